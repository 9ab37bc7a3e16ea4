# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_verify's logic against outputs captured on sim3 (fixtures/fabric_verify) and the GB10 sysfs tree."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._fabric_verify import (
    Plan,
    Settings,
    Verifier,
    parse_ip_addr,
    parse_ip_route,
    parse_ping,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import FabricHost, fabric_plan
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import GB10

HERE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "fabric_verify"
SIM3 = ["sim3-head", "sim3-worker1", "sim3-worker2"]
PORTS = ("enp1s0f0np0", "enp1s0f1np1")


def fixture(name: str) -> str:
    return (HERE / name).read_text()


def sim3_plan(host: str = "sim3-head") -> dict[str, Any]:
    hosts = [FabricHost(name, rank, f"10.99.3.{rank + 1}") for rank, name in enumerate(SIM3)]
    return fabric_plan("triangle", hosts)[host].as_dict()


def sim_sys(tmp_path: pathlib.Path, mtu: int = 9000, carrier: int = 1, speed: int = 10000) -> str:
    """A node's /sys as the simulator's veth ports show it: no RDMA, 10000 Mb/s."""
    for port in PORTS:
        base = tmp_path / "sys" / "class" / "net" / port
        base.mkdir(parents=True, exist_ok=True)
        for name, value in (("mtu", mtu), ("carrier", carrier), ("speed", speed), ("operstate", "up")):
            (base / name).write_text(f"{value}\n")
        (base / "address").write_text("72:43:a6:8f:57:20\n")
    return str(tmp_path / "sys")


class FakeNode:
    """Answers ip and ping as sim3-head did; ``pings`` maps a destination to a fixture file."""

    def __init__(self, addr: str | None = None, route: str | None = None, pings: dict[str, str] | None = None):
        self.addr = addr if addr is not None else fixture("ip-addr.json")
        self.route = route if route is not None else fixture("ip-route.json")
        self.pings = pings or {}
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> CommandResult:
        self.calls.append(argv)
        if argv[0] == "ip":
            return CommandResult(0, self.route if "route" in argv else self.addr, "")
        name = self.pings.get(argv[-1], "ping-ok.txt")
        text = fixture(name)
        if name == "ping-unreachable.txt":
            return CommandResult(2, "", text.splitlines()[0])
        return CommandResult(0 if name == "ping-ok.txt" else 1, text, "")


def edited_addr(change: Any) -> str:
    links = json.loads(fixture("ip-addr.json"))
    change({link["ifname"]: link for link in links})
    return json.dumps(links)


def test_parse_ip_addr_reads_the_fabric_ports() -> None:
    links = parse_ip_addr(fixture("ip-addr.json"))
    assert links["enp1s0f1np1"] == {
        "up": True,
        "mtu": 9000,
        "operstate": "UP",
        "addresses": [{"local": "10.99.3.1", "prefixlen": 32, "peer": "10.99.3.2"}],
    }
    assert links["eth0"]["addresses"] == [{"local": "172.31.3.10", "prefixlen": 24, "peer": None}]


def test_parse_ip_route_writes_host_routes_as_32() -> None:
    routes = parse_ip_route(fixture("ip-route.json"))
    assert {"dst": "10.99.3.2/32", "gateway": None, "dev": "enp1s0f1np1"} in routes
    assert {"dst": "default", "gateway": "172.31.3.1", "dev": "eth0"} in routes


@pytest.mark.parametrize(
    ("name", "rc", "expected"),
    [
        ("ping-ok.txt", 0, {"sent": 3, "received": 3, "rtt_avg_ms": 0.085, "ok": True, "error": None}),
        (
            "ping-too-long.txt",
            1,
            {"ok": False, "error": "the frame does not fit the path's MTU (message too long)", "sent": 1},
        ),
        ("ping-no-reply.txt", 1, {"ok": False, "sent": 15, "received": 0}),
        (
            "ping-unreachable.txt",
            2,
            {"ok": False, "error": "no route to the peer (the port is down or has no fabric address)"},
        ),
    ],
)
def test_parse_ping(name: str, rc: int, expected: dict[str, Any]) -> None:
    result = parse_ping(rc, fixture(name), "")
    assert {key: result[key] for key in expected} == expected
    if name == "ping-no-reply.txt":
        assert result["error"].startswith("no reply to 15 do-not-fragment ping(s)")


def test_a_healthy_triangle_port_passes_and_names_what_nccl_gets(tmp_path: pathlib.Path) -> None:
    node = FakeNode()
    settings = Settings(link_speed_mbps=10000, sys_root=sim_sys(tmp_path))
    result = Verifier(Plan.from_dict(sim3_plan()), settings, node).verify()
    assert result["failures"] == [] and result["drift"] == [] and result["notices"] == []
    assert [p["destination_host"] for p in result["pings"]] == ["sim3-worker1", "sim3-worker2"]
    assert all(p["ok"] and p["payload"] == 8972 for p in result["pings"])
    assert result["nccl"] == {"hca": [], "socket_ifname": "=enp1s0f0np0,enp1s0f1np1", "gid_index": None}
    pings = [call for call in node.calls if call[0] == "ping"]
    assert sorted(pings) == sorted(
        ["ping", "-n", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-w", "3", "-I", port, address]
        for port, address in (("enp1s0f1np1", "10.99.3.2"), ("enp1s0f0np0", "10.99.3.3"))
    )


def test_a_cut_cable_fails_naming_both_ranks_and_both_ports(tmp_path: pathlib.Path) -> None:
    node = FakeNode(pings={"10.99.3.2": "ping-no-reply.txt"})
    result = Verifier(Plan.from_dict(sim3_plan()), Settings(sys_root=sim_sys(tmp_path)), node).verify()
    assert len(result["failures"]) == 1
    assert result["failures"][0].startswith(
        "rank 0 (sim3-head) -> rank 1 (sim3-worker1, 10.99.3.2) on enp1s0f1np1 -> enp1s0f0np0 direct: "
        "no reply to 15 do-not-fragment ping(s)"
    )


def test_no_carrier_wrong_speed_and_mtu_are_failures(tmp_path: pathlib.Path) -> None:
    settings = Settings(link_speed_mbps=200000, ping=False, sys_root=sim_sys(tmp_path, carrier=0, mtu=1500))
    result = Verifier(Plan.from_dict(sim3_plan()), settings, FakeNode()).verify()
    assert (
        "rank 0 (sim3-head) enp1s0f1np1 (cabled to rank 1 (sim3-worker1) enp1s0f0np0): "
        "no carrier (cable, far end or port down)"
    ) in result["failures"]
    assert (
        "rank 0 (sim3-head) enp1s0f0np0 (cabled to rank 2 (sim3-worker2) enp1s0f1np1): MTU 1500, expected 9000"
        in (result["failures"])
    )
    # no carrier: the speed sysfs shows is meaningless, so it is not judged
    assert not any("link speed" in line for line in result["failures"])
    with_carrier = Settings(link_speed_mbps=200000, ping=False, sys_root=sim_sys(tmp_path / "up"))
    result = Verifier(Plan.from_dict(sim3_plan()), with_carrier, FakeNode()).verify()
    assert result["failures"] == [
        f"rank 0 (sim3-head) {port} (cabled to rank {rank} ({peer}) {far}): link speed 10000 Mb/s, expected 200000 Mb/s"
        for port, rank, peer, far in (
            ("enp1s0f0np0", 2, "sim3-worker2", "enp1s0f1np1"),
            ("enp1s0f1np1", 1, "sim3-worker1", "enp1s0f0np0"),
        )
    ]


def test_drift_names_what_a_reapply_would_change(tmp_path: pathlib.Path) -> None:
    def change(links: dict[str, Any]) -> None:
        links["enp1s0f1np1"]["flags"].remove("UP")
        links["enp1s0f0np0"]["mtu"] = 1500
        links["enp1s0f0np0"]["addr_info"] = []

    node = FakeNode(addr=edited_addr(change))
    verifier = Verifier(Plan.from_dict(sim3_plan()), Settings(ping=False, sys_root=sim_sys(tmp_path)), node)
    assert verifier.drift(verifier.read_state()) == [
        "enp1s0f0np0: MTU 1500 (plan: 9000)",
        "enp1s0f0np0: address 10.99.3.1/32 missing (has: none)",
        "enp1s0f1np1: administratively down (plan: up)",
    ]
    failures = verifier.verify()["failures"]
    assert "rank 0 (sim3-head) enp1s0f1np1: administratively down (plan: up)" in failures


def test_a_rings_missing_route_is_drift(tmp_path: pathlib.Path) -> None:
    names = ["sim4-head", "sim4-worker1", "sim4-worker2", "sim4-worker3"]
    hosts = [FabricHost(name, rank, f"10.99.4.{rank + 1}") for rank, name in enumerate(names)]
    plan = fabric_plan("ring", hosts)["sim4-head"].as_dict()
    addr = json.dumps(
        [
            {
                "ifname": port,
                "flags": ["UP"],
                "mtu": 9000,
                "addr_info": [{"family": "inet", "local": "10.99.4.1", "prefixlen": 32}],
            }
            for port in PORTS
        ]
    )
    verifier = Verifier(
        Plan.from_dict(plan), Settings(ping=False, sys_root=sim_sys(tmp_path)), FakeNode(addr=addr, route="[]")
    )
    assert verifier.drift(verifier.read_state()) == [
        "route to sim4-worker2 (10.99.4.3/32) via sim4-worker1 (10.99.4.2) on enp1s0f1np1 missing"
    ]
    route = json.dumps([{"dst": "10.99.4.3", "gateway": "10.99.4.2", "dev": "enp1s0f1np1", "flags": ["onlink"]}])
    verifier = Verifier(
        Plan.from_dict(plan), Settings(ping=False, sys_root=sim_sys(tmp_path)), FakeNode(addr=addr, route=route)
    )
    assert verifier.drift(verifier.read_state()) == []


def test_wait_reads_again_until_the_plan_holds(tmp_path: pathlib.Path) -> None:
    node = FakeNode(addr=edited_addr(lambda links: links["enp1s0f1np1"].update(mtu=1500)))
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 1.0:
            node.addr = fixture("ip-addr.json")

    settings = Settings(ping=False, wait=5, sys_root=sim_sys(tmp_path))
    verifier = Verifier(Plan.from_dict(sim3_plan()), settings, node, sleep=sleep, clock=lambda: now[0])
    state, drift, waited = verifier.wait_for_plan()
    assert drift == [] and waited == 1.0
    never = Settings(ping=False, wait=2, sys_root=sim_sys(tmp_path / "b"))
    stuck = FakeNode(addr=edited_addr(lambda links: links["enp1s0f1np1"].update(mtu=1500)))
    now[0] = 0.0
    verifier = Verifier(
        Plan.from_dict(sim3_plan()), never, stuck, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0]
    )
    assert verifier.wait_for_plan()[1] == ["enp1s0f1np1: MTU 1500 (plan: 9000)"]


def gb10_switch_plan(address: str) -> dict[str, Any]:
    """A switch host whose port is the GB10 fixture's enp1s0f0np0 (ACTIVE, RoCE v2 192.168.100.10 at index 3)."""
    hosts = [
        FabricHost("gb10-1", 0, address, {"enp1s0f0np0": "switch"}),
        FabricHost("gb10-2", 1, "192.168.100.11", None),
    ]
    return fabric_plan("switch", hosts)["gb10-1"].as_dict()


def gb10_addr(address: str) -> str:
    return json.dumps(
        [
            {
                "ifname": "enp1s0f0np0",
                "flags": ["UP"],
                "mtu": 9000,
                "addr_info": [{"family": "inet", "local": address, "prefixlen": 24}],
            }
        ]
    )


def test_roce_on_a_gb10_port_gives_nccl_its_device_and_gid_index() -> None:
    settings = Settings(link_speed_mbps=200000, require_rdma=True, ping=False, sys_root=str(GB10 / "sys"))
    plan = Plan.from_dict(gb10_switch_plan("192.168.100.10"))
    result = Verifier(plan, settings, FakeNode(addr=gb10_addr("192.168.100.10"), route="[]")).verify()
    assert result["failures"] == []
    assert result["nccl"] == {"hca": ["rocep1s0f0"], "socket_ifname": "=enp1s0f0np0", "gid_index": 3}
    assert result["links"]["enp1s0f0np0"]["speed_mbps"] == 200000


def test_no_roce_gid_for_the_fabric_address_fails_when_rdma_is_required() -> None:
    settings = Settings(require_rdma=True, ping=False, sys_root=str(GB10 / "sys"))
    plan = Plan.from_dict(gb10_switch_plan("192.168.100.20"))
    result = Verifier(plan, settings, FakeNode(addr=gb10_addr("192.168.100.20"), route="[]")).verify()
    assert result["failures"] == [
        "gb10-1 enp1s0f0np0 (rocep1s0f0): no RoCE v2 GID for 192.168.100.20 "
        "(the address is missing, or the port is not RoCE v2: see show_gids)"
    ]
    assert result["nccl"]["hca"] == ["rocep1s0f0"] and result["nccl"]["gid_index"] is None


def test_no_rdma_device_fails_only_when_required(tmp_path: pathlib.Path) -> None:
    plan = Plan.from_dict(sim3_plan())
    optional = Verifier(plan, Settings(ping=False, sys_root=sim_sys(tmp_path)), FakeNode()).verify()
    assert optional["failures"] == []
    required = Verifier(plan, Settings(ping=False, require_rdma=True, sys_root=sim_sys(tmp_path)), FakeNode()).verify()
    assert len(required["failures"]) == 2
    assert required["failures"][0].startswith("sim3-head enp1s0f0np0: no RDMA device (no RDMA devices in ")


def test_a_missing_port_is_a_failure_not_drift(tmp_path: pathlib.Path) -> None:
    links = [link for link in json.loads(fixture("ip-addr.json")) if link["ifname"] != "enp1s0f0np0"]
    sys_root = sim_sys(tmp_path)
    (pathlib.Path(sys_root) / "class" / "net" / "enp1s0f0np0" / "mtu").unlink()
    for name in ("carrier", "speed", "operstate", "address"):
        (pathlib.Path(sys_root) / "class" / "net" / "enp1s0f0np0" / name).unlink()
    (pathlib.Path(sys_root) / "class" / "net" / "enp1s0f0np0").rmdir()
    result = Verifier(
        Plan.from_dict(sim3_plan()), Settings(ping=False, sys_root=sys_root), FakeNode(addr=json.dumps(links))
    ).verify()
    assert result["drift"] == []
    assert result["failures"] == [
        "rank 0 (sim3-head) enp1s0f0np0 (cabled to rank 2 (sim3-worker2) enp1s0f1np1): no such interface on the host"
    ]


def test_plan_from_dict_needs_the_plan_keys() -> None:
    data = copy.deepcopy(sim3_plan())
    del data["rank"]
    with pytest.raises(KeyError):
        Plan.from_dict(data)
