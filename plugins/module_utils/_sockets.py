# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Listening TCP sockets and the processes that hold them, read from procfs (no ``ss``, no ``lsof``).

``/proc/net/tcp`` and ``/proc/net/tcp6`` list every socket of the reader's network namespace with its
inode (proc(5)); a process holds a socket when one of its ``/proc/<pid>/fd`` links reads ``socket:[inode]``.
Only the sockets on the ports asked for are looked up, so a node with every planned port free costs two
small reads and no walk over its processes. A process whose descriptors cannot be read (another user's,
without root) is counted, not guessed.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles, problem
from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import parse_cgroup_container

# The kernel's TCP state numbers (include/net/tcp_states.h), as /proc/net/tcp prints them (``st``, hex).
TCP_LISTEN = 0x0A
FAMILIES: tuple[tuple[str, str], ...] = (("ipv4", "tcp"), ("ipv6", "tcp6"))
_SOCKET_LINK = re.compile(r"^socket:\[(\d+)\]$")


@dataclass(frozen=True)
class TcpSocket:
    family: str
    """ipv4 or ipv6."""
    address: str
    port: int
    inode: int
    uid: int


def _address(text: str, family: str, little_endian: bool) -> str:
    """The kernel prints the address as 32-bit words in the host's byte order, each ``%08X``."""
    words = [int(text[at : at + 8], 16) for at in range(0, len(text), 8)]
    packed = b"".join(struct.pack("<I" if little_endian else ">I", word) for word in words)
    return socket.inet_ntop(socket.AF_INET if family == "ipv4" else socket.AF_INET6, packed)


def parse_net_tcp(text: str, family: str, little_endian: bool = sys.byteorder == "little") -> list[TcpSocket]:
    """The listening sockets of a /proc/net/tcp (``family`` ipv4) or /proc/net/tcp6 (ipv6) text."""
    width = 8 if family == "ipv4" else 32
    found: list[TcpSocket] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if not fields:
            continue
        try:
            local, state, uid, inode = fields[1], int(fields[3], 16), int(fields[7]), int(fields[9])
            address, port = local.split(":")
            if len(address) != width:
                raise ValueError(address)
            if state != TCP_LISTEN:
                continue
            found.append(TcpSocket(family, _address(address, family, little_endian), int(port, 16), inode, uid))
        except (IndexError, ValueError):
            raise ValueError(
                f"not a /proc/net/{'tcp' if family == 'ipv4' else 'tcp6'} line: {line.strip()!r}"
            ) from None
    return found


def socket_inode(link: str) -> int | None:
    """The inode of an fd link that reads ``socket:[12345]``; None for anything else."""
    match = _SOCKET_LINK.match(link)
    return int(match.group(1)) if match else None


def socket_holders(proc_root: str, inodes: Sequence[int]) -> tuple[dict[int, list[int]], int]:
    """The pids holding each of ``inodes`` (lowest first), and how many processes' descriptors could not
    be read (permission). A process that ends during the walk is skipped."""
    wanted = set(inodes)
    holders: dict[int, list[int]] = {inode: [] for inode in sorted(wanted)}
    unreadable = 0
    if not wanted:
        return holders, unreadable
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return holders, unreadable
    for pid in sorted(int(entry) for entry in entries if entry.isdigit()):
        directory = os.path.join(proc_root, str(pid), "fd")
        try:
            descriptors = os.listdir(directory)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                inode = socket_inode(os.readlink(os.path.join(directory, descriptor)))
            except OSError:
                continue
            if inode in wanted and pid not in holders[inode]:
                holders[inode].append(pid)
    return holders, unreadable


def listening_facts(files: HostFiles, proc_root: str, ports: Sequence[int]) -> dict[str, Any]:
    """The ``ports`` section: every listening TCP socket on ``ports`` (all ports when empty) with the
    process holding it (the lowest pid of those that do): ``pid``, ``comm`` and ``container`` (the ID from
    its cgroup; null on the host)."""
    asked = sorted(set(ports))
    sockets: list[TcpSocket] = []
    for family, name in FAMILIES:
        path = os.path.join(proc_root, "net", name)
        text = files.read(path, "ports")
        if text is None:
            continue
        try:
            sockets += [s for s in parse_net_tcp(text, family) if not asked or s.port in asked]
        except ValueError as error:
            files.problems.append(problem("ports", path, str(error)))
    holders, unreadable = socket_holders(proc_root, [s.inode for s in sockets])
    listening = []
    for item in sorted(sockets, key=lambda s: (s.port, s.family, s.address)):
        pids = holders.get(item.inode, [])
        entry: dict[str, Any] = {
            "port": item.port,
            "family": item.family,
            "address": item.address,
            "inode": item.inode,
            "uid": item.uid,
            "pids": pids,
            "pid": pids[0] if pids else None,
            "comm": None,
            "container": None,
        }
        if pids:
            entry["comm"] = files.read(os.path.join(proc_root, str(pids[0]), "comm"), "ports")
            cgroup = files.read(os.path.join(proc_root, str(pids[0]), "cgroup"), "ports")
            entry["container"] = parse_cgroup_container(cgroup) if cgroup is not None else None
        listening.append(entry)
    return {"asked": asked or None, "listening": listening, "unreadable_processes": unreadable}
