# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: a whole benchmark - gate, warm-up, the sweep, the needle - with progress, then its files.

Each step runs as ``dgxspark.cluster.bench_load`` on the task's host (the client); the figures, the
report and the charts are made here on the controller (plugin_utils/bench/bench.py) and written under
``results_dir``.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import ENDPOINT
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _report

display = Display()

DEFAULT_GATE = [
    {"name": "count", "prompt": "Count from 1 to 10.", "expect": r"1\D+2\D+3\D+4\D+5\D+6\D+7\D+8\D+9\D+10"},
    {"name": "arithmetic", "prompt": "What is 17 + 25? Answer with the number.", "expect": r"\b42\b"},
]

# Answer tokens the needle asks for (bench_load's run_needle): the haystack and these must fit max_model_len.
NEEDLE_ANSWER_TOKENS = 64
# The client's own event loop waking this late (p99) means its timestamps are late too.
LAG_WARN_MS = 5.0


class ActionModule(ValidatedAction):
    _requires_connection = True
    ARGUMENT_SPEC = {
        **ENDPOINT,
        "levels": {"type": "list", "elements": "int", "default": [1, 2, 4, 8]},
        "requests": {"type": "int", "default": 100},
        "prompt_tokens": {"type": "int", "default": 128},
        "max_tokens": {"type": "int", "default": 128},
        "warmup_requests": {"type": "int", "default": 8},
        "ramp": {"type": "float", "default": 0},
        "timeout": {"type": "float", "default": 600},
        "seed": {"type": "int", "default": 0},
        "extra_body": {"type": "dict"},
        "gate": {"type": "list", "elements": "dict"},
        "needle_tokens": {"type": "int", "default": 0},
        "needle_depth": {"type": "float", "default": 0.5},
        "max_model_len": {"type": "int"},
        "bursts": {"type": "list", "elements": "int", "default": [4, 6]},
        "burst_max_tokens": {"type": "int", "default": 512},
        "progress_every": {"type": "int", "default": 25},
        "slos": {"type": "list", "elements": "dict"},
        "results_dir": {"type": "path", "required": True},
        "label": {"type": "str", "default": ""},
        "nodes_after": {"type": "bool", "default": False},
        "identity": {"type": "dict", "default": {}},
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        levels = args["levels"]
        if not levels or any(level < 1 for level in levels) or len(set(levels)) != len(levels):
            raise AnsibleActionFail(f"levels must be distinct concurrencies of at least 1, got {levels}")
        levels = sorted(levels)
        for name in ("requests", "prompt_tokens", "max_tokens", "burst_max_tokens"):
            if args[name] < 1:
                raise AnsibleActionFail(f"{name} must be at least 1, got {args[name]}")
        bursts = args["bursts"]
        if any(size < 1 for size in bursts) or len(set(bursts)) != len(bursts):
            raise AnsibleActionFail(f"bursts must be distinct request counts of at least 1, got {bursts}")
        if args["progress_every"] < 0:
            raise AnsibleActionFail(f"progress_every must be 0 (one part) or more, got {args['progress_every']}")
        refusal = _bench.needle_refusal(args["needle_tokens"], args["max_model_len"], NEEDLE_ANSWER_TOKENS)
        if refusal:
            raise AnsibleActionFail(refusal)
        try:
            slos = _bench.parse_slos(args["slos"])
        except ValueError as error:
            raise AnsibleActionFail(f"slos: {error}") from None
        gate = args["gate"] if args["gate"] is not None else DEFAULT_GATE
        client = task_vars.get("inventory_hostname", "?")
        plan = (
            f"gate ({len(gate)} checks), warm-up ({args['warmup_requests']} requests), concurrency "
            f"{', '.join(map(str, levels))} x {args['requests']} requests of {args['prompt_tokens']} prompt and "
            f"{args['max_tokens']} output tokens"
            + (f", bursts of {', '.join(map(str, bursts))} requests" if bursts else "")
            + (f", a needle in {args['needle_tokens']} tokens" if args["needle_tokens"] else "")
            + f", sent from {client} to {args['url']}"
        )
        if self._task.check_mode:
            result.update(changed=False, msg=f"check mode: would run {plan}; nothing was sent")
            return result
        display.display(f"bench: {plan}")

        common = {name: args[name] for name in (*ENDPOINT, "timeout", "seed", "extra_body")}
        started_at = _now()
        workload = {
            "prompt_tokens": args["prompt_tokens"],
            "max_tokens": args["max_tokens"],
            "requests_per_level": args["requests"],
            "levels": levels,
            "stream": True,
            "api": args["api"],
            "warmup_requests": args["warmup_requests"],
            "ramp_s": args["ramp"],
            "bursts": bursts,
            "burst_max_tokens": args["burst_max_tokens"],
            "progress_every": args["progress_every"],
        }
        identity = dict(args["identity"])
        identity.update(client_host=client, endpoint=args["url"], started_at=started_at, workload=workload)
        identity.setdefault("model", args["model"])
        results: dict[str, Any] = {
            "format": _bench.FORMAT,
            "identity": identity,
            "gate": None,
            "levels": [],
            "needle": None,
            "client": [],
            "bursts": [],
            "phases": [],
            "slos": slos,
        }

        gate_result = self._step(task_vars, dict(common, mode="gate", checks=gate), "gate")
        results["gate"] = gate_result["gate"]
        for check in results["gate"]["checks"]:
            verdict = "PASS" if check["passed"] else "FAIL"
            why = "" if check["passed"] else f" (expected /{check['expected']}/, got {check['got'][:120]!r}"
            why += f"; {check['error']})" if check.get("error") else (")" if why else "")
            display.display(f"bench: gate {check['name']}: {verdict} in {check['seconds'] or 0:.2f} s{why}")
        if not results["gate"]["passed"]:
            identity["finished_at"] = _now()
            results["levels"] = []
            folder = self._write(args, results, None)
            raise AnsibleActionFail(
                f"the functional gate failed, so no performance figures are reported (results in {folder})"
            )

        if args["warmup_requests"] > 0:
            display.display(f"bench: warm-up, {args['warmup_requests']} requests at concurrency {levels[-1]}")
            warm = self._step(
                task_vars,
                dict(
                    common,
                    mode="load",
                    concurrency=levels[-1],
                    requests=args["warmup_requests"],
                    seed=args["seed"] + 1,
                    prompt_tokens=args["prompt_tokens"],
                    max_tokens=args["max_tokens"],
                ),
                "warm-up",
            )
            failed = [record for record in warm["level"]["requests"] if not record["ok"]]
            if failed:
                display.warning(f"bench: {len(failed)} warm-up request(s) failed: {failed[0]['error']}")

        for number, concurrency in enumerate(levels, 1):
            parts = _bench.level_parts(args["requests"], concurrency, args["progress_every"])
            display.display(
                f"bench: level {number}/{len(levels)}: concurrency {concurrency}, {args['requests']} requests"
                + (f" in {len(parts)} parts ..." if len(parts) > 1 else " ...")
            )
            level: dict[str, Any] = {"requests": [], "client": None}
            for part, (first, count) in enumerate(parts):
                step = self._step(
                    task_vars,
                    dict(
                        common,
                        mode="load",
                        concurrency=concurrency,
                        requests=count,
                        first_index=first,
                        prompt_tokens=args["prompt_tokens"],
                        max_tokens=args["max_tokens"],
                        seed=args["seed"] + 1000 * number,
                        ramp=args["ramp"] if part == 0 else 0,
                    ),
                    f"concurrency {concurrency}",
                )["level"]
                for record in step["requests"]:
                    if len(parts) > 1:
                        record["part"] = part
                level["requests"] += step["requests"]
                level["client"] = _bench.merge_client(level["client"], step["client"])
                if len(parts) > 1 and part < len(parts) - 1:
                    display.display(
                        f"bench: level {number}/{len(levels)}: {first + count}/{args['requests']} requests: "
                        + _level_line(level)
                    )
            results["levels"].append({"concurrency": concurrency, "requests": level["requests"]})
            results["client"].append(dict(level["client"], concurrency=concurrency))
            results["phases"].append(_phase(f"level C={concurrency}", level["client"]))
            display.display(f"bench: level {number}/{len(levels)}: {_level_line(level)}")
            lag, cpu = level["client"]["loop_lag"]["p99_ms"], level["client"]["cpu_share"]
            if lag > LAG_WARN_MS:
                who = (
                    f"the client may be the bottleneck (it used {cpu:.0%} of a core)"
                    if cpu >= 0.5
                    else f"{client} is busy (the client itself used {cpu:.0%} of a core)"
                )
                display.warning(
                    f"bench: at concurrency {concurrency} the client's event loop woke {lag} ms late (p99): "
                    f"{who}, so its times may be late by as much; run it from a less busy host"
                )

        for number, size in enumerate(bursts, 1):
            display.display(
                f"bench: burst {number}/{len(bursts)}: {size} requests at once, "
                f"{args['burst_max_tokens']} tokens each ..."
            )
            step = self._step(
                task_vars,
                dict(
                    common,
                    mode="load",
                    concurrency=size,
                    requests=size,
                    prompt_tokens=args["prompt_tokens"],
                    max_tokens=args["burst_max_tokens"],
                    seed=args["seed"] + 500000 + size,
                ),
                f"burst of {size}",
            )["level"]
            burst = {"size": size, "requests": step["requests"], "client": step["client"]}
            results["bursts"].append(burst)
            results["phases"].append(_phase(f"burst {size}", step["client"]))
            figures = _bench.burst_summary(burst)
            display.display(
                f"bench: burst {number}/{len(bursts)}: {figures['ok']}/{size} ok, aggregate "
                + ("-" if figures["aggregate_tps"] is None else f"{figures['aggregate_tps']:.1f}")
                + f" tok/s ({figures['output_tokens']} tokens in {figures['span_s'] or 0:.2f} s)"
                + (f"; first error: {figures['first_error']}" if figures["first_error"] else "")
            )

        if args["needle_tokens"]:
            display.display(f"bench: needle in a haystack of {args['needle_tokens']} tokens (server's count) ...")
            needle = self._step(
                task_vars,
                dict(
                    common,
                    mode="needle",
                    needle_tokens=args["needle_tokens"],
                    needle_depth=args["needle_depth"],
                    max_model_len=args["max_model_len"],
                ),
                "needle",
            )["needle"]
            results["needle"] = needle
            if needle.get("started_at") is not None:
                results["phases"].append(
                    {"name": "needle", "started_at": needle["started_at"], "finished_at": needle["finished_at"]}
                )
            display.display(
                f"bench: needle: {'found' if needle['found'] else 'NOT found'} in {needle['context_tokens']} tokens "
                f"({needle.get('counted_by', 'usage')}), {needle['seconds'] or 0:.1f} s"
                + (f" ({needle['error']})" if needle.get("error") else "")
            )

        identity["finished_at"] = _now()
        try:
            summary = _bench.summarize(results, slos)
        except ValueError as error:
            raise AnsibleActionFail(f"the results could not be summarized: {error}") from None
        folder = self._write(args, results, summary)
        # with the nodes' samples still to come (bench_nodes), seed 000's figures are said once they are in
        table = _report.text_table(summary, seed=not args["nodes_after"])
        result.update(
            changed=False,
            dir=folder,
            results_file=os.path.join(folder, "results.json"),
            report_file=os.path.join(folder, "report.md"),
            summary=summary,
            table=table,
            msg=f"benchmark done; results, report and charts in {folder}",
        )
        return result

    def _step(self, task_vars: dict[str, Any], module_args: dict[str, Any], what: str) -> dict[str, Any]:
        started = time.monotonic()
        step = self._execute_module(
            module_name="dgxspark.cluster.bench_load", module_args=module_args, task_vars=task_vars
        )
        if step.get("failed") or step.get("unreachable"):
            raise AnsibleActionFail(f"bench {what}: {step.get('msg', 'failed')}", result=step)
        step["seconds"] = round(time.monotonic() - started, 1)
        return step

    def _write(self, args: dict[str, Any], results: dict[str, Any], summary: dict[str, Any] | None) -> str:
        """The run's folder under results_dir: results.json, report.md and charts/*.png."""
        identity = results["identity"]
        stamp = identity["started_at"].replace(":", "").replace("-", "")
        name = "-".join(part for part in (stamp, identity.get("shape", ""), args["label"]) if part)
        folder = os.path.join(args["results_dir"], _safe(name))
        for warning in _report.write_run(folder, results, summary):
            display.warning(f"bench: {warning}")
        return folder


def _phase(name: str, client: dict[str, Any]) -> dict[str, Any]:
    """A phase of the run with its start and end on the client's wall clock (for the nodes' samples)."""
    return {"name": name, "started_at": client.get("started_at"), "finished_at": client.get("finished_at")}


def _level_line(level: dict[str, Any]) -> str:
    records = level["requests"]
    ok = [record for record in records if record["ok"]]
    client = level["client"]
    line = f"{len(ok)} ok, {len(records) - len(ok)} failed in {client['wall_s']:.1f} s"
    if ok:
        ttfts = sorted(record["ttft"] for record in ok)
        line += f"; TTFT median {ttfts[len(ttfts) // 2] * 1000:.0f} ms"
        tpots = sorted(
            (record["e2e"] - record["ttft"]) / (record["output_tokens"] - 1)
            for record in ok
            if (record.get("output_tokens") or 0) > 1
        )
        if tpots:
            line += f", TPOT median {tpots[len(tpots) // 2] * 1000:.1f} ms"
    line += f"; client CPU {client['cpu_share']:.0%} of a core, loop lag p99 {client['loop_lag']['p99_ms']} ms"
    failed = [record["error"] for record in records if not record["ok"]]
    if failed:
        line += f"; first error: {failed[0]}"
    return line


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _safe(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)
