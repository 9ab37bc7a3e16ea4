# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory's hosts for a cluster: their names, one host model, and one check of it.

The serving plan and the fabric plan read the same hosts (``Host``) and check them the same way
(:func:`check_hosts`): one rank per host, 0..N-1, and one fabric address per host that peers can reach
over the fabric (IPv4: the fabric's routes, networkd files and do-not-fragment pings are IPv4). So an
address the fabric cannot use fails the serving plan with the problem the fabric plan gives.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import (
    DEFAULT_GROUPS,
    HEAD_GROUP,
    WORKERS_GROUP,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.overrides import OVERRIDES_VAR, origin_of

# The inventory groups of a cluster's head and workers: the one default of the variable that names them
# (GROUPS_VAR), which every role, playbook and plugin of the collection reads (cluster_groups below); written in
# module_utils/_specs.py, where the modules' specs can read it too.
GROUPS_VAR = "dgxspark_cluster_groups"
# What named them before GROUPS_VAR, one variable a group (deprecated; still read where an inventory sets them).
LEGACY_GROUP_VARS = {"head": "boot_head_group", "workers": "boot_workers_group"}
RANK_VAR = "dgxspark_rank"
ADDRESS_VAR = "dgxspark_fabric_address"
CABLING_VAR = "dgxspark_fabric_cabling"
# What the fabric role found on a host's ports (RDMA devices, interfaces, RoCE GID index), for NCCL.
FABRIC_NCCL_VAR = "fabric_nccl"
# The address Ansible manages the host on (SSH): the fabric must be another network (seed 000).
MANAGEMENT_VAR = "ansible_host"
# Why this cluster's image is named by tag, not by digest or ID (the simulated clusters: built on this machine, no
# registry); without it a tag-only image is a warning of the plan (_images.pin_warning).
IMAGE_BY_TAG_VAR = "dgxspark_image_by_tag"


@dataclass(frozen=True)
class Host:
    """A cluster host as the inventory describes it. Values are as found until :func:`check_hosts` has read
    them; the hosts it returns have ``rank`` as an int and ``fabric_address`` as a normalised IPv4 address
    (None where the value was unusable, which is then a problem)."""

    name: str
    rank: Any = None
    """``dgxspark_rank``."""
    fabric_address: Any = None
    """``dgxspark_fabric_address``."""
    cabling: Any = None
    """``dgxspark_fabric_cabling``: port -> ``peer-host``, ``peer-host/peer-port`` or ``switch``; None: the
    convention."""
    head: bool = False
    """In the head group."""
    overrides: Any = None
    """``dgxspark_overrides``: the host's own profile settings."""
    discovered: Any = None
    """What the fabric role found on the host's ports (``fabric_nccl``): hca, socket_ifname, gid_index."""
    management_address: Any = None
    """``ansible_host``: where Ansible reaches the host (an address or a name)."""
    overrides_from: str | None = None
    """The inventory file that sets ``dgxspark_overrides`` (``_overrides.origin_of``), when the files show it."""
    image_by_tag: Any = None
    """``dgxspark_image_by_tag``: why the inventory names its image by tag (None: the plan warns of a tag)."""


def cluster_groups(given: Any = None, legacy: Mapping[str, Any] | None = None) -> tuple[dict[str, str], list[str]]:
    """The cluster's groups, ``{"head": ..., "workers": ...}``, and the deprecated variables that gave any of them.

    ``given`` is the value of ``dgxspark_cluster_groups`` (None when unset); ``legacy`` the values of
    ``boot_head_group`` and ``boot_workers_group`` that are set, by variable name. A key that ``given`` leaves out
    comes from its legacy variable, else from the default (``dgxspark_head``, ``dgxspark_workers``). ValueError,
    naming the variable, for a value that is not a group name, an unknown key, or a legacy variable that names
    another group than ``dgxspark_cluster_groups`` does (which one was meant cannot be told)."""
    legacy = legacy or {}
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ValueError(f"{GROUPS_VAR} must be a dict with the keys head and workers, not {given!r}")
    unknown = sorted(set(given) - set(DEFAULT_GROUPS))
    if unknown:
        raise ValueError(f"{GROUPS_VAR} has unknown keys {unknown}: its keys are head and workers")
    groups: dict[str, str] = {}
    used: list[str] = []
    for key, default in DEFAULT_GROUPS.items():
        old_name = LEGACY_GROUP_VARS[key]
        old = legacy.get(old_name)
        for where, value in ((f"{GROUPS_VAR}.{key}", given.get(key)), (old_name, old)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{where} must be an inventory group's name, not {value!r}")
        if given.get(key) is not None:
            if old is not None and old.strip() != given[key].strip():
                raise ValueError(
                    f"{GROUPS_VAR}.{key} is {given[key]!r} but {old_name}, its deprecated name, is {old!r}: "
                    f"set {GROUPS_VAR} alone"
                )
            groups[key] = given[key].strip()
        elif old is not None:
            groups[key] = old.strip()
            used.append(old_name)
        else:
            groups[key] = default
    return groups, used


def hosts_from_inventory(
    hostvars: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    head_group: str = HEAD_GROUP,
    workers_group: str = WORKERS_GROUP,
) -> tuple[list[Host], list[str]]:
    """The head and worker hosts of an inventory (head first) with every variable the plans read, and any
    host that is (wrongly) in both groups."""
    heads = list(groups.get(head_group, []))
    workers = list(groups.get(workers_group, []))
    hosts = []
    for name in list(dict.fromkeys(heads + workers)):
        variables = hostvars.get(name, {})
        overrides = variables.get(OVERRIDES_VAR)
        hosts.append(
            Host(
                name,
                rank=variables.get(RANK_VAR),
                fabric_address=variables.get(ADDRESS_VAR),
                cabling=variables.get(CABLING_VAR),
                head=name in heads,
                overrides=overrides,
                discovered=variables.get(FABRIC_NCCL_VAR),
                management_address=variables.get(MANAGEMENT_VAR),
                overrides_from=origin_of(name, variables) if overrides else None,
                image_by_tag=variables.get(IMAGE_BY_TAG_VAR),
            )
        )
    return hosts, [h for h in heads if h in workers]


def other_clusters_hosts(
    play_hosts: Sequence[str], hosts: Sequence[Host], hostvars: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """The hosts of a run that belong to another cluster: they carry a rank (``dgxspark_rank``) but are not among
    this cluster's head and workers. An inventory may hold a fleet, several clusters side by side (each with its
    own head and workers groups); a run then acts on one, limited to its group, and one that spans two would plan
    one cluster and start, stop or guard the other's nodes with it."""
    ours = {host.name for host in hosts}
    return sorted(name for name in play_hosts if name not in ours and RANK_VAR in hostvars.get(name, {}))


def as_rank(value: Any) -> int | None:
    """A rank from the inventory: an integer >= 0, or its digits as text (INI inventories); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


def fabric_address(value: Any) -> tuple[str | None, str, str]:
    """A fabric address from the inventory: (the normalised IPv4 address, "", ""), or (None, what is wrong,
    what to do)."""
    text = "" if value is None or isinstance(value, bool) else str(value).strip()
    if value is None or (isinstance(value, str) and not text):
        return None, "no fabric address", "set it in the inventory (the sim: 10.99.<N>.<rank+1>)"
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None, "not an IPv4 address", ""
    if not isinstance(address, ipaddress.IPv4Address):
        return (
            None,
            "not an IPv4 address",
            "the fabric is IPv4: its addresses, routes, networkd and netplan files, do-not-fragment pings "
            "and NCCL's RoCE v2 GIDs are planned for IPv4",
        )
    kinds = (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_multicast, "a multicast address"),
        (address.is_reserved or address in _THIS_NETWORK, "a reserved address"),
    )
    for unusable, kind in kinds:
        if unusable:
            return None, f"{kind}, which peers cannot reach", "use the address of the host's fabric ports"
    return str(address), "", ""


def check_hosts(
    hosts: Sequence[Host],
    out: Collector,
    *,
    nodes: int | None = None,
    shape: str = "",
    groups: tuple[str, str] | None = None,
    both_groups: Sequence[str] = (),
) -> tuple[list[Host], bool]:
    """Check the hosts every plan needs: ranks 0..N-1 once each and one usable, distinct fabric address
    per host; with ``nodes``, the shape's node count; with ``groups`` (head, workers), one head, at rank 0.

    Returns the hosts by rank, read (``rank`` an int, ``fabric_address`` normalised, None where unusable),
    and whether the ranks are usable (one host per rank, 0..N-1).
    """
    names = ", ".join(h.name for h in hosts) or "none"
    if groups is not None:
        head_group, workers_group = groups
        for host in both_groups:
            out.error(f"host {host}", f"in both {head_group} and {workers_group}", expected="one of the two groups")
    if nodes is not None and len(hosts) != nodes:
        where = f"groups {groups[0]} + {groups[1]}" if groups else "hosts"
        out.error(
            where,
            f"shape {shape} runs on {nodes} nodes but the inventory has {len(hosts)} ({names})",
            found=len(hosts),
            expected=str(nodes),
            hint="choose the shape that matches the cluster, or fix the inventory",
        )
    if groups is not None:
        heads = [h.name for h in hosts if h.head]
        if len(heads) != 1:
            out.error(f"group {groups[0]}", "exactly one head (rank 0) is needed", found=heads, expected="one host")
    read: list[Host] = []
    by_rank: dict[int, list[str]] = {}
    by_address: dict[str, list[str]] = {}
    for host in hosts:
        rank = _check_rank(host, out, nodes or len(hosts), groups)
        if rank is not None:
            by_rank.setdefault(rank, []).append(host.name)
        address, problem, hint = fabric_address(host.fabric_address)
        if address is None:
            found = None if problem == "no fabric address" else host.fabric_address
            out.error(f"host {host.name}: {ADDRESS_VAR}", problem, found, "one IPv4 address per host", hint)
        else:
            by_address.setdefault(address, []).append(host.name)
        values = {f.name: getattr(host, f.name) for f in fields(Host)}
        read.append(Host(**{**values, "rank": rank, "fabric_address": address}))
    for rank, owners in sorted(by_rank.items()):
        if len(owners) > 1:
            out.error(
                f"{RANK_VAR} {rank}", "the same rank on several hosts", found=owners, expected="one host per rank"
            )
    expected = set(range(len(hosts)))
    all_ranked = sum(map(len, by_rank.values())) == len(hosts)
    if by_rank and set(by_rank) != expected and all_ranked and (nodes is None or len(hosts) == nodes):
        out.error(
            RANK_VAR,
            "ranks must be 0..N-1 with none missing",
            found=sorted(by_rank),
            expected=f"{sorted(expected)} (missing {sorted(expected - set(by_rank))}, "
            f"out of range {sorted(set(by_rank) - expected)})",
        )
    _check_fabric_apart(hosts, by_address, out)
    for address, owners in sorted(by_address.items()):
        if len(owners) > 1:
            out.error(
                f"{ADDRESS_VAR} {address}",
                "the same fabric address on several hosts",
                found=owners,
                expected="one address per host",
            )
    ranks_ok = all(len(owners) == 1 for owners in by_rank.values()) and set(by_rank) == expected
    return sorted(read, key=lambda h: h.rank if h.rank is not None else 1 << 30), ranks_ok


def _check_rank(host: Host, out: Collector, count: int, groups: tuple[str, str] | None) -> int | None:
    where = f"host {host.name}: {RANK_VAR}"
    rank = as_rank(host.rank)
    if host.rank is None:
        out.error(where, "no rank given", expected="an integer (0 for the head)")
    elif rank is None:
        out.error(where, "not a rank", found=host.rank, expected="an integer >= 0")
    elif groups is not None and host.head and rank != 0:
        out.error(where, "the head must be rank 0", found=rank, expected="0")
    elif groups is not None and not host.head and rank == 0:
        out.error(
            where,
            "rank 0 is the head's; this host is a worker",
            found=rank,
            expected=f"1..{count - 1}, or move the host to {groups[0]}",
        )
    return rank


def connects_to(host: Host) -> str:
    """Where Ansible connects to the host, as the boot does: its ``ansible_host``, else its inventory name."""
    value = host.management_address
    return host.name if value is None or str(value).strip() == "" else str(value).strip()


def management_ip(value: Any) -> str | None:
    """The management address as a normalised IP address; None for a host name (not resolved here: the
    controller's resolver and SSH's own configuration may disagree)."""
    try:
        return str(ipaddress.ip_address(str(value).strip())) if value is not None else None
    except ValueError:
        return None


# The inventory gives a management address without its prefix: the plan takes the /24 around it, seed 000's
# fabric being 'a private /24' of its own. The boot's preflight judges the nodes' real prefixes (node facts).
MANAGEMENT_PREFIX = 24


def management_subnet(address: str) -> ipaddress.IPv4Network | None:
    """The /24 the plan takes as the management subnet of an IPv4 management address (None for IPv6)."""
    ip = ipaddress.ip_address(address)
    return ipaddress.ip_network(f"{ip}/{MANAGEMENT_PREFIX}", strict=False) if ip.version == 4 else None


def _check_fabric_apart(hosts: Sequence[Host], by_address: Mapping[str, list[str]], out: Collector) -> None:
    """Fabric addresses are not management addresses, nor inside any management subnet of the cluster (seed 000:
    'a private /24 fabric that is separate from management traffic'): NCCL and the head's rendezvous would
    otherwise share the SSH network. A host without ``ansible_host`` is managed on its inventory name, compared
    when that is an address. The management subnet is the /24 around a management address (``MANAGEMENT_PREFIX``:
    the inventory gives no prefix); one problem per fabric address, naming the first subnet it is inside."""
    managed = {ip: h for h in hosts if (ip := management_ip(connects_to(h))) is not None}
    subnets: dict[ipaddress.IPv4Network, Host] = {}
    for ip, manager in managed.items():
        subnet = management_subnet(ip)
        if subnet is not None:
            subnets.setdefault(subnet, manager)
    for address, owners in sorted(by_address.items()):
        inside = next((n for n in subnets if ipaddress.ip_address(address) in n), None)
        if address not in managed and inside is not None:
            manager = subnets[inside]
            out.error(
                f"host {owners[0]}: {ADDRESS_VAR}",
                f"the fabric address is inside the management subnet {inside} (the /{MANAGEMENT_PREFIX} around "
                f"{MANAGEMENT_VAR} {connects_to(manager)} of host {manager.name}); seed 000 runs NCCL on 'a private "
                "/24 fabric that is separate from management traffic'",
                found=address,
                expected=f"a fabric address outside every management subnet ({', '.join(map(str, subnets))})",
                check="fabric-not-management",
            )
        if address in managed:
            manager = managed[address]
            given = str(manager.management_address or "").strip()
            how = MANAGEMENT_VAR if given else f"its inventory name, without {MANAGEMENT_VAR}"
            out.error(
                f"host {owners[0]}: {ADDRESS_VAR}",
                f"the fabric address is also the management address ({how}) of host {manager.name}; "
                "seed 000 runs NCCL on 'a private /24 fabric that is separate from management traffic'",
                found=address,
                expected="an address on the fabric ports, on another network than the management one",
                check="fabric-not-management",
            )


def answers_by_host(hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str], name: str) -> dict[str, Any]:
    """Each host's ``name`` (a task's registered answer), by host in the order of ``hosts``. A host without it is left
    out: the task did not run there (a task file included for some of the play's hosts only)."""
    return {host: hostvars[host][name] for host in hosts if host in hostvars and name in hostvars[host]}
