# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: compare two benchmark runs' files (the newest two by default) and give a verdict.

Controller only. The comparison itself is plugin_utils/bench/bench.py's ``compare`` (also the
``dgxspark.cluster.bench_compare`` filter); this plugin finds and reads the files, writes the
comparison next to the candidate and fails on a regression when asked.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _report

display = Display()


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = {
        "results_dir": {"type": "path"},
        "baseline": {"type": "path"},
        "candidate": {"type": "path"},
        "threshold": {"type": "float", "default": 3.0},
        "alpha": {"type": "float", "default": 0.05},
        "fail_on_regression": {"type": "bool", "default": True},
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        baseline, candidate = args["baseline"], args["candidate"]
        if not (baseline and candidate):
            if not args["results_dir"]:
                raise AnsibleActionFail("give baseline and candidate, or results_dir to take its two newest runs")
            runs = newest_runs(args["results_dir"])
            if len(runs) < 2 - bool(baseline) - bool(candidate):
                raise AnsibleActionFail(
                    f"{args['results_dir']}: {len(runs)} run(s) with a results.json; a comparison needs two "
                    "(run playbooks/bench.yml again, or give baseline and candidate)"
                )
            candidate = candidate or runs[-1]
            baseline = baseline or next(run for run in reversed(runs) if run != _results_file(candidate))
        baseline, candidate = _results_file(baseline), _results_file(candidate)
        try:
            comparison = _bench.compare(
                _bench.load_results(baseline),
                _bench.load_results(candidate),
                threshold=args["threshold"] / 100,
                alpha=args["alpha"],
            )
        except ValueError as error:
            raise AnsibleActionFail(f"the runs cannot be compared: {error}") from None
        comparison["files"] = {"baseline": baseline, "candidate": candidate}
        lines = summary_lines(comparison)
        for line in lines:
            display.display(f"compare: {line}")
        result.update(
            changed=False,
            comparison=comparison,
            verdict=comparison["verdict"],
            lines=lines,
            baseline=baseline,
            candidate=candidate,
        )
        if not self._task.check_mode:
            folder = os.path.dirname(candidate)
            name = "comparison-" + os.path.basename(os.path.dirname(baseline))
            with open(os.path.join(folder, name + ".json"), "w", encoding="utf-8") as handle:
                json.dump(comparison, handle, indent=1, sort_keys=True)
            with open(os.path.join(folder, name + ".md"), "w", encoding="utf-8") as handle:
                handle.write(_report.render_comparison_markdown(comparison))
            result["report_file"] = os.path.join(folder, name + ".md")
        if comparison["verdict"] != _bench.PASS and args["fail_on_regression"]:
            result["failed"] = True
            result["msg"] = "\n".join(lines)
        else:
            result["msg"] = lines[0]
        return result


def _results_file(path: str) -> str:
    return os.path.join(path, "results.json") if os.path.isdir(path) else path


def newest_runs(results_dir: str) -> list[str]:
    """The results.json of every run folder under ``results_dir``, oldest first (folders start with the time)."""
    try:
        names = sorted(os.listdir(results_dir))
    except OSError as error:
        raise AnsibleActionFail(f"{results_dir}: {error.strerror or error}") from None
    return [
        os.path.join(results_dir, name, "results.json")
        for name in names
        if os.path.isfile(os.path.join(results_dir, name, "results.json"))
    ]


def summary_lines(comparison: dict[str, Any]) -> list[str]:
    """The verdict and its reasons, one line each, for the terminal."""
    base, cand = comparison["baseline"], comparison["candidate"]
    lines = [
        f"verdict: {comparison['verdict'].upper()} - candidate {cand['started_at']} ({cand['shape']}) against "
        f"baseline {base['started_at']} ({base['shape']}), threshold {comparison['threshold'] * 100:g} %, "
        f"alpha {comparison['alpha']:g}"
    ]
    lines += [f"cannot compare: {reason}" for reason in comparison["reasons"]]
    lines += [f"regression: {line['message']}" for line in comparison["regressions"]]
    lines += [f"undecided: {line['message']}" for line in comparison.get("undecided") or []]
    for row in comparison["metrics"]:
        label, unit, _better = _bench.METRICS[row["metric"]]
        change = "n/a" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
        flags = ", significant" if row["significant"] else ""
        flags += ", REGRESSION" if row["regression"] else ""
        lines.append(
            f"C={row['concurrency']} {label}: {_number(row['baseline']['mean'])} -> "
            f"{_number(row['candidate']['mean'])} {unit} ({change}, p={_number(row['p'])}{flags})"
        )
    lines += [f"note: {note}" for note in comparison["notes"]]
    return lines


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
