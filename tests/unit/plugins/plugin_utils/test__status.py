# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml's controller logic (plugin_utils/status/report.py): the document, what makes it degraded, the
screen. The GPU sections and the clock-latch cases come from a real H100's node_facts and bench_monitor results
(tests/unit/fixtures/gpu_clocks/README.md)."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._gpu_clocks import judge_clock_latch
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import load_results, summarize
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.status import report
from ansible_collections.dgxspark.cluster.tests.unit.plugins.test_bench import document, steady

GPU_FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "gpu_clocks"
GIB = 1024**3
NOW = 1796700000.0  # 2026-12-07T...Z
HOSTS = ["sim3-head", "sim3-worker1", "sim3-worker2"]
HEAD = HOSTS[0]


def sample(name: str) -> Any:
    """A hardware sample: its header (``# `` lines up to a bare ``#``) dropped."""
    text = (GPU_FIXTURES / name).read_text()
    _header, _bar, body = text.partition("\n#\n")
    return json.loads(body)


def h100_idle_gpu() -> dict[str, Any]:
    return sample("node-facts.h100-80gb-hbm3.vm-idle.json")["ansible_facts"]["dgxspark_node"]["gpu"]


def h100_loaded_devices() -> list[list[dict[str, Any]]]:
    return [devices for _t, devices in sample("bench-monitor.h100-80gb-hbm3.bf16-matmul-load.json")["gpu"]]


def gpu_section(devices: list[dict[str, Any]]) -> dict[str, Any]:
    """node_facts' gpu section for one query (as _node_facts.gpu builds it)."""
    return {
        "present": True,
        "error": None,
        "count": len(devices),
        "devices": devices,
        "clock_latch": judge_clock_latch([devices]),
    }


def answer(host: str, *, running: bool = True, gpu: dict | None = None, guard: dict | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "ranks": {
            "error": None,
            "records": [],
            "problems": [],
            "containers": [
                {
                    "name": "vllm_dsv41",
                    "rank": str(HOSTS.index(host)),
                    "spec_sha256": f"spec-{host}",
                    "running": running,
                    "status": "running" if running else "exited",
                    "exit_code": 0 if running else 137,
                    "oom_killed": False,
                    "restart_count": 0,
                    "started_at": "2026-12-07T01:00:00.123456789Z",
                    "finished_at": "0001-01-01T00:00:00Z" if running else "2026-12-07T02:00:00Z",
                    "log_tail": [],
                }
            ],
        },
        "memguard": guard
        or {
            "installed": True,
            "running": True,
            "phase": "steady",
            "trips": 0,
            "tripped": None,
            "state_age_s": 0.5,
            "last_sample": {"t": NOW, "mem_available": 40 * GIB},
            "floor_bytes": 3 * GIB,
            "mem_available_min": {"bytes": 20 * GIB, "t": NOW - 100, "since": NOW - 3600},
            "last_decision": {
                "decision": "phase",
                "time": NOW - 3000,
                "phase": "steady",
                "reason": "startup -> steady",
            },
        },
        "gpu": gpu or h100_idle_gpu(),
        "disk": {
            "path": "/data/models",
            "checked_path": "/data/models",
            "available_bytes": 500 * GIB,
            "total_bytes": 3700 * GIB,
        },
    }
    if host == HEAD:
        node["releases"] = {
            "promoted": "r2",
            "releases": [
                {
                    "id": "r1",
                    "state": "retired",
                    "created": "2026-12-01T00:00:00Z",
                    "by": "alice",
                    "spec_sha256": {h: f"old-{h}" for h in HOSTS},
                    "profile_path": "p.json",
                    "shape": "tp3-triangle",
                    "image": "vllm:old",
                    "bench": None,
                },
                {
                    "id": "r2",
                    "state": "promoted",
                    "created": "2026-12-05T00:00:00Z",
                    "by": "bob (AWX)",
                    "spec_sha256": {h: f"spec-{h}" for h in HOSTS},
                    "profile_path": "/inv/serving-profile.json",
                    "profile_sha256": "abcdef0123456789",
                    "shape": "tp3-triangle",
                    "image": "vllm:v0.20",
                    "bench": None,
                },
            ],
        }
        node["api"] = {
            "url": "http://127.0.0.1:8000",
            "answered": True,
            "status": 200,
            "models": ["m"],
            "seconds": 0.004,
            "error": None,
            "smoke": None,
        }
    return {"changed": False, "node": node}


def healthy() -> dict[str, Any]:
    return {host: answer(host) for host in HOSTS}


def judge(answers: dict[str, Any], bench: dict | None = None, margin: float = 0.25) -> dict[str, Any]:
    return report.status(answers, HOSTS, HEAD, NOW, "http://192.0.2.10:8000/v1", bench, margin)


def test_a_healthy_cluster_is_ok_with_every_section() -> None:
    doc = judge(healthy())
    assert doc["ok"] is True and doc["degraded"] == []
    assert doc["format"] == "dgxspark.cluster/status/1"
    assert doc["release"]["id"] == "r2" and doc["release"]["serves"] is True and doc["release"]["by"] == "bob (AWX)"
    assert [r["host"] for r in doc["ranks"]] == HOSTS
    assert doc["ranks"][0]["uptime_s"] == pytest.approx(NOW - 1796605200.123456, abs=0.1)
    assert doc["ranks"][0]["finished_at"] is None  # Docker's zero time is not shown for a running rank
    assert doc["api"]["answered"] and doc["api"]["endpoint"] == "http://192.0.2.10:8000/v1"
    guard = doc["guards"][1]
    assert (guard["mem_available_bytes"], guard["floor_bytes"], guard["mem_available_min_bytes"]) == (
        40 * GIB,
        3 * GIB,
        20 * GIB,
    )
    assert guard["close_to_floor"] is False and guard["last_decision"]["decision"] == "phase"
    # the real H100, idle: its clocks shown, the latch not judged (an idle clock says nothing)
    (device,) = doc["gpus"][0]["devices"]
    assert (device["name"], device["sm_mhz"], device["max_sm_mhz"], device["temperature_c"]) == (
        "NVIDIA H100 80GB HBM3",
        345,
        1980,
        38,
    )
    assert device["verdict"] == "not_judged" and doc["gpus"][0]["clock_latch"] == "not_judged"
    assert doc["disks"][0]["available_bytes"] == 500 * GIB
    json.dumps(doc)  # one JSON document
    text = "\n".join(report.lines(doc))
    assert text.startswith("status: OK - 3 nodes, head sim3-head")
    assert "release: r2 (promoted), 2026-12-05T00:00:00Z by bob (AWX)" in text
    assert "image vllm:v0.20" in text
    assert "sim3-worker1: rank 1 vllm_dsv41 running 1d02h, restarts 0" in text
    assert "API: http://192.0.2.10:8000/v1 - answers, models m" in text
    assert "MemAvailable 40.00 GiB (floor 3.00 GiB), lowest since the boot 20.00 GiB" in text
    assert "SM 345/1980 MHz, 38 C, 0 % busy; clock latch: not_judged" in text
    assert "/data/models: 500.00 GiB free of 3700.00 GiB" in text


def test_a_profile_without_a_weights_path_shows_no_disk_and_says_why() -> None:
    answers = healthy()
    for result in answers.values():
        result["node"]["disk"] = {"path": None, "available_bytes": None, "total_bytes": None}
    doc = judge(answers)
    assert doc["ok"] is True  # no weights path is not a degraded cluster
    assert [d["path"] for d in doc["disks"]] == [None, None, None]
    text = "\n".join(report.lines(doc))
    assert text.count("none named (the profile has no host.weights_path)") == 3
    assert "free of" not in text


def test_a_real_h100_under_load_passes_and_a_latched_clock_degrades() -> None:
    loaded = h100_loaded_devices()
    answers = healthy()
    answers["sim3-worker1"] = answer("sim3-worker1", gpu=gpu_section(loaded[-1]))
    doc = judge(answers)
    assert doc["ok"], doc["degraded"]
    assert doc["gpus"][1]["clock_latch"] == "pass" and doc["gpus"][1]["devices"][0]["utilization_pct"] >= 50
    # the same real samples with the SM clock halved: what a GB10 stuck in its slow state looks like to this check
    slow = copy.deepcopy(loaded[-1])
    for device in slow:
        device["clocks_sm_mhz"] = device["clocks_sm_mhz"] // 2
    answers["sim3-worker1"] = answer("sim3-worker1", gpu=gpu_section(slow))
    doc = judge(answers)
    assert not doc["ok"]
    (reason,) = doc["degraded"]
    assert reason.startswith("sim3-worker1: GPU clock latched: GPU 0 latched: SM clock")
    assert "clock latch: latched" in "\n".join(report.lines(doc))


def test_the_monitor_s_real_verdicts_are_what_status_shows() -> None:
    """bench_monitor's verdict over its samples, idle and loaded, matches the check status runs on one sample."""
    for name, verdict in (
        ("bench-monitor.h100-80gb-hbm3.idle.json", "not_judged"),
        ("bench-monitor.h100-80gb-hbm3.bf16-matmul-load.json", "pass"),
    ):
        monitor = sample(name)
        assert monitor["clock_latch"]["verdict"] == verdict
        last = [devices for _t, devices in monitor["gpu"]][-1]
        assert gpu_section(last)["clock_latch"]["verdict"] == verdict


def test_a_rank_gone_a_node_unreachable_and_the_api_down_degrade() -> None:
    answers = healthy()
    answers["sim3-worker2"] = answer("sim3-worker2", running=False)
    answers["sim3-worker1"] = {"unreachable": True, "msg": "ssh: connect to host timed out"}
    answers[HEAD]["node"]["api"] = {
        "url": "http://127.0.0.1:8000",
        "answered": False,
        "status": None,
        "models": [],
        "seconds": 0.001,
        "error": "[Errno 111] Connection refused",
        "smoke": None,
    }
    doc = judge(answers)
    assert doc["degraded"] == [
        "sim3-worker1: did not answer (unreachable: ssh: connect to host timed out)",
        "sim3-worker2: rank 2 (vllm_dsv41) is exited (exit code 137)",
        "API down: [Errno 111] Connection refused (http://127.0.0.1:8000)",
    ]
    assert doc["cluster"]["nodes"]["sim3-worker1"]["answered"] is False
    exited = doc["ranks"][-1]
    assert (exited["running"], exited["exit_code"], exited["uptime_s"]) == (False, 137, None)
    text = "\n".join(report.lines(doc))
    assert text.startswith("status: DEGRADED (3)")
    assert "sim3-worker2: rank 2 vllm_dsv41 exited (exit 137, finished 2026-12-07T02:00:00Z)" in text
    assert "API: http://192.0.2.10:8000/v1 - DOWN: [Errno 111] Connection refused" in text


def test_no_rank_container_and_a_failed_smoke_degrade() -> None:
    answers = healthy()
    answers["sim3-worker2"]["node"]["ranks"]["containers"] = []
    answers[HEAD]["node"]["api"]["smoke"] = {
        "ok": False,
        "ttft": None,
        "e2e": None,
        "output_tokens": None,
        "error": "HTTP 500",
    }
    doc = judge(answers)
    assert doc["degraded"] == ["sim3-worker2: no rank container", "API smoke failed: HTTP 500"]


def test_a_tripped_guard_one_close_to_its_floor_and_one_not_running_degrade() -> None:
    answers = healthy()
    tripped = copy.deepcopy(answers["sim3-worker1"]["node"]["memguard"])
    tripped.update(
        trips=1, tripped={"time_utc": "2026-12-07T03:00:00Z", "reason": "a trip by hand (test)", "from_peer": None}
    )
    answers["sim3-worker1"]["node"]["memguard"] = tripped
    close = answers["sim3-worker2"]["node"]["memguard"]
    close["last_sample"] = {"t": NOW, "mem_available": int(3.5 * GIB)}  # under 3 GiB x 1.25
    dead = answers[HEAD]["node"]["memguard"]
    dead.update(running=False, state_age_s=600.0)
    doc = judge(answers)
    assert doc["degraded"] == [
        "sim3-head: memory guard not running (its state is 600.0 s old)",
        "sim3-worker1: memory guard tripped at 2026-12-07T03:00:00Z: a trip by hand (test)",
        "sim3-worker2: MemAvailable 3.50 GiB within 25% of the steady floor 3.00 GiB",
    ]
    assert doc["guards"][2]["close_to_floor"] is True
    assert not judge(answers, margin=0.1)["guards"][2]["close_to_floor"]  # 3.5 > 3.3
    assert "TRIPPED at 2026-12-07T03:00:00Z: a trip by hand (test)" in "\n".join(report.lines(doc))
    with pytest.raises(ValueError, match="floor_margin"):
        judge(answers, margin=-1)


def test_what_runs_is_no_release_the_promoted_one_is_shown_and_said() -> None:
    answers = healthy()
    answers["sim3-worker1"]["node"]["ranks"]["containers"][0]["spec_sha256"] = "something else"
    release = judge(answers)["release"]
    assert (release["id"], release["serves"]) == ("r2", False)
    assert release["note"] == "what runs is no release's specs: the promoted release is shown"
    answers[HEAD]["node"]["releases"] = {"promoted": None, "releases": []}
    doc = judge(answers)
    assert doc["release"]["id"] is None and "release: none - no release is kept" in "\n".join(report.lines(doc))


def write_run(root: pathlib.Path, name: str, gaps: dict[int, float]) -> str:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(document(steady(gaps))))
    return str(folder / "results.json")


def test_the_last_run_against_the_promoted_release_s_run(tmp_path: pathlib.Path) -> None:
    promoted = write_run(tmp_path, "20261201T000000Z-spark3", {1: 0.02, 2: 0.03, 4: 0.04})  # 50, 33, 25 tok/s
    write_run(tmp_path, "20261207T000000Z-spark3", {1: 0.02, 2: 0.06, 4: 0.08})  # 50, 17, 12.5: Max C 1
    (tmp_path / "not-a-run").mkdir()
    bench = report.bench_section(str(tmp_path), promoted, summarize, load_results)
    assert bench["last"]["run"] == "20261207T000000Z-spark3" and bench["last"]["max_c"] == 1
    assert bench["promoted"]["max_c"] == 4 and bench["promoted"]["max_c_may_be_higher"] is True
    assert bench["max_c_change"] == {"max_c": [4, 1]} and bench["last_is_promoted"] is False
    level = bench["last"]["levels"][0]
    assert level["concurrency"] == 1 and level["ttft_p90_ms"] == pytest.approx(200.0)
    assert level["tpot_mean_ms"] == pytest.approx(20.0)
    text = "\n".join(report.lines(judge(healthy(), bench)))
    assert "last run: 20261207T000000Z-spark3 (2026-11-20T10:00:00Z), gate passed, Max C 1" in text
    assert (
        "promoted release run: 20261201T000000Z-spark3 (2026-11-20T10:00:00Z), gate passed, Max C 4 (or more)" in text
    )
    assert "C=1: TTFT p90 200.0 ms, TPOT 20.0 ms" in text
    assert "Max C: 4 (promoted) -> 1 (last)" in text


def test_the_promoted_run_is_the_last_missing_or_unreadable(tmp_path: pathlib.Path) -> None:
    only = write_run(tmp_path, "20261207T000000Z-spark3", {1: 0.02})
    same = report.bench_section(str(tmp_path), only, summarize, load_results)
    assert same["last_is_promoted"] and same["promoted"] is same["last"] and same["max_c_change"] is None
    missing = report.bench_section(str(tmp_path), "/elsewhere/results.json", summarize, load_results)
    assert missing["promoted"] == {"results": "/elsewhere/results.json", "error": "not on this controller"}
    pathlib.Path(only).write_text("{}")
    broken = report.bench_section(str(tmp_path), None, summarize, load_results)
    assert broken["last"]["error"] and broken["promoted"] is None
    assert report.bench_section(str(tmp_path / "none"), None, summarize, load_results)["last"] is None
    answers = healthy()
    answers[HEAD]["node"]["releases"]["releases"][1]["bench"] = {"results": only, "run": "x"}
    assert report.promoted_results(answers, HEAD) == only
