# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RDMA and network parts of sysfs: /sys/class/infiniband and /sys/class/net.

What is read, and from where, is what the tools read:
- ``ibdev2netdev`` maps an RDMA device to its netdevs through ``/sys/class/infiniband/<dev>/device/net/``;
- ``show_gids`` lists ``ports/<n>/gids/<i>`` with ``gid_attrs/types/<i>`` (``IB/RoCE v1`` or ``RoCE v2``) and
  ``gid_attrs/ndevs/<i>``, skipping all-zero (unused) entries; an IPv4-mapped GID (``::ffff:a.b.c.d``) is a
  RoCE address, and its index is what ``NCCL_IB_GID_INDEX`` names;
- port ``state`` (``4: ACTIVE``), ``phys_state`` (``5: LinkUp``), ``link_layer`` and ``rate``
  (``200 Gb/sec (4X HDR)``) as ``rdma link`` and ``ibv_devinfo`` show them;
- a netdev's ``carrier``, ``speed`` (Mb/s, what ``ethtool`` prints), ``mtu``, ``operstate`` and ``address``.
  ``speed`` reads -1 (or fails with EINVAL) when the link is down: that is reported as null.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles, problem

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
# Netdev names that are fabric ports on a DGX Spark (ConnectX-7: enp1s0f0np0, enP2p1s0f1np1, ...).
FABRIC_NETDEV_PATTERN = "en*np*"
# sysfs reports (u32)-1 on some drivers for an unknown speed.
_UNKNOWN_SPEEDS = (-1, 0xFFFFFFFF)
_STATE = re.compile(r"^(\d+):\s*(\S.*)$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s+Gb/sec\b")
_GID = re.compile(r"^[0-9a-f]{4}(?::[0-9a-f]{4}){7}$")


def parse_port_state(text: str) -> tuple[int | None, str]:
    """``4: ACTIVE`` -> (4, "ACTIVE"); a value without a code -> (None, text)."""
    match = _STATE.match(text.strip())
    if not match:
        return None, text.strip()
    return int(match.group(1)), match.group(2)


def parse_rate_gbps(text: str) -> float | None:
    """``200 Gb/sec (4X HDR)`` -> 200.0; anything else -> None."""
    match = _RATE.match(text.strip())
    return float(match.group(1)) if match else None


def gid_ipv4(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (``0000:...:ffff:c0a8:640a`` -> 192.168.100.10), else None."""
    words = gid.lower().split(":")
    if len(words) != 8 or words[:5] != ["0000"] * 5 or words[5] != "ffff":
        return None
    raw = int(words[6], 16) << 16 | int(words[7], 16)
    return ".".join(str(raw >> shift & 0xFF) for shift in (24, 16, 8, 0))


def parse_gid(text: str) -> str:
    """A sysfs GID as written (eight groups of four hex digits); raises ``ValueError`` otherwise."""
    gid = text.strip().lower()
    if not _GID.match(gid):
        raise ValueError(f"not a GID: {text!r}")
    return gid


def roce_version(gid_type: str | None) -> str | None:
    """``RoCE v2`` -> "v2", ``IB/RoCE v1`` -> "v1" (show_gids' VER column)."""
    if not gid_type:
        return None
    if gid_type.endswith("v2"):
        return "v2"
    if gid_type.endswith("v1"):
        return "v1"
    return None


def normalize_speed(value: int | None) -> int | None:
    """Mb/s, or None when the kernel says the speed is unknown (link down)."""
    if value is None or value in _UNKNOWN_SPEEDS or value < 0:
        return None
    return value


def _by_number(names: list[str]) -> list[str]:
    return sorted((n for n in names if n.isdigit()), key=int)


class SysfsReader:
    """Reads the RDMA and net trees under ``sys_root`` (normally /sys) through a :class:`HostFiles`."""

    def __init__(self, files: HostFiles, sys_root: str) -> None:
        self.files = files
        self.ib_root = os.path.join(sys_root, "class", "infiniband")
        self.net_root = os.path.join(sys_root, "class", "net")

    # ---------------------------------------------------------------- RDMA
    def rdma_device_names(self) -> list[str]:
        return self.files.listdir(self.ib_root, "rdma")

    def rdma_netdevs(self, device: str) -> list[str]:
        """The netdevs of an RDMA device's PCI function (what ibdev2netdev prints)."""
        return self.files.listdir(os.path.join(self.ib_root, device, "device", "net"), "rdma")

    def rdma_device(self, device: str) -> dict[str, Any]:
        base = os.path.join(self.ib_root, device)
        read = self.files.read
        ports = [
            self.rdma_port(device, port) for port in _by_number(self.files.listdir(os.path.join(base, "ports"), "rdma"))
        ]
        return {
            "node_guid": read(os.path.join(base, "node_guid"), "rdma"),
            "fw_ver": read(os.path.join(base, "fw_ver"), "rdma"),
            "hca_type": read(os.path.join(base, "hca_type"), "rdma"),
            "board_id": read(os.path.join(base, "board_id"), "rdma"),
            "netdevs": self.rdma_netdevs(device),
            "ports": ports,
        }

    def rdma_port(self, device: str, port: str) -> dict[str, Any]:
        base = os.path.join(self.ib_root, device, "ports", port)
        read = self.files.read
        state_text = read(os.path.join(base, "state"), "rdma")
        phys_text = read(os.path.join(base, "phys_state"), "rdma")
        rate = read(os.path.join(base, "rate"), "rdma")
        state_code, state = parse_port_state(state_text) if state_text is not None else (None, None)
        phys_code, phys_state = parse_port_state(phys_text) if phys_text is not None else (None, None)
        return {
            "port": int(port),
            "state": state,
            "state_code": state_code,
            "phys_state": phys_state,
            "phys_state_code": phys_code,
            "link_layer": read(os.path.join(base, "link_layer"), "rdma"),
            "rate": rate,
            "rate_gbps": parse_rate_gbps(rate) if rate is not None else None,
            "gids": self.gids(base),
        }

    def gids(self, port_dir: str) -> list[dict[str, Any]]:
        """The port's used GID entries, as show_gids lists them."""
        entries: list[dict[str, Any]] = []
        gid_dir = os.path.join(port_dir, "gids")
        for index in _by_number(self.files.listdir(gid_dir, "rdma")):
            text = self.files.read(os.path.join(gid_dir, index), "rdma")
            if text is None:
                continue
            try:
                gid = parse_gid(text)
            except ValueError as error:
                self.files.problems.append(problem("rdma", os.path.join(gid_dir, index), str(error)))
                continue
            if gid == ZERO_GID:
                continue
            gid_type = self.files.read(os.path.join(port_dir, "gid_attrs", "types", index), "rdma")
            entries.append(
                {
                    "index": int(index),
                    "gid": gid,
                    "ipv4": gid_ipv4(gid),
                    "type": gid_type,
                    "roce_version": roce_version(gid_type),
                    "netdev": self.files.read(os.path.join(port_dir, "gid_attrs", "ndevs", index), "rdma"),
                }
            )
        return entries

    # ---------------------------------------------------------------- net
    def netdev_names(self) -> list[str]:
        return self.files.listdir(self.net_root, "fabric")

    def netdev(self, name: str) -> dict[str, Any]:
        base = os.path.join(self.net_root, name)
        if not os.path.isdir(base):
            return {"present": False}
        files = self.files
        carrier = files.read_int(os.path.join(base, "carrier"), "fabric")
        return {
            "present": True,
            "operstate": files.read(os.path.join(base, "operstate"), "fabric"),
            "carrier": None if carrier is None else carrier == 1,
            "speed_mbps": normalize_speed(files.read_int(os.path.join(base, "speed"), "fabric")),
            "mtu": files.read_int(os.path.join(base, "mtu"), "fabric"),
            "address": files.read(os.path.join(base, "address"), "fabric"),
        }


def default_fabric_interfaces(rdma_mapped: list[str], netdevs: list[str]) -> list[str]:
    """Every netdev mapped to an RDMA device, plus every netdev named like a ConnectX port (en*np*)."""
    names = set(rdma_mapped)
    names.update(name for name in netdevs if fnmatch.fnmatchcase(name, FABRIC_NETDEV_PATTERN))
    return sorted(names)
