# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seed 000's figures in the bench: bursts, parts, the needle's refusal, node memory, the monitor, the comparison."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_monitor import mem_available, monitor
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.seed import (
    GIB,
    burst_summary,
    node_memory,
    seed_comparison,
)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"


def record(i: int, t_send: float, ttft: float, e2e: float, tokens: int, ok: bool = True) -> dict[str, Any]:
    return {
        "i": i,
        "ok": ok,
        "error": None if ok else "HTTP 500: boom",
        "status": 200 if ok else 500,
        "t_send": t_send,
        "ttft": ttft if ok else None,
        "e2e": e2e,
        "gaps": [],
        "chunks": tokens,
        "output_tokens": tokens if ok else None,
        "prompt_tokens": 140,
        "finish_reason": "length",
    }


def test_burst_of_four_at_seed_000_rate() -> None:
    # 4 x 512 tokens in 14.884 s = 137.6 tok/s, seed 000's 4-request burst
    burst = {"size": 4, "requests": [record(i, 100.0 + i * 0.001, 0.5, 14.884 - i * 0.001, 512) for i in range(4)]}
    figures = burst_summary(burst)
    assert figures["output_tokens"] == 2048 and figures["errors"] == 0
    assert figures["span_s"] == pytest.approx(14.884)
    assert figures["aggregate_tps"] == pytest.approx(137.6, rel=1e-3)


def test_a_burst_with_a_failure_has_no_aggregate() -> None:
    burst = {"size": 6, "requests": [record(i, 1.0, 0.5, 20.0, 512, ok=i != 5) for i in range(6)]}
    figures = burst_summary(burst)
    assert figures["aggregate_tps"] is None and figures["first_error"] == "HTTP 500: boom"


@pytest.mark.parametrize(
    ("requests", "concurrency", "every", "parts"),
    [
        (100, 1, 25, [(0, 25), (25, 25), (50, 25), (75, 25)]),  # the 85 s level: a line every ~21 s
        (100, 2, 25, [(0, 50), (50, 50)]),
        (100, 4, 25, [(0, 100)]),
        (100, 8, 25, [(0, 100)]),
        (110, 1, 25, [(0, 25), (25, 25), (50, 25), (75, 35)]),  # a rest under half a part joins the last
        (120, 1, 25, [(0, 25), (25, 25), (50, 25), (75, 25), (100, 20)]),
        (100, 1, 0, [(0, 100)]),
    ],
)
def test_level_parts(requests: int, concurrency: int, every: int, parts: list[tuple[int, int]]) -> None:
    assert _bench.level_parts(requests, concurrency, every) == parts
    assert sum(count for _first, count in parts) == requests


def test_parts_do_not_count_the_pause_between_them() -> None:
    level = {"concurrency": 1, "requests": [record(0, 10.0, 0.2, 1.0, 16), record(1, 11.0, 0.2, 1.0, 16)]}
    level["requests"] += [dict(record(2, 15.0, 0.2, 1.0, 16), part=1), dict(record(3, 16.0, 0.2, 1.0, 16), part=1)]
    for item in level["requests"][:2]:
        item["part"] = 0
    summary = _bench.level_summary(level)
    assert summary["span_s"] == pytest.approx(4.0)  # 2 s + 2 s, not 10 -> 17 s
    assert summary["output_tps"] == pytest.approx(64 / 4.0)


@pytest.mark.parametrize(
    ("tokens", "limit", "refused"),
    [
        (443223, 1048576, None),  # seed 000's needle fits its 1M context
        (1048576, 1048576, "does not fit max_model_len 1048576 with its 64 answer tokens"),
        (443223, 300000, "choose needle_tokens <= 299936"),  # tp8-300k (seed 002) cannot take it
        (0, 8192, None),
        (8192, None, None),
    ],
)
def test_needle_refusal(tokens: int, limit: int | None, refused: str | None) -> None:
    message = _bench.needle_refusal(tokens, limit, 64)
    assert (message is None) if refused is None else (refused in str(message))


def test_node_memory_per_phase() -> None:
    samples = [[100.0, 20 * GIB], [101.0, 8 * GIB], [102.0, int(6.8 * GIB)], [103.0, 9 * GIB], [110.0, 5 * GIB]]
    phases = [
        {"name": "needle", "started_at": 100.5, "finished_at": 103.5},
        {"name": "burst 4", "started_at": 200, "finished_at": 201},
    ]
    memory = node_memory(samples, phases)
    assert memory["min_bytes"] == 5 * GIB and memory["min_at"] == 110.0
    assert memory["phases"]["needle"] == {"samples": 3, "min_bytes": int(6.8 * GIB)}
    assert memory["phases"]["burst 4"] == {"samples": 0, "min_bytes": None}


def summary_with(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "identity": {"hosts": ["head", "w1"]},
        "levels": [],
        "bursts": [],
        "needle": None,
        "nodes": None,
    }
    base.update(parts)
    return base


def test_seed_comparison_with_seed_000s_own_numbers() -> None:
    levels = [{"concurrency": 1, "ok": 12, "stats": {"tps_user": {"mean": 53.9}}}]
    bursts = [
        {"size": 4, "aggregate_tps": 137.6, "output_tokens": 2048, "span_s": 14.88, "errors": 0},
        {"size": 6, "aggregate_tps": 123.2, "output_tokens": 3072, "span_s": 24.94, "errors": 0},
    ]
    needle = {"context_tokens": 443223, "counted_by": "usage", "seconds": 87.1, "found": True}
    nodes = {"head": {"error": None, "memory": {"phases": {"needle": {"samples": 170, "min_bytes": int(6.8 * GIB)}}}}}
    rows = {
        row["figure"]: row
        for row in seed_comparison(summary_with(levels=levels, bursts=bursts, needle=needle, nodes=nodes))
    }
    for figure in ("single_stream_tps", "burst_4_tps", "burst_6_tps", "needle_seconds", "needle_min_headroom_gib"):
        assert rows[figure]["ratio"] == pytest.approx(1.0, abs=1e-3), figure
    assert rows["needle_seconds"]["note"] == "443223 tokens (usage), found"


def test_seed_comparison_says_what_was_not_measured() -> None:
    needle = {"context_tokens": 8192, "counted_by": "usage", "seconds": 2.0, "found": True}
    rows = {row["figure"]: row for row in seed_comparison(summary_with(needle=needle))}
    assert all(row["value"] is None for figure, row in rows.items() if figure != "needle_min_headroom_gib")
    assert rows["single_stream_tps"]["note"] == "not measured: concurrency 1 was not among the levels"
    assert rows["burst_4_tps"]["note"] == "not measured: no 4-request burst in this run"
    assert rows["needle_seconds"]["note"] == "not comparable: the needle had 8192 tokens (usage)"
    assert rows["needle_min_headroom_gib"]["note"] == "not measured: no node monitor in this run"


def test_monitor_samples_until_the_stop_file(tmp_path: pathlib.Path) -> None:
    stop = tmp_path / "stop"
    clock = iter(float(t) for t in range(1000, 2000))
    query_csv = (FIXTURES / "gpu_clocks" / "h200-idle.csv").read_text()
    calls: list[int] = []

    def sleep(_seconds: float) -> None:
        calls.append(1)
        if len(calls) == 3:
            stop.write_text("")

    result = monitor(str(stop), 0.5, 2, 60, lambda: (0, query_csv, ""), lambda: 7 * GIB, lambda: next(clock), sleep)
    assert result["stopped_by"] == "stop_file" and stop.exists()  # left for its maker (bench.yml) to remove
    assert [value for _t, value in result["mem_available"]] == [7 * GIB] * 4
    assert len(result["gpu"]) == 2 and result["clock_latch"]["verdict"] == "not_judged"


def test_monitor_stops_at_max_seconds_and_reports_nvidia_smi_failures(tmp_path: pathlib.Path) -> None:
    clock = iter(float(t) for t in range(100))
    result = monitor(
        str(tmp_path / "never"),
        1,
        1,
        3,
        lambda: (9, "", "NVIDIA-SMI has failed"),
        lambda: None,
        lambda: next(clock),
        lambda _s: None,
    )
    assert result["stopped_by"] == "max_seconds" and result["mem_available"] == [] and result["clock_latch"] is None
    assert result["gpu_error"] == "nvidia-smi exited 9: NVIDIA-SMI has failed"


def test_mem_available_from_a_meminfo(tmp_path: pathlib.Path) -> None:
    (tmp_path / "meminfo").write_text((FIXTURES / "node_facts" / "bare" / "proc" / "meminfo").read_text())
    assert mem_available(str(tmp_path)) == 24063916 * 1024
    assert mem_available(os.path.join(str(tmp_path), "absent")) is None


def test_nodes_from_monitors_and_their_lines() -> None:
    monitors = {
        "head": {"mem_available": [[1.0, 7 * GIB]], "clock_latch": {"verdict": "pass"}, "stopped_by": "stop_file"},
        "w1": {"failed": True, "msg": "async job failed"},
        "w2": {},
    }
    nodes = _bench.nodes_from_monitors(monitors)
    assert nodes["w1"] == {"error": "async job failed"}
    assert nodes["w2"] == {"error": "the monitor returned no samples"}
    summary = {"nodes": _bench._nodes(nodes, [])}
    assert _bench.nodes_lines(summary) == [
        "head: MemAvailable min 7.00 GiB over 1 samples; GPU clocks: pass",
        "w1: no samples (async job failed)",
        "w2: no samples (the monitor returned no samples)",
    ]
