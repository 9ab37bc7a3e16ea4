# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' memguard section on the files the real daemon writes (stored, and written again here)."""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles
from ansible_collections.dgxspark.cluster.plugins.module_utils._memguard_state import (
    LOG_TAIL_BYTES,
    memguard_facts,
    utc_iso,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, gather
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.memguard_support import (
    GIB,
    STEADY_DIP,
    STORED,
    GuardFiles,
    run_guard,
)

REASON = "MemAvailable under the steady floor 3.00 GiB (last 2.50 GiB) for 30.00 s (grace 30 s, phase steady)"
TRIPPED_AT = 1796106576.0  # 2026-12-01T06:29:36Z
UPDATED = 1796106580.0  # the state's last rewrite


def read(
    files: GuardFiles | pathlib.Path, proc: pathlib.Path, wall: float = UPDATED + 1
) -> tuple[dict[str, Any], list]:
    directory = files if isinstance(files, pathlib.Path) else files.state.parent
    problems: list[dict[str, str]] = []
    facts = memguard_facts(
        HostFiles(problems),
        str(directory / "state.json"),
        str(directory / "tripped.json"),
        str(directory / "decisions.jsonl"),
        str(proc),
        lambda: wall,
    )
    return facts, problems


def stored_pid() -> int:
    return int(json.loads((STORED / "state.json").read_text())["pid"])


@pytest.fixture
def proc(tmp_path: pathlib.Path) -> pathlib.Path:
    """A /proc where the stored state's daemon is alive."""
    (tmp_path / "proc" / str(stored_pid())).mkdir(parents=True)
    return tmp_path / "proc"


def test_a_steady_trip_with_its_samples(proc: pathlib.Path) -> None:
    facts, problems = read(STORED, proc)
    assert problems == []
    tripped = facts.pop("tripped")
    assert facts == {
        "installed": True,
        "running": True,
        "pid": stored_pid(),
        "phase": "steady",
        "startup_overdue": False,
        "startup_seconds": None,
        "trips": 1,
        "updated_utc": "2026-12-01T06:29:40Z",
        "state_age_s": 1.0,
        "last_sample": {"t": UPDATED, "mem_available": int(2.5 * GIB), "psi_full_avg10": None, "low": True},
        # the lowest since the guard started (no load began in this trace), and the trip as the last decision
        "mem_available_min": {"bytes": int(2.5 * GIB), "t": 1796106546.0, "since": 1796106540.0},
        "last_decision": {"decision": "trip", "time": TRIPPED_AT, "phase": "steady", "reason": REASON},
        "floor_bytes": 3 * GIB,
        "health": {
            "ok": True,
            "problems": [],
            "write_errors": 0,
            "watchdog_s": None,
            "stale_after_s": 30.0,
            "started": 1796106540.0,
        },
        "peers": {"listening": None, "listen_error": None, "rejections": 0, "clock_skew": None},
        "state_path": str(STORED / "state.json"),
        "trip_path": str(STORED / "tripped.json"),
    }
    samples = tripped.pop("samples")
    assert tripped == {
        "time": TRIPPED_AT,
        "time_utc": "2026-12-01T06:29:36Z",
        "reason": REASON,
        "from_peer": None,
        "stop": {"action": "stop", "ok": True, "status": 204, "outcome": "stopped", "seconds": 1.104},
        "stop_all": None,  # a guard without peers: no stop-all
    }
    # three samples at 40 GiB, then 2.5 GiB from 06:29:06 to the trip at 06:29:36 (16 samples, 30 s)
    assert [s["mem_available"] for s in samples] == STEADY_DIP[:19]
    assert [s["low"] for s in samples] == [False] * 3 + [True] * 16
    assert (samples[3]["t"], samples[-1]["t"]) == (1796106546.0, TRIPPED_AT)


def test_stored_fixture_is_what_the_daemon_writes(tmp_path: pathlib.Path) -> None:
    files = run_guard(tmp_path / "guard", STEADY_DIP)
    for name in ("state.json", "tripped.json"):
        written = json.loads((tmp_path / "guard" / name).read_text())
        stored = json.loads((STORED / name).read_text())
        written.pop("pid", None), stored.pop("pid", None)
        assert written == stored, name
    assert files.log.read_text() == (STORED / "decisions.jsonl").read_text()


@pytest.mark.parametrize(
    "wall,alive,running",
    [
        (UPDATED + 1, True, True),
        (UPDATED + 30, True, True),
        (UPDATED + 31, True, False),  # the daemon stopped writing: hung or gone
        (UPDATED + 1, False, False),  # its pid is gone (the state in /run outlived it)
    ],
)
def test_running_means_alive_and_fresh(tmp_path: pathlib.Path, wall: float, alive: bool, running: bool) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    if alive:
        (proc / str(stored_pid())).mkdir()
    facts, _problems = read(STORED, proc, wall)
    assert facts["running"] is running and facts["state_age_s"] == round(wall - UPDATED, 1)


def write_state(directory: pathlib.Path, **changes: Any) -> dict[str, Any]:
    """The stored state with some keys changed (a key set to None is removed)."""
    state = json.loads((STORED / "state.json").read_text())
    for key, value in changes.items():
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    (directory / "state.json").write_text(json.dumps(state))
    return state


@pytest.mark.parametrize(
    "stale_after_s,age,running",
    [
        (6.0, 5.0, True),  # a watchdog of 6 s: a state 5 s old is fresh
        (6.0, 7.0, False),  # ... and one 7 s old is from a guard that is down or hung (30 s would say running)
        (90.0, 60.0, True),  # an idle interval of 30 s: 60 s is still fresh (30 s would say down)
        (None, 30.0, True),  # a guard that writes no health: 30 s
        (None, 31.0, False),
    ],
)
def test_running_uses_the_guards_own_stale_after(
    tmp_path: pathlib.Path, stale_after_s: float | None, age: float, running: bool
) -> None:
    proc = tmp_path / "proc"
    (proc / str(stored_pid())).mkdir(parents=True)
    health = None if stale_after_s is None else {"ok": True, "problems": [], "stale_after_s": stale_after_s}
    write_state(tmp_path, health=health)
    facts, problems = read(tmp_path, proc, UPDATED + age)
    assert (facts["running"], problems) == (running, [])


def test_health_and_peers_of_a_guard_with_problems(tmp_path: pathlib.Path) -> None:
    problems_said = [
        "peer listener: cannot listen on 10.0.0.2 port 7391: [Errno 98] Address already in use",
        "writing the decision log: No space left on device (/var/log/dgxspark-memguard/decisions.jsonl)",
    ]
    skew = {"from": "spark-head", "skew_s": -300.0, "allowed_s": 120.0, "time": UPDATED, "reason": "x"}
    write_state(
        tmp_path,
        health={
            "ok": False,
            "problems": problems_said,
            "write_errors": 3,
            "started": 1796106540.0,
            "watchdog_s": 6.0,
            "stale_after_s": 6.0,
            "systemd_notify": True,
        },
        peers={
            "listen": {"address": "10.0.0.2", "ip": "10.0.0.2", "port": 7391, "listening": False, "error": "busy"},
            "allowed": ["10.0.0.1"],
            "rejections": {"total": 12, "last": None, "suppressed": 7},
            "clock_skew": skew,
            "nonces": {},
        },
    )
    facts, problems = read(tmp_path, tmp_path)
    assert problems == []
    assert facts["health"] == {
        "ok": False,
        "problems": problems_said,
        "write_errors": 3,
        "watchdog_s": 6.0,
        "stale_after_s": 6.0,
        "started": 1796106540.0,
    }
    assert facts["peers"] == {"listening": False, "listen_error": "busy", "rejections": 12, "clock_skew": skew}


def test_the_trip_line_is_found_in_the_rotated_log(tmp_path: pathlib.Path) -> None:
    """The log rotated right after the trip: its line is in decisions.jsonl.1, the new log has none."""
    shutil.copy(STORED / "tripped.json", tmp_path / "tripped.json")
    shutil.copy(STORED / "decisions.jsonl", tmp_path / "decisions.jsonl.1")
    (tmp_path / "decisions.jsonl").write_text(json.dumps({"decision": "phase", "time": UPDATED}) + "\n")
    facts, problems = read(tmp_path, tmp_path)
    assert problems == []
    assert len(facts["tripped"]["samples"]) == 19


def test_a_missing_rotated_log_is_not_a_problem(tmp_path: pathlib.Path) -> None:
    shutil.copy(STORED / "tripped.json", tmp_path / "tripped.json")
    (tmp_path / "decisions.jsonl").write_text("")
    facts, problems = read(tmp_path, tmp_path)
    assert (facts["tripped"]["samples"], problems) == (None, [])


def test_a_fresh_node_has_no_guard(tmp_path: pathlib.Path) -> None:
    facts, problems = read(tmp_path, tmp_path)
    assert problems == []
    assert facts["installed"] is False
    assert {k: v for k, v in facts.items() if k not in ("installed", "state_path", "trip_path")} == dict.fromkeys(
        (
            "running",
            "pid",
            "phase",
            "startup_overdue",
            "startup_seconds",
            "trips",
            "updated_utc",
            "state_age_s",
            "last_sample",
            "mem_available_min",
            "last_decision",
            "floor_bytes",
            "tripped",
            "health",
            "peers",
        )
    )


def test_a_trip_of_a_peer(tmp_path: pathlib.Path) -> None:
    files = run_guard(tmp_path / "guard", [40 * GIB] * 4, peer="spark-head")
    facts, problems = read(files, tmp_path)
    assert problems == []
    tripped = facts["tripped"]
    assert tripped["from_peer"] == "spark-head"
    assert tripped["reason"] == "peer spark-head tripped: emergency: MemAvailable 0.80 GiB under 1.00 GiB"
    assert [s["mem_available"] for s in tripped["samples"]] == [40 * GIB] * 4  # this node's own samples


def test_a_cleared_trip_is_gone_but_counted(tmp_path: pathlib.Path) -> None:
    files = run_guard(tmp_path / "guard", STEADY_DIP, clear=True)
    assert not files.trip.exists()
    facts, problems = read(files, tmp_path)
    assert (facts["installed"], facts["tripped"], facts["trips"], problems) == (True, None, 1, [])


def test_after_a_reboot_the_trip_file_alone_says_tripped(tmp_path: pathlib.Path) -> None:
    """/run is empty after a reboot; /var/lib keeps the trip until it is cleared."""
    shutil.copy(STORED / "tripped.json", tmp_path / "tripped.json")
    facts, problems = read(tmp_path, tmp_path)
    assert (facts["installed"], facts["running"], facts["phase"]) == (True, None, None)
    assert facts["tripped"]["reason"] == REASON
    assert facts["tripped"]["samples"] is None  # no decision log here
    assert problems == []


def test_the_trip_line_is_found_at_the_end_of_a_long_log(tmp_path: pathlib.Path) -> None:
    for name in ("state.json", "tripped.json"):
        shutil.copy(STORED / name, tmp_path / name)
    filler = json.dumps({"decision": "phase", "time": 1.0, "samples": [{"t": 1.0}] * 50}) + "\n"
    older_trip = json.dumps({"decision": "trip", "time": 5.0, "samples": [{"t": 5.0}]}) + "\n"
    lines = [older_trip] + [filler] * (LOG_TAIL_BYTES // len(filler) // 2) + [(STORED / "decisions.jsonl").read_text()]
    (tmp_path / "decisions.jsonl").write_text("".join(lines) + filler * 3)
    facts, _problems = read(tmp_path, tmp_path)
    assert len(facts["tripped"]["samples"]) == 19  # the trip at TRIPPED_AT, not the older one


def test_a_trip_beyond_the_logs_tail_has_no_samples(tmp_path: pathlib.Path) -> None:
    for name in ("state.json", "tripped.json"):
        shutil.copy(STORED / name, tmp_path / name)
    filler = json.dumps({"decision": "phase", "time": 1.0, "samples": [{"t": 1.0}] * 50}) + "\n"
    text = (STORED / "decisions.jsonl").read_text() + filler * (LOG_TAIL_BYTES // len(filler) + 2)
    (tmp_path / "decisions.jsonl").write_text(text)
    facts, _problems = read(tmp_path, tmp_path)
    assert facts["tripped"]["samples"] is None


def test_samples_the_state_holds_win(tmp_path: pathlib.Path) -> None:
    state = json.loads((STORED / "state.json").read_text())
    state["tripped"]["samples"] = [{"t": TRIPPED_AT, "mem_available": 1, "psi_full_avg10": None, "low": True}]
    (tmp_path / "state.json").write_text(json.dumps(state))
    facts, _problems = read(tmp_path, tmp_path)
    assert facts["tripped"]["samples"] == state["tripped"]["samples"]


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("state.json", "{not json", "not JSON"),
        ("tripped.json", "", "not JSON"),
        ("decisions.jsonl", None, "Is a directory"),  # a directory where the log should be: not a quiet error
    ],
)
def test_unreadable_files_are_problems(tmp_path: pathlib.Path, name: str, content: str | None, message: str) -> None:
    for stored in ("state.json", "tripped.json"):
        shutil.copy(STORED / stored, tmp_path / stored)
    if content is None:
        (tmp_path / name).mkdir()
    else:
        (tmp_path / name).write_text(content)
    facts, problems = read(tmp_path, tmp_path)
    assert [(p["section"], pathlib.Path(p["source"]).name) for p in problems] == [("memguard", name)]
    assert message in problems[0]["message"]
    assert facts["installed"] is True


@pytest.mark.parametrize(
    "seconds,text",
    [(1796106576.0, "2026-12-01T06:29:36Z"), (0, "1970-01-01T00:00:00Z"), (None, None), ("x", None), (True, None)],
)
def test_utc_iso(seconds: Any, text: str | None) -> None:
    assert utc_iso(seconds) == text


def test_node_facts_reads_the_guard_at_the_options_paths(proc: pathlib.Path) -> None:
    node = gather(
        Options(
            sections=("memguard",),
            proc_root=str(proc),
            memguard_state_path=str(STORED / "state.json"),
            memguard_trip_path=str(STORED / "tripped.json"),
            memguard_log_path=str(STORED / "decisions.jsonl"),
        ),
        lambda argv: CommandResult(1, "", "no tools here"),
        wall=lambda: UPDATED + 2,
    )
    guard = node["memguard"]
    assert (guard["running"], guard["state_age_s"], guard["tripped"]["time_utc"]) == (True, 2.0, "2026-12-01T06:29:36Z")
    assert len(guard["tripped"]["samples"]) == 19 and node["problems"] == []
