# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare a node's fabric with its plan, and prove every peer answers over it.

No Ansible imports: the module passes a :data:`Runner` (``run_command`` under coreutils ``timeout``).
Three kinds of result:

* ``drift``: the configuration differs from the plan (a port down by hand, another MTU, an address or a
  route missing). The fabric role reapplies its configuration when there is any.
* ``failures``: what stops NCCL: a port missing or without carrier, a wrong MTU, a speed other than
  expected, no RoCE v2 IPv4 GID where RDMA is required, and every peer that does not answer a
  do-not-fragment ping that fills a frame. Each names the ranks, the hosts and the ports.
* ``nccl``: what the node offers NCCL, discovered from the ports it really has: the RDMA devices
  (``NCCL_IB_HCA``), the interfaces (``NCCL_SOCKET_IFNAME``) and the RoCE v2 IPv4 GID index.

The link facts come from :func:`_node_facts.gather` (sysfs; the same code as the preflight), the
addresses, flags and routes from one ``ip -j addr`` and one ``ip -j route``, and the pings run at once,
one thread each.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import Options, Runner, gather
from ansible_collections.dgxspark.cluster.plugins.module_utils._roce import cidr, nccl_names

PING_STATS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
PING_RTT = re.compile(r"= [\d.]+/([\d.]+)/[\d.]+/[\d.]+ ms")
TOO_BIG = re.compile(r"message too long|frag needed|mtu ?= ?\d+", re.IGNORECASE)
MAX_PING_THREADS = 16


@dataclass
class Plan:
    """What the fabric_plan action plugin planned for this host (its ``fabric`` result)."""

    host: str
    rank: int
    address: str
    mtu: int
    interfaces: list[dict[str, Any]]
    routes: list[dict[str, Any]]
    checks: list[dict[str, Any]]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            str(data["host"]),
            int(data["rank"]),
            str(data["address"]),
            int(data["mtu"]),
            list(data.get("interfaces", [])),
            list(data.get("routes", [])),
            list(data.get("checks", [])),
        )


@dataclass
class Settings:
    link_speed_mbps: int | None = None
    """None: not checked."""
    require_rdma: bool = False
    ping: bool = True
    ping_count: int = 3
    ping_deadline: int = 3
    wait: float = 0.0
    """Seconds to wait for the configuration to match the plan (after a reconfigure)."""
    sys_root: str = "/sys"
    ip: str = "ip"
    ping_bin: str = "ping"


@dataclass
class LiveState:
    links: dict[str, dict[str, Any]]
    """ifname -> flags, mtu, operstate and IPv4 addresses, from ``ip -j addr``."""
    routes: list[dict[str, Any]]
    node: dict[str, Any]
    """``_node_facts`` sections rdma and fabric for the planned ports."""
    errors: list[str] = field(default_factory=list)


def parse_ip_addr(text: str) -> dict[str, dict[str, Any]]:
    """``ip -j addr show``: ifname -> {up, mtu, operstate, addresses: [{local, prefixlen, peer}]}."""
    links: dict[str, dict[str, Any]] = {}
    for item in json.loads(text or "[]"):
        if not isinstance(item, dict) or "ifname" not in item:
            continue
        addresses = [
            {
                "local": info.get("local"),
                "prefixlen": info.get("prefixlen"),
                "peer": info.get("address") if info.get("address") != info.get("local") else None,
            }
            for info in item.get("addr_info", [])
            if info.get("family") == "inet"
        ]
        links[item["ifname"]] = {
            "up": "UP" in item.get("flags", []),
            "mtu": item.get("mtu"),
            "operstate": item.get("operstate"),
            "addresses": addresses,
        }
    return links


def parse_ip_route(text: str) -> list[dict[str, Any]]:
    """``ip -j -4 route show``: [{dst (with /32 added to host routes), gateway, dev}]."""
    routes = []
    for item in json.loads(text or "[]"):
        if not isinstance(item, dict) or "dst" not in item:
            continue
        dst = item["dst"] if "/" in item["dst"] or item["dst"] == "default" else f"{item['dst']}/32"
        routes.append({"dst": dst, "gateway": item.get("gateway"), "dev": item.get("dev")})
    return routes


def parse_ping(rc: int, stdout: str, stderr: str) -> dict[str, Any]:
    """One ``ping`` run (iputils): sent, received, average round trip, and why it failed."""
    text = f"{stdout}\n{stderr}"
    stats = PING_STATS.search(text)
    rtt = PING_RTT.search(text)
    sent, received = (int(stats.group(1)), int(stats.group(2))) if stats else (0, 0)
    result: dict[str, Any] = {
        "sent": sent,
        "received": received,
        "rtt_avg_ms": float(rtt.group(1)) if rtt else None,
        "ok": received > 0,
        "error": None,
    }
    if received == 0:
        too_big = TOO_BIG.search(text)
        if too_big:
            result["error"] = f"the frame does not fit the path's MTU ({too_big.group(0)})"
        elif "unreachable" in text.lower():
            result["error"] = "no route to the peer (the port is down or has no fabric address)"
        elif stats:
            result["error"] = (
                f"no reply to {sent} do-not-fragment ping(s) (cable, peer's address, or a smaller MTU at the far end)"
            )
        else:
            said = [line.strip() for line in text.splitlines() if line.strip()]
            result["error"] = f"ping exited {rc}: {said[-1] if said else 'no output'}"
    return result


@dataclass
class Verifier:
    """Checks the node against ``plan`` with ``settings``, running commands through ``run``."""

    plan: Plan
    settings: Settings
    run: Runner
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    # ---------------------------------------------------------------- state
    def read_state(self) -> LiveState:
        errors: list[str] = []
        links: dict[str, dict[str, Any]] = {}
        routes: list[dict[str, Any]] = []
        for argv, parse, what in (
            ([self.settings.ip, "-j", "addr", "show"], parse_ip_addr, "addresses"),
            ([self.settings.ip, "-j", "-4", "route", "show"], parse_ip_route, "routes"),
        ):
            result = self.run(argv)
            if result.rc != 0:
                errors.append(
                    f"could not read the {what}: {' '.join(argv)} exited {result.rc}: {result.stderr.strip()}"
                )
                continue
            try:
                parsed = parse(result.stdout)
            except ValueError as error:
                errors.append(f"could not read the {what} from {' '.join(argv)}: {error}")
                continue
            if what == "addresses":
                links = parsed  # type: ignore[assignment]
            else:
                routes = parsed  # type: ignore[assignment]
        names = tuple(interface["name"] for interface in self.plan.interfaces)
        node = gather(
            Options(sections=("rdma", "fabric"), sys_root=self.settings.sys_root, fabric_interfaces=names), self.run
        )
        return LiveState(links, routes, node, errors)

    def drift(self, state: LiveState) -> list[str]:
        """How the live configuration differs from the plan (what a reconfigure would change)."""
        found: list[str] = []
        for interface in self.plan.interfaces:
            name = interface["name"]
            link = state.links.get(name)
            if link is None:
                continue  # a missing port is a failure, not something a reconfigure can mend
            if not link["up"]:
                found.append(f"{name}: administratively down (plan: up)")
            if link["mtu"] != interface["mtu"]:
                found.append(f"{name}: MTU {link['mtu']} (plan: {interface['mtu']})")
            local, prefix = cidr(interface["address"])
            if not any(a["local"] == local and a["prefixlen"] == prefix for a in link["addresses"]):
                have = ", ".join(f"{a['local']}/{a['prefixlen']}" for a in link["addresses"]) or "none"
                found.append(f"{name}: address {interface['address']} missing (has: {have})")
        for route in self.plan.routes:
            if not any(
                r["dst"] == route["destination"] and r["gateway"] == route["gateway"] and r["dev"] == route["interface"]
                for r in state.routes
            ):
                found.append(
                    f"route to {route['destination_host']} ({route['destination']}) via {route['via_host']} "
                    f"({route['gateway']}) on {route['interface']} missing"
                )
        return found

    def wait_for_plan(self) -> tuple[LiveState, list[str], float]:
        """Read the state until it matches the plan or ``settings.wait`` has passed."""
        start = self.clock()
        while True:
            state = self.read_state()
            drift = self.drift(state)
            waited = self.clock() - start
            if not drift or waited >= self.settings.wait:
                return state, drift, round(waited, 2)
            self.sleep(0.25)

    # ---------------------------------------------------------------- links and RDMA
    def link_failures(self, state: LiveState) -> tuple[list[str], list[str]]:
        failures: list[str] = []
        warnings: list[str] = []
        facts = state.node["fabric"]["interfaces"]
        for interface in self.plan.interfaces:
            name = interface["name"]
            where = f"rank {self.plan.rank} ({self.plan.host}) {name} ({self._cable(interface)})"
            fact = facts.get(name, {"present": False})
            if not fact.get("present") or name not in state.links:
                failures.append(f"{where}: no such interface on the host")
                continue
            if fact.get("carrier") is not True:
                failures.append(f"{where}: no carrier (cable, far end or port down)")
            if fact.get("mtu") != interface["mtu"]:
                failures.append(f"{where}: MTU {fact.get('mtu')}, expected {interface['mtu']}")
            expected = self.settings.link_speed_mbps
            speed = fact.get("speed_mbps")
            if expected and fact.get("carrier") is True:
                if speed is None:
                    warnings.append(f"{where}: link speed unknown, expected {expected} Mb/s")
                elif speed != expected:
                    failures.append(f"{where}: link speed {speed} Mb/s, expected {expected} Mb/s")
        return failures, warnings

    # ---------------------------------------------------------------- pings
    def ping(self, check: dict[str, Any]) -> dict[str, Any]:
        settings = self.settings
        argv = [
            settings.ping_bin,
            "-n",
            "-M",
            "do",
            "-s",
            str(check["payload"]),
            "-c",
            str(settings.ping_count),
            "-i",
            "0.2",
            "-w",
            str(settings.ping_deadline),
            "-I",
            check["interface"],
            check["destination_address"],
        ]
        result = self.run(argv)
        outcome = parse_ping(result.rc, result.stdout, result.stderr)
        if result.timed_out:
            outcome.update(ok=False, error="ping did not finish in time")
        return {
            "description": check["description"],
            "destination_host": check["destination_host"],
            "payload": check["payload"],
            **outcome,
        }

    def pings(self) -> list[dict[str, Any]]:
        checks = self.plan.checks
        if not checks:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_PING_THREADS, len(checks))) as pool:
            return list(pool.map(self.ping, checks))

    # ---------------------------------------------------------------- all of it
    def verify(self) -> dict[str, Any]:
        state, drift, waited = self.wait_for_plan()
        failures = list(state.errors)
        link_failures, warnings = self.link_failures(state)
        failures += link_failures
        nccl, rdma_failures, rdma_warnings = nccl_names(
            self.plan.host, self.plan.interfaces, state.node, self.settings.require_rdma
        )
        failures += rdma_failures
        warnings += rdma_warnings
        failures += [f"rank {self.plan.rank} ({self.plan.host}) {item}" for item in drift]
        pings: list[dict[str, Any]] = []
        if self.settings.ping:
            pings = self.pings()
            for outcome in pings:
                if not outcome["ok"]:
                    failures.append(f"{outcome['description']}: {outcome['error']}")
                elif outcome["received"] < outcome["sent"]:
                    warnings.append(f"{outcome['description']}: {outcome['received']}/{outcome['sent']} replies")
        return {
            "host": self.plan.host,
            "rank": self.plan.rank,
            "address": self.plan.address,
            "drift": drift,
            "failures": failures,
            "notices": warnings,
            "pings": pings,
            "links": {
                interface["name"]: {
                    **state.node["fabric"]["interfaces"].get(interface["name"], {"present": False}),
                    **{k: v for k, v in state.links.get(interface["name"], {}).items() if k in ("up", "addresses")},
                }
                for interface in self.plan.interfaces
            },
            "nccl": nccl,
            "waited_s": waited,
            "problems": state.node["problems"],
        }

    def _cable(self, interface: dict[str, Any]) -> str:
        peer = interface.get("peer_host")
        if not peer:
            return "not cabled"
        if peer == "switch":
            return "to the switch"
        ranks = {check["destination_host"]: check["destination_rank"] for check in self.plan.checks}
        rank = f"rank {ranks[peer]} " if peer in ranks else ""
        return f"cabled to {rank}({peer}) {interface.get('peer_port') or ''}".rstrip()
