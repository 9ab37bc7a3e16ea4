# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric role's filters: the report across ranks, and the NCCL bandwidth verdict."""

from __future__ import annotations

import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.fabric import FilterModule

FILTERS = FilterModule().filters()
NCCL = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def result(rank: int, failures: list[str], notices: list[str] | None = None) -> dict:
    return {
        "rank": rank,
        "address": f"10.99.3.{rank + 1}",
        "failures": failures,
        "notices": notices or [],
        "links": {"enp1s0f0np0": {"speed_mbps": 10000, "mtu": 9000}, "enp1s0f1np1": {"speed_mbps": 10000, "mtu": 9000}},
        "pings": [
            {"ok": True, "payload": 8972, "rtt_avg_ms": 0.05, "sent": 3, "received": 3},
            {"ok": True, "payload": 8972, "rtt_avg_ms": 0.07, "sent": 3, "received": 3},
        ],
    }


def test_fabric_report_orders_by_rank_and_names_every_problem() -> None:
    lines = FILTERS["fabric_report"](
        {
            "sim3-worker1": result(1, ["rank 1 (sim3-worker1) -> rank 0 ...: no reply"], ["a doubt"]),
            "sim3-head": result(0, []),
            "sim3-worker2": {"skipped": True, "msg": "host failed earlier"},
        }
    )
    assert lines == [
        "PASS  rank 0 sim3-head: 10.99.3.1 on enp1s0f0np0, enp1s0f1np1: carrier, 10000 Mb/s, MTU 9000; "
        "2/2 peers answer 8972-byte do-not-fragment pings (avg 0.060 ms)",
        "FAIL  rank 1 sim3-worker1: rank 1 (sim3-worker1) -> rank 0 ...: no reply",
        "WARN  rank 1 sim3-worker1: a doubt",
        "SKIP  sim3-worker2: not verified (host failed earlier)",
    ]


def test_nccl_tests_verdict_on_real_spark_runs() -> None:
    degraded = next(NCCL.glob("*koyoimai-direct-degraded*"))
    verdict = FILTERS["nccl_tests_verdict"](degraded.read_text())
    assert verdict["status"] == "FAIL"
    assert verdict["message"].startswith("peak bus bandwidth 22.6 Gb/s (2.83 GB/s at 2 GiB) < floor 175 Gb/s")
    good = next(NCCL.glob("*trevor-dell-promax*"))
    assert FILTERS["nccl_tests_verdict"](good.read_text())["status"] == "PASS"
    assert FILTERS["nccl_tests_verdict"](good.read_text(), floor_gbps=190)["status"] == "FAIL"
    with pytest.raises(AnsibleFilterError, match="nccl_tests_verdict: not nccl-tests output"):
        FILTERS["nccl_tests_verdict"]("hello")


NETWORKD_DIR = "/etc/systemd/network"
FABRIC_PLAN = {"networkd": {"10-dgxspark-fabric-enp1s0f0np0.network": "", "10-dgxspark-fabric-enp1s0f1np1.network": ""}}


def test_the_stale_fabric_files_are_those_found_that_the_plan_no_longer_has() -> None:
    found = {
        "files": [
            {"path": f"{NETWORKD_DIR}/10-dgxspark-fabric-enP2p1s0f1np1.network"},
            {"path": f"{NETWORKD_DIR}/10-dgxspark-fabric-enp1s0f0np0.network"},
            {"path": "/elsewhere/10-dgxspark-fabric-enp9s0.network"},
        ]
    }
    assert FILTERS["fabric_stale_files"](found, FABRIC_PLAN, NETWORKD_DIR) == [
        f"{NETWORKD_DIR}/10-dgxspark-fabric-enP2p1s0f1np1.network",
        f"{NETWORKD_DIR}/10-dgxspark-fabric-enp9s0.network",  # named in the directory the role writes in
    ]
    # the netplan backend: the find was skipped
    assert FILTERS["fabric_stale_files"]({"skipped": True, "changed": False}, FABRIC_PLAN, NETWORKD_DIR) == []
    assert FILTERS["fabric_stale_files"](None, {}, NETWORKD_DIR) == []
    with pytest.raises(AnsibleFilterError, match="fabric_stale_files: needs find's answer and a fabric plan"):
        FILTERS["fabric_stale_files"]({"files": []}, "plan", NETWORKD_DIR)


def test_the_removed_ports_are_those_whose_file_was_removed_this_run() -> None:
    removed = {
        "changed": True,
        "results": [
            {"changed": True, "fabric_stale": f"{NETWORKD_DIR}/10-dgxspark-fabric-enP2p1s0f1np1.network"},
            {"changed": False, "fabric_stale": f"{NETWORKD_DIR}/10-dgxspark-fabric-enp9s0.network"},  # gone already
            {"changed": True, "fabric_stale": f"{NETWORKD_DIR}/odd.network"},  # not named by the role: as it is
        ],
    }
    assert FILTERS["fabric_removed_ports"](removed) == ["enP2p1s0f1np1", "odd.network"]
    assert FILTERS["fabric_removed_ports"]({"skipped": True}) == []
    assert FILTERS["fabric_removed_ports"](None) == []
    with pytest.raises(AnsibleFilterError, match="fabric_removed_ports: needs the removal's registered answer"):
        FILTERS["fabric_removed_ports"](["x"])


def test_the_port_states_name_each_fabric_port_with_its_state_in_the_facts_order() -> None:
    interfaces = {"enp1s0f1np1": {"operstate": "up", "mtu": 9000}, "enp1s0f0np0": {"operstate": "down"}}
    assert FILTERS["fabric_port_states"](interfaces) == "enp1s0f1np1 up, enp1s0f0np0 down"
    assert FILTERS["fabric_port_states"]({"enp1s0f0np0": {}}) == "enp1s0f0np0 None"  # not read: as the facts say
    assert FILTERS["fabric_port_states"]({}) == ""
    with pytest.raises(AnsibleFilterError, match="fabric_port_states: needs node_facts' fabric.interfaces"):
        FILTERS["fabric_port_states"](["enp1s0f0np0"])
