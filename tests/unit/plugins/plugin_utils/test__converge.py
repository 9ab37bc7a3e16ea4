# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import (
    NETPLAN_BIN,
    difference,
    fabric_expectation,
    sha256,
)

CONF = "/etc/dgxspark-memguard/config.json"
SHORT = sha256("{}\n")[:12]
EXPECT = {
    "files": {CONF: sha256("{}\n"), "/etc/old": None},
    "units": ["dgxspark-memguard.service"],
    "ports": {"enp1s0f0np0": {"mtu": 9000, "ipv4": ["10.99.3.1/32"]}},
}


def node(**changes: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "files": {"paths": {CONF: {"exists": True, "sha256": sha256("{}\n")}, "/etc/old": {"exists": False}}},
        "services": {"units": {"dgxspark-memguard.service": {"active_state": "active", "unit_file_state": "enabled"}}},
        "fabric": {"interfaces": {"enp1s0f0np0": {"mtu": 9000, "ipv4": ["10.99.3.1/32"]}}},
    }
    for path, value in changes.items():
        section, key, field = path.split("__")
        facts[section][{"files": "paths", "services": "units", "fabric": "interfaces"}[section]][
            {"conf": CONF, "old": "/etc/old", "unit": "dgxspark-memguard.service", "port": "enp1s0f0np0"}[key]
        ][field] = value
    return facts


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({}, []),
        ({"files__conf__sha256": "ab" * 32}, [f"{CONF}: sha256 abababababab → {SHORT}"]),
        ({"files__conf__exists": False}, [f"{CONF}: absent → sha256 {SHORT}"]),
        ({"files__old__exists": True}, ["/etc/old: present → absent"]),
        (
            {"services__unit__active_state": "failed"},
            ["dgxspark-memguard.service: failed, enabled → active, enabled"],
        ),
        ({"fabric__port__mtu": 1500}, ["enp1s0f0np0 MTU: 1500 → 9000"]),
        ({"fabric__port__ipv4": []}, ["enp1s0f0np0 address 10.99.3.1/32: missing → present"]),
        ({"fabric__port__ipv4": None}, ["enp1s0f0np0 address 10.99.3.1/32: not looked at → present"]),
    ],
)
def test_difference(changes: dict[str, Any], expected: list[str]) -> None:
    assert difference(node(**changes), EXPECT) == expected


def test_facts_not_gathered_are_differences_never_matches() -> None:
    assert difference({}, EXPECT) == [
        f"{CONF}: not looked at → sha256 {SHORT}",
        "/etc/old: not looked at → absent",
        "dgxspark-memguard.service: not looked at → active, enabled",
        "enp1s0f0np0: not found → MTU 9000, 10.99.3.1/32",
    ]
    assert difference({}, {}) == []


PLAN = {
    "networkd": {"10-dgxspark-fabric-enp1s0f0np0.network": "[Match]\nName=enp1s0f0np0"},
    "netplan": "network: {}",
    "sysctls": {"net.ipv4.conf.enp1s0f0np0.rp_filter": 2},
    "sysctl": "# Managed by dgxspark.cluster (fabric): h rank 0.\nnet.ipv4.conf.enp1s0f0np0.rp_filter = 2\n",
    "fabric": {"interfaces": [{"name": "enp1s0f0np0", "mtu": 9000, "address": "10.99.3.1/32"}]},
}
NETWORKD = "/etc/systemd/network/10-dgxspark-fabric-enp1s0f0np0.network"
NETPLAN = "/etc/netplan/60-dgxspark-fabric.yaml"


@pytest.mark.parametrize(
    "backend,netplan_exists,present,absent",
    [
        ("networkd", None, [NETWORKD], [NETPLAN]),
        ("netplan", None, [NETPLAN], [NETWORKD]),
        ("auto", True, [NETPLAN], [NETWORKD]),
        ("auto", False, [NETWORKD], [NETPLAN]),
    ],
)
def test_fabric_expectation_backends(
    backend: str, netplan_exists: bool | None, present: list[str], absent: list[str]
) -> None:
    facts = None if netplan_exists is None else {"files": {"paths": {NETPLAN_BIN: {"exists": netplan_exists}}}}
    expect = fabric_expectation(PLAN, backend, facts)
    for path in present:
        assert path in expect["files"]
    for path in absent:
        assert path not in expect["files"]
    assert expect["files"]["/proc/sys/net/ipv4/conf/enp1s0f0np0/rp_filter"] == sha256("2\n")
    assert expect["files"]["/etc/sysctl.d/60-dgxspark-fabric.conf"] == sha256(PLAN["sysctl"])  # the file copied whole
    assert expect["units"] == ["systemd-networkd.service"]
    assert expect["ports"] == {"enp1s0f0np0": {"mtu": 9000, "ipv4": ["10.99.3.1/32"]}}


def test_fabric_expectation_without_facts_asks_for_both_backends() -> None:
    expect = fabric_expectation(PLAN)
    assert {NETWORKD, NETPLAN, NETPLAN_BIN} <= set(expect["paths"])


def _matching_node() -> dict[str, Any]:
    """A node that has every file, unit and port of PLAN as the networkd backend writes them."""
    expect = fabric_expectation(PLAN, "networkd")
    return {
        "files": {"paths": {path: {"exists": True, "sha256": digest} for path, digest in expect["files"].items()}},
        "services": {"units": {"systemd-networkd.service": {"active_state": "active", "unit_file_state": "enabled"}}},
        "fabric": {"interfaces": {"enp1s0f0np0": {"mtu": 9000, "ipv4": ["10.99.3.1/32"]}}},
    }


def test_the_fabric_difference_is_the_node_against_what_the_role_writes() -> None:
    from ansible_collections.dgxspark.cluster.plugins.filter.converge import FilterModule

    fabric_difference = FilterModule().filters()["fabric_difference"]
    facts = _matching_node()
    assert fabric_difference(facts, PLAN, "networkd") == []
    facts["fabric"]["interfaces"]["enp1s0f0np0"]["mtu"] = 1500
    assert fabric_difference(facts, PLAN, "networkd") == ["enp1s0f0np0 MTU: 1500 → 9000"]
    # the directories the role writes in are the ones compared
    moved = fabric_difference(_matching_node(), PLAN, "networkd", networkd_dir="/run/systemd/network")
    assert moved == [
        f"/run/systemd/network/10-dgxspark-fabric-enp1s0f0np0.network: not looked at → sha256 "
        f"{sha256(PLAN['networkd']['10-dgxspark-fabric-enp1s0f0np0.network'])[:12]}"
    ]


def test_the_report_says_what_a_role_changes_or_would_change_in_check_mode() -> None:
    from ansible_collections.dgxspark.cluster.plugins.filter.converge import FilterModule
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import report

    assert report("h", "fabric", ["a: x → y"], False) == [
        "h: the fabric differs from the plan; configuring it:",
        "a: x → y",
    ]
    assert report("h", "memory guard", ["b"], False, ["(a note)"]) == [
        "h: the memory guard differs; installing it:",
        "b",
        "(a note)",
    ]
    fabric_report = FilterModule().filters()["fabric_difference_report"]
    assert fabric_report(["a: x → y"], "sim3-head", True) == [
        "sim3-head: the fabric would change (check mode):",
        "a: x → y",
    ]
    assert fabric_report([], "h", "false") == ["h: the fabric differs from the plan; configuring it:"]
