# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's reports: Markdown for a run and for a comparison, a terminal table, and charts.

Controller side. Everything takes what ``_bench.summarize`` and ``_bench.compare`` return. The charts
need matplotlib, which is imported inside :func:`write_charts` only (its Agg canvas, no pyplot, no GUI):
this module imports without it, and without it :func:`write_charts` writes nothing and
:func:`charts_missing` says why, which the report shows.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import (
    CAPACITY_RULE,
    CORDATUS_RULE,
    LEVEL_FIGURES,
    METRICS,
)

MATPLOTLIB_MISSING = (
    "matplotlib is not installed on the controller, so no chart was drawn "
    "(pip install matplotlib; requirements/dev.in lists it)"
)
# Chart name -> (title, y label, where the figure is in a level, the lines drawn).
CHARTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "ttft": ("Time to first token", "TTFT (ms)", "ttft_ms", ("p50", "p90")),
    "tpot": ("Time per output token (ITL)", "TPOT (ms)", "tpot_ms", ("p50", "p90")),
    "tps_user": ("Tokens per second per user", "tok/s per user (1 / TPOT)", "tps_user", ("p10", "p50", "p90")),
    "latency": ("End-to-end latency", "latency (s)", "e2e_s", ("p50", "p90")),
    "rps": ("Completed requests per second", "RPS (req/s)", "rps", ("value",)),
    "output_tps": ("Output tokens per second, all users", "output tok/s", "output_tps", ("value",)),
}
DEFINITIONS = (
    "- **TTFT**: request sent to the first non-empty content (or reasoning) delta, client monotonic clock.",
    "- **N**: output tokens from the server's usage report; when absent, content chunks (flagged in the notes).",
    "- **TPOT** = (latency - TTFT) / (N - 1), undefined for N < 2; **tok/s per user** = 1 / TPOT. NVIDIA AIPerf "
    "calls TPOT ITL; vLLM calls it TPOT. **ITL gap**: the raw gaps between content chunks, pooled per level.",
    "- **Latency**: request sent to the end of the stream. **RPS** = completed / (last end - first send); "
    "**output tok/s** = sum of N / the same span.",
    "- **CordatusAI's columns** (seed 002): TTFT = mean TTFT, ITL = mean TPOT, TPS = mean of N / latency (TTFT "
    "included), Latency = mean latency, RPS = 1 / mean latency.",
    "- **Percentiles**: linear interpolation between closest ranks (numpy's default `linear`): rank "
    "h = (n - 1) p / 100, value x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]). **stdev**: sample (n - 1).",
    "- Failed requests count as errors and are left out of every timing figure. Lower-is-better SLOs are "
    "judged at a high percentile (p90, p99), higher-is-better ones at a low one (p10).",
)


# ---------------------------------------------------------------- formatting
def _fmt(value: Any, decimals: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return str(value)


def _pct(change: float | None) -> str:
    return "-" if change is None else f"{change * 100:+.1f} %"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value >= 0.001 or value == 0 else f"{value:.1e}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> list[str]:
    """A Markdown table; ``right`` marks right-aligned (numeric) columns."""
    right = right or [index > 0 for index in range(len(header))]
    lines = ["| " + " | ".join(_cell(name) for name in header) + " |"]
    lines.append("|" + "|".join("---:" if flag else "---" for flag in right) + "|")
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def _mark(passed: bool) -> str:
    return "✓" if passed else "✗"


# ---------------------------------------------------------------- one run
def render_markdown(
    results: Mapping[str, Any],
    summary: Mapping[str, Any],
    charts: Sequence[str] | None = None,
    relative_to: str | None = None,
) -> str:
    """The run's report in Markdown: identity, gate, our table, CordatusAI's table, capacity, needle, charts.

    ``summary`` is what ``_bench.summarize(results)`` returned; ``charts`` the files :func:`write_charts`
    wrote, linked relative to ``relative_to`` (the report's folder) when given. A failed gate gives the
    identity and the gate only: no performance figure.
    """
    identity = results["identity"]
    lines = [f"# Benchmark: {identity['profile']} / {identity['shape']}", ""]
    lines += _identity_section(identity)
    lines += _gate_section(summary["gate"])
    if not summary["figures"]:
        lines += ["**The gate failed: no performance figures are reported for this run.**", ""]
        return "\n".join(lines)
    levels = summary["levels"]
    lines += ["## Results per concurrency level", ""]
    lines += _levels_table(levels) + [""]
    lines += ["## CordatusAI's table (seed 002's columns)", ""]
    lines += [
        "Computed from the same requests by CordatusAI/llm-benchmark's definitions, to set beside seed 002: TPS is "
        "N / latency (TTFT included), ITL the mean TPOT, RPS 1 / mean latency.",
        "",
    ]
    lines += _cordatus_table(levels) + [""]
    lines += _capacity_section(summary["capacity"])
    lines += _errors_section(levels)
    lines += ["## Distributions", ""]
    for metric, (label, unit, better) in METRICS.items():
        lines += [f"**{label}** ({unit}, {better} is better)", ""]
        lines += _distribution_table(levels, metric) + [""]
    lines += _needle_section(summary.get("needle"))
    lines += _bursts_section(summary.get("bursts") or [])
    lines += _nodes_section(summary.get("nodes"))
    lines += _seed_section(summary.get("seed_000") or [])
    if summary.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in summary["notes"]] + [""]
    lines += _charts_section(charts, relative_to)
    lines += ["## Definitions", "", *DEFINITIONS, f"- **Capacity**: {CAPACITY_RULE}", f"- {CORDATUS_RULE}", ""]
    return "\n".join(lines)


def _identity_section(identity: Mapping[str, Any]) -> list[str]:
    workload = identity["workload"]
    rows = [
        ("profile", f"{identity['profile']} (hash {identity['profile_hash']})"),
        ("shape", identity["shape"]),
        ("model", identity["model"]),
        ("hosts", ", ".join(identity["hosts"])),
        ("images", "; ".join(f"{host}: {image}" for host, image in identity["image_ids"].items()) or "-"),
        ("client", f"{identity['client_host']} -> {identity['endpoint']}"),
        ("run", f"{identity['started_at']} to {identity['finished_at']}"),
        (
            "workload",
            f"{workload['prompt_tokens']} prompt tokens, max_tokens {workload['max_tokens']}, "
            f"{workload['requests_per_level']} requests per level, concurrency "
            f"{', '.join(map(str, workload['levels']))}, streamed",
        ),
    ]
    return ["## Identity", "", *_table(["", ""], rows, right=[False, False]), ""]


def _gate_section(gate: Mapping[str, Any]) -> list[str]:
    verdict = "passed" if gate["passed"] else f"FAILED ({', '.join(gate['failed']) or 'no check failed'})"
    rows = [
        (
            check["name"],
            "PASS" if check["passed"] else "FAIL",
            check["expected"],
            check["got"],
            f"{check['seconds']:.2f}",
        )
        for check in gate["checks"]
    ]
    lines = ["## Gate", "", f"Gate {verdict}.", ""]
    if rows:
        lines += _table(["check", "result", "expected", "got", "s"], rows, right=[False, False, False, False, True])
        lines.append("")
    return lines


def _levels_table(levels: Sequence[Mapping[str, Any]]) -> list[str]:
    header = ["C", "ok / sent", "errors"]
    columns: list[tuple[str, str, int]] = []
    for metric, label, stats, decimals in (
        ("ttft_ms", "TTFT ms", ("mean", "p50", "p90", "p99"), 1),
        ("tpot_ms", "TPOT ms", ("mean", "p50", "p90", "p99"), 2),
        ("tps_user", "tok/s/user", ("mean", "p10", "p50", "p90", "p99"), 2),
        ("e2e_s", "latency s", ("mean", "p50", "p90", "p99"), 2),
    ):
        for stat in stats:
            header.append(f"{label} {stat}")
            columns.append((metric, stat, decimals))
    header += ["RPS", "output tok/s"]
    rows = []
    for level in levels:
        row: list[Any] = [level["concurrency"], f"{level['ok']} / {level['requests']}", level["errors"]]
        row += [_fmt(level["stats"][metric][stat], decimals) for metric, stat, decimals in columns]
        row += [_fmt(level["rps"], 3), _fmt(level["output_tps"], 1)]
        rows.append(row)
    return _table(header, rows)


def _cordatus_table(levels: Sequence[Mapping[str, Any]]) -> list[str]:
    header = ["Concurrency", "TTFT (ms)", "ITL (ms)", "TPS (tok/s)", "Latency (s)", "Throughput (RPS)"]
    rows = [
        (
            level["concurrency"],
            _fmt(level["cordatus"]["ttft_ms"]),
            _fmt(level["cordatus"]["itl_ms"]),
            _fmt(level["cordatus"]["tps"]),
            _fmt(level["cordatus"]["latency_s"]),
            _fmt(level["cordatus"]["rps"]),
        )
        for level in levels
    ]
    return _table(header, rows)


def _capacity_section(capacity: Mapping[str, Any]) -> list[str]:
    slos = capacity["slos"]
    header = ["C", "errors", *[slo["label"] for slo in slos], "level"]
    rows = []
    for level in capacity["levels"]:
        cells = [f"{_fmt(check['value'])} {_mark(check['passed'])}" for check in level["checks"]]
        rows.append(
            [level["concurrency"], f"{level['errors']} {_mark(not level['errors'])}", *cells, _mark(level["passed"])]
        )
    cordatus = capacity["cordatus"]
    crow = [
        (
            row["concurrency"],
            f"{_fmt(row['ttft_ms'])} {_mark(row['ttft_ms'] is not None and row['ttft_ms'] <= cordatus['ttft_ms'])}",
            f"{_fmt(row['tps'])} {_mark(row['tps'] is not None and row['tps'] >= cordatus['tps'])}",
            _mark(row["passed"]),
        )
        for row in cordatus["levels"]
    ]
    return [
        "## Capacity",
        "",
        f"{capacity['rule']}",
        "",
        *_table(header, rows),
        "",
        f"**Max C = {_fmt(capacity['max_c'])}**; users supported: {capacity['users_supported']}.",
        "",
        f"CordatusAI's targets (mean TTFT <= {cordatus['ttft_ms']:g} ms, mean TPS >= {cordatus['tps']:g} tok/s), "
        "for comparison with seed 002:",
        "",
        *_table(["C", "mean TTFT ms", "mean TPS (N / latency)", "level"], crow),
        "",
        f"**CordatusAI's Max C = {_fmt(cordatus['max_c'])}** ({cordatus['users_supported']}).",
        "",
    ]


def _errors_section(levels: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [
        (level["concurrency"], entry["count"], entry["error"]) for level in levels for entry in level["error_messages"]
    ]
    if not rows:
        return ["## Errors", "", "No request failed.", ""]
    return ["## Errors", "", *_table(["C", "requests", "error"], rows, right=[True, True, False]), ""]


def _distribution_table(levels: Sequence[Mapping[str, Any]], metric: str) -> list[str]:
    stats = ("n", "mean", "stdev", "min", "p10", "p50", "p90", "p99", "max")
    decimals = 3 if metric in ("e2e_s",) else 2
    rows = [
        [level["concurrency"], *(_fmt(level["stats"][metric][stat], decimals) for stat in stats)] for level in levels
    ]
    return _table(["C", *stats], rows)


def _needle_section(needle: Mapping[str, Any] | None) -> list[str]:
    if needle is None:
        return ["## Needle in a haystack", "", "Not run.", ""]
    verdict = "found" if needle["found"] else "NOT found"
    lines = [
        "## Needle in a haystack",
        "",
        f"At {needle['context_tokens']} context tokens: {verdict} in {needle['seconds']:.1f} s.",
        "",
        f"- expected: `{_cell(needle['expected'])}`",
        f"- got: `{_cell(needle.get('got') or '')}`",
    ]
    if needle.get("error"):
        lines.append(f"- error: {_cell(needle['error'])}")
    return [*lines, ""]


def _bursts_section(bursts: Sequence[Mapping[str, Any]]) -> list[str]:
    if not bursts:
        return ["## Bursts", "", "Not run.", ""]
    rows = [
        [
            burst["size"],
            f"{burst['ok']}/{burst['requests']}",
            burst["output_tokens"],
            _fmt(burst["span_s"], 2),
            _fmt(burst["aggregate_tps"], 1),
            burst["first_error"] or "",
        ]
        for burst in bursts
    ]
    header = ["requests at once", "ok/sent", "output tokens", "span s", "aggregate tok/s", "first error"]
    return [
        "## Bursts",
        "",
        "N requests sent at once, each on its own connection; aggregate tok/s = sum of output tokens / (last end - "
        "first send), TTFT and any queueing behind max_num_seqs included.",
        "",
        *_table(header, rows, right=[True, True, True, True, True, False]),
        "",
    ]


def _gib(value: Any) -> str:
    return "-" if value is None else f"{value / 1024**3:.2f}"


def _nodes_section(nodes: Mapping[str, Any] | None) -> list[str]:
    if not nodes:
        return ["## Nodes during the run", "", "No node monitor ran (bench.yml starts one on every node).", ""]
    phases = sorted({name for node in nodes.values() for name in ((node.get("memory") or {}).get("phases") or {})})
    rows = []
    for host, node in nodes.items():
        memory = node.get("memory") or {}
        latch = node.get("clock_latch") or {}
        rows.append(
            [
                host,
                memory.get("samples", "-"),
                _gib(memory.get("min_bytes")),
                *[_gib(((memory.get("phases") or {}).get(name) or {}).get("min_bytes")) for name in phases],
                latch.get("summary") or node.get("error") or "-",
            ]
        )
    header = ["node", "samples", "min MemAvailable GiB", *[f"min during {name} GiB" for name in phases], "GPU clocks"]
    return [
        "## Nodes during the run",
        "",
        "MemAvailable sampled on every node by its monitor (dgxspark.cluster.bench_monitor) while the run went on; "
        "the GPU clock-latch check judges the SM clock under load against its maximum.",
        "",
        *_table(header, rows, right=[False] + [True] * (len(header) - 2) + [False]),
        "",
    ]


def _seed_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    table = [
        [
            row["label"],
            f"{row['seed']:g} {row['unit']}",
            "not measured" if row["value"] is None else f"{row['value']:.4g} {row['unit']}",
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
            row["how"],
            row["note"],
        ]
        for row in rows
    ]
    return [
        "## Against seed 000",
        "",
        "Seed 000's measured operating figures (tp3-triangle, three DGX Sparks) beside this run's. Nothing is judged "
        "here: another cluster, model or workload gives other figures.",
        "",
        *_table(
            ["figure", "seed 000", "this run", "ratio", "how it is measured", "note"],
            table,
            right=[False, True, True, True, False, False],
        ),
        "",
    ]


def _charts_section(charts: Sequence[str] | None, relative_to: str | None) -> list[str]:
    lines = ["## Charts", ""]
    if not charts:
        return [*lines, f"No charts: {charts_missing() or 'none were written for this report'}.", ""]
    for path in charts:
        link = os.path.relpath(path, relative_to) if relative_to else path
        name = os.path.splitext(os.path.basename(path))[0]
        lines += [f"![{name}]({link})", ""]
    return lines


# ---------------------------------------------------------------- a comparison
def render_comparison_markdown(comparison: Mapping[str, Any]) -> str:
    """A comparison (``_bench.compare``) in Markdown: verdict, reasons or regressions, and every figure."""
    base, cand = comparison["baseline"], comparison["candidate"]
    lines = [f"# Benchmark comparison: {comparison['verdict']}", ""]
    rows = [
        (key, _fmt(base[key]), _fmt(cand[key]))
        for key in ("profile", "profile_hash", "shape", "model", "started_at", "gate_passed")
    ]
    for key in ("prompt_tokens", "max_tokens", "requests_per_level", "levels"):
        rows.append((key, _fmt(base["workload"][key]), _fmt(cand["workload"][key])))
    lines += _table(["", "baseline", "candidate"], rows, right=[False, False, False]) + [""]
    if comparison["reasons"]:
        lines += ["The runs cannot be compared:", ""] + [f"- {reason}" for reason in comparison["reasons"]] + [""]
    elif comparison["regressions"]:
        lines += ["Regressions:", ""] + [f"- {line['message']}" for line in comparison["regressions"]] + [""]
    elif comparison.get("undecided"):
        needed = comparison.get("requests_needed")
        lines += (
            ["Inconclusive: the runs are too short to tell a change of the threshold's size from noise:", ""]
            + [f"- {line['message']}" for line in comparison["undecided"]]
            + ["", f"About {needed} requests per level on each run would decide." if needed else "", ""]
        )
    else:
        lines += [
            "Pass: no metric is worse by more than the threshold at the confidence bound, no level or Max C is lost, "
            "no seed figure dropped.",
            "",
        ]
    lines += [
        f"Threshold {comparison['threshold'] * 100:g} %, alpha {comparison['alpha']:g}: a regression is a change "
        "that is worse, larger than the threshold and significant (Welch's two-sided t-test, p < alpha), a level "
        "whose SLOs the baseline met and the candidate does not, a lower Max C, or a seed figure (single-stream "
        "tok/s, a burst's aggregate) that drops by more than the threshold. A pass needs every metric's one-sided "
        f"{(1 - comparison['alpha']) * 100:g} % bound of its worsening within the threshold; otherwise the "
        "verdict is inconclusive, and it promotes nothing.",
        "",
    ]
    if comparison["metrics"]:
        lines += ["## Per-request metrics", ""]
        header = ["C", "metric", "baseline mean", "candidate mean", "change", "worse", "t", "df", "p", "significant"]
        header += ["regression", "worst case", "decided"]
        table = []
        for row in comparison["metrics"]:
            label, unit, _better = METRICS[row["metric"]]
            table.append(
                [
                    row["concurrency"],
                    f"{label} ({unit})",
                    _fmt(row["baseline"]["mean"], 3),
                    _fmt(row["candidate"]["mean"], 3),
                    _pct(row["change"]),
                    _fmt(row["worse"]),
                    _fmt(row["t"], 2),
                    _fmt(row["df"], 1),
                    _p(row["p"]),
                    _fmt(row["significant"]),
                    "**yes**" if row["regression"] else "no",
                    _pct(row.get("worst_change")),
                    _fmt(row.get("decided")),
                ]
            )
        lines += _table(header, table, right=[True, False, *([True] * (len(header) - 2))]) + [""]
    if comparison["level_figures"]:
        lines += [
            "## Level-wide figures",
            "",
            "One value per level and run: the change is shown, no test is possible and it does not enter the verdict.",
            "",
        ]
        table = [
            [
                row["concurrency"],
                LEVEL_FIGURES[row["figure"]][0],
                _fmt(row["baseline"], 3),
                _fmt(row["candidate"], 3),
                _pct(row["change"]),
                _fmt(row["worse"]),
            ]
            for row in comparison["level_figures"]
        ]
        header = ["C", "figure", "baseline", "candidate", "change", "worse"]
        lines += _table(header, table, right=[True, False, True, True, True, True]) + [""]
    if comparison["notes"]:
        lines += ["## Notes", ""] + [f"- {note}" for note in comparison["notes"]] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the terminal
def text_table(summary: Mapping[str, Any], seed: bool = True) -> str:
    """A compact plain-text table of a summary for a terminal: aligned columns, Max C under it, then seed 000's
    figures beside the run's (``seed``; bench.yml leaves them to bench_nodes when the node monitors' samples, the
    minimum headroom among them, are added after the run)."""
    gate = summary["gate"]
    if not summary["figures"]:
        failed = ", ".join(gate["failed"]) or "no check listed"
        return f"gate FAILED ({failed}): no performance figures"
    header = [
        "C",
        "ok/sent",
        "err",
        "TTFT p50 ms",
        "TTFT p90 ms",
        "TPOT p50 ms",
        "tok/s/user p10",
        "lat p50 s",
        "RPS",
        "out tok/s",
        "SLO",
    ]
    verdicts = {row["concurrency"]: row["passed"] for row in summary["capacity"]["levels"]}
    rows = []
    for level in summary["levels"]:
        stats = level["stats"]
        rows.append(
            [
                str(level["concurrency"]),
                f"{level['ok']}/{level['requests']}",
                str(level["errors"]),
                _fmt(stats["ttft_ms"]["p50"], 1),
                _fmt(stats["ttft_ms"]["p90"], 1),
                _fmt(stats["tpot_ms"]["p50"], 2),
                _fmt(stats["tps_user"]["p10"], 2),
                _fmt(stats["e2e_s"]["p50"], 2),
                _fmt(level["rps"], 3),
                _fmt(level["output_tps"], 1),
                "pass" if verdicts.get(level["concurrency"]) else "FAIL",
            ]
        )
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=False)) for row in [header, *rows]]
    capacity = summary["capacity"]
    slos = "; ".join(slo["label"] for slo in capacity["slos"])
    lines.append(f"Max C = {_fmt(capacity['max_c'])} ({capacity['users_supported']}) at {slos}, no errors")
    cordatus = capacity["cordatus"]
    lines.append(
        f"CordatusAI's Max C = {_fmt(cordatus['max_c'])} (mean TTFT <= {cordatus['ttft_ms']:g} ms, "
        f"mean N/latency >= {cordatus['tps']:g} tok/s)"
    )
    for burst in summary.get("bursts") or []:
        lines.append(
            f"burst of {burst['size']}: {burst['ok']}/{burst['requests']} ok, aggregate "
            f"{_fmt(burst['aggregate_tps'], 1)} tok/s ({burst['output_tokens']} tokens in {_fmt(burst['span_s'], 2)} s)"
        )
    if seed:
        lines += seed_lines(summary)
    return "\n".join(lines)


def seed_lines(summary: Mapping[str, Any]) -> list[str]:
    """Seed 000's figures beside the run's, one line each."""
    lines = []
    for row in summary.get("seed_000") or []:
        value = "not measured" if row["value"] is None else f"{row['value']:.4g} {row['unit']}"
        lines.append(f"seed 000 {row['label']}: {row['seed']:g} {row['unit']}, this run {value} ({row['note']})")
    return lines


# ---------------------------------------------------------------- the run's folder
def write_run(folder: str, results: Mapping[str, Any], summary: Mapping[str, Any] | None = None) -> list[str]:
    """Write a run's folder: results.json, report.md and charts/*.png (each file replaced whole).

    ``summary`` defaults to ``_bench.summarize(results, results["slos"])``. Returns warnings (no charts)."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench

    os.makedirs(folder, exist_ok=True)
    _atomic_write(os.path.join(folder, "results.json"), json.dumps(results, indent=1, sort_keys=True) + "\n")
    if summary is None:
        summary = _bench.summarize(results, results.get("slos"))
    charts = write_charts(summary, os.path.join(folder, "charts"))
    missing = charts_missing()
    warnings = [missing] if missing and summary.get("figures") else []
    _atomic_write(os.path.join(folder, "report.md"), render_markdown(results, summary, charts, relative_to=folder))
    return warnings


def _atomic_write(path: str, text: str) -> None:
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)


# ---------------------------------------------------------------- charts
def charts_missing() -> str | None:
    """Why no chart can be drawn here (matplotlib is not installed), or None when it can."""
    return None if importlib.util.find_spec("matplotlib") is not None else MATPLOTLIB_MISSING


def write_charts(summary: Mapping[str, Any], out_dir: str) -> list[str]:
    """One PNG per figure against concurrency in ``out_dir`` (created if needed); the paths written.

    TTFT, TPOT, latency: p50 and p90; tokens/s per user: p10, p50, p90; RPS and output tokens/s (one value
    per level). An SLO on a charted metric is drawn as a dashed line. Nothing is written (and the list is
    empty) without matplotlib (see :func:`charts_missing`), for a failed gate or without levels.
    """
    levels = summary.get("levels") or []
    if not summary.get("figures") or not levels or charts_missing():
        return []
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    os.makedirs(out_dir, exist_ok=True)
    identity = summary["identity"]
    concurrency = [level["concurrency"] for level in levels]
    slos = (summary.get("capacity") or {}).get("slos") or []
    written = []
    for name, (title, ylabel, figure, lines) in CHARTS.items():
        fig = Figure(figsize=(7.0, 4.5), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for line in lines:
            values = [_chart_value(level, figure, line) for level in levels]
            points = [(c, v) for c, v in zip(concurrency, values, strict=False) if v is not None]
            if points:
                label = "per level" if line == "value" else line
                ax.plot([point[0] for point in points], [point[1] for point in points], marker="o", label=label)
        for slo in slos:
            if slo["metric"] == figure:
                ax.axhline(slo["threshold"], linestyle="--", color="grey", label=f"SLO {slo['label']}")
        if len(concurrency) > 1 and min(concurrency) > 0 and max(concurrency) / min(concurrency) >= 8:
            ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(concurrency))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("concurrency (simultaneous requests)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}\n{identity['profile']} / {identity['shape']} / {identity['model']}", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"bench-{name}.png")
        fig.savefig(path, format="png")
        written.append(path)
    return written


def _chart_value(level: Mapping[str, Any], figure: str, line: str) -> float | None:
    if line == "value":
        return level.get(figure)
    return level["stats"][figure][line]
