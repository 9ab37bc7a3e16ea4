# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's management subnets, from the nodes' facts, and the fabric addresses inside them.

Seed 000 runs NCCL on "a private /24 fabric that is separate from management traffic". The plan judges the /24
around each management address (the inventory gives no prefix); the boot's preflight judges the real subnets:
on each node, the interfaces that carry the address the boot connects to (else, for a management name, those the
IPv4 default route leaves by), fabric ports and loopback left out, with the prefix ``ip`` gives them
(node_facts' ``fabric.addresses``). A planned fabric address inside any of these subnets, of any node, is
``fabric-not-management``'s.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import management_ip


def _ip(text: Any) -> str:
    """An address without its prefix length."""
    return str(text).split("/", maxsplit=1)[0]


def _networks(addresses: Sequence[Any]) -> list[ipaddress.IPv4Network]:
    found = []
    for text in addresses:
        try:
            interface = ipaddress.ip_interface(str(text))
        except ValueError:
            continue
        if interface.version == 4 and not interface.is_loopback:
            found.append(interface.network)
    return found


def node_subnets(node: Mapping[str, Any], management: str, fabric_ports: Sequence[str]) -> dict[str, list[str]]:
    """Interface name to the management subnets it carries on this node ({} when node_facts gave no addresses)."""
    fabric = node.get("fabric") if isinstance(node.get("fabric"), Mapping) else {}
    addresses = fabric.get("addresses")
    if not isinstance(addresses, Mapping):
        return {}
    others = {
        str(name): list(found)
        for name, found in addresses.items()
        if name not in fabric_ports and name != "lo" and isinstance(found, list)
    }
    address = management_ip(management)
    chosen = [name for name, found in others.items() if address and address in (_ip(a) for a in found)]
    if not chosen:  # a management name, or an address on no interface here (NAT): the default route's interfaces
        routes = fabric.get("default_routes") if isinstance(fabric.get("default_routes"), list) else []
        chosen = [str(r.get("interface")) for r in routes if isinstance(r, Mapping) and r.get("interface") in others]
    subnets = {name: [str(n) for n in _networks(others[name])] for name in dict.fromkeys(chosen)}
    return {name: found for name, found in subnets.items() if found}


def planned_fabric(plan: Mapping[str, Any]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Host to its planned fabric ports' names, and host to its planned fabric addresses (without prefix), from
    the plan's fabric share of each host (its ``interfaces``, and its ``fabric`` plan's address and ports)."""
    ports: dict[str, list[str]] = {}
    addresses: dict[str, list[str]] = {}
    for rank in plan["ranks"]:
        host = rank["host"]
        share = (plan.get("fabric") or {}).get(host)
        share = share if isinstance(share, Mapping) else {}
        planned = share.get("fabric") if isinstance(share.get("fabric"), Mapping) else {}
        interfaces = [i for i in planned.get("interfaces") or [] if isinstance(i, Mapping)]
        ports[host] = list(
            dict.fromkeys([*map(str, share.get("interfaces") or []), *(str(i.get("name")) for i in interfaces)])
        )
        found = [planned.get("address"), *(i.get("address") for i in interfaces)]
        addresses[host] = list(dict.fromkeys(_ip(a) for a in found if a))
    return ports, addresses


def cluster_subnets(
    facts: Mapping[str, Any], management: Mapping[str, str], fabric_ports: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """Every management subnet of the cluster, once, with where it was found (``HOST's IFACE``), nodes in order."""
    seen: dict[str, str] = {}
    for host, ports in fabric_ports.items():
        node = facts.get(host)
        if not isinstance(node, Mapping):
            continue
        for name, subnets in node_subnets(node, management.get(host) or host, ports).items():
            for subnet in subnets:
                seen.setdefault(subnet, f"{host}'s {name}")
    return list(seen.items())


def inside(address: str, subnets: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The first management subnet (and where it was found) that holds ``address``, else None."""
    try:
        ip = ipaddress.ip_address(_ip(address))
    except ValueError:
        return None
    return next(((net, where) for net, where in subnets if ip in ipaddress.ip_network(net)), None)
