# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's analysis on synthetic results with known timings: metrics, capacity, comparison, reports."""

from __future__ import annotations

import copy
import json
import math
import pathlib
import random
import struct
import subprocess
import sys
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.bench import FilterModule
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _bench_report
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import (
    DEFAULT_SLOS,
    FORMAT,
    compare,
    level_summary,
    load_results,
    parse_slos,
    request_metrics,
    round_figure,
    summarize,
    validate_results,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.report import (
    render_comparison_markdown,
    render_markdown,
    text_table,
    write_charts,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
FILTERS = FilterModule().filters()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- synthetic results
def request(
    i: int,
    *,
    t_send: float = 0.0,
    ttft: float = 0.2,
    gap: float = 0.025,
    n: int = 128,
    usage: bool = True,
) -> dict[str, Any]:
    """A successful streamed request: ``n`` chunks of one token, ``n - 1`` gaps of ``gap`` after ``ttft``."""
    gaps = [gap] * (n - 1)
    return {
        "i": i,
        "ok": True,
        "error": None,
        "status": 200,
        "t_send": t_send,
        "ttft": ttft,
        "e2e": ttft + math.fsum(gaps),
        "gaps": gaps,
        "output_tokens": n if usage else None,
        "prompt_tokens": 512,
        "chunks": n,
        "finish_reason": "length",
    }


def failed(
    i: int, *, t_send: float = 0.0, error: str | None = "timeout after 300 s", status: int | None = None
) -> dict:
    return {
        "i": i,
        "ok": False,
        "error": error,
        "status": status,
        "t_send": t_send,
        "ttft": None,
        "e2e": None,
        "gaps": [],
        "output_tokens": None,
        "prompt_tokens": None,
        "chunks": 0,
        "finish_reason": None,
    }


def noisy(concurrency: int, count: int, ttft: float, gap: float, spread: float, seed: int) -> list[dict[str, Any]]:
    """``count`` requests sent in waves of ``concurrency``, TTFT and gap each varied by +-``spread`` (relative)."""
    rng = random.Random(seed)
    return [
        request(
            i,
            t_send=(i // concurrency) * 10.0,
            ttft=ttft * (1 + rng.uniform(-spread, spread)),
            gap=gap * (1 + rng.uniform(-spread, spread)),
        )
        for i in range(count)
    ]


def document(
    levels: dict[int, list[dict[str, Any]]],
    *,
    gate: bool = True,
    shape: str = "tp8-300k",
    model: str = "v41-flash",
    prompt_tokens: int = 512,
    max_tokens: int = 128,
    needle: dict[str, Any] | None = None,
) -> dict[str, Any]:
    checks = [
        {"name": "models", "passed": True, "expected": model, "got": model, "seconds": 0.05},
        {
            "name": "smoke",
            "passed": gate,
            "expected": "a completion",
            "got": "ok" if gate else "HTTP 503",
            "seconds": 1.2,
        },
    ]
    return {
        "format": FORMAT,
        "identity": {
            "profile": "spark8",
            "profile_hash": "sha256:abc",
            "shape": shape,
            "model": model,
            "hosts": ["spark-head", "spark-w1"],
            "image_ids": {"spark-head": "sha256:1111", "spark-w1": "sha256:1111"},
            "client_host": "spark-head",
            "endpoint": "http://192.0.2.10:8000/v1",
            "started_at": "2026-11-20T10:00:00Z",
            "finished_at": "2026-11-20T10:20:00Z",
            "workload": {
                "prompt_tokens": prompt_tokens,
                "max_tokens": max_tokens,
                "requests_per_level": max((len(r) for r in levels.values()), default=1),
                "levels": sorted(levels),
                "stream": True,
            },
        },
        "gate": {"passed": gate, "checks": checks},
        "levels": [{"concurrency": c, "requests": r} for c, r in levels.items()],
        "needle": needle,
    }


def steady(gaps: dict[int, float], count: int = 8, ttft: float = 0.2) -> dict[int, list[dict[str, Any]]]:
    """Levels whose requests all have the same timings: ``gaps`` maps concurrency to the gap between tokens."""
    return {
        c: [request(i, t_send=(i // c) * 10.0, ttft=ttft, gap=gap) for i in range(count)] for c, gap in gaps.items()
    }


def level_of(summary: dict[str, Any], concurrency: int) -> dict[str, Any]:
    return next(level for level in summary["levels"] if level["concurrency"] == concurrency)


# ---------------------------------------------------------------- one request
def test_request_with_known_timing() -> None:
    metrics = request_metrics(request(0, t_send=5.0))
    assert metrics["n"] == 128 and not metrics["n_from_chunks"]
    assert metrics["e2e_s"] == pytest.approx(0.2 + 127 * 0.025)  # 3.375 s
    assert metrics["tpot_s"] == pytest.approx(0.025, rel=1e-12)  # (e2e - ttft) / (N - 1)
    assert metrics["tps_user"] == pytest.approx(40.0, rel=1e-12)  # 1 / TPOT
    assert metrics["cordatus_tps"] == pytest.approx(128 / 3.375, rel=1e-12)  # N / latency, TTFT included
    assert metrics["end"] == pytest.approx(5.0 + 3.375)


def test_n_from_chunks_is_flagged() -> None:
    raw = request(0, usage=False)
    raw["chunks"] = 64  # a chunk may carry more than one token: without usage the chunks are all we have
    metrics = request_metrics(raw)
    assert metrics["n"] == 64 and metrics["n_from_chunks"]
    assert metrics["tpot_s"] == pytest.approx(127 * 0.025 / 63)
    summary = summarize(document({1: [raw, request(1, t_send=10.0)]}))
    assert level_of(summary, 1)["n_from_chunks"] == 1
    assert any("N counted from content chunks for 1 request" in note for note in summary["notes"])


def test_tpot_undefined_for_fewer_than_two_tokens() -> None:
    one = request_metrics(request(0, n=1))
    assert one["n"] == 1 and one["tpot_s"] is None and one["tps_user"] is None
    assert one["cordatus_tps"] == pytest.approx(1 / 0.2)
    summary = summarize(document({1: [request(0, n=1), request(1, t_send=10.0)]}))
    level = level_of(summary, 1)
    assert level["tpot_undefined"] == 1 and level["stats"]["tpot_ms"]["n"] == 1
    assert level["stats"]["ttft_ms"]["n"] == 2


def test_failed_requests_are_errors_and_out_of_the_timings() -> None:
    requests = [
        request(0, ttft=0.1),
        failed(1),
        failed(2),
        failed(3, error=None, status=503),
        failed(4, error=None, status=None),
        request(5, ttft=0.3, t_send=10.0),
    ]
    level = level_summary({"concurrency": 2, "requests": requests})
    assert (level["requests"], level["ok"], level["errors"]) == (6, 2, 4)
    assert level["error_messages"] == [
        {"error": "timeout after 300 s", "count": 2},
        {"error": "HTTP 503", "count": 1},
        {"error": "failed without an error message", "count": 1},
    ]
    assert level["stats"]["ttft_ms"]["n"] == 2
    assert level["stats"]["ttft_ms"]["mean"] == pytest.approx(200.0)
    assert level["stats"]["e2e_s"]["n"] == 2


# ---------------------------------------------------------------- one level
def test_level_rps_output_rate_and_cordatus_columns() -> None:
    # C=2, four requests in two waves 4 s apart, each 3.375 s: the span is 0 .. 4 + 3.375.
    requests = [request(i, t_send=(i // 2) * 4.0) for i in range(4)]
    level = level_summary({"concurrency": 2, "requests": requests})
    assert level["span_s"] == pytest.approx(7.375)
    assert level["rps"] == pytest.approx(4 / 7.375)
    assert level["output_tps"] == pytest.approx(4 * 128 / 7.375)
    assert level["output_tokens"] == 512
    stats = level["stats"]
    assert stats["ttft_ms"]["p90"] == pytest.approx(200.0) and stats["tpot_ms"]["p50"] == pytest.approx(25.0)
    assert stats["tps_user"]["p10"] == pytest.approx(40.0) and stats["e2e_s"]["mean"] == pytest.approx(3.375)
    assert stats["itl_gap_ms"]["n"] == 4 * 127 and stats["itl_gap_ms"]["mean"] == pytest.approx(25.0)
    cordatus = level["cordatus"]
    assert cordatus["ttft_ms"] == pytest.approx(200.0)
    assert cordatus["itl_ms"] == pytest.approx(25.0)
    assert cordatus["tps"] == pytest.approx(128 / 3.375)
    assert cordatus["latency_s"] == pytest.approx(3.375)
    assert cordatus["rps"] == pytest.approx(1 / 3.375)  # 1 / mean latency, not completed / span
    assert level["finish_reasons"] == {"length": 4}


def test_summary_is_json_and_rounded() -> None:
    summary = summarize(document(steady({1: 0.025, 2: 0.03, 4: 0.04})))
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text) == summary
    assert summary["format"] == "dgxspark.cluster/bench-summary/1" and summary["figures"]
    assert [level["concurrency"] for level in summary["levels"]] == [1, 2, 4]
    # 0.025 s summed 127 times is not exactly 3.175: the summary rounds to 6 significant digits.
    assert level_of(summary, 1)["stats"]["tpot_ms"]["p50"] == 25.0
    assert level_of(summary, 4)["stats"]["tps_user"]["mean"] == 25.0
    assert round_figure(123.456789) == 123.457 and round_figure(0.000123456789) == 0.000123457
    assert round_figure(float("nan")) is None and round_figure(0.0) == 0.0


def test_levels_are_sorted_and_missing_ones_noted() -> None:
    results = document(steady({4: 0.04, 1: 0.025}))
    results["identity"]["workload"]["levels"] = [1, 2, 4]
    summary = summarize(results)
    assert [level["concurrency"] for level in summary["levels"]] == [1, 4]
    assert "planned but not in the results: C=2" in summary["notes"]


# ---------------------------------------------------------------- SLOs and capacity
def test_default_slos() -> None:
    assert parse_slos(None) == [dict(slo) for slo in DEFAULT_SLOS]
    assert DEFAULT_SLOS[0] == {"metric": "ttft_ms", "op": "<=", "threshold": 1000, "percentile": 90}
    assert DEFAULT_SLOS[1] == {"metric": "tps_user", "op": ">=", "threshold": 20, "percentile": 10}


@pytest.mark.parametrize(
    ("slos", "message"),
    [
        ("ttft_ms<=1000", "must be a list"),
        ([], "slos is empty"),
        (
            [{"metric": "ttfb", "op": "<=", "threshold": 1, "percentile": 90}],
            r"slos\[0\]\.metric: 'ttfb' is not a metric",
        ),
        ([{"metric": "ttft_ms", "op": "=<", "threshold": 1, "percentile": 90}], "is not an operator"),
        (
            [{"metric": "ttft_ms", "op": ">=", "threshold": 1, "percentile": 90}],
            "lower-is-better, so its SLO is <= or <",
        ),
        ([{"metric": "tps_user", "op": "<=", "threshold": 1, "percentile": 10}], "higher-is-better"),
        ([{"metric": "ttft_ms", "op": "<=", "threshold": "1s", "percentile": 90}], r"threshold: expected a number"),
        ([{"metric": "ttft_ms", "op": "<=", "threshold": True, "percentile": 90}], r"threshold: expected a number"),
        ([{"metric": "ttft_ms", "op": "<=", "threshold": 1, "percentile": 120}], "from 0 to 100"),
        ([{"metric": "ttft_ms", "op": "<=", "threshold": 1, "percentile": 10}], "bad tail.*at least 50"),
        ([{"metric": "tps_user", "op": ">=", "threshold": 1, "percentile": 90}], "bad tail.*at most 50"),
        ([{"metric": "ttft_ms", "op": "<=", "threshold": 1, "percentile": 90, "unit": "ms"}], "unknown key"),
        (["ttft_ms"], r"slos\[0\]: expected an object"),
    ],
)
def test_slo_validation(slos: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_slos(slos)


def test_capacity_all_levels_pass_may_be_higher() -> None:
    capacity = summarize(document(steady({1: 0.025, 2: 0.03, 4: 0.04})))["capacity"]
    assert capacity["max_c"] == 4 and capacity["may_be_higher"]
    assert capacity["passing_levels"] == [1, 2, 4]
    assert "at least 4" in capacity["users_supported"] and "may be higher" in capacity["users_supported"]
    first = capacity["levels"][0]["checks"]
    assert [check["label"] for check in first] == ["TTFT p90 <= 1000 ms", "tok/s per user p10 >= 20 tok/s"]
    assert first[0]["value"] == pytest.approx(200.0) and first[1]["value"] == pytest.approx(40.0)


def test_capacity_stops_at_the_first_failing_level() -> None:
    # tok/s per user = 1 / gap: 40, 25, 16.7 (fails), 20.8 (passes again but does not count).
    capacity = summarize(document(steady({1: 0.025, 2: 0.04, 4: 0.06, 8: 0.048})))["capacity"]
    assert capacity["max_c"] == 2 and not capacity["may_be_higher"]
    assert capacity["passing_levels"] == [1, 2, 8]
    assert [level["passed"] for level in capacity["levels"]] == [True, True, False, True]
    assert "C=8 passes again above a failing level" in capacity["users_supported"]
    assert capacity["levels"][2]["reasons"] == ["tok/s per user p10 >= 20 tok/s: 16.67"]


def test_capacity_none_when_the_lowest_level_fails() -> None:
    capacity = summarize(document(steady({2: 0.06, 4: 0.07})))["capacity"]
    assert capacity["max_c"] is None and not capacity["may_be_higher"]
    assert "the lowest level tested (C=2) already fails" in capacity["users_supported"]
    assert capacity["cordatus"]["max_c"] is None


def test_a_level_with_errors_fails_capacity() -> None:
    levels = steady({1: 0.025, 2: 0.03, 4: 0.04})
    levels[2].append(failed(99, t_send=30.0))
    capacity = summarize(document(levels))["capacity"]
    assert capacity["max_c"] == 1
    level2 = capacity["levels"][1]
    assert level2["errors"] == 1 and not level2["passed"] and level2["reasons"] == ["1 failed request(s)"]
    assert all(check["passed"] for check in level2["checks"])


def test_custom_slos_and_ttft_tail() -> None:
    levels = steady({1: 0.025, 2: 0.025})
    levels[2][0] = request(0, ttft=1.5)  # one slow first token in eight
    slos = [{"metric": "ttft_ms", "op": "<=", "threshold": 1000, "percentile": 99}]
    capacity = summarize(document(levels), slos)["capacity"]
    assert capacity["max_c"] == 1
    assert capacity["levels"][1]["checks"][0]["value"] == pytest.approx(200 + 0.93 * 1300)  # p99 of 7 x 200, 1500
    relaxed = summarize(document(levels), [{"metric": "ttft_ms", "op": "<=", "threshold": 1000, "percentile": 50}])
    assert relaxed["capacity"]["max_c"] == 2


def seed002(ttft_ms: float, tps: float, tpot_ms: float) -> list[dict[str, Any]]:
    """Eight identical requests with a mean TTFT, CordatusAI TPS (N / latency) and TPOT like seed 002's rows."""
    ttft = ttft_ms / 1000
    n = 128
    latency = n / tps
    gap = (latency - ttft) / (n - 1)
    assert gap * 1000 == pytest.approx(tpot_ms, abs=0.01)
    return [request(i, t_send=10.0 * i, ttft=ttft, gap=gap) for i in range(8)]


def test_cordatus_max_c_and_ours_can_differ() -> None:
    # TPS (N / latency) includes TTFT, tokens/s per user (1 / TPOT) does not: at C=4 CordatusAI's TPS is 19.5
    # (fails its 20 tok/s target) while 1 / TPOT = 20.25 tok/s passes ours.
    levels = {
        1: seed002(213.19, 35.98, 26.33),
        2: seed002(279.55, 28.21, 33.53),
        4: seed002(370.36, 19.5, 48.77),
        8: seed002(488.22, 13.63, 70.10),
    }
    summary = summarize(document(levels))
    assert summary["capacity"]["cordatus"]["max_c"] == 2
    assert summary["capacity"]["max_c"] == 4
    row = level_of(summary, 4)["cordatus"]
    assert row["tps"] == pytest.approx(19.5) and row["ttft_ms"] == pytest.approx(370.36)
    levels[4] = seed002(370.36, 20.10, 47.23)  # seed 002's TP8-300K at C=4: 20.10 tok/s, Max C = 4
    assert summarize(document(levels))["capacity"]["cordatus"]["max_c"] == 4


# ---------------------------------------------------------------- the document
def test_valid_document_passes_and_file_round_trip(tmp_path: pathlib.Path) -> None:
    results = document(
        steady({1: 0.025}),
        needle={"context_tokens": 1000, "found": True, "seconds": 2.0, "expected": "x", "got": "x", "error": None},
    )
    validate_results(results)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    assert load_results(str(path)) == results


def test_validation_names_every_problem() -> None:
    results = document(steady({1: 0.025, 2: 0.03}))
    results["format"] = "bench/0"
    del results["identity"]["model"]
    results["identity"]["workload"]["max_tokens"] = True  # a bool is not an integer
    results["identity"]["started_at"] = "yesterday"
    results["levels"][0]["requests"][1]["ttft"] = None  # ok without a first token
    results["levels"][0]["requests"][2]["ttft"] = 9.0  # after the end of the stream
    results["levels"][1]["concurrency"] = 1  # tested twice
    results["levels"][1]["requests"][0]["gaps"][3] = -1.0
    results["gate"]["checks"][0]["passed"] = False  # gate.passed stays true
    with pytest.raises(ValueError) as raised:
        validate_results(results, source="run.json")
    message = str(raised.value)
    for expected in (
        "run.json: $.format: expected 'dgxspark.cluster/bench-results/1'",
        "run.json: $.identity.model: missing (expected a string)",
        "run.json: $.identity.workload.max_tokens: expected an integer >= 1, found bool true",
        "run.json: $.identity.started_at: expected an ISO-8601 time",
        "run.json: $.levels[0].requests[1].ttft: a successful request (ok: true) needs it, found null",
        "run.json: $.levels[0].requests[2].ttft: 9.0 s is after the end of the stream",
        "run.json: $.levels[1].concurrency: concurrency 1 is tested twice",
        "run.json: $.levels[1].requests[0].gaps[3]: expected a number >= 0",
        "run.json: $.gate.passed: is true, but these checks failed: models",
    ):
        assert expected in message
    assert message.startswith("not a valid dgxspark.cluster/bench-results/1 document (9 problem(s))")


def test_validation_of_structure() -> None:
    with pytest.raises(ValueError, match=r"<results>: \$: expected an object, found list"):
        validate_results([])
    results = document(steady({1: 0.025}))
    results["levels"][0]["requests"].append(copy.deepcopy(results["levels"][0]["requests"][0]))
    results["levels"].append({"concurrency": 16, "requests": "none"})
    results["identity"]["workload"]["stream"] = False
    results["needle"] = {"context_tokens": 10}
    with pytest.raises(ValueError) as raised:
        validate_results(results)
    message = str(raised.value)
    assert "$.levels[0].requests[8].i: request 0 appears twice in this level" in message
    assert "$.levels[1].concurrency: 16 is not in $.identity.workload.levels [1]" in message
    assert "$.levels[1].requests: expected a list, found str" in message
    assert "$.identity.workload.stream: must be true" in message
    assert "$.needle.found: missing (expected a boolean)" in message


def test_load_results_errors(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ValueError, match=r"nope\.json: cannot read the results"):
        load_results(str(missing))
    broken = tmp_path / "broken.json"
    broken.write_text('{"format":\n  "x",,}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.json: line 2, column 7: not JSON"):
        load_results(str(broken))
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(document(steady({1: 0.025}))).replace('"ttft": 0.2', '"ttft": NaN', 1), encoding="utf-8")
    with pytest.raises(ValueError, match=r"nan\.json: not JSON: NaN is not valid JSON"):
        load_results(str(nan))
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"format": "x"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"wrong\.json: \$\.identity: missing"):
        load_results(str(wrong))


# ---------------------------------------------------------------- the gate
def test_failed_gate_gives_no_figures(tmp_path: pathlib.Path) -> None:
    results = document(steady({1: 0.025}), gate=False)
    summary = summarize(results)
    assert not summary["figures"] and summary["levels"] == [] and summary["capacity"] is None
    assert summary["gate"]["failed"] == ["smoke"]
    report = render_markdown(results, summary, [])
    assert "Gate FAILED (smoke)" in report and "no performance figures" in report
    assert "TTFT" not in report and "Max C" not in report and "| 1 |" not in report
    assert text_table(summary) == "gate FAILED (smoke): no performance figures"
    assert write_charts(summary, str(tmp_path / "charts")) == []
    assert not (tmp_path / "charts").exists()


# ---------------------------------------------------------------- comparing
def runs(gap_b: float, gap_c: float, spread: float, count: int = 32) -> tuple[dict[str, Any], dict[str, Any]]:
    levels_b = {c: noisy(c, count, 0.2, gap_b, spread, seed=c) for c in (1, 2, 4)}
    levels_c = {c: noisy(c, count, 0.2, gap_c, spread, seed=c) for c in (1, 2, 4)}
    return document(levels_b), document(levels_c)


def rows(comparison: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    return [row for row in comparison["metrics"] if row["metric"] == metric]


def test_identical_runs_pass_with_p_one() -> None:
    baseline = runs(0.025, 0.025, 0.05)[0]
    comparison = compare(baseline, copy.deepcopy(baseline))
    assert comparison["verdict"] == "pass" and comparison["regressions"] == [] and comparison["reasons"] == []
    assert len(comparison["metrics"]) == 3 * 5
    for row in comparison["metrics"]:
        assert row["p"] == 1.0 and row["t"] == 0.0 and row["change"] == 0.0
        assert not row["significant"] and not row["worse"] and not row["regression"]
    assert {row["figure"] for row in comparison["level_figures"]} == {"rps", "output_tps", "errors"}
    json.dumps(comparison, allow_nan=False)


def test_ten_percent_slower_is_a_regression() -> None:
    baseline, candidate = runs(0.025, 0.0275, 0.01)
    comparison = compare(baseline, candidate)
    assert comparison["verdict"] == "regression"
    for row in rows(comparison, "tpot_ms"):
        assert row["change"] == pytest.approx(0.10, abs=0.005)
        assert row["worse"] and row["significant"] and row["regression"] and row["p"] < 1e-10
    for row in rows(comparison, "tps_user"):  # higher is better: lower tokens/s is worse
        assert row["change"] < -0.08 and row["worse"] and row["regression"]
    for row in rows(comparison, "ttft_ms"):  # same TTFTs in both runs
        assert row["p"] == 1.0 and not row["regression"]
    regressed = {(line["concurrency"], line["metric"]) for line in comparison["regressions"]}
    assert (1, "tpot_ms") in regressed and (4, "e2e_s") in regressed and (2, "cordatus_tps") in regressed
    assert not any(metric == "ttft_ms" for _c, metric in regressed)
    message = next(line["message"] for line in comparison["regressions"] if line["metric"] == "tpot_ms")
    assert message.startswith("TPOT at C=1: 2") and " ms (+10.0 %, p=" in message


def test_one_percent_change_passes_even_if_significant() -> None:
    baseline, candidate = runs(0.025, 0.02525, 0.001)
    comparison = compare(baseline, candidate)
    tpot = rows(comparison, "tpot_ms")
    assert all(row["significant"] and row["worse"] for row in tpot)
    assert all(row["change"] == pytest.approx(0.01, abs=0.002) for row in tpot)
    assert comparison["verdict"] == "pass"
    # A threshold under the change makes it a regression.
    assert compare(baseline, candidate, threshold=0.005)["verdict"] == "regression"


def test_faster_candidate_is_not_a_regression() -> None:
    baseline, candidate = runs(0.025, 0.0225, 0.01)
    comparison = compare(baseline, candidate)
    assert comparison["verdict"] == "pass"
    assert all(row["significant"] and not row["worse"] for row in rows(comparison, "tpot_ms"))
    assert all(row["change"] > 0.05 and not row["worse"] for row in rows(comparison, "tps_user"))


def test_noise_without_significance_is_not_a_regression_nor_a_pass() -> None:
    """Four noisy requests a side cannot tell a 3 % change from noise: the verdict is inconclusive, never a pass,
    and it says how many requests would decide; that many at the same spread decide it."""
    levels_b = {1: noisy(1, 4, 0.2, 0.025, 0.2, seed=1)}
    levels_c = {1: noisy(1, 4, 0.2, 0.0252, 0.2, seed=2)}
    comparison = compare(document(levels_b), document(levels_c))
    tpot = rows(comparison, "tpot_ms")[0]
    assert not tpot["significant"] and not tpot["regression"] and not tpot["decided"]
    assert comparison["verdict"] == "inconclusive" and comparison["regressions"] == []
    assert tpot["worst_change"] > 0.03 and comparison["requests_needed"] > 4
    assert any("requests per level on each run would decide" in u["message"] for u in comparison["undecided"])
    assert "Inconclusive" in render_comparison_markdown(comparison)
    needed = comparison["requests_needed"]
    levels_b = {1: noisy(1, 3 * needed, 0.2, 0.025, 0.2, seed=3)}
    levels_c = {1: noisy(1, 3 * needed, 0.2, 0.025, 0.2, seed=4)}
    decided = compare(document(levels_b), document(levels_c))
    assert decided["verdict"] == "pass", decided["undecided"] + decided["regressions"]
    assert all(row["decided"] and row["worst_change"] <= 0.03 for row in decided["metrics"])


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"prompt_tokens": 2048}, "prompt_tokens differs: baseline 512, candidate 2048"),
        ({"max_tokens": 256}, "max_tokens differs: baseline 128, candidate 256"),
        ({"shape": "tp8-1m"}, "shape differs: baseline 'tp8-300k', candidate 'tp8-1m'"),
        ({"model": "other"}, "model differs"),
        ({"gate": False}, "the candidate's gate failed (smoke): it has no figures"),
    ],
)
def test_incomparable_runs(changes: dict[str, Any], reason: str) -> None:
    levels = steady({1: 0.025})
    comparison = compare(document(levels), document(levels, **changes))
    assert comparison["verdict"] == "incomparable"
    assert any(reason in line for line in comparison["reasons"])
    assert comparison["metrics"] == [] and comparison["regressions"] == []
    assert "cannot be compared" in render_comparison_markdown(comparison)


def test_no_common_level_is_incomparable_and_one_sided_levels_noted() -> None:
    comparison = compare(document(steady({1: 0.025})), document(steady({2: 0.025})))
    assert comparison["verdict"] == "incomparable"
    assert comparison["reasons"] == ["no concurrency level was tested in both runs"]
    partial = compare(document(steady({1: 0.025, 2: 0.03})), document(steady({1: 0.025, 4: 0.03})))
    assert partial["verdict"] == "pass"
    assert "only in the baseline: C=2 (not compared)" in partial["notes"]
    assert "only in the candidate: C=4 (not compared)" in partial["notes"]


def test_compare_edge_cases_never_nan() -> None:
    # Constant timings on both sides: equal -> p 1; different -> p 0 and a regression past the threshold.
    same = compare(document(steady({1: 0.025})), document(steady({1: 0.025})))
    assert all(row["p"] == 1.0 and row["t"] is None for row in same["metrics"])
    apart = compare(document(steady({1: 0.025})), document(steady({1: 0.03})))
    tpot = rows(apart, "tpot_ms")[0]
    assert tpot["p"] == 0.0 and tpot["regression"] and apart["verdict"] == "regression"
    # One request per side: no test, no regression, nothing decided; the single-stream seed figure halves, though,
    # and that alone is a regression
    single = compare(document({1: [request(0)]}), document({1: [request(0, gap=0.05)]}))
    assert all(row["p"] is None and not row["regression"] and not row["decided"] for row in single["metrics"])
    assert [line["metric"] for line in single["regressions"]] == ["single_stream_tps"]
    assert single["verdict"] == "regression"
    # the same request on both sides: nothing worse, but one request cannot bound anything
    one = compare(document({1: [request(0)]}), document({1: [request(0)]}))
    assert one["verdict"] == "inconclusive" and one["requests_needed"] is None
    said = " ".join(line["message"] for line in one["undecided"])
    assert "fewer than 2 requests on a side" in said and "at least 2 requests per level" in said, said
    assert "its change alone reaches the threshold" not in said, said
    # Every request failed on one side: no means.
    levels = {1: [failed(0), failed(1)]}
    empty = compare(document(steady({1: 0.025})), document(levels))
    assert all(row["candidate"]["mean"] is None and row["change"] is None for row in empty["metrics"])
    assert "C=1: the candidate has more failed requests (2 against 0)" in " ".join(empty["notes"])
    for comparison in (same, apart, single, empty):
        json.dumps(comparison, allow_nan=False)
        render_comparison_markdown(comparison)


def test_a_failed_request_fails_a_level_the_baseline_passed() -> None:
    """Errors are a level figure with no test, but a failed request fails the level's SLOs (the capacity rule):
    a level the baseline passed and the candidate fails is a regression, and Max C falls with it."""
    levels_c = steady({1: 0.025})
    levels_c[1].append(failed(50, t_send=80.0))
    comparison = compare(document(steady({1: 0.025})), document(levels_c))
    errors = next(row for row in comparison["level_figures"] if row["figure"] == "errors")
    assert (errors["baseline"], errors["candidate"], errors["worse"], errors["test"]) == (0, 1, True, None)
    assert comparison["verdict"] == "regression"
    assert [line["message"] for line in comparison["regressions"]] == [
        "C=1 fails its SLOs (1 failed request(s)), which the baseline met",
        "Max C fell from 1 to none (over C=1)",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"threshold": -0.1}, "threshold must be"), ({"alpha": 0.0}, "alpha must be"), ({"alpha": 1.5}, "alpha must be")],
)
def test_compare_arguments(kwargs: dict[str, Any], message: str) -> None:
    levels = steady({1: 0.025})
    with pytest.raises(ValueError, match=message):
        compare(document(levels), document(levels), **kwargs)
    broken = document(levels)
    broken["format"] = "x"
    with pytest.raises(ValueError, match=r"candidate: \$\.format"):
        compare(document(levels), broken)


# ---------------------------------------------------------------- reports
NEEDLE = {
    "context_tokens": 250000,
    "found": False,
    "seconds": 41.5,
    "expected": "the code is 7421",
    "got": "I could not find it",
    "error": None,
}


def test_markdown_report_has_every_table() -> None:
    levels = steady({1: 0.025, 2: 0.04, 4: 0.06})
    levels[4].append(failed(9, t_send=90.0, status=500, error=None))
    results = document(levels, needle=NEEDLE)
    summary = summarize(results)
    report = render_markdown(results, summary, ["/out/bench-ttft.png"], relative_to="/out")
    assert report.startswith("# Benchmark: spark8 / tp8-300k")
    for heading in (
        "## Identity",
        "## Gate",
        "## Results per concurrency level",
        "## CordatusAI's table",
        "## Capacity",
    ):
        assert heading in report
    assert "| Concurrency | TTFT (ms) | ITL (ms) | TPS (tok/s) | Latency (s) | Throughput (RPS) |" in report
    # CordatusAI's row at C=1: 200 ms, 25 ms, 128 / 3.375 = 37.93 tok/s, 3.375 s, 1 / 3.375 = 0.30.
    assert "| 1 | 200.00 | 25.00 | 37.93 | 3.38 | 0.30 |" in report
    assert "| C | errors | TTFT p90 <= 1000 ms | tok/s per user p10 >= 20 tok/s | level |" in report
    assert "| 1 | 0 ✓ | 200.00 ✓ | 40.00 ✓ | ✓ |" in report
    assert "| 4 | 1 ✗ | 200.00 ✓ | 16.67 ✗ | ✗ |" in report
    assert "**Max C = 2**" in report and "**CordatusAI's Max C = 2**" in report
    assert "| 4 | 1 | HTTP 500 |" in report
    assert "TTFT ms mean | TTFT ms p50 | TTFT ms p90 | TTFT ms p99 | TPOT ms mean" in report
    assert "At 250000 context tokens: NOT found in 41.5 s." in report
    assert "![bench-ttft](bench-ttft.png)" in report
    assert (
        "## Definitions" in report
        and "linear interpolation" in report
        and "TPOT** = (latency - TTFT) / (N - 1)" in report
    )


def test_report_says_why_there_are_no_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    results = document(steady({1: 0.025}))
    summary = summarize(results)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert _bench_report.charts_missing() == _bench_report.MATPLOTLIB_MISSING
    assert write_charts(summary, "/nonexistent/never-written") == []
    report = render_markdown(results, summary, [])
    assert "No charts: matplotlib is not installed on the controller" in report


def test_text_table_is_aligned() -> None:
    levels = steady({1: 0.025, 2: 0.04, 16: 0.06})
    summary = summarize(document(levels))
    table = text_table(summary)
    lines = table.splitlines()
    grid = lines[:4]
    assert len({len(line) for line in grid}) == 1
    assert grid[0].split()[:3] == ["C", "ok/sent", "err"]
    assert grid[1].split() == ["1", "8/8", "0", "200.0", "200.0", "25.00", "40.00", "3.38", "0.109", "14.0", "pass"]
    assert grid[3].split()[-1] == "FAIL"
    assert lines[4].startswith("Max C = 2 (2 concurrent users) at TTFT p90 <= 1000 ms")
    assert lines[5].startswith("CordatusAI's Max C = 2")

    # seed 000's figures end it, unless the node monitors' samples come after the run (bench.yml: bench_nodes says
    # them then, so the headroom is never "not measured" above the figure measured)
    assert any(line.startswith("seed 000 Minimum headroom") for line in lines)
    assert not any(line.startswith("seed 000 ") for line in text_table(summary, seed=False).splitlines())


def test_comparison_markdown() -> None:
    baseline, candidate = runs(0.025, 0.0275, 0.01)
    report = render_comparison_markdown(compare(baseline, candidate))
    assert report.startswith("# Benchmark comparison: regression")
    assert "Regressions:" in report and "- TPOT at C=1: " in report
    assert (
        "| C | metric | baseline mean | candidate mean | change | worse | t | df | p | significant | regression |"
        in report
    )
    assert "## Level-wide figures" in report and "no test is possible" in report


def test_charts_are_png_files(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    summary = summarize(document(steady({1: 0.025, 2: 0.04, 4: 0.06, 8: 0.08})))
    written = write_charts(summary, str(tmp_path / "charts"))
    names = [pathlib.Path(path).name for path in written]
    assert names == [
        "bench-ttft.png",
        "bench-tpot.png",
        "bench-tps_user.png",
        "bench-latency.png",
        "bench-rps.png",
        "bench-output_tps.png",
    ]
    for path in written:
        data = pathlib.Path(path).read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 5000
        width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
        assert (width, height) == (700, 450)
    report = render_markdown(document({}), summary, written, relative_to=str(tmp_path))
    assert "![bench-rps](charts/bench-rps.png)" in report


def test_modules_import_without_matplotlib() -> None:
    # ansible-test's import sanity check runs without matplotlib: nothing may import it at module level.
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"
        "from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench\n"
        "from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _bench_report\n"
        "from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import stats as _bench_stats\n"
        "from ansible_collections.dgxspark.cluster.plugins.filter import bench\n"
        "print(_bench_report.charts_missing() is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / ".ansible" / "collections"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# ---------------------------------------------------------------- filters
def test_filter_summary_from_a_path_and_errors(tmp_path: pathlib.Path) -> None:
    results = document(steady({1: 0.025, 2: 0.03}))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    summary = FILTERS["bench_summary"](str(path))
    assert summary == FILTERS["bench_summary"](results)
    assert summary["capacity"]["max_c"] == 2
    with pytest.raises(AnsibleFilterError, match=r"(?s)dgxspark.cluster.bench_summary: .*results.json: \$\.format"):
        path.write_text(json.dumps({**results, "format": "v0"}), encoding="utf-8")
        FILTERS["bench_summary"](str(path))
    with pytest.raises(AnsibleFilterError, match="bench_summary: slos\\[0\\].metric"):
        FILTERS["bench_summary"](results, slos=[{"metric": "x", "op": "<=", "threshold": 1, "percentile": 90}])
    table = FILTERS["bench_text_table"](summary)
    assert table.splitlines()[0].split()[0] == "C"
    with pytest.raises(AnsibleFilterError, match="bench_text_table: not a bench_summary result"):
        FILTERS["bench_text_table"]({"levels": []})


def test_filter_compare_threshold_in_percent() -> None:
    baseline, candidate = runs(0.025, 0.0275, 0.01)
    assert FILTERS["bench_compare"](baseline, candidate)["verdict"] == "regression"
    relaxed = FILTERS["bench_compare"](baseline, candidate, threshold=15)
    assert relaxed["verdict"] == "pass" and relaxed["threshold"] == 0.15
    assert FILTERS["bench_compare"](baseline, candidate, threshold="15", alpha="0.01")["verdict"] == "pass"
    with pytest.raises(AnsibleFilterError, match="bench_compare: threshold \\(percent\\) must be a number"):
        FILTERS["bench_compare"](baseline, candidate, threshold="lots")
    with pytest.raises(AnsibleFilterError, match="bench_compare: alpha must be"):
        FILTERS["bench_compare"](baseline, candidate, alpha=2)


@pytest.mark.parametrize("name", ["bench_summary", "bench_compare", "bench_text_table"])
def test_filter_documentation(name: str) -> None:
    doc = yaml.safe_load((ROOT / "plugins" / "filter" / f"{name}.yml").read_text(encoding="utf-8"))
    assert doc["DOCUMENTATION"]["name"] == name and name in FILTERS
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert "_input" in doc["DOCUMENTATION"]["options"] and "_value" in doc["RETURN"]


# ---------------------------------------------------------------- a verdict that cannot pass a worse candidate
def burst(size: int, span: float) -> dict[str, Any]:
    """``size`` requests sent at once, the last one ending ``span`` seconds after the first send."""
    return {"size": size, "requests": [request(i, ttft=0.2, gap=(span - 0.2) / 127) for i in range(size)]}


def with_bursts(doc: dict[str, Any], *bursts: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "bursts": list(bursts)}


def test_the_same_run_passes_silently() -> None:
    levels = steady({1: 0.025, 2: 0.025, 4: 0.025})
    comparison = compare(with_bursts(document(levels), burst(4, 3.4)), with_bursts(document(levels), burst(4, 3.4)))
    assert comparison["verdict"] == "pass"
    assert comparison["regressions"] == [] and comparison["undecided"] == []
    assert comparison["requests_needed"] is None
    faster = compare(document(levels), document(steady({1: 0.02, 2: 0.02, 4: 0.02})))
    assert faster["verdict"] == "pass" and faster["regressions"] == []


def test_a_lost_level_and_a_lower_max_c_are_regressions_whatever_the_tests_say() -> None:
    """docs/releases.md's case: max_num_seqs 4 -> 3, the C=4 level's TTFT p90 from under 1 s to 4 s on a few of its
    requests, p well above alpha; the level lost and Max C 4 -> 2 decide it."""
    base = steady({1: 0.025, 2: 0.025, 4: 0.025}, count=12, ttft=0.5)
    cand = steady({1: 0.025, 2: 0.025}, count=12, ttft=0.5)
    cand[4] = [request(i, t_send=(i // 4) * 10.0, ttft=4.0 if i % 6 == 0 else 0.5) for i in range(12)]
    comparison = compare(document(base), document(cand))
    ttft = next(row for row in rows(comparison, "ttft_ms") if row["concurrency"] == 4)
    assert not ttft["regression"] and ttft["p"] > 0.05  # the t-test alone would pass it
    assert comparison["verdict"] == "regression"
    messages = [line["message"] for line in comparison["regressions"]]
    assert messages[0] == "C=4 fails its SLOs (TTFT p90 <= 1000 ms: 3650), which the baseline met"
    assert messages[1] == "Max C fell from 4 to 2 (over C=1, 2, 4)"
    # the candidate meeting the same SLOs at C=4: neither rule speaks
    again = compare(document(base), document(steady({1: 0.025, 2: 0.025, 4: 0.025}, count=12, ttft=0.5)))
    assert not [line for line in again["regressions"] if line["metric"] in ("slo", "max_c")]


@pytest.mark.parametrize(
    ("span", "regressed"),
    [(3.4, False), (3.5, False), (3.55, True), (5.0, True)],  # 4 x 128 tokens: 150.6 -> 146.3 (-2.9 %), 144.2 (-4.2 %)
)
def test_a_burst_aggregate_that_drops_past_the_threshold_is_a_regression(span: float, regressed: bool) -> None:
    levels = steady({1: 0.025})
    comparison = compare(with_bursts(document(levels), burst(4, 3.4)), with_bursts(document(levels), burst(4, span)))
    found = [line for line in comparison["regressions"] if line["metric"] == "burst_4_tps"]
    assert bool(found) == regressed, comparison["regressions"]
    if regressed:
        assert "more than the 3 % threshold" in found[0]["message"]
    assert (comparison["verdict"] == "regression") == regressed


def test_a_burst_the_candidate_could_not_measure_is_a_regression() -> None:
    levels = steady({1: 0.025})
    broken = {"size": 4, "requests": [request(0), request(1), request(2), failed(3)]}
    comparison = compare(with_bursts(document(levels), burst(4, 3.4)), with_bursts(document(levels), broken))
    [line] = [line for line in comparison["regressions"] if line["metric"] == "burst_4_tps"]
    assert "not measured: 1 of the 4 requests failed" in line["message"]


def test_the_one_sided_t_quantile() -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.stats import t_quantile

    assert t_quantile(0.05, 10) == pytest.approx(1.8125, abs=1e-4)
    assert t_quantile(0.025, 5) == pytest.approx(2.5706, abs=1e-4)
    assert t_quantile(0.05, 1e6) == pytest.approx(1.6449, abs=1e-3)
    with pytest.raises(ValueError, match="alpha must be between 0 and 0.5"):
        t_quantile(0.5, 10)
