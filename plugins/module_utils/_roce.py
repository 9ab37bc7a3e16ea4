# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node offers NCCL over RoCE on its planned fabric ports, from node_facts' ``fabric`` and ``rdma`` sections.

Pure, and its own module: the node's fabric verify (``_fabric_verify``) and the controller's preflight
(``plugin_utils/preflight/boot.py``, binding the plan's one late input) call the same code, and the controller
reads it without loading the node's fact gathering. No imports beyond typing.
"""

from __future__ import annotations

from typing import Any


def cidr(address: str) -> tuple[str, int]:
    local, _sep, prefix = address.partition("/")
    return local, int(prefix or 32)


def nccl_names(
    host: str, interfaces: list[dict[str, Any]], node: dict[str, Any], require_rdma: bool = False
) -> tuple[dict[str, Any], list[str], list[str]]:
    """What a node offers NCCL on its planned fabric ports (RDMA devices, the ports, the common RoCE v2
    IPv4 GID index for the host's address), from node_facts' ``fabric`` and ``rdma`` sections; and what
    is wrong with its RoCE setup. Pure: the preflight calls it on the controller with the same facts."""
    failures: list[str] = []
    warnings: list[str] = []
    facts = node["fabric"]["interfaces"]
    rdma = node["rdma"]
    names = [interface["name"] for interface in interfaces]
    hcas: list[str] = []
    indexes: dict[str, set[int]] = {}
    for interface in interfaces:
        name = interface["name"]
        device = facts.get(name, {}).get("rdma_device")
        local, _prefix = cidr(interface["address"])
        if device is None:
            if require_rdma:
                failures.append(
                    f"{host} {name}: no RDMA device ({rdma.get('error') or 'none maps to this port'}); "
                    "fabric.nccl_net IB needs RoCE on every fabric port"
                )
            continue
        hcas.append(device)
        found = {
            entry["index"]
            for entry in rdma["roce_v2_ipv4"]
            if entry["netdev"] == name and entry["device"] == device and entry["ipv4"] == local
        }
        if found:
            indexes[device] = found
        elif require_rdma:
            failures.append(
                f"{host} {name} ({device}): no RoCE v2 GID for {local} "
                "(the address is missing, or the port is not RoCE v2: see show_gids)"
            )
    common = set.intersection(*indexes.values()) if indexes else set()
    if indexes and not common:
        message = f"{host}: the RoCE v2 IPv4 GID index differs between devices: " + ", ".join(
            f"{device} {sorted(found)}" for device, found in sorted(indexes.items())
        )
        (failures if require_rdma else warnings).append(
            message + "; NCCL_IB_GID_INDEX takes one value: set fabric.gid_index per host in dgxspark_overrides"
        )
    nccl = {
        "hca": sorted(set(hcas)),
        "socket_ifname": "=" + ",".join(names) if names else None,
        "gid_index": min(common) if common else None,
    }
    return nccl, failures, warnings
