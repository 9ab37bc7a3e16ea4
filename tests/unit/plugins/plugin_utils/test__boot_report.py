# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import (
    boot_report,
    boot_undo_report,
    guard_summary,
    rfc3339,
)

PLAN = {"head": "head", "ranks": [{"rank": 0, "api_port": 8000}, {"rank": 1, "api_port": None}]}


def host(name: str, rank: int, **extra: Any) -> dict[str, Any]:
    return {
        "inventory_hostname": name,
        "ansible_host": f"172.31.3.{10 + rank}",
        "boot_rank": {"rank": rank},
        "boot_steadied": {"guard": {"phase": "steady", "tripped": None}, "rank": {"status": "running"}},
        **extra,
    }


def test_report_of_a_boot_that_serves() -> None:
    head = host(
        "head",
        0,
        boot_served={"models": ["m"], "seconds": 5.4},
        boot_smoke={"json": {"choices": [{"text": " 1, 2, 3\n"}]}},
    )
    assert boot_report([host("w1", 1), head], PLAN, "Count:") == [
        "endpoint: http://172.31.3.10:8000/v1 serving m (ready after 5.4 s of waiting)",
        "ranks: 0 head running; 1 w1 running",
        "memory guard: steady on every node",
        'sample completion ("Count:"): 1, 2, 3',
    ]


def test_report_of_a_boot_that_changed_nothing() -> None:
    lines = boot_report([host("head", 0), host("w1", 1)], PLAN, "Count:")
    assert lines[0] == "endpoint: http://172.31.3.10:8000/v1 (already serving as planned: nothing was started)"
    assert len(lines) == 3


@pytest.mark.parametrize(
    "states,expected,tripped",
    [
        ([{"phase": "steady"}, {"phase": "steady"}], "memory guard: steady on every node", []),
        (
            [{"phase": "steady"}, {"phase": "steady", "tripped": {"reason": "low"}}],
            "memory guard: steady on a; TRIPPED (low) on b",
            ["b"],
        ),
        ([{"phase": "idle"}, None], "memory guard: idle on a; not answering on b", []),
    ],
)
def test_guard_is_never_steady_while_tripped(states: list[Any], expected: str, tripped: list[str]) -> None:
    hosts = [
        {"inventory_hostname": name, "boot_steadied": {"guard": state}}
        for name, state in zip("ab", states, strict=True)
    ]
    assert guard_summary(hosts) == (expected, tripped)


def test_undo_report_names_causes_lost_nodes_and_unfinished_steps() -> None:
    hosts = [
        host("head", 0, boot_stopped={"ranks": []}),
        host("w1", 1, boot_failure="rank 1 exited", boot_stopped={"failed": True, "msg": "engine down"}),
    ]
    lines = boot_undo_report(hosts, ["w1"], ["w2"])
    assert lines[0] == "the boot failed, and its undo did not finish everywhere:"
    assert lines[1:3] == ["w1: rank 1 exited", "w2: did not answer"]
    assert "w1: its ranks were not all stopped: engine down" in lines
    assert any(line.startswith("w2: stopped answering during the boot") for line in lines)


def test_undo_report_names_the_phase_steps_that_did_not_finish() -> None:
    """node_phase ran every step and named each that failed; a module that never ran is reported too."""
    errors = ["guard: the memory guard does not answer (refused)", "helpers: comfyui.service not started (failed)"]
    hosts = [
        host("head", 0, boot_stopped={"ranks": []}, boot_undone={"failed": True, "errors": errors}),
        host("w1", 1, boot_failure="timeout", boot_undone={"failed": True, "msg": "module not found"}),
    ]
    lines = boot_undo_report(hosts, ["w1"], [])
    assert lines[0] == "the boot failed, and its undo did not finish everywhere:"
    assert lines[2:] == [
        "head: the memory guard did not go idle: the memory guard does not answer (refused)",
        "head: a helper service did not resume: comfyui.service not started (failed)",
        "w1: the guard was not left idle nor the helpers resumed: module not found",
    ]


def test_undo_report_when_the_undo_finished() -> None:
    hosts = [host("head", 0, boot_stopped={"ranks": []}), host("w1", 1, boot_failure="timeout")]
    lines = boot_undo_report(hosts, ["w1"], [])
    assert lines[0].startswith("the boot failed; every rank was stopped and removed")
    assert lines[1:] == ["w1: timeout"]


def test_startup_figures_and_phase_times() -> None:
    head = host(
        "head",
        0,
        boot_served={"models": ["m"], "seconds": 5, "started_at": "2026-12-01T12:00:00.5Z"},
        boot_smoke={"text": " 1, 2", "sent_at": 1796126406.0, "ttft": 0.25},
        boot_clock={"plan": 100.0, "converge": 101.5, "create": 110.0, "wait": 113.0, "finish": 120.0},
    )
    head["boot_served"].update(port_open_at=1796126404.5, ready_at=1796126405.0)  # 4.0 s and 4.5 s after start
    worker = host("w1", 1, boot_clock={"plan": 100.2, "workers": 111.0, "wait": 113.1})
    lines = boot_report([head, worker], PLAN, "Count:", ended=121.0)
    assert 'sample completion ("Count:"): 1, 2' in lines
    assert "startup (from the head's engine start): port open 4.0 s, HTTP ready 4.5 s, first token 5.8 s" in lines
    assert lines[-1] == (
        "boot phases: plan and preflight 1.5 s, converge 8.5 s, create 1.0 s, workers 2.0 s, "
        "wait and smoke 7.0 s, steady 1.0 s; in all 21.0 s"
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2026-12-01T12:00:00Z", 1796126400.0),
        ("2026-12-01T12:00:00.123456789Z", 1796126400.123456789),
        ("0001-01-01T00:00:00Z", None),  # Docker's "never"
        ("yesterday", None),
        (None, None),
    ],
)
def test_rfc3339(text: Any, expected: float | None) -> None:
    assert rfc3339(text) == (pytest.approx(expected) if expected is not None else None)


def test_a_load_over_the_startup_wait_is_a_warning_naming_the_node_and_its_time() -> None:
    """The guard's answer to the switch to steady says the load ran over seed 000's 120 s wait and how long it
    took: the boot serves (a slow load is not killed for being slow), and its report says so, per node."""
    slow = host("w1", 1)
    slow["boot_steadied"]["guard"].update(startup_overdue=True, startup_seconds=187.5)
    old = host("w2", 2)
    old["boot_steadied"]["guard"].update(startup_overdue=True)  # a guard that does not say how long
    on_time = host("head", 0, boot_served={"models": ["m"], "seconds": 5.4})
    on_time["boot_steadied"]["guard"].update(startup_overdue=False, startup_seconds=61.0)
    lines = boot_report([slow, on_time, old], PLAN, "Count:", startup_wait=120)
    assert lines[2:5] == [
        "memory guard: steady on every node",
        "WARN memory guard: the load on w1 took 187.5 s, over host.startup_memguard_wait_seconds (120 s): judged by "
        "the steady floor and grace from then on, not stopped (a slow load is not killed for being slow); find out "
        "why it was slow",
        "WARN memory guard: the load on w2 took an unrecorded time (its guard predates startup_seconds), over "
        "host.startup_memguard_wait_seconds (120 s): judged by the steady floor and grace from then on, not stopped "
        "(a slow load is not killed for being slow); find out why it was slow",
    ]
    assert not any(line.startswith("WARN") for line in boot_report([on_time], PLAN, "Count:", startup_wait=120))


def test_a_node_lost_during_the_steady_phase_is_named_never_steady() -> None:
    """The report covers every rank of the boot: one whose steady switch never came back (it stopped answering)
    is 'not answering', in the ranks and in the guard's line, never 'steady on every node'."""
    head = host("head", 0, boot_served={"models": ["m"], "seconds": 5.4})
    lost = {"inventory_hostname": "w1", "boot_rank": {"rank": 1}, "boot_steadied": {"unreachable": True}}
    lines = boot_report([head, lost], PLAN, "Count:")
    assert lines[1] == "ranks: 0 head running; 1 w1 not answering"
    assert lines[2] == "memory guard: steady on head; not answering on w1"


def test_the_outcome_names_failed_and_lost_hosts_once() -> None:
    from ansible_collections.dgxspark.cluster.plugins.filter.boot_report import boot_outcome

    hostvars = {
        "head": {"boot_failure": "stopped answering during its start: timeout", "boot_unreachable": True},
        "w1": {"boot_failure": "the rank exited"},
        "w2": {},
        "w3": {},
    }
    hosts = ["head", "w1", "w2", "w3"]
    # a play over every host: w3 was dropped by Ansible (unreachable), the head kept and marked
    assert boot_outcome(hostvars, hosts, ["head", "w1", "w2"]) == {
        "failed": ["w1"],
        "lost": ["head", "w3"],
        "any": ["w1", "head", "w3"],
    }
    # a play over some of them (the head's start): only what the phases recorded counts
    assert boot_outcome(hostvars, hosts) == {"failed": ["w1"], "lost": ["head"], "any": ["w1", "head"]}
    assert boot_outcome({}, ["a"], ["a"]) == {"failed": [], "lost": [], "any": []}


def test_a_lost_head_is_named_and_its_next_boot_said() -> None:
    lines = boot_undo_report([{"inventory_hostname": "w1"}, {"inventory_hostname": "head"}], [], ["head"])
    assert lines[0] == "the boot failed, and its undo did not finish everywhere:"
    assert "head: did not answer" in lines
    assert any(
        line.startswith("head: stopped answering during the boot") and "the next boot finds its journal" in line
        for line in lines
    ), lines


# ------------------------------------------------------------------ the steady phase: the release and the guard
RANKS_PLAN = {"head": "head", "ranks": [{"host": "head", "spec_sha256": "aaa"}, {"host": "w1", "spec_sha256": "bbb"}]}


def test_release_write_maps_each_decision_to_the_release_module_s_operation() -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import release_write

    record = {"id": "r2", "profile_sha256": "p"}
    first = release_write({"decision": "first", "promoted": None, "record": record, "by": "op"}, RANKS_PLAN)
    assert first == {
        "operation": "record",
        "detail": "",
        "by": "op",
        "record": {**record, "plan": RANKS_PLAN, "spec_sha256": {"head": "aaa", "w1": "bbb"}},
    }
    candidate = release_write({"decision": "candidate", "promoted": "r1", "record": record, "by": "op"}, RANKS_PLAN)
    assert candidate["operation"] == "record" and "id" not in candidate and "event" not in candidate
    served = release_write({"decision": "promoted", "promoted": "r1", "record": None, "by": "op"}, RANKS_PLAN)
    assert served == {"operation": "event", "detail": "", "by": "op", "id": "r1", "event": "served again"}
    respec = {"decision": "promoted", "promoted": "r1", "respec": {"head": "c"}, "record": {}, "by": "op"}
    assert release_write(respec, RANKS_PLAN) == {
        "operation": "event",
        "detail": "",
        "by": "op",
        "id": "r1",
        "event": "served again, re-rendered",
        "spec_sha256": {"head": "c"},
    }
    rollback = release_write({"decision": "rollback", "promoted": "r2", "target": "r1", "by": "op"}, RANKS_PLAN)
    assert rollback == {
        "operation": "promote",
        "detail": "rolled back to it (playbooks/rollback.yml)",
        "by": "op",
        "id": "r1",
    }
    with pytest.raises(ValueError, match="no release is written for the decision None"):
        release_write({"decision": None}, RANKS_PLAN)


@pytest.mark.parametrize(
    "decision,written,line",
    [
        (
            {"decision": "first", "promoted": None},
            ["a.json", "b.json"],
            "release: the first release, a.json, b.json, promoted",
        ),
        (
            {"decision": "candidate", "promoted": "r1"},
            ["r2.json"],
            "release: a CANDIDATE, r2.json (promote.yml judges it; rollback.yml goes back to r1)",
        ),
        ({"decision": "promoted", "promoted": "r1"}, [], "release: the promoted release r1"),
        ({"decision": "rollback", "promoted": "r2", "target": "r1"}, [], "release: rolled back to r1, promoted again"),
        ({"decision": None, "promoted": "r1"}, [], "release: none recorded"),
    ],
)
def test_the_release_line_says_what_the_boot_made_of_the_releases(
    decision: dict[str, Any], written: list[str], line: str
) -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import release_line

    assert release_line(decision, written) == line


def test_the_steady_report_ends_with_the_release_line_and_names_the_startup_wait() -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import steady_report

    head = host("head", 0, boot_served={"models": ["m"], "seconds": 5.4}, boot_released={"written": ["r1.json"]})
    slow = host("w1", 1)
    slow["boot_steadied"]["guard"].update(startup_overdue=True, startup_seconds=187.5)
    hostvars = {"head": head, "w1": slow, "elsewhere": {}}
    planned = {"plan": PLAN, "profile": {"host": {"startup_memguard_wait_seconds": 120}}}
    lines = steady_report(hostvars, ["head", "w1"], planned, {"decision": "first", "promoted": None}, "Count:")
    assert lines[:2] == [
        "endpoint: http://172.31.3.10:8000/v1 serving m (ready after 5.4 s of waiting)",
        "ranks: 0 head running; 1 w1 running",
    ]
    assert "over host.startup_memguard_wait_seconds (120 s)" in lines[3]
    assert lines[-1] == "release: the first release, r1.json, promoted"
    # no release step on the head (skipped, or not run), no wait in the profile
    head.pop("boot_released")
    lines = steady_report(hostvars, ["head", "w1"], {"plan": PLAN}, {"decision": "promoted", "promoted": "r1"}, "")
    assert "over host.startup_memguard_wait_seconds: judged" in lines[3]
    assert lines[-1] == "release: the promoted release r1"


@pytest.mark.parametrize(
    "guard,said",
    [
        (None, ""),
        ({}, ""),
        ({"phase": "steady", "tripped": None}, ""),
        ({"phase": "steady", "tripped": None, "health": {"ok": True, "problems": []}}, ""),
        ({"phase": "steady", "health": None}, ""),
        (
            {"tripped": {"reason": "MemAvailable low"}, "health": {"ok": False}},
            "w1: the memory guard is TRIPPED (MemAvailable low); the boot is not steady. Read its decisions, then "
            "clear it (-e boot_clear_trip=true or the memguard role's clear entry point).",
        ),
        (
            {"tripped": None, "health": {"ok": False, "problems": ["peer listener: down", "clock skew"]}},
            "w1: the memory guard is up but not healthy after the switch to steady: peer listener: down; clock skew. "
            "Fix them (the memguard role's README: the listener, peers, writes, clocks); dgxspark-memguard status "
            "prints its state.",
        ),
        (
            {"health": {"ok": False}},
            "w1: the memory guard is up but not healthy after the switch to steady: no problem named. Fix them",
        ),
    ],
)
def test_the_guard_failure_names_a_trip_first_then_an_unhealthy_guard(guard: Any, said: str) -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import guard_failure

    found = guard_failure(guard, "w1")
    assert found.startswith(said) if said else found == ""
