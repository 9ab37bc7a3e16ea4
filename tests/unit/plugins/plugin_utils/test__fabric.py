# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import (
    PORT0,
    PORT1,
    HostFabric,
    default_cabling,
    fabric_plan,
    host_share,
    ping_payload,
    render_netplan,
    render_networkd,
    render_sysctl,
    shape_settings,
    sysctls,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, hosts_from_inventory

SIM = {
    3: ["sim3-head", "sim3-worker1", "sim3-worker2"],
    4: ["sim4-head", "sim4-worker1", "sim4-worker2", "sim4-worker3"],
    8: ["sim8-head"] + [f"sim8-worker{i}" for i in range(1, 8)],
}


def sim_hosts(cluster: int, cabling: dict[str, Any] | None = None) -> list[Host]:
    """The simulated cluster's hosts: rank r has 10.99.<N>.<r+1>."""
    cabling = cabling or {}
    return [
        Host(name, rank, f"10.99.{cluster}.{rank + 1}", cabling.get(name)) for rank, name in enumerate(SIM[cluster])
    ]


def problems(topology: str, hosts: list[Host], **kwargs: Any) -> list[str]:
    with pytest.raises(ProfileError) as info:
        fabric_plan(topology, hosts, **kwargs)
    return [p.render() for p in info.value.problems]


def summary(host: HostFabric) -> dict[str, Any]:
    return {
        "interfaces": {i.name: (i.address, i.peer, i.peer_host) for i in host.interfaces},
        "routes": {r.destination: (r.gateway, r.interface) for r in host.routes},
        "ip_forward": host.ip_forward,
    }


# sim3 and sim4 follow the cabling convention: rank i enp1s0f1np1 -> rank i+1 enp1s0f0np0, wrapping.
EXPECTED = {
    ("triangle", 3): {
        "sim3-head": {
            "interfaces": {
                PORT0: ("10.99.3.1/32", "10.99.3.3/32", "sim3-worker2"),
                PORT1: ("10.99.3.1/32", "10.99.3.2/32", "sim3-worker1"),
            },
            "routes": {},
            "ip_forward": False,
        },
        "sim3-worker1": {
            "interfaces": {
                PORT0: ("10.99.3.2/32", "10.99.3.1/32", "sim3-head"),
                PORT1: ("10.99.3.2/32", "10.99.3.3/32", "sim3-worker2"),
            },
            "routes": {},
            "ip_forward": False,
        },
        "sim3-worker2": {
            "interfaces": {
                PORT0: ("10.99.3.3/32", "10.99.3.2/32", "sim3-worker1"),
                PORT1: ("10.99.3.3/32", "10.99.3.1/32", "sim3-head"),
            },
            "routes": {},
            "ip_forward": False,
        },
    },
    # Non-neighbours go through the lowest-ranked neighbour on a shortest path, so the way back is
    # the same way: 0 <-> 2 through rank 1, 1 <-> 3 through rank 0.
    ("ring", 4): {
        "sim4-head": {
            "interfaces": {
                PORT0: ("10.99.4.1/32", "10.99.4.4/32", "sim4-worker3"),
                PORT1: ("10.99.4.1/32", "10.99.4.2/32", "sim4-worker1"),
            },
            "routes": {"10.99.4.3/32": ("10.99.4.2", PORT1)},
            "ip_forward": True,
        },
        "sim4-worker1": {
            "interfaces": {
                PORT0: ("10.99.4.2/32", "10.99.4.1/32", "sim4-head"),
                PORT1: ("10.99.4.2/32", "10.99.4.3/32", "sim4-worker2"),
            },
            "routes": {"10.99.4.4/32": ("10.99.4.1", PORT0)},
            "ip_forward": True,
        },
        "sim4-worker2": {
            "interfaces": {
                PORT0: ("10.99.4.3/32", "10.99.4.2/32", "sim4-worker1"),
                PORT1: ("10.99.4.3/32", "10.99.4.4/32", "sim4-worker3"),
            },
            "routes": {"10.99.4.1/32": ("10.99.4.2", PORT0)},
            "ip_forward": False,
        },
        "sim4-worker3": {
            "interfaces": {
                PORT0: ("10.99.4.4/32", "10.99.4.3/32", "sim4-worker2"),
                PORT1: ("10.99.4.4/32", "10.99.4.1/32", "sim4-head"),
            },
            "routes": {"10.99.4.2/32": ("10.99.4.1", PORT1)},
            "ip_forward": False,
        },
    },
    ("switch", 8): {
        name: {
            "interfaces": {PORT1: (f"10.99.8.{rank + 1}/24", None, "switch")},
            "routes": {},
            "ip_forward": False,
        }
        for rank, name in enumerate(SIM[8])
    },
}


@pytest.mark.parametrize("topology,cluster", list(EXPECTED), ids=[f"sim{c}-{t}" for t, c in EXPECTED])
def test_sim_clusters(topology: str, cluster: int) -> None:
    plan = fabric_plan(topology, sim_hosts(cluster))
    assert {name: summary(host) for name, host in plan.items()} == EXPECTED[topology, cluster]
    assert all(i.mtu == 9000 for host in plan.values() for i in host.interfaces)


@pytest.mark.parametrize(
    "topology,cluster,source,expected",
    [
        (
            "triangle",
            3,
            "sim3-worker1",
            [(0, PORT0, None, ["sim3-worker1", "sim3-head"]), (2, PORT1, None, ["sim3-worker1", "sim3-worker2"])],
        ),
        (
            "ring",
            4,
            "sim4-worker2",
            [
                (0, PORT0, "sim4-worker1", ["sim4-worker2", "sim4-worker1", "sim4-head"]),
                (1, PORT0, None, ["sim4-worker2", "sim4-worker1"]),
                (3, PORT1, None, ["sim4-worker2", "sim4-worker3"]),
            ],
        ),
        (
            "switch",
            8,
            "sim8-worker7",
            [(r, PORT1, None, ["sim8-worker7", SIM[8][r]]) for r in range(7)],
        ),
    ],
)
def test_checks_every_rank_to_every_other(
    topology: str, cluster: int, source: str, expected: list[tuple[int, str, str | None, list[str]]]
) -> None:
    plan = fabric_plan(topology, sim_hosts(cluster))
    assert sum(len(h.checks) for h in plan.values()) == cluster * (cluster - 1)
    checks = plan[source].checks
    assert [(c.destination_rank, c.interface, c.via_host, c.path) for c in checks] == expected
    assert all(c.payload == 8972 and c.source_host == source for c in checks)
    for check in checks:
        assert check.destination_address == f"10.99.{cluster}.{check.destination_rank + 1}"


def test_check_description_names_ranks_and_ports() -> None:
    check = fabric_plan("ring", sim_hosts(4))["sim4-head"].checks[1]
    assert check.describe() == (
        "rank 0 (sim4-head) -> rank 2 (sim4-worker2, 10.99.4.3) on enp1s0f1np1 -> enp1s0f0np0 "
        "via sim4-worker1 (10.99.4.2)"
    )
    data = fabric_plan("ring", sim_hosts(4))["sim4-head"].as_dict()
    assert data["ping_payload"] == 8972
    assert data["checks"][1]["description"] == check.describe()


@pytest.mark.parametrize("mtu,payload", [(9000, 8972), (1500, 1472)])
def test_ping_payload(mtu: int, payload: int) -> None:
    assert ping_payload(mtu) == payload
    plan = fabric_plan("triangle", sim_hosts(3), mtu=mtu)
    assert {c.payload for h in plan.values() for c in h.checks} == {payload}
    assert {i.mtu for h in plan.values() for i in h.interfaces} == {mtu}


def test_switch_prefix_parameter() -> None:
    plan = fabric_plan("switch", sim_hosts(8), prefix=16)
    assert plan["sim8-worker3"].interfaces[0].address == "10.99.8.4/16"


def test_default_cabling_is_the_sim_convention() -> None:
    assert default_cabling("ring", SIM[4])["sim4-worker3"] == {
        PORT0: f"sim4-worker2/{PORT1}",
        PORT1: f"sim4-head/{PORT0}",
    }
    assert default_cabling("switch", SIM[8])["sim8-head"] == {PORT1: "switch"}


def test_cabling_override_host_names_only() -> None:
    """Overrides may name the peer host without its port; the plan is the same as the convention's."""
    cabling = {
        "sim3-head": {PORT1: "sim3-worker1", PORT0: "sim3-worker2"},
        "sim3-worker1": {PORT0: "sim3-head", PORT1: "sim3-worker2"},
        "sim3-worker2": {PORT0: "sim3-worker1", PORT1: "sim3-head"},
    }
    plan = fabric_plan("triangle", sim_hosts(3, cabling))
    assert {n: summary(h) for n, h in plan.items()} == EXPECTED["triangle", 3]


def test_cabling_override_swapped_ports() -> None:
    """sim3 cabled the other way round: the ports follow the cables, not the convention."""
    cabling = {
        "sim3-head": {PORT0: "sim3-worker1", PORT1: "sim3-worker2"},
        "sim3-worker1": {PORT1: "sim3-head", PORT0: "sim3-worker2"},
        "sim3-worker2": {PORT1: "sim3-worker1", PORT0: "sim3-head"},
    }
    plan = fabric_plan("triangle", sim_hosts(3, cabling))
    assert plan["sim3-head"].interfaces[0].peer_host == "sim3-worker1"
    assert plan["sim3-head"].interfaces[0].name == PORT0


def test_triangle_missing_a_cable_routes_through_the_third_host() -> None:
    cabling = {
        "sim3-head": {PORT1: "sim3-worker1"},
        "sim3-worker1": {PORT0: "sim3-head", PORT1: "sim3-worker2"},
        "sim3-worker2": {PORT0: "sim3-worker1"},
    }
    plan = fabric_plan("triangle", sim_hosts(3, cabling))
    assert summary(plan["sim3-head"])["routes"] == {"10.99.3.3/32": ("10.99.3.2", PORT1)}
    assert plan["sim3-worker1"].ip_forward
    assert not plan["sim3-head"].ip_forward


def test_six_node_ring_routes_two_hops() -> None:
    names = [f"n{r}" for r in range(6)]
    hosts = [Host(n, r, f"192.168.0.{r + 1}") for r, n in enumerate(names)]
    plan = fabric_plan("ring", hosts)
    # 0 -> 3: both ways are 3 hops; the lower-ranked first hop (n1) wins, and each hop decides again.
    check = plan["n0"].checks[2]
    assert (check.destination_host, check.via_host, check.path) == ("n3", "n1", ["n0", "n1", "n2", "n3"])
    assert [r.destination_host for r in plan["n0"].routes] == ["n2", "n3", "n4"]
    assert all(h.ip_forward for h in plan.values())


def test_from_inventory() -> None:
    hostvars = {
        "a": {"dgxspark_rank": 0, "dgxspark_fabric_address": "10.0.0.1"},
        "b": {"dgxspark_rank": 1, "dgxspark_fabric_address": "10.0.0.2", "dgxspark_fabric_cabling": {PORT1: "switch"}},
    }
    groups = {"dgxspark_head": ["a"], "dgxspark_workers": ["b"]}
    hosts, both = hosts_from_inventory(hostvars, groups)
    assert both == [] and hosts == [
        Host("a", 0, "10.0.0.1", head=True),
        Host("b", 1, "10.0.0.2", {PORT1: "switch"}),
    ]
    assert set(fabric_plan("switch", hosts)) == {"a", "b"}


SIM4_HEAD_PORT1 = """\
# Managed by dgxspark.cluster (fabric): sim4-head rank 0.
[Match]
Name=enp1s0f1np1

[Link]
MTUBytes=9000
RequiredForOnline=no

[Network]
ConfigureWithoutCarrier=yes
LinkLocalAddressing=no
IPForward=yes

[Address]
Address=10.99.4.1/32
Peer=10.99.4.2/32

[Route]
Destination=10.99.4.3/32
Gateway=10.99.4.2
GatewayOnLink=yes
"""

SIM8_WORKER1 = """\
# Managed by dgxspark.cluster (fabric): sim8-worker1 rank 1.
[Match]
Name=enp1s0f1np1

[Link]
MTUBytes=9000
RequiredForOnline=no

[Network]
ConfigureWithoutCarrier=yes
LinkLocalAddressing=no

[Address]
Address=10.99.8.2/24
"""


def test_render_networkd_ring_host() -> None:
    files = render_networkd(fabric_plan("ring", sim_hosts(4))["sim4-head"])
    assert sorted(files) == ["10-dgxspark-fabric-enp1s0f0np0.network", "10-dgxspark-fabric-enp1s0f1np1.network"]
    assert files["10-dgxspark-fabric-enp1s0f1np1.network"] == SIM4_HEAD_PORT1
    assert "[Route]" not in files["10-dgxspark-fabric-enp1s0f0np0.network"]
    assert "Peer=10.99.4.4/32\n" in files["10-dgxspark-fabric-enp1s0f0np0.network"]


def test_render_networkd_switch_host_and_determinism() -> None:
    files = render_networkd(fabric_plan("switch", sim_hosts(8))["sim8-worker1"])
    assert files == {"10-dgxspark-fabric-enp1s0f1np1.network": SIM8_WORKER1}
    assert render_networkd(fabric_plan("switch", list(reversed(sim_hosts(8))))["sim8-worker1"]) == files


def test_render_networkd_triangle_has_no_forwarding_or_routes() -> None:
    for host in fabric_plan("triangle", sim_hosts(3)).values():
        for text in render_networkd(host).values():
            assert "IPForward" not in text
            assert "[Route]" not in text


def _with(hosts: list[Host], index: int, **changes: Any) -> list[Host]:
    return [*hosts[:index], replace(hosts[index], **changes), *hosts[index + 1 :]]


@pytest.mark.parametrize(
    "topology,hosts,kwargs,fragments",
    [
        ("triangle", sim_hosts(4), {}, ["topology: a triangle is exactly 3 nodes (found 4; expected 3)"]),
        ("ring", sim_hosts(3)[:2], {}, ["topology: a ring needs at least 3 nodes (found 2"]),
        ("switch", sim_hosts(8)[:1], {}, ["topology: a switch fabric needs at least 2 nodes (found 1"]),
        (
            "mesh",
            sim_hosts(3),
            {},
            ['topology: unknown fabric topology (found "mesh"; expected triangle | ring | switch)'],
        ),
        ("ring", sim_hosts(4), {"mtu": 100000}, ["mtu: not a usable MTU (found 100000"]),
        ("switch", sim_hosts(8), {"prefix": 31}, ["prefix: not a usable prefix length"]),
        (
            "ring",
            _with(sim_hosts(4), 2, fabric_address=None),
            {},
            ["host sim4-worker2: dgxspark_fabric_address: no fabric address"],
        ),
        (
            "ring",
            _with(sim_hosts(4), 2, fabric_address="10.99.4.300"),
            {},
            ['host sim4-worker2: dgxspark_fabric_address: not an IPv4 address (found "10.99.4.300"'],
        ),
        (
            "ring",
            _with(sim_hosts(4), 2, fabric_address="fd00::3"),
            {},
            ['host sim4-worker2: dgxspark_fabric_address: not an IPv4 address (found "fd00::3"'],
        ),
        (
            "ring",
            _with(sim_hosts(4), 2, fabric_address="10.99.4.2"),
            {},
            ['dgxspark_fabric_address 10.99.4.2: the same fabric address on several hosts (found ["sim4-worker1", '],
        ),
        (
            "ring",
            _with(sim_hosts(4), 2, rank=1),
            {},
            [
                'dgxspark_rank 1: the same rank on several hosts (found ["sim4-worker1", "sim4-worker2"]',
                "dgxspark_rank: ranks must be 0..N-1 with none missing (found [0, 1, 3]",
            ],
        ),
        ("ring", _with(sim_hosts(4), 2, rank=None), {}, ["host sim4-worker2: dgxspark_rank: no rank given"]),
        ("ring", _with(sim_hosts(4), 2, rank="two"), {}, ['host sim4-worker2: dgxspark_rank: not a rank (found "two"']),
        (
            "switch",
            _with(sim_hosts(8), 5, fabric_address="10.99.9.6"),
            {},
            [
                "host sim8-worker5: dgxspark_fabric_address: not in the switch's prefix 10.99.8.0/24 "
                '(rank 0, sim8-head) (found "10.99.9.6"'
            ],
        ),
        (
            "switch",
            _with(sim_hosts(8), 5, fabric_address="10.99.8.255"),
            {},
            ["host sim8-worker5: dgxspark_fabric_address: the network or broadcast address of 10.99.8.0/24"],
        ),
    ],
)
def test_validation(topology: str, hosts: list[Host], kwargs: dict[str, Any], fragments: list[str]) -> None:
    found = problems(topology, hosts, **kwargs)
    for fragment in fragments:
        assert any(fragment in text for text in found), (fragment, found)
    assert len(found) == len(fragments), found


RING_CABLING = default_cabling("ring", SIM[4])


def _cabling(**changes: dict[str, str]) -> dict[str, Any]:
    cabling: dict[str, Any] = {name: dict(ports) for name, ports in RING_CABLING.items()}
    cabling.update({name.replace("_", "-"): ports for name, ports in changes.items()})
    return cabling


@pytest.mark.parametrize(
    "cabling,fragments",
    [
        pytest.param(
            _cabling(sim4_worker2={PORT0: "sim4-worker1", PORT1: "sim4-head"}),
            [
                "host sim4-worker2: dgxspark_fabric_cabling.enp1s0f1np1: cabled to sim4-head, "
                "but sim4-head has no port cabled back to sim4-worker2/enp1s0f1np1 "
                '(found {"enp1s0f0np0": "sim4-worker3/enp1s0f1np1", "enp1s0f1np1": "sim4-worker1/enp1s0f0np0"}; '
                "expected sim4-head: {<port>: sim4-worker2/enp1s0f1np1}). a cable has two ends",
                "host sim4-worker3: dgxspark_fabric_cabling.enp1s0f0np0: cabled to sim4-worker2/enp1s0f1np1, "
                "but sim4-worker2 has no port cabled back to sim4-worker3/enp1s0f0np0",
            ],
            id="not-symmetric",
        ),
        pytest.param(
            _cabling(
                sim4_head={PORT0: "sim4-worker1", PORT1: "sim4-worker1"},
                sim4_worker1={PORT0: "sim4-head", PORT1: "sim4-worker2"},
            ),
            [
                "host sim4-worker1: dgxspark_fabric_cabling.enp1s0f0np0: port cabled twice "
                '(found ["sim4-head/enp1s0f0np0", "sim4-head/enp1s0f1np1"]',
                "host sim4-worker3: dgxspark_fabric_cabling.enp1s0f1np1: cabled to sim4-head/enp1s0f0np0, "
                "but sim4-head has no port cabled back",
                "the fabric is not connected: these hosts cannot be reached from sim4-head (rank 0) "
                '(found ["sim4-worker1", "sim4-worker2", "sim4-worker3"]',
            ],
            id="port-cabled-twice",
        ),
        pytest.param(
            _cabling(
                sim4_head={PORT1: "sim4-worker1"},
                sim4_worker1={PORT0: "sim4-head"},
                sim4_worker2={PORT1: "sim4-worker3"},
                sim4_worker3={PORT0: "sim4-worker2"},
            ),
            [
                "the fabric is not connected: these hosts cannot be reached from sim4-head (rank 0) "
                '(found ["sim4-worker2", "sim4-worker3"]',
            ],
            id="not-connected",
        ),
        pytest.param(
            _cabling(sim4_head={PORT0: "sim4-wroker3", PORT1: "sim4-worker1"}),
            [
                "host sim4-head: dgxspark_fabric_cabling.enp1s0f0np0: cabled to a host that is not in the fabric",
                "did you mean 'sim4-worker3'?",
                "host sim4-worker3: dgxspark_fabric_cabling.enp1s0f1np1: cabled to sim4-head/enp1s0f0np0, but",
            ],
            id="unknown-peer",
        ),
        pytest.param(
            _cabling(sim4_head=[PORT0]),
            [
                "host sim4-head: dgxspark_fabric_cabling: not a map of port to peer",
                "host sim4-worker1: dgxspark_fabric_cabling.enp1s0f0np0: cabled to sim4-head/enp1s0f1np1, but",
                "host sim4-worker3: dgxspark_fabric_cabling.enp1s0f1np1: cabled to sim4-head/enp1s0f0np0, but",
                "the fabric is not connected",
            ],
            id="not-a-map",
        ),
    ],
)
def test_cabling_validation(cabling: dict[str, Any], fragments: list[str]) -> None:
    found = problems("ring", sim_hosts(4, cabling))
    for fragment in fragments:
        assert any(fragment in text for text in found), (fragment, found)
    assert len(found) == len([f for f in fragments if not f.startswith("did you mean")]), found


@pytest.mark.parametrize(
    "cabling,fragments",
    [
        (
            {"sim8-worker3": {PORT1: "sim8-worker4"}},
            ["host sim8-worker3: dgxspark_fabric_cabling.enp1s0f1np1: a direct cable in a switch fabric"],
        ),
        (
            {"sim8-worker3": {PORT0: "switch", PORT1: "switch"}},
            ["host sim8-worker3: dgxspark_fabric_cabling: more than one port on the switch"],
        ),
        (
            {"sim8-worker6": {PORT1: "other-switch"}, "sim8-worker7": {PORT1: "other-switch"}},
            [
                "the fabric is not connected: these hosts cannot be reached from sim8-head (rank 0) "
                '(found ["sim8-worker6", "sim8-worker7"]'
            ],
        ),
    ],
)
def test_switch_cabling_validation(cabling: dict[str, Any], fragments: list[str]) -> None:
    found = problems("switch", sim_hosts(8, cabling))
    for fragment in fragments:
        assert any(fragment in text for text in found), (fragment, found)


def test_every_problem_at_once() -> None:
    hosts = _with(_with(sim_hosts(4), 1, fabric_address="nope"), 3, rank=7)
    found = problems("triangle", hosts, mtu=0)
    assert len(found) == 4, found
    assert [text.split(": ")[1] for text in found] == ["topology", "mtu", "host sim4-worker1", "dgxspark_rank"]


def test_address_mtu_and_cabling_problems_together() -> None:
    cabling = _cabling(sim4_worker2={PORT0: "sim4-worker1", PORT1: "sim4-head"})
    hosts = _with(sim_hosts(4, cabling), 1, fabric_address=None)
    found = problems("ring", hosts, mtu="9000")
    assert [text.split(": ")[1] for text in found] == [
        "mtu",
        "host sim4-worker1",
        "host sim4-worker2",
        "host sim4-worker3",
    ], found


def test_switch_prefix_check_skips_hosts_without_address() -> None:
    hosts = _with(_with(sim_hosts(8), 0, fabric_address=""), 7, fabric_address="10.99.9.8")
    found = problems("switch", hosts)
    assert len(found) == 2, found
    assert "host sim8-head: dgxspark_fabric_address: no fabric address" in found[0]
    assert "not in the switch's prefix 10.99.8.0/24 (rank 1, sim8-worker1)" in found[1]


def test_ranks_read_as_the_plan_reads_them() -> None:
    # An INI inventory gives "1"; the serving plan accepts it, so the fabric plan does too.
    hosts = [replace(h, rank=str(h.rank)) for h in sim_hosts(3)]
    plan = fabric_plan("triangle", hosts)
    assert sorted(p.rank for p in plan.values()) == [0, 1, 2]
    assert any("not a rank" in p for p in problems("triangle", [Host("a", "one", "10.99.3.1"), *hosts[1:]]))


def test_checks_name_the_far_port_on_cables_and_on_the_switch() -> None:
    ring = fabric_plan("ring", sim_hosts(4))["sim4-head"]
    assert [(c.destination_host, c.interface, c.peer_interface) for c in ring.checks] == [
        ("sim4-worker1", PORT1, PORT0),
        ("sim4-worker2", PORT1, PORT0),
        ("sim4-worker3", PORT0, PORT1),
    ]
    switch = fabric_plan("switch", sim_hosts(8))["sim8-worker3"]
    assert {c.peer_interface for c in switch.checks} == {PORT1}
    assert "on enp1s0f1np1 -> enp1s0f1np1 direct" in switch.checks[0].describe()


def test_netplan_says_what_networkd_says() -> None:
    ring = fabric_plan("ring", sim_hosts(4))["sim4-head"]
    text = render_netplan(ring)
    assert text.splitlines()[0] == "# Managed by dgxspark.cluster (fabric): sim4-head rank 0."
    document = yaml.safe_load(text)
    assert (document["network"]["version"], document["network"]["renderer"]) == (2, "networkd")
    # rank 0 of a 4-ring: worker3 on port 0 and worker1 on port 1 as on-link peers, worker2 via worker1
    assert document["network"]["ethernets"]["enp1s0f1np1"] == {
        "mtu": 9000,
        "ignore-carrier": True,
        "optional": True,
        "link-local": [],
        "addresses": ["10.99.4.1/32"],
        "routes": [
            {"to": "10.99.4.2/32", "scope": "link"},
            {"to": "10.99.4.3/32", "via": "10.99.4.2", "on-link": True},
        ],
    }
    assert {"to": "10.99.4.4/32", "scope": "link"} in document["network"]["ethernets"]["enp1s0f0np0"]["routes"]
    switch = yaml.safe_load(render_netplan(fabric_plan("switch", sim_hosts(8))["sim8-head"]))
    (port,) = switch["network"]["ethernets"].values()
    assert port["addresses"] == ["10.99.8.1/24"] and "routes" not in port


@pytest.mark.parametrize("name", ["*eth", "'x", "{a}", "a\x01b", "a=b", "a;b", "a/b", "-x", "a.b", "x" * 16])
def test_rendering_refuses_a_name_no_check_saw(name: str) -> None:
    """Defense in depth: a plan built some other way still never writes a name off the allow-list."""
    plan = fabric_plan("ring", sim_hosts(4))["sim4-head"]
    plan.interfaces[0] = replace(plan.interfaces[0], name=name)
    for render in (render_netplan, render_networkd, sysctls):
        with pytest.raises(ValueError, match="fabric port names that cannot be written"):
            render(plan)


def test_sysctls_loose_rp_filter_everywhere_and_forwarding_only_where_needed() -> None:
    ring = fabric_plan("ring", sim_hosts(4))
    assert sysctls(ring["sim4-head"]) == {
        "net.ipv4.conf.enp1s0f0np0.rp_filter": "2",
        "net.ipv4.conf.enp1s0f1np1.rp_filter": "2",
        "net.ipv4.ip_forward": "1",
    }
    triangle = fabric_plan("triangle", sim_hosts(3))["sim3-head"]
    assert "net.ipv4.ip_forward" not in sysctls(triangle)
    assert render_sysctl(triangle) == (
        "# Managed by dgxspark.cluster (fabric): sim3-head rank 0.\n"
        "net.ipv4.conf.enp1s0f0np0.rp_filter = 2\n"
        "net.ipv4.conf.enp1s0f1np1.rp_filter = 2\n"
    )


def test_shape_settings_and_a_hosts_share() -> None:
    shape = {"nodes": 3, "fabric": {"transport": "oneshot-direct", "nccl_net": "Socket", "link_speed_mbps": 10000}}
    assert shape_settings(shape) == {
        "transport": "oneshot-direct",
        "topology": "triangle",
        "mtu": 9000,
        "link_speed_mbps": 10000,
        "nccl_net": "Socket",
        "nodes": 3,
    }
    assert shape_settings({"nodes": 8, "fabric": {"transport": "switch"}})["link_speed_mbps"] == 200000
    share = host_share(fabric_plan("triangle", sim_hosts(3)), "sim3-worker1")
    assert share["interfaces"] == [PORT0, PORT1]
    assert sorted(share["networkd"]) == [f"10-dgxspark-fabric-{PORT0}.network", f"10-dgxspark-fabric-{PORT1}.network"]
    assert share["fabric"]["address"] == "10.99.3.2" and share["fabric"]["ping_payload"] == 8972
    assert share["fabric"]["checks"][0]["description"].startswith("rank 1 (sim3-worker1) -> rank 0 (sim3-head")
