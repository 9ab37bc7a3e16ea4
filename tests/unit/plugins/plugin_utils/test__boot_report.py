# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._boot_report import (
    boot_report,
    boot_undo_report,
    guard_summary,
)

PLAN = {"head": "head", "ranks": [{"rank": 0, "api_port": 8000}, {"rank": 1, "api_port": None}]}


def host(name: str, rank: int, **extra: Any) -> dict[str, Any]:
    return {
        "inventory_hostname": name,
        "ansible_host": f"172.31.3.{10 + rank}",
        "boot_rank": {"rank": rank},
        "boot_final": {"status": "running"},
        "memguard_state": {"phase": "steady", "tripped": None},
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
    hosts = [{"inventory_hostname": name, "memguard_state": state} for name, state in zip("ab", states, strict=True)]
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


def test_undo_report_when_the_undo_finished() -> None:
    hosts = [host("head", 0, boot_stopped={"ranks": []}), host("w1", 1, boot_failure="timeout")]
    lines = boot_undo_report(hosts, ["w1"], [])
    assert lines[0].startswith("the boot failed; every rank was stopped and removed")
    assert lines[1:] == ["w1: timeout"]
