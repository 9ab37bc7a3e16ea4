# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's history across releases: each release's runs from its evidence, their figures at the level every
run measured, the verdicts, a results file missing from this controller, and the charts over time."""

from __future__ import annotations

import json
import pathlib
import struct
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import history as _history
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import summarize
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.report import charts_missing
from ansible_collections.dgxspark.cluster.tests.unit.plugins.test_bench import document, noisy, steady

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHART_FILES = [f"history-{name}.png" for name in ("ttft", "tpot", "tps_user", "output_tps", "max_c")]


def run_file(folder: pathlib.Path, name: str, started: str, gaps: dict[int, float], ttft: float = 0.2) -> str:
    """A run's results.json under ``folder/name``: levels whose every request has TTFT ``ttft`` s and ``gaps``."""
    results = document(steady(gaps, ttft=ttft))
    results["identity"]["started_at"] = started
    results["identity"]["finished_at"] = started
    path = folder / name / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(results), encoding="utf-8")
    return str(path)


def release(
    n: int, state: str, created: str, evidence: dict[str, Any], promoted_at: str | None = None
) -> dict[str, Any]:
    history = [{"event": "booted", "at": created, "by": "ops@ctl"}]
    if promoted_at:
        history.append({"event": "promoted", "at": promoted_at, "by": "ops@ctl"})
    return {
        "id": f"r{created[:10].replace('-', '')}T100000Z-{n:012x}",
        "state": state,
        "created": created,
        "by": "ops@ctl",
        "profile": {"path": f"profiles/p{n}.json", "sha256": f"{n:064x}"},
        "shape": "tp3-triangle",
        "image": "vllm:26.11",
        "evidence": evidence,
        "history": history,
    }


def three_releases(tmp_path: pathlib.Path) -> list[dict[str, Any]]:
    """Three releases: the first, retired; the second promoted against it (pass); a third, rolled back (regression),
    whose run is kept; the first's bench run replaced by a newer one, and one baseline file gone from here."""
    bench = tmp_path / ".bench"
    # r1: tok/s per user 40, 25, 20, 16.7 at C=1, 2, 4, 8 -> Max C 4; its older run is the second's baseline
    r1_old = run_file(bench, "20261201T110000Z-tp3", "2026-12-01T11:00:00Z", {1: 0.025, 2: 0.04, 4: 0.05, 8: 0.06})
    r1_new = run_file(bench, "20261202T090000Z-tp3", "2026-12-02T09:00:00Z", {1: 0.025, 2: 0.04, 4: 0.05, 8: 0.06})
    # r2: faster: Max C 8
    r2 = run_file(bench, "20261203T120000Z-tp3", "2026-12-03T12:00:00Z", {1: 0.02, 2: 0.025, 4: 0.03, 8: 0.04}, 0.1)
    # r3: slower: Max C 2, TTFT 0.4 s
    r3 = run_file(bench, "20261205T120000Z-tp3", "2026-12-05T12:00:00Z", {1: 0.03, 2: 0.045, 4: 0.06, 8: 0.08}, 0.4)
    first = release(1, "retired", "2026-12-01T10:00:00Z", {"bench": {"results": r1_new}}, "2026-12-01T10:00:00Z")
    second = release(
        2,
        "promoted",
        "2026-12-03T10:00:00Z",
        {
            "bench": {"results": r2},
            "promotion": {
                "verdict": "pass",
                "threshold_percent": 3,
                "baseline": {"release": first["id"], "results": r1_old},
                "candidate": {"release": "", "results": r2},
            },
        },
        "2026-12-03T13:00:00Z",
    )
    second["evidence"]["promotion"]["candidate"]["release"] = second["id"]
    third = release(
        3,
        "retired",
        "2026-12-05T10:00:00Z",
        {
            "bench": {"results": r3},
            "promotion": {
                "verdict": "regression",
                "threshold_percent": 3,
                "baseline": {"release": second["id"], "results": str(bench / "gone" / "results.json")},
                "candidate": {"release": "", "results": r3},
            },
        },
    )
    third["evidence"]["promotion"]["candidate"]["release"] = third["id"]
    return [third, first, second]  # any order: the history sorts them by creation


@pytest.fixture(name="releases")
def fixture_releases(tmp_path: pathlib.Path) -> list[dict[str, Any]]:
    return three_releases(tmp_path)


def test_each_release_has_its_runs_in_time_order_with_figures_at_the_common_level(releases: list[dict]) -> None:
    history = _history.build(releases)
    assert [r["id"][-1] for r in history["releases"]] == ["1", "2", "3"]
    assert history["level"] == 8 and history["promoted"] == releases[2]["id"]
    first, second, third = history["releases"]
    assert [run["started_at"] for run in first["runs"]] == ["2026-12-01T11:00:00Z", "2026-12-02T09:00:00Z"]
    assert first["runs"][0]["kept_as"] == ["baseline"] and first["runs"][1]["kept_as"] == ["bench"]
    figures = first["runs"][1]["figures"]
    assert figures["concurrency"] == 8
    assert figures["ttft_ms_p50"] == pytest.approx(200.0) and figures["ttft_ms_p90"] == pytest.approx(200.0)
    assert figures["tpot_ms_p50"] == pytest.approx(60.0) and figures["tps_user_p50"] == pytest.approx(16.6667)
    assert figures["max_c"] == 4
    assert second["runs"][0]["kept_as"] == ["bench", "promotion"]
    assert second["runs"][0]["verdict"]["verdict"] == "pass" and second["runs"][0]["figures"]["max_c"] == 8
    assert third["runs"][0]["figures"]["max_c"] == 2
    assert third["runs"][0]["figures"]["ttft_ms_p90"] == pytest.approx(400.0)
    # the baseline file of the third's promotion is not on this controller: said, in the second release's runs
    assert [m["release"] for m in history["missing"]] == [second["id"]]
    assert "cannot read the results" in history["missing"][0]["why"]
    assert history["runs"] == 5 and history["measured"] == 4


def test_the_markdown_has_a_table_per_release_with_the_figures_and_verdicts(releases: list[dict]) -> None:
    history = _history.build(releases)
    text = _history.render_markdown(history, [])
    assert text.startswith("# Benchmark history across releases")
    assert "3 release(s), 5 run(s) named in their evidence, 4 with figures, at C=8" in text
    first, second, third = (r["id"] for r in history["releases"])
    assert f"### {second}: **promoted** (since 2026-12-03T13:00:00Z)" in text
    assert f"### {first}: retired" in text and f"### {third}: retired" in text
    rows = [line for line in text.splitlines() if line.startswith("| 2026-12-")]
    assert rows[0].startswith("| 2026-12-01T11:00:00Z | 20261201T110000Z-tp3 | 8 | 200.0 | 200.0 | 60.00 | 16.67 |")
    assert rows[0].endswith(f"| 4 | baseline of {second} (pass) |")
    assert rows[2].endswith(f"| 8 | **pass** against {first} |")
    assert rows[3].startswith("| 2026-12-05T12:00:00Z | 20261205T120000Z-tp3 | 8 | 400.0 | 400.0 | 80.00 | 12.50 |")
    assert rows[3].endswith(f"| 2 | **regression** against {second} |")
    assert f"baseline of {third} (regression); missing |" in text
    assert "- missing: " in text and "gone/results.json" in text
    assert "TTFT p90 <= 1000 ms" in text  # the SLOs the Max C is judged by


@pytest.mark.skipif(charts_missing() is not None, reason="matplotlib is not installed")
def test_the_folder_holds_the_report_and_a_png_per_figure(releases: list[dict], tmp_path: pathlib.Path) -> None:
    out = tmp_path / "history"
    written = _history.write(str(out), releases)
    assert sorted(pathlib.Path(p).name for p in written["charts"]) == sorted(CHART_FILES)
    for name in CHART_FILES:
        data = (out / "charts" / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
        width, height = struct.unpack(">II", data[16:24])
        assert (width, height) == (800, 480)
    text = (out / "history.md").read_text()
    assert "![history-ttft](charts/history-ttft.png)" in text
    assert written["warnings"] == [] and written["report"] == str(out / "history.md")


@pytest.mark.skipif(charts_missing() is not None, reason="matplotlib is not installed")
def test_a_single_run_is_drawn_and_tabled(tmp_path: pathlib.Path) -> None:
    path = run_file(tmp_path, "20261201T110000Z-tp3", "2026-12-01T11:00:00Z", {1: 0.025, 2: 0.04})
    only = release(1, "promoted", "2026-12-01T10:00:00Z", {"bench": {"results": path}}, "2026-12-01T10:00:00Z")
    written = _history.write(str(tmp_path / "out"), [only])
    assert len(written["charts"]) == len(CHART_FILES)
    assert written["history"]["level"] == 2 and written["history"]["runs"] == 1
    text = (tmp_path / "out" / "history.md").read_text()
    assert "| 2026-12-01T11:00:00Z | 20261201T110000Z-tp3 | 2 | 200.0 | 200.0 | 40.00 | 25.00 |" in text


def test_no_run_anywhere_writes_the_report_and_no_chart(tmp_path: pathlib.Path) -> None:
    bare = release(1, "promoted", "2026-12-01T10:00:00Z", {}, "2026-12-01T10:00:00Z")
    gone = release(2, "candidate", "2026-12-02T10:00:00Z", {"bench": {"results": str(tmp_path / "nope.json")}})
    written = _history.write(str(tmp_path / "out"), [bare, gone])
    assert written["charts"] == [] and written["history"]["measured"] == 0
    text = (tmp_path / "out" / "history.md").read_text()
    assert "No benchmark run kept" in text and "nope.json" in text and "No charts:" in text


def test_a_failed_gate_and_levels_in_no_common(tmp_path: pathlib.Path) -> None:
    low = run_file(tmp_path, "a", "2026-12-01T11:00:00Z", {1: 0.025, 2: 0.04})
    high = run_file(tmp_path, "b", "2026-12-02T11:00:00Z", {4: 0.025, 8: 0.04})
    failed = document(steady({1: 0.025}), gate=False)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.json").write_text(json.dumps(failed))
    one = release(1, "retired", "2026-12-01T10:00:00Z", {"bench": {"results": low}})
    two = release(2, "retired", "2026-12-02T10:00:00Z", {"bench": {"results": high}})
    three = release(3, "promoted", "2026-12-03T10:00:00Z", {"bench": {"results": str(tmp_path / "c" / "results.json")}})
    history = _history.build([one, two, three])
    assert history["level"] is None and "each run's figures are at its own highest level" in history["notes"][0]
    assert history["releases"][0]["runs"][0]["figures"]["concurrency"] == 2
    assert history["releases"][1]["runs"][0]["figures"]["concurrency"] == 8
    assert history["releases"][2]["runs"][0]["gate_passed"] is False
    assert "gate failed" in _history.render_markdown(history)


def test_noisy_runs_figures_are_each_runs_own_summary_at_the_reference_level(tmp_path: pathlib.Path) -> None:
    """Runs as a cluster gives them (every request's TTFT and gap varied), a week of releases: each table cell is
    the run's own summary at the reference level, and p50 and p90 differ."""
    releases = []
    for n, (ttft, gap) in enumerate([(0.21, 0.026), (0.18, 0.024), (0.35, 0.05), (0.17, 0.022)], start=1):
        day = f"2026-12-{n + 1:02d}"
        results = document(
            {c: noisy(c, 40, ttft * c**0.5, gap * (1 + c / 8), 0.3, seed=n * 10 + c) for c in (1, 2, 4, 8)}
        )
        results["identity"]["started_at"] = f"{day}T12:00:00Z"
        path = tmp_path / f"{day}-run" / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps(results))
        state = "promoted" if n == 4 else "retired"
        releases.append(release(n, state, f"{day}T10:00:00Z", {"bench": {"results": str(path)}}))
    history = _history.build(releases)
    assert history["level"] == 8
    for entry in history["releases"]:
        run = entry["runs"][0]
        summary = summarize(json.loads(pathlib.Path(run["results"]).read_text()))
        level = next(row for row in summary["levels"] if row["concurrency"] == 8)
        assert run["figures"]["ttft_ms_p50"] == level["stats"]["ttft_ms"]["p50"]
        assert run["figures"]["ttft_ms_p90"] == level["stats"]["ttft_ms"]["p90"] > level["stats"]["ttft_ms"]["p50"]
        assert run["figures"]["output_tps"] == level["output_tps"]
        assert run["figures"]["max_c"] == summary["capacity"]["max_c"]
    assert [entry["runs"][0]["figures"]["max_c"] for entry in history["releases"]] == [4, 4, None, 4]
    text = _history.render_markdown(history)
    assert " | none | - |" in text  # the third: no level within the SLOs
    if charts_missing() is None:
        assert len(_history.write_charts(history, str(tmp_path / "charts"))) == len(CHART_FILES)
