# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for procfs text: /proc/meminfo, /proc/cmdline, /proc/modules, /proc/<pid>/limits, smaps,
/proc/net/route.

Pure functions of the file's text (formats as proc(5) documents them); a line that does not fit raises
``ValueError`` naming the line.
"""

from __future__ import annotations

import re
import socket
import struct
from dataclasses import dataclass

# /proc/meminfo keys the memory facts report, and the fact each becomes (bytes).
MEMINFO_FACTS: tuple[tuple[str, str], ...] = (
    ("MemTotal", "mem_total_bytes"),
    ("MemAvailable", "mem_available_bytes"),
    ("MemFree", "mem_free_bytes"),
    ("SwapTotal", "swap_total_bytes"),
    ("SwapFree", "swap_free_bytes"),
    ("Hugepagesize", "hugepage_size_bytes"),
)

# /proc/<pid>/limits row names (fs/proc/base.c lnames[]) and the `ulimit`/`docker --ulimit` name of each.
LIMIT_NAMES: dict[str, str] = {
    "Max cpu time": "cpu",
    "Max file size": "fsize",
    "Max data size": "data",
    "Max stack size": "stack",
    "Max core file size": "core",
    "Max resident set": "rss",
    "Max processes": "nproc",
    "Max open files": "nofile",
    "Max locked memory": "memlock",
    "Max address space": "as",
    "Max file locks": "locks",
    "Max pending signals": "sigpending",
    "Max msgqueue size": "msgqueue",
    "Max nice priority": "nice",
    "Max realtime priority": "rtprio",
    "Max realtime timeout": "rttime",
}
UNLIMITED = -1

_MEMINFO_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+(kB))?$")
_LIMITS_LINE = re.compile(r"^(Max [a-z ]+?)\s+(unlimited|\d+)\s+(unlimited|\d+)(?:\s+(\S+))?$")
_SMAPS_PAGE = re.compile(r"^KernelPageSize:\s+(\d+)\s+kB$")


def parse_meminfo(text: str) -> dict[str, int]:
    """Every /proc/meminfo entry: sizes in bytes (the file says kB, meaning KiB), counts as they are."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _MEMINFO_LINE.match(line.strip())
        if not match:
            raise ValueError(f"not a meminfo line: {line!r}")
        key, number, unit = match.groups()
        values[key] = int(number) * 1024 if unit else int(number)
    return values


def memory_facts(meminfo: dict[str, int]) -> dict[str, int | None]:
    """The memory facts (bytes); a key the kernel does not report is null."""
    return {fact: meminfo.get(key) for key, fact in MEMINFO_FACTS}


def parse_cmdline(text: str) -> list[str]:
    """The kernel command line's words; double quotes group a value with spaces and are removed."""
    words: list[str] = []
    current: list[str] = []
    quoted = False
    started = False
    for char in text.strip():
        if char == '"':
            quoted = not quoted
            started = True
        elif char.isspace() and not quoted:
            if started:
                words.append("".join(current))
            current, started = [], False
        else:
            current.append(char)
            started = True
    if started:
        words.append("".join(current))
    return words


@dataclass(frozen=True)
class KernelModule:
    name: str
    size: int
    refcount: int | None
    """None where the kernel prints ``-`` (built without CONFIG_MODULE_UNLOAD: no use count is kept)."""
    used_by: tuple[str, ...]
    state: str


def parse_modules(text: str) -> list[KernelModule]:
    """/proc/modules: ``name size refcount deps state address [taints]`` per line.

    A kernel built without module unloading prints ``-`` for both the use count and the users (kernel/module/
    procfs.c; seen on a real H200 host, tests/unit/fixtures/gpu_clocks/README.md): the count is then None."""
    modules: list[KernelModule] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 5:
            raise ValueError(f"not a /proc/modules line: {line!r}")
        try:
            size, refcount = int(fields[1]), (None if fields[2] == "-" else int(fields[2]))
        except ValueError:
            raise ValueError(f"not a /proc/modules line: {line!r}") from None
        used_by = tuple(name for name in fields[3].split(",") if name and name != "-")
        modules.append(KernelModule(fields[0], size, refcount, used_by, fields[4]))
    return modules


@dataclass(frozen=True)
class Limit:
    soft: int
    """-1 for unlimited."""
    hard: int
    """-1 for unlimited."""

    def as_dict(self) -> dict[str, int]:
        return {"soft": self.soft, "hard": self.hard}


def parse_limits(text: str) -> dict[str, Limit]:
    """/proc/<pid>/limits, keyed by the ``ulimit`` name (nofile, memlock, ...); -1 is unlimited."""
    limits: dict[str, Limit] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("Limit "):
            continue
        match = _LIMITS_LINE.match(stripped)
        if not match or match.group(1) not in LIMIT_NAMES:
            raise ValueError(f"not a /proc/<pid>/limits line: {line!r}")
        name, soft, hard, _unit = match.groups()
        limits[LIMIT_NAMES[name]] = Limit(_limit_value(soft), _limit_value(hard))
    return limits


def _limit_value(text: str) -> int:
    return UNLIMITED if text == "unlimited" else int(text)


def parse_page_size(line: str) -> int:
    """The base page size in bytes from an smaps ``KernelPageSize:  64 kB`` line."""
    match = _SMAPS_PAGE.match(line.strip())
    if not match:
        raise ValueError(f"not an smaps KernelPageSize line: {line!r}")
    return int(match.group(1)) * 1024


# capabilities(7): the bit that lets a process raise a hard resource limit (setrlimit above its own).
CAP_SYS_RESOURCE = 24


def parse_cap_eff(text: str) -> int:
    """The effective capability set (``CapEff:``, hex) of a /proc/<pid>/status text."""
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            try:
                return int(line.split(":", 1)[1].strip(), 16)
            except ValueError:
                raise ValueError(f"CapEff is not hexadecimal: {line.strip()!r}") from None
    raise ValueError("no CapEff line")


# A container's cgroup as the engines name it: Docker with the systemd driver (``docker-<id>.scope``) or
# cgroupfs (``/docker/<id>``), Podman (``libpod-<id>``), containerd's CRI (``cri-containerd-<id>``), CRI-O.
# A container's 64-hex ID as a cgroup path segment: /docker/<id> (v1), docker-<id>.scope (v2, systemd),
# podman's and CRI's prefixes, or /<parent>/<id> under a dockerd --cgroup-parent (the simulated nodes).
_CONTAINER_CGROUP = re.compile(r"(?:^|/)(?:docker-|libpod-|cri-containerd-|crio-)?([0-9a-f]{64})(?:\.scope)?(?=/|$)")


def parse_cgroup_container(text: str) -> str | None:
    """The ID of the container a process runs in, from its /proc/<pid>/cgroup; None on the host.

    The innermost container ID of the first line that names one (cgroup v1 lists one line per
    hierarchy, all naming the same container; v2 has the single ``0::`` line)."""
    for line in text.splitlines():
        found = _CONTAINER_CGROUP.findall(line.split(":", 2)[-1])
        if found:
            return str(found[-1])
    return None


# /proc/net/route (net/ipv4/fib_trie.c, fib_route_seq_show): a header, then one line per IPv4 route of the main
# table, tab-separated: Iface, Destination, Gateway, Flags, RefCnt, Use, Metric, Mask, MTU, Window, IRTT. The
# addresses are the kernel's network-order words printed as native-order hex (%08X), so on a little-endian
# machine (x86_64, a GB10's arm64) 192.0.2.1 reads 010200C0; ``*`` names a route without a device.
ROUTE_FIELDS = ("Iface", "Destination", "Gateway", "Flags", "RefCnt", "Use", "Metric", "Mask", "MTU", "Window", "IRTT")
RTF_GATEWAY = 0x2


@dataclass(frozen=True)
class Route:
    interface: str
    destination: str
    mask: str
    gateway: str | None
    """None for a route on the link itself (no RTF_GATEWAY)."""
    metric: int

    @property
    def default(self) -> bool:
        return self.destination == "0.0.0.0" and self.mask == "0.0.0.0"


def _route_address(word: str) -> str:
    return socket.inet_ntoa(struct.pack("=I", int(word, 16)))


def parse_routes(text: str) -> list[Route]:
    """/proc/net/route, read on the machine that wrote it (its byte order); the header line is checked."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    if tuple(lines[0].split()) != ROUTE_FIELDS:
        raise ValueError(f"not the /proc/net/route header: {lines[0].strip()!r}")
    routes: list[Route] = []
    for line in lines[1:]:
        fields = line.split()
        try:
            if len(fields) != len(ROUTE_FIELDS):
                raise ValueError
            flags = int(fields[3], 16)
            gateway = _route_address(fields[2]) if flags & RTF_GATEWAY else None
            routes.append(
                Route(fields[0], _route_address(fields[1]), _route_address(fields[7]), gateway, int(fields[6]))
            )
        except (ValueError, struct.error):
            raise ValueError(f"not a /proc/net/route line: {line.strip()!r}") from None
    return routes


def default_routes(routes: list[Route]) -> list[dict[str, object]]:
    """The IPv4 default routes, the one the kernel prefers (lowest metric) first."""
    found = sorted((r for r in routes if r.default), key=lambda r: r.metric)
    return [{"interface": r.interface, "gateway": r.gateway, "metric": r.metric} for r in found]
