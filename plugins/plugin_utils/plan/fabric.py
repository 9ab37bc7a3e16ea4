# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric plan: which ports each host configures, with which address, MTU and routes.

Every host has ONE fabric address (``dgxspark_fabric_address``). On direct cables (triangle, ring)
that address sits as a /32 on every cabled port with the neighbour's address as ``Peer``, so each
cable is a point-to-point link; hosts that are not cabled to each other (a ring's non-neighbours)
are reached with a /32 route through a neighbour, which then forwards IP. On a switch every host
has one port with the address in the switch's prefix (/24 by default) and no routes.

Each host picks its next hop on a shortest path, the lowest-ranked neighbour on a tie, so on a
ring of 4 both directions of a pair take the same way (0 <-> 2 through 1, 1 <-> 3 through 0). On
an even ring of 6 or more the two directions between opposite hosts can differ: strict reverse
path filtering (``rp_filter=1``) on the fabric ports would drop those packets, so the role keeps it
loose (2) or off there.

The plan also lists the checks to run afterwards (every rank to every other, with the port and the
neighbour the packet must take, and a do-not-fragment payload that proves the MTU end to end) and
renders systemd-networkd ``.network`` files, deterministically, so idempotence is byte-for-byte.

Cabling (``dgxspark_fabric_cabling``, per host, overrides the convention): a map from the host's
port to the far end, ``peer-host`` or ``peer-host/peer-port``; on a switch, port to ``switch``.
The convention (the simulated cluster's and the shipped inventories'): rank i ``enp1s0f1np1`` to
rank (i+1) % n ``enp1s0f0np0`` for triangle and ring; every rank's ``enp1s0f1np1`` to the switch.

Hosts are ``_inventory.Host`` and are checked by ``_inventory.check_hosts``, as the serving plan's are.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, did_you_mean
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    ADDRESS_VAR,
    CABLING_VAR,
    Host,
    check_hosts,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import topology_of
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import IFNAME, IFNAME_HINT

PORT0 = "enp1s0f0np0"
PORT1 = "enp1s0f1np1"
SWITCH = "switch"
TOPOLOGIES = ("triangle", "ring", "switch")
DEFAULT_MTU = 9000
DEFAULT_PREFIX = 24
DEFAULT_LINK_SPEED_MBPS = 200000  # a ConnectX-7 QSFP port on a DGX Spark
MIN_MTU = 1280
MAX_MTU = 9216
# IPv4 header (20) + ICMP header (8): the largest ping payload that fits one frame unfragmented.
ICMP_OVERHEAD = 28
NETWORKD_PREFIX = "10-dgxspark-fabric"
IFNAMSIZ = 16  # Linux: an interface name and its terminating NUL


FabricHost = Host
"""The fabric plan's former name for :class:`Host` (same fields in the same order): kept for callers."""


@dataclass(frozen=True)
class Interface:
    name: str
    mtu: int
    address: str
    """``10.99.4.1/32`` on a cable, ``10.99.8.1/24`` on a switch."""
    peer: str | None = None
    """The neighbour's address on a cable (``10.99.4.2/32``); None on a switch."""
    peer_host: str | None = None
    peer_port: str | None = None


@dataclass(frozen=True)
class Route:
    destination: str
    """``10.99.4.3/32``"""
    gateway: str
    interface: str
    destination_host: str
    via_host: str


@dataclass(frozen=True)
class Check:
    """One rank must reach another: how, and with which payload."""

    source_host: str
    source_rank: int
    destination_host: str
    destination_rank: int
    destination_address: str
    interface: str
    """The source's port the packet leaves on."""
    via_host: str | None
    """The neighbour that forwards it; None when the destination is on that port directly."""
    via_address: str | None
    path: list[str]
    """Every host the packet passes, source and destination included."""
    payload: int
    """``ping -M do -s <payload>``: the MTU less the IPv4 and ICMP headers."""
    peer_interface: str | None = None
    """The far end of the first hop: the neighbour's port on a cable, the destination's on a switch."""

    def describe(self) -> str:
        how = f"via {self.via_host} ({self.via_address})" if self.via_host else "direct"
        far = f" -> {self.peer_interface}" if self.peer_interface else ""
        return (
            f"rank {self.source_rank} ({self.source_host}) -> rank {self.destination_rank} "
            f"({self.destination_host}, {self.destination_address}) on {self.interface}{far} {how}"
        )


@dataclass
class HostFabric:
    host: str
    rank: int
    address: str
    mtu: int
    interfaces: list[Interface]
    routes: list[Route]
    ip_forward: bool
    checks: list[Check] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ping_payload"] = ping_payload(self.mtu)
        for check, item in zip(self.checks, data["checks"], strict=True):
            item["description"] = check.describe()
        return data


@dataclass(frozen=True)
class _End:
    host: str
    port: str
    peer_host: str
    peer_port: str | None


def ping_payload(mtu: int) -> int:
    """The do-not-fragment ping payload that fills one frame of ``mtu`` bytes."""
    return mtu - ICMP_OVERHEAD


def default_cabling(topology: str, names_by_rank: Sequence[str]) -> dict[str, dict[str, str]]:
    """The convention: rank i ``enp1s0f1np1`` to rank (i+1) % n ``enp1s0f0np0`` on triangle and
    ring; every rank's ``enp1s0f1np1`` to the switch."""
    count = len(names_by_rank)
    if topology == SWITCH:
        return {name: {PORT1: SWITCH} for name in names_by_rank}
    return {
        name: {
            PORT0: f"{names_by_rank[(i - 1) % count]}/{PORT1}",
            PORT1: f"{names_by_rank[(i + 1) % count]}/{PORT0}",
        }
        for i, name in enumerate(names_by_rank)
    }


def fabric_plan(
    topology: str,
    hosts: Sequence[Host],
    mtu: Any = DEFAULT_MTU,
    prefix: Any = DEFAULT_PREFIX,
) -> dict[str, HostFabric]:
    """Every host's interfaces, routes, forwarding and checks; raises ``ProfileError`` with every
    problem found."""
    out = Collector("inventory")
    topology_ok = _check_settings(topology, len(hosts), mtu, prefix, out)
    ranked, ranks_ok = check_hosts(hosts, out)
    if not (topology_ok and ranks_ok):
        # The cabling cannot be read without a known topology and one host per rank.
        out.raise_if_errors()
    mtu = mtu if _mtu_ok(mtu) else DEFAULT_MTU
    prefix_ok = _prefix_ok(prefix)
    names = [h.name for h in ranked]
    rank_of = {h.name: int(h.rank) for h in ranked}
    address_of = {h.name: str(h.fabric_address) for h in ranked}
    defaults = default_cabling(topology, names)
    cabling = {h.name: h.cabling if h.cabling is not None else defaults[h.name] for h in ranked}
    ends = _parse_cabling(topology, cabling, rank_of, out)
    if topology == SWITCH:
        if prefix_ok:
            _check_prefix([h for h in ranked if h.fabric_address is not None], int(prefix), out)
        plan = _switch_plan(ranked, ends, int(mtu), int(prefix) if prefix_ok else DEFAULT_PREFIX, out)
    else:
        plan = _direct_plan(ranked, ends, int(mtu), address_of, out)
    out.raise_if_errors()
    return plan


# ----------------------------------------------------------------------------- validation


def _check_settings(topology: str, count: int, mtu: Any, prefix: Any, out: Collector) -> bool:
    """Check the topology against the node count, the MTU and the prefix; True when the topology is usable."""
    before = len(out.errors)
    if topology not in TOPOLOGIES:
        out.error(
            "topology",
            "unknown fabric topology",
            found=topology,
            expected=" | ".join(TOPOLOGIES),
            hint=did_you_mean(str(topology), TOPOLOGIES),
        )
    elif topology == "triangle" and count != 3:
        out.error("topology", "a triangle is exactly 3 nodes", found=count, expected="3")
    elif topology == "ring" and count < 3:
        out.error("topology", "a ring needs at least 3 nodes", found=count, expected=">= 3")
    elif topology == SWITCH and count < 2:
        out.error("topology", "a switch fabric needs at least 2 nodes", found=count, expected=">= 2")
    topology_ok = len(out.errors) == before
    if not _mtu_ok(mtu):
        out.error("mtu", "not a usable MTU", found=mtu, expected=f"an integer {MIN_MTU}..{MAX_MTU} (9000: jumbo)")
    if topology == SWITCH and not _prefix_ok(prefix):
        out.error("prefix", "not a usable prefix length for the switch", found=prefix, expected="an integer 8..30")
    return topology_ok


def _mtu_ok(mtu: Any) -> bool:
    return _is_int(mtu) and MIN_MTU <= mtu <= MAX_MTU


def _prefix_ok(prefix: Any) -> bool:
    return _is_int(prefix) and 8 <= prefix <= 30


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_prefix(hosts: Sequence[Host], prefix: int, out: Collector) -> None:
    """On a switch every address must be a host address of one prefix (the head's)."""
    if not hosts:
        return
    network = ipaddress.ip_network(f"{hosts[0].fabric_address}/{prefix}", strict=False)
    outside = [h for h in hosts if ipaddress.ip_address(str(h.fabric_address)) not in network]
    for host in outside:
        out.error(
            f"host {host.name}: {ADDRESS_VAR}",
            f"not in the switch's prefix {network} (rank {hosts[0].rank}, {hosts[0].name})",
            found=host.fabric_address,
            expected=f"an address in {network}",
        )
    for host in hosts:
        address = ipaddress.ip_address(str(host.fabric_address))
        if host not in outside and address in (network.network_address, network.broadcast_address):
            out.error(
                f"host {host.name}: {ADDRESS_VAR}",
                f"the network or broadcast address of {network}",
                found=host.fabric_address,
                expected="a host address",
            )


def _parse_cabling(topology: str, cabling: Mapping[str, Any], rank_of: Mapping[str, int], out: Collector) -> list[_End]:
    ends: list[_End] = []
    for host in sorted(cabling, key=lambda name: rank_of[name]):
        where = f"host {host}: {CABLING_VAR}"
        ports = cabling[host]
        if not isinstance(ports, Mapping) or not ports:
            out.error(where, "not a map of port to peer", found=ports, expected=f"e.g. {{{PORT1}: peer-host/{PORT0}}}")
            continue
        for port, peer in sorted(ports.items(), key=lambda item: str(item[0])):
            why = interface_name_problem(port)
            if why:
                out.error(where, f"not a port name: {why}", found=port, expected=IFNAME_HINT)
                continue
            if not isinstance(peer, str) or not peer.strip():
                out.error(f"{where}.{port}", "not a peer", found=peer, expected="peer-host or peer-host/peer-port")
                continue
            peer_host, _sep, peer_port = peer.strip().partition("/")
            why = interface_name_problem(peer_port) if peer_port else None
            if why:
                out.error(f"{where}.{port}", f"not a peer port name: {why}", found=peer, expected=IFNAME_HINT)
                continue
            if topology == SWITCH:
                if peer_host in rank_of:
                    out.error(
                        f"{where}.{port}",
                        "a direct cable in a switch fabric",
                        found=peer,
                        expected=f"{SWITCH} (every port is cabled to the switch)",
                    )
                    continue
            elif peer_host not in rank_of:
                out.error(
                    f"{where}.{port}",
                    "cabled to a host that is not in the fabric",
                    found=peer,
                    expected="one of " + ", ".join(sorted(rank_of)),
                    hint=did_you_mean(peer_host, rank_of),
                )
                continue
            elif peer_host == host:
                out.error(f"{where}.{port}", "cabled to the host itself", found=peer, expected="another host")
                continue
            ends.append(_End(host, port, peer_host, peer_port or None))
    return ends


# ----------------------------------------------------------------------------- direct cables


def _direct_plan(
    hosts: Sequence[Host],
    ends: Sequence[_End],
    mtu: int,
    address_of: Mapping[str, str],
    out: Collector,
) -> dict[str, HostFabric]:
    rank_of = {h.name: int(h.rank) for h in hosts}
    cables = _pair(ends, rank_of, out)
    # host -> [(neighbour, own port, neighbour's port)], by neighbour's rank
    links: dict[str, list[tuple[str, str, str]]] = {h.name: [] for h in hosts}
    for a, b in cables:
        links[a.host].append((b.host, a.port, b.port))
        links[b.host].append((a.host, b.port, a.port))
    for host, items in links.items():
        items.sort(key=lambda item: (rank_of[item[0]], item[1]))
        seen: dict[str, list[str]] = {}
        for neighbour, port, _peer_port in items:
            seen.setdefault(neighbour, []).append(port)
        for neighbour, ports in seen.items():
            if len(ports) > 1 and rank_of[host] < rank_of[neighbour]:
                out.error(
                    f"host {host}: {CABLING_VAR}",
                    f"several cables to {neighbour}: one address per host cannot tell them apart",
                    found=ports,
                    expected="one cable per pair of hosts",
                )
    _check_connected(hosts, {h: [n for n, *_rest in items] for h, items in links.items()}, out)
    if out.errors:
        return {}
    distance = {h.name: _distances(h.name, links) for h in hosts}

    def next_hop(source: str, destination: str) -> tuple[str, str]:
        """The neighbour on a shortest path (lowest rank on a tie) and the port to it."""
        want = distance[destination][source] - 1
        for neighbour, port, _peer_port in links[source]:
            if distance[destination][neighbour] == want:
                return neighbour, port
        raise AssertionError("connected graph without a next hop")

    forwarders: set[str] = set()
    paths: dict[tuple[str, str], list[str]] = {}
    for source in rank_of:
        for destination in rank_of:
            if source == destination:
                continue
            path = [source]
            while path[-1] != destination:
                path.append(next_hop(path[-1], destination)[0])
            paths[source, destination] = path
            forwarders.update(path[1:-1])
    plan: dict[str, HostFabric] = {}
    for host in hosts:
        name = host.name
        own = address_of[name]
        interfaces = [
            Interface(port, mtu, f"{own}/32", f"{address_of[neighbour]}/32", neighbour, peer_port)
            for neighbour, port, peer_port in sorted(links[name], key=lambda item: item[1])
        ]
        direct = {n for n, *_rest in links[name]}
        routes: list[Route] = []
        checks: list[Check] = []
        for other in sorted(rank_of, key=lambda n: rank_of[n]):
            if other == name:
                continue
            via, port = next_hop(name, other)
            far_port = next((p for n, own_port, p in links[name] if n == via and own_port == port), None)
            if other not in direct:
                routes.append(Route(f"{address_of[other]}/32", address_of[via], port, other, via))
            checks.append(
                Check(
                    name,
                    rank_of[name],
                    other,
                    rank_of[other],
                    address_of[other],
                    port,
                    None if via == other else via,
                    None if via == other else address_of[via],
                    paths[name, other],
                    ping_payload(mtu),
                    far_port,
                )
            )
        plan[name] = HostFabric(name, rank_of[name], own, mtu, interfaces, routes, name in forwarders, checks)
    return plan


def _pair(ends: Sequence[_End], rank_of: Mapping[str, int], out: Collector) -> list[tuple[_End, _End]]:
    """Match every port's end with the far end's port that points back."""
    partner: dict[tuple[str, str], _End] = {}
    claims: dict[tuple[str, str], list[_End]] = {}
    by_host: dict[str, list[_End]] = {}
    for end in ends:
        by_host.setdefault(end.host, []).append(end)
    for end in ends:
        where = f"host {end.host}: {CABLING_VAR}.{end.port}"
        candidates = [
            back
            for back in by_host.get(end.peer_host, [])
            if back.peer_host == end.host
            and (end.peer_port is None or back.port == end.peer_port)
            and (back.peer_port is None or back.peer_port == end.port)
        ]
        if not candidates:
            far = f"{end.peer_host}/{end.peer_port}" if end.peer_port else end.peer_host
            back_map = {
                e.port: f"{e.peer_host}/{e.peer_port}" if e.peer_port else e.peer_host
                for e in by_host.get(end.peer_host, [])
            }
            out.error(
                where,
                f"cabled to {far}, but {end.peer_host} has no port cabled back to {end.host}/{end.port}",
                found=back_map,
                expected=f"{end.peer_host}: {{{end.peer_port or '<port>'}: {end.host}/{end.port}}}",
                hint="a cable has two ends: describe it on both hosts",
            )
            continue
        if len(candidates) == 1:
            partner[end.host, end.port] = candidates[0]
            claims.setdefault((candidates[0].host, candidates[0].port), []).append(end)
    for (host, port), claimants in sorted(claims.items(), key=lambda item: (rank_of[item[0][0]], item[0][1])):
        if len(claimants) > 1:
            out.error(
                f"host {host}: {CABLING_VAR}.{port}",
                "port cabled twice",
                found=sorted(f"{e.host}/{e.port}" for e in claimants),
                expected="one cable per port",
                hint="name the far port (peer-host/peer-port) or fix the cabling map",
            )
    cables: list[tuple[_End, _End]] = []
    for end in ends:
        other = partner.get((end.host, end.port))
        if other is None or len(claims.get((other.host, other.port), [])) != 1:
            continue
        back = partner.get((other.host, other.port))
        if back == end and (rank_of[end.host], end.port) < (rank_of[other.host], other.port):
            cables.append((end, other))
    return cables


def _distances(source: str, links: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, int]:
    distance = {source: 0}
    queue = deque([source])
    while queue:
        here = queue.popleft()
        for neighbour, _port, _peer_port in links[here]:
            if neighbour not in distance:
                distance[neighbour] = distance[here] + 1
                queue.append(neighbour)
    return distance


def _check_connected(hosts: Sequence[Host], neighbours: Mapping[str, Sequence[str]], out: Collector) -> None:
    if not hosts:
        return
    start = hosts[0].name
    reached = {start}
    queue = deque([start])
    while queue:
        for neighbour in neighbours.get(queue.popleft(), []):
            if neighbour not in reached:
                reached.add(neighbour)
                queue.append(neighbour)
    unreachable = [h.name for h in hosts if h.name not in reached]
    if unreachable:
        out.error(
            CABLING_VAR,
            f"the fabric is not connected: these hosts cannot be reached from {start} (rank {hosts[0].rank})",
            found=unreachable,
            expected="every host reachable over the cables",
            hint="check the cabling maps (and the cables)",
        )


# ----------------------------------------------------------------------------- switch


def _switch_plan(
    hosts: Sequence[Host], ends: Sequence[_End], mtu: int, prefix: int, out: Collector
) -> dict[str, HostFabric]:
    ports: dict[str, list[_End]] = {h.name: [] for h in hosts}
    for end in ends:
        ports[end.host].append(end)
    for host, items in ports.items():
        if len(items) > 1:
            out.error(
                f"host {host}: {CABLING_VAR}",
                "more than one port on the switch: one address per host can sit on one port only",
                found=sorted(e.port for e in items),
                expected="one port",
            )
    switches: dict[str, list[str]] = {}
    for host in hosts:
        for end in ports[host.name][:1]:
            switches.setdefault(end.peer_host, []).append(host.name)
    first = ports[hosts[0].name][:1] if hosts else []
    main = first[0].peer_host if first else None
    on_main = switches.get(main, []) if main is not None else []
    neighbours = {name: [n for n in on_main if n != name] if name in on_main else [] for name in ports}
    _check_connected(hosts, neighbours, out)
    if out.errors:
        return {}
    plan: dict[str, HostFabric] = {}
    port_of = {h.name: ports[h.name][0].port for h in hosts}
    for host in hosts:
        end = ports[host.name][0]
        interface = Interface(end.port, mtu, f"{host.fabric_address}/{prefix}", None, end.peer_host, end.peer_port)
        checks = [
            Check(
                host.name,
                int(host.rank),
                other.name,
                int(other.rank),
                str(other.fabric_address),
                end.port,
                None,
                None,
                [host.name, other.name],
                ping_payload(mtu),
                port_of[other.name],
            )
            for other in hosts
            if other.name != host.name
        ]
        plan[host.name] = HostFabric(
            host.name, int(host.rank), str(host.fabric_address), mtu, [interface], [], False, checks
        )
    return plan


# ----------------------------------------------------------------------------- systemd-networkd


def networkd_file_name(interface: str) -> str:
    return f"{NETWORKD_PREFIX}-{interface}.network"


_NETWORKD_FILE = re.compile(rf"^{re.escape(NETWORKD_PREFIX)}-(.*)\.network$")


def stale_networkd_files(found: Mapping[str, Any] | None, planned: Iterable[str], directory: str) -> list[str]:
    """The fabric's networkd files on a node that its plan no longer has (a port taken out of the fabric), to
    remove: ``found`` is what ``ansible.builtin.find`` found of ``10-dgxspark-fabric-*.network`` in ``directory``
    (skipped or none: nothing), ``planned`` the plan's file names (its ``networkd`` keys). In the order found."""
    keep = {str(name) for name in planned}
    names = [posixpath.basename(str(item["path"])) for item in (found or {}).get("files") or []]
    return [f"{directory}/{name}" for name in names if name not in keep]


def removed_ports(removed: Mapping[str, Any] | None) -> list[str]:
    """The ports whose fabric networkd file was removed this run (the removal's loop results, ``fabric_stale`` each,
    those that changed): ``networkctl reconfigure`` gives them up with the fabric's own ports. A file not named as
    the role names them stays as it is."""
    ports = []
    for item in (removed or {}).get("results") or []:
        if isinstance(item, Mapping) and item.get("changed"):
            ports.append(_NETWORKD_FILE.sub(r"\1", posixpath.basename(str(item["fabric_stale"]))))
    return ports


def port_states(interfaces: Mapping[str, Mapping[str, Any]]) -> str:
    """``<port> <operstate>`` of each of a node's fabric ports (node_facts' ``fabric.interfaces``), in its order."""
    return ", ".join(f"{name} {port.get('operstate')}" for name, port in interfaces.items())


def render_networkd(plan: HostFabric) -> dict[str, str]:
    """One ``.network`` file per interface: file name -> contents (same plan, same bytes)."""
    _check_names(plan)
    files: dict[str, str] = {}
    for interface in plan.interfaces:
        lines = [
            f"# Managed by dgxspark.cluster (fabric): {plan.host} rank {plan.rank}.",
            "[Match]",
            f"Name={interface.name}",
            "",
            "[Link]",
            f"MTUBytes={interface.mtu}",
            "RequiredForOnline=no",
            "",
            "[Network]",
            "ConfigureWithoutCarrier=yes",
            "LinkLocalAddressing=no",
        ]
        if plan.ip_forward:
            lines.append("IPForward=yes")
        lines += ["", "[Address]", f"Address={interface.address}"]
        if interface.peer:
            lines.append(f"Peer={interface.peer}")
        for route in plan.routes:
            if route.interface == interface.name:
                lines += [
                    "",
                    "[Route]",
                    f"Destination={route.destination}",
                    f"Gateway={route.gateway}",
                    "GatewayOnLink=yes",
                ]
        files[networkd_file_name(interface.name)] = "\n".join(lines) + "\n"
    return files


# ----------------------------------------------------------------------------- netplan and sysctl

NETPLAN_FILE = "60-dgxspark-fabric.yaml"
SYSCTL_FILE = "60-dgxspark-fabric.conf"
RP_FILTER_LOOSE = "2"


def render_netplan(plan: HostFabric) -> str:
    """The same configuration as :func:`render_networkd`'s files, as one netplan file
    (renderer networkd, so NetworkManager leaves these ports alone). Neither form holds up the
    boot waiting for a fabric port (``RequiredForOnline=no``, ``optional: true``). netplan has no ``Peer=``: the
    neighbour is an on-link /32 route instead, which is what the kernel makes of a peer address.

    Written by a YAML dumper, never by pasting strings: a name that YAML would read otherwise (``*``, a quote,
    ``{``) cannot break the file, and with it every interface netplan generates at the next boot. Every port
    name is also checked against the allow-list first (``ValueError``)."""
    _check_names(plan)
    ethernets: dict[str, Any] = {}
    for interface in plan.interfaces:
        port: dict[str, Any] = {
            "mtu": interface.mtu,
            "ignore-carrier": True,
            "optional": True,
            "link-local": [],
            "addresses": [str(interface.address)],
        }
        routes: list[dict[str, Any]] = [{"to": str(interface.peer), "scope": "link"}] if interface.peer else []
        routes += [
            {"to": str(route.destination), "via": str(route.gateway), "on-link": True}
            for route in plan.routes
            if route.interface == interface.name
        ]
        if routes:
            port["routes"] = routes
        ethernets[interface.name] = port
    document = {"network": {"version": 2, "renderer": "networkd", "ethernets": ethernets}}
    header = f"# Managed by dgxspark.cluster (fabric): {_comment(plan.host)} rank {plan.rank}.\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1000)


def _comment(text: str) -> str:
    """Text for a one-line comment: no line break can end it early."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def interface_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a fabric port's name (it is written into netplan YAML, networkd file names and
    sysctl keys), or None."""
    if not isinstance(name, str) or not name:
        return "not a name"
    if re.fullmatch(IFNAME, name):
        return None
    if len(name) > IFNAMSIZ - 1:
        return f"{len(name)} characters, Linux allows {IFNAMSIZ - 1} (IFNAMSIZ)"
    if name[0] in "-*'\"{[&!|>%@`#?:,":
        return f"starts with {name[0]!r}"
    bad = sorted({c for c in name if not (c.isalnum() or c in "_-") or not c.isascii()})
    return "holds " + ", ".join(repr(c) for c in bad)


def _check_names(plan: HostFabric) -> None:
    bad = [(i.name, interface_name_problem(i.name)) for i in plan.interfaces if interface_name_problem(i.name)]
    if bad:
        raise ValueError(
            "fabric port names that cannot be written into the node's network configuration: "
            + "; ".join(f"{name!r}: {why}" for name, why in bad)
            + f" (expected {IFNAME_HINT})"
        )


def sysctls(plan: HostFabric) -> dict[str, str]:
    """Kernel settings the plan needs: loose reverse-path filtering on every fabric port (a ring's two
    directions may take different ways), and IPv4 forwarding where the host forwards for others
    (networkd's ``IPForward=`` is deprecated from systemd 256, so the sysctl is set as well)."""
    _check_names(plan)
    values = {f"net.ipv4.conf.{interface.name}.rp_filter": RP_FILTER_LOOSE for interface in plan.interfaces}
    if plan.ip_forward:
        values["net.ipv4.ip_forward"] = "1"
    return values


def render_sysctl(plan: HostFabric) -> str:
    """:func:`sysctls` as a sysctl.d file."""
    lines = [f"# Managed by dgxspark.cluster (fabric): {plan.host} rank {plan.rank}."]
    lines += [f"{name} = {value}" for name, value in sorted(sysctls(plan).items())]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- a host's share


def shape_settings(shape: Mapping[str, Any]) -> dict[str, Any]:
    """What the fabric role reads from a profile's shape: cabling, MTU, expected speed, NCCL's net."""
    fabric = shape["fabric"]
    return {
        "transport": fabric["transport"],
        "topology": topology_of(fabric),
        "mtu": fabric.get("mtu", DEFAULT_MTU),
        "link_speed_mbps": fabric.get("link_speed_mbps", DEFAULT_LINK_SPEED_MBPS),
        "nccl_net": fabric.get("nccl_net", "IB"),
        "nodes": shape["nodes"],
    }


def plan_shares(
    shape: Mapping[str, Any],
    shape_name: str,
    hosts: Sequence[Host],
    prefix: Any = DEFAULT_PREFIX,
    **settings_given: Any,
) -> dict[str, dict[str, Any]]:
    """Every host's share of the fabric plan for a profile's shape, each with the settings it was planned
    with (what ``fabric_plan`` returns for one host): the one plan's fabric part. ``settings_given``
    (topology, mtu, link_speed_mbps) override the shape's where not None. Raises ``ProfileError``."""
    settings = shape_settings(shape)
    settings.update({key: value for key, value in settings_given.items() if value is not None})
    settings.update(shape=shape_name, hosts=len(hosts), prefix=prefix)
    plan = fabric_plan(settings["topology"], hosts, settings["mtu"], prefix)
    return {host.name: {**host_share(plan, host.name), "settings": settings} for host in hosts}


def host_share(plan: Mapping[str, HostFabric], host: str) -> dict[str, Any]:
    """One host's part of the plan with every file the role writes for it, as plain data."""
    own = plan[host]
    return {
        "fabric": own.as_dict(),
        "networkd": render_networkd(own),
        "netplan": render_netplan(own),
        "sysctl": render_sysctl(own),
        "sysctls": sysctls(own),
        "interfaces": [interface.name for interface in own.interfaces],
    }


# ----------------------------------------------------------------------------- the report


def verify_report(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per host that passed, one per failure or warning: fabric_verify results by host."""
    lines: list[str] = []
    for host, result in sorted(results.items(), key=lambda item: (item[1].get("rank", 1 << 30), item[0])):
        if not isinstance(result, Mapping) or "failures" not in result:
            lines.append(f"SKIP  {host}: not verified ({(result or {}).get('msg', 'no result')})")
            continue
        who = f"rank {result.get('rank', '?')} {host}"
        for failure in result["failures"]:
            lines.append(f"FAIL  {who}: {failure}")
        for warning in result.get("notices", []):
            lines.append(f"WARN  {who}: {warning}")
        if not result["failures"]:
            links = result.get("links", {})
            speeds = sorted({str(link.get("speed_mbps")) for link in links.values()})
            mtus = sorted({str(link.get("mtu")) for link in links.values()})
            pings = result.get("pings", [])
            answered = [p for p in pings if p.get("ok")]
            rtts = [p["rtt_avg_ms"] for p in answered if p.get("rtt_avg_ms") is not None]
            payload = f"{pings[0].get('payload')}-byte " if pings and pings[0].get("payload") else ""
            line = (
                f"PASS  {who}: {result.get('address', '?')} on {', '.join(links) or 'no port'}: carrier, "
                f"{'/'.join(speeds)} Mb/s, MTU {'/'.join(mtus)}"
            )
            if pings:
                line += f"; {len(answered)}/{len(pings)} peers answer {payload}do-not-fragment pings"
                if rtts:
                    line += f" (avg {sum(rtts) / len(rtts):.3f} ms)"
            lines.append(line)
    return lines
