# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric-not-management from addresses to subnets: a fabric address inside any management subnet of the cluster
FAILs, in the plan (the /24 around each management address) and at the boot's preflight (the subnets node_facts
reads on the management interfaces), with the profile's waiver of the same name."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, check_hosts
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import management_subnets as subnets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import (
    fabric_not_management,
    preflight,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__preflight import (
    GB10_FABRIC,
    HOSTS,
    PLAN,
    PROFILE,
    by,
    facts,
    node,
)

CHECK = "fabric-not-management"


# ------------------------------------------------------------------------------------------------ the plan
def cluster(*pairs: tuple[str, str]) -> list[Host]:
    return [
        Host(f"spark-{i}", rank=i, fabric_address=fabric, head=i == 0, management_address=mgmt)
        for i, (mgmt, fabric) in enumerate(pairs)
    ]


def subnet_errors(out: Collector) -> list[str]:
    return [p.render() for p in out.errors if "management subnet" in p.message]


@pytest.mark.parametrize(
    "fabric,inside",
    [
        (("192.0.2.110", "192.0.2.111", "192.0.2.112"), ["spark-0", "spark-1", "spark-2"]),  # the case
        (("198.51.100.10", "198.51.100.11", "192.0.2.255"), ["spark-2"]),  # just inside the /24: its last address
        (("198.51.100.10", "198.51.100.11", "192.0.2.0"), ["spark-2"]),  # just inside: its first address
        (("198.51.100.10", "198.51.100.11", "192.0.3.0"), []),  # just outside, above
        (("198.51.100.10", "198.51.100.11", "192.0.1.255"), []),  # just outside, below
        (("198.51.100.10", "198.51.100.11", "198.51.100.12"), []),  # seed 000's own: a private /24 apart
    ],
    ids=["all inside", "last address", "first address", "next /24", "previous /24", "apart"],
)
def test_a_fabric_address_inside_a_management_24_is_refused_by_the_plan(fabric: tuple[str, ...], inside: list) -> None:
    out = Collector("inventory")
    check_hosts(cluster(*zip(("192.0.2.10", "192.0.2.11", "192.0.2.12"), fabric, strict=True)), out)
    found = subnet_errors(out)
    assert len(found) == len(inside), found
    for name in inside:
        assert any(f"host {name}: dgxspark_fabric_address" in p and "192.0.2.0/24" in p for p in found), found
    assert all("seed 000" in p for p in found)
    if not inside:
        assert out.errors == [] and out.warnings == []  # silent where nothing is wrong


def test_any_hosts_management_subnet_counts_and_an_equal_address_is_named_once() -> None:
    """Another host's management /24 is a management subnet of the cluster too; a fabric address that is a
    management address gets the old problem only, not a second one."""
    out = Collector("inventory")
    check_hosts(cluster(("192.0.2.10", "198.51.100.10"), ("203.0.113.11", "192.0.2.50")), out)
    [found] = subnet_errors(out)
    assert "host spark-1: dgxspark_fabric_address" in found and "ansible_host 192.0.2.10 of host spark-0" in found
    same = Collector("inventory")
    check_hosts(cluster(("192.0.2.10", "192.0.2.10"), ("192.0.2.11", "198.51.100.11")), same)
    assert [p.message.split(";")[0] for p in same.errors] == [
        "the fabric address is also the management address (ansible_host) of host spark-0"
    ]


def test_management_names_and_ipv6_give_no_subnet() -> None:
    out = Collector("inventory")
    check_hosts(cluster(("spark-0.lan", "192.0.2.10"), ("fd00::11", "192.0.2.11")), out)
    assert subnet_errors(out) == []


def test_the_plan_refuses_it_and_the_profile_may_waive_it_by_name() -> None:
    profile = validate_profile(json.loads(SPARK3.read_text()))
    hosts = [
        Host(name, rank=i, fabric_address=f"192.0.2.{110 + i}", head=i == 0, management_address=f"192.0.2.{10 + i}")
        for i, name in enumerate(["spark-head", "spark-w1", "spark-w2"])
    ]
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, "tp3-triangle", hosts)
    assert [(p.where, p.found) for p in caught.value.problems] == [
        (f"host {h.name}: dgxspark_fabric_address", h.fabric_address) for h in hosts
    ]
    out = Collector("inventory", waivers={CHECK: "a lab rig on one network"})
    check_hosts(hosts, out)
    assert out.errors == [] and len(out.warnings) == 3
    assert all("waived fabric-not-management (a lab rig on one network)" in w.render() for w in out.warnings)


# ------------------------------------------------------------------------------------------- the preflight
def with_addresses(rank: int, addresses: dict[str, list[str]], routes: list[dict[str, Any]] | None = None) -> dict:
    facts_of = node(rank)
    facts_of["fabric"] = {**copy.deepcopy(GB10_FABRIC), "addresses": addresses}
    if routes is not None:
        facts_of["fabric"]["default_routes"] = routes
    return facts_of


MGMT = {"eno1": ["198.51.100.200/24"], "lo": ["127.0.0.1/8"], "docker0": ["172.17.0.1/16"]}


@pytest.mark.parametrize(
    "addresses,management,expected",
    [
        (MGMT, "198.51.100.200", {"eno1": ["198.51.100.0/24"]}),  # the interface that carries it
        ({"eno1": ["198.51.100.200/25"]}, "198.51.100.200", {"eno1": ["198.51.100.128/25"]}),  # its own prefix
        (MGMT, "spark-w1", {}),  # a name: the default route's interface (wlP9s9, none here)
        ({**MGMT, "wlP9s9": ["192.168.10.21/24"]}, "spark-w1", {"wlP9s9": ["192.168.10.0/24"]}),
        ({"enp1s0f0np0": ["198.51.100.200/24"]}, "198.51.100.200", {}),  # a fabric port: its own check's
    ],
    ids=["carried", "a /25", "a name, no route's interface", "a name, the route's interface", "a fabric port"],
)
def test_the_management_subnets_are_read_on_the_management_interfaces(
    addresses: dict[str, list[str]], management: str, expected: dict[str, list[str]]
) -> None:
    found = subnets.node_subnets(with_addresses(1, addresses), management, ["enp1s0f0np0", "enP2p1s0f0np0"])
    assert found == expected


def test_no_addresses_gathered_gives_no_subnet() -> None:
    assert subnets.node_subnets(node(1), "192.0.2.11", ["enp1s0f0np0"]) == {}


@pytest.mark.parametrize(
    "address,inside",
    [("198.51.100.255", True), ("198.51.100.0", True), ("198.51.101.0", False), ("198.51.99.255", False)],
)
def test_inside_a_24_just_inside_and_just_outside(address: str, inside: bool) -> None:
    found = subnets.inside(address, [("198.51.100.0/24", "spark-head's eno1")])
    assert (found is not None) is inside


def test_a_fabric_address_inside_a_nodes_management_subnet_fails_the_preflight_and_the_others_are_silent() -> None:
    """The plan's fabric is 198.51.100.10-12; spark-w1 is managed on 198.51.100.200/24: every rank's fabric address
    is inside that subnet, whichever node it was read on."""
    managed = dict(zip(HOSTS, ("192.0.2.10", "198.51.100.200", "192.0.2.12"), strict=True))
    nodes = facts(**{"spark-w1": with_addresses(1, MGMT)})
    result = preflight(nodes, PLAN, PROFILE.data, management=managed)
    assert result["failed"]
    failing = [(f["host"], f["message"]) for f in result["failures"] if f["check"] == CHECK]
    assert [line[0] for line in failing] == HOSTS
    assert (
        "the fabric address 198.51.100.11 is inside the management subnet 198.51.100.0/24 (spark-w1's eno1;"
        in (dict(failing)["spark-w1"])
    )
    # the same node on a management network apart from the fabric: PASS, saying what was compared
    apart = facts(**{"spark-w1": with_addresses(1, {"eno1": ["192.0.2.11/24"]})})
    result = preflight(apart, PLAN, PROFILE.data, management={**managed, "spark-w1": "192.0.2.11"})
    line = by(result, CHECK, "spark-w1")
    assert line["status"] == "PASS", line
    assert "the fabric addresses (198.51.100.11) are outside the management subnets (192.0.2.0/24)" in line["message"]
    assert not [f for f in result["failures"] if f["check"] == CHECK]


def test_the_preflight_takes_the_profiles_waiver() -> None:
    line = fabric_not_management(
        "spark-w1",
        with_addresses(1, MGMT),
        "192.168.10.1",
        "a lab rig on one network",
        subnets=[("198.51.100.0/24", "spark-w1's eno1")],
        fabric_addresses=["198.51.100.11"],
    )
    assert line["status"] == "WARN"
    assert line["message"].startswith(
        "waived fabric-not-management (a lab rig on one network): a planned fabric port is the management interface: "
        "the fabric address 198.51.100.11 is inside the management subnet 198.51.100.0/24"
    )
    assert by(preflight(facts(), PLAN, PROFILE.data), CHECK, "spark-w1")["status"] == "PASS"  # no subnets read
