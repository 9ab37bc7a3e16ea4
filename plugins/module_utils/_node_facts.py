# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything a preflight and the roles need to know about one node, gathered in one module run.

No Ansible imports: the module gives a :class:`Runner` (its ``run_command``) and the options; procfs and
sysfs are read under ``proc_root``/``sys_root`` so a test can point them at a fixture tree. Three processes
at most (``nvidia-smi``, ``systemctl show`` and ``ip -j -4 addr show``, one call each); the Docker engine is
asked over its socket; the memory guard is read from its files (never asked), listening sockets from
/proc/net/tcp and tcp6, the IPv4 default routes from /proc/net/route, the ``files`` asked for are stat'ed and
hashed, the weights directory's files are listed and hashed within a time budget (``_weights_manifest``) and the
KV-relevant keys of its config.json read (``_model_config``), and the mount and block devices of the weights path
and ``disk_paths`` come from /proc/self/mountinfo and /sys/class/block (``_storage``).
A missing tool or device is a fact (``present: false`` with an ``error``); an unexpected read error is
reported in ``problems`` and leaves the value null. Nothing is changed on the node but the ``weights``
section's own cache of the hashes it took (never in check mode).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Sequence

from ansible_collections.dgxspark.cluster.plugins.module_utils._api_status import api_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    DEFAULT_DOCKER_HOST,
    DockerEngine,
    docker_facts,
    socket_path,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._files import files_facts, secret_files_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._gpu_clocks import judge_clock_latch
from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles, Problem, problem
from ansible_collections.dgxspark.cluster.plugins.module_utils._journal import DEFAULT_PATH as DEFAULT_JOURNAL_PATH
from ansible_collections.dgxspark.cluster.plugins.module_utils._journal import facts as journal_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._memguard_state import (
    DEFAULT_LOG_PATH,
    DEFAULT_STATE_PATH,
    DEFAULT_TRIP_PATH,
    memguard_facts,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._model_config import model_configs
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import (
    failure_message,
    parse_query_csv,
    query_argv,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import (
    CAP_SYS_RESOURCE,
    default_routes,
    memory_facts,
    parse_cap_eff,
    parse_cmdline,
    parse_limits,
    parse_meminfo,
    parse_modules,
    parse_page_size,
    parse_routes,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import rank_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._releases import (
    DEFAULT_DIRECTORY as DEFAULT_RELEASES_DIR,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._releases import facts as releases_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._sockets import listening_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._storage import (
    BlockDevices,
    Mount,
    parse_mountinfo,
    storage_facts,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._sysfs import SysfsReader, default_fabric_interfaces
from ansible_collections.dgxspark.cluster.plugins.module_utils._systemctl import PROPERTIES, parse_show, show_argv
from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import (
    DEFAULT_CACHE_DIR as DEFAULT_WEIGHTS_CACHE_DIR,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import (
    DEFAULT_HASH_SECONDS,
    weights_facts,
)

SECTIONS: tuple[str, ...] = (
    "memory",
    "kernel",
    "gpu",
    "rdma",
    "fabric",
    "docker",
    "limits",
    "disk",
    "services",
    "memguard",
    "ports",
    "files",
    "releases",
    "weights",
    "secrets",
    "ranks",
    "journal",
    "api",
)
# What a plain call gathers: the memory guard, the sockets, the files, the releases, the weights' manifest, the
# secrets' files, the rank containers' records and the boot's journal are asked for by name (a boot's preflight, a
# recovery); the API on the head, by status.yml.
DEFAULT_SECTIONS: tuple[str, ...] = SECTIONS[:-9]
DEFAULT_CONTAINER_NAME = "vllm_dsv41"
# where a stop or a boot's undo keeps the records of the ranks it removed (the boot role's boot_rank_records)
DEFAULT_RANK_RECORDS_DIR = "/var/log/dgxspark-cluster/ranks"
# Limits reported for the module's own process and the container daemons (docker --ulimit names).
REPORTED_LIMITS: tuple[str, ...] = ("nofile", "memlock", "stack", "core")
DAEMONS: tuple[str, ...] = ("dockerd", "containerd")
# The memory-saver build of nvidia_uvm (christopherowen/dgx-spark-memory-saver) is the one with this
# parameter; stock nvidia_uvm has none. Y/1: leaf page-table packing is on.
MEMORY_SAVER_PARAMETER = "uvm_pack_sysmem_leaf_tables"
# `timeout`'s exit status when it stopped the command (124), or killed it after --kill-after (128 + 9).
TIMEOUT_EXIT_CODES = (124, 137)
# The NVIDIA Container Toolkit's hook: dockerd registers the "nvidia" device driver (what --gpus asks for) when it
# finds it; looked for on the module's PATH and where the toolkit installs it.
GPU_HOOK = "nvidia-container-runtime-hook"
GPU_HOOK_DIRS: tuple[str, ...] = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/usr/local/sbin")
# Every interface's IPv4 addresses in one call (iproute2's JSON output).
IP_ADDR_ARGS: tuple[str, ...] = ("-j", "-4", "addr", "show")


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False


Runner = Callable[[List[str]], CommandResult]


@dataclass(frozen=True)
class Tool:
    """An executable the module may run: its path, or why there is none."""

    name: str
    path: str | None
    missing: str = ""

    @classmethod
    def resolve(cls, name: str, given: str | None, found_on_path: str | None) -> Tool:
        """``given`` (an explicit path) wins; otherwise what the PATH search found."""
        if given:
            if os.path.isfile(given) and os.access(given, os.X_OK):
                return cls(name, given)
            return cls(name, None, f"{name} not found at {given}")
        if found_on_path:
            return cls(name, found_on_path)
        return cls(name, None, f"{name} not found")


@dataclass(frozen=True)
class Options:
    sections: tuple[str, ...] = DEFAULT_SECTIONS
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    nvidia_smi: Tool = Tool("nvidia-smi", None, "nvidia-smi not found")
    systemctl: Tool = Tool("systemctl", None, "systemctl not found")
    ip: Tool = Tool("ip", None, "ip not looked for")
    docker_host: str = DEFAULT_DOCKER_HOST
    container_name: str | None = DEFAULT_CONTAINER_NAME
    fabric_interfaces: tuple[str, ...] | None = None
    weights_path: str | None = None
    disk_paths: tuple[str, ...] = ()
    """Paths besides ``weights_path`` whose mount and block devices ``disk`` reports (``disk.mounts``): the
    directory Engram on disk reads, when it is not the weights (seed 002 section 5.2: local NVMe)."""
    services: tuple[str, ...] = ()
    timeout: float = 20.0
    memguard_state_path: str = DEFAULT_STATE_PATH
    memguard_trip_path: str = DEFAULT_TRIP_PATH
    memguard_log_path: str = DEFAULT_LOG_PATH
    ports: tuple[int, ...] = ()
    """The TCP ports whose listeners ``ports`` reports; empty: every listening port."""
    files: tuple[str, ...] = ()
    """The absolute paths ``files`` reports (existence, type, mode, owner, size, SHA-256)."""
    releases_dir: str = DEFAULT_RELEASES_DIR
    """Where ``releases`` reads the cluster's releases (the head keeps them)."""
    weights_cache_dir: str = DEFAULT_WEIGHTS_CACHE_DIR
    """Where ``weights`` keeps the hashes it took (empty: no cache)."""
    weights_hash_seconds: float = DEFAULT_HASH_SECONDS
    """How long ``weights`` may spend hashing files whose hash is not in the cache."""
    write_cache: bool = True
    """False in check mode: the weights' hash cache is read, not written."""
    secret_files: tuple[str, ...] = ()
    """The absolute paths ``secrets`` reports by ``stat`` alone (type, mode, owner): the profile's secrets."""
    rank_records_dir: str = DEFAULT_RANK_RECORDS_DIR
    """Where ``ranks`` reads the records a stop or a boot's undo kept of the ranks it removed (empty: none)."""
    rank_log_lines: int = 20
    """How many of each rank container's last log lines ``ranks`` returns."""
    journal_path: str = DEFAULT_JOURNAL_PATH
    """The boot's journal on the node (``journal``): a boot that did not finish left it."""
    api_url: str | None = None
    """The OpenAI API's base URL as this node reaches it (``api``: the head, over loopback)."""
    api_key_file: str | None = None
    api_ca_file: str | None = None
    api_smoke: bool = False
    """``api``: one streamed completion of one token after ``/v1/models``."""


def ip_addr_argv(ip: str) -> list[str]:
    return [ip, *IP_ADDR_ARGS]


def parse_ip_addresses(text: str) -> dict[str, list[str]]:
    """``ip -j -4 addr show``: ifname -> its IPv4 addresses as ``address/prefixlen``, in ip's order.

    Entries without ``ifname`` (older iproute2 prints ``{}`` for each link that ``-4`` filtered out) and
    address entries of another family are skipped. Raises ValueError when the text is not such a list.
    """
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"expected a JSON list of links, found {type(data).__name__}")
    found: dict[str, list[str]] = {}
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        infos = link.get("addr_info")
        infos = [] if infos is None else infos
        if not isinstance(infos, list):
            raise ValueError(f"{link['ifname']}: expected addr_info to be a list, found {type(infos).__name__}")
        addresses = found.setdefault(link["ifname"], [])
        for info in infos:
            if not isinstance(info, dict) or info.get("family") != "inet":
                continue
            local, prefix = info.get("local"), info.get("prefixlen")
            if not isinstance(local, str) or isinstance(prefix, bool) or not isinstance(prefix, int):
                raise ValueError(f"{link['ifname']}: expected local and prefixlen, found {info!r:.120}")
            addresses.append(f"{local}/{prefix}")
    return found


def make_runner(
    run_command: Callable[[list[str]], tuple[int, str, str]], timeout_bin: str | None, seconds: float
) -> Runner:
    """A :data:`Runner` on top of ``run_command``, bounded by coreutils ``timeout`` when there is one."""

    def run(argv: list[str]) -> CommandResult:
        full = [timeout_bin, "--kill-after=5", f"{seconds:g}", *argv] if timeout_bin else list(argv)
        try:
            rc, out, err = run_command(full)
        except OSError as error:
            return CommandResult(-1, "", f"{argv[0]}: {error.strerror or error}")
        return CommandResult(rc, out, err, timed_out=bool(timeout_bin) and rc in TIMEOUT_EXIT_CODES)

    return run


class _Gatherer:
    def __init__(
        self,
        options: Options,
        run: Runner,
        engine_factory: Callable[[str, float], DockerEngine],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.run = run
        self.engine_factory = engine_factory
        self.wall = wall
        self.problems: list[Problem] = []
        self.files = HostFiles(self.problems)
        self.sysfs = SysfsReader(self.files, options.sys_root)

    def proc(self, *parts: str) -> str:
        return os.path.join(self.options.proc_root, *parts)

    def sys(self, *parts: str) -> str:
        return os.path.join(self.options.sys_root, *parts)

    def parse_problem(self, section: str, source: str, error: ValueError) -> None:
        self.problems.append(problem(section, source, str(error)))

    # ------------------------------------------------------------ memory
    def memory(self) -> dict[str, Any]:
        path = self.proc("meminfo")
        text = self.files.read(path, "memory")
        meminfo: dict[str, int] = {}
        if text is not None:
            try:
                meminfo = parse_meminfo(text)
            except ValueError as error:
                self.parse_problem("memory", path, error)
        return memory_facts(meminfo)

    # ------------------------------------------------------------ kernel
    def kernel(self) -> dict[str, Any]:
        files = self.files
        cmdline = files.read(self.proc("cmdline"), "kernel")
        modules: list[str] | None = None
        modules_text = files.read(self.proc("modules"), "kernel")
        if modules_text is not None:
            try:
                modules = sorted(m.name for m in parse_modules(modules_text))
            except ValueError as error:
                self.parse_problem("kernel", self.proc("modules"), error)
        uvm = self.sys("module", "nvidia_uvm")
        packing = files.read(os.path.join(uvm, "parameters", MEMORY_SAVER_PARAMETER), "kernel")
        return {
            "release": files.read(self.proc("sys", "kernel", "osrelease"), "kernel"),
            "page_size": self.page_size(),
            "cmdline": parse_cmdline(cmdline) if cmdline is not None else None,
            "modules": modules,
            "nvidia": {
                "version": files.read(self.sys("module", "nvidia", "version"), "kernel"),
                "uvm_loaded": os.path.isdir(uvm),
                "uvm_srcversion": files.read(os.path.join(uvm, "srcversion"), "kernel"),
            },
            "memory_saver": {
                "loaded": packing is not None,
                "packing_enabled": None if packing is None else packing in ("Y", "1"),
            },
        }

    def page_size(self) -> int | None:
        """The base page size: smaps' KernelPageSize of the module's first mapping (4 kB or 64 kB)."""
        path = self.proc("self", "smaps")
        line = self.files.first_line_with(path, "KernelPageSize:", "kernel")
        if line is not None:
            try:
                return parse_page_size(line)
            except ValueError as error:
                self.parse_problem("kernel", path, error)
        if os.path.realpath(self.options.proc_root) == "/proc":
            return os.sysconf("SC_PAGE_SIZE")
        return None

    # ------------------------------------------------------------ gpu
    def gpu(self) -> dict[str, Any]:
        tool = self.options.nvidia_smi
        facts: dict[str, Any] = {"present": False, "error": None, "count": 0, "devices": [], "clock_latch": None}
        if tool.path is None:
            facts["error"] = tool.missing
            return facts
        result = self.run(query_argv(tool.path))
        if result.timed_out:
            facts["error"] = f"nvidia-smi did not answer within {self.options.timeout:g} s"
            return facts
        if result.rc != 0:
            facts["error"] = failure_message(result.rc, result.stdout, result.stderr)
            return facts
        try:
            devices, unreadable = parse_query_csv(result.stdout)
        except ValueError as error:
            self.parse_problem("gpu", "nvidia-smi", error)
            facts["error"] = f"could not read nvidia-smi's output: {error}"
            return facts
        for message in unreadable:
            self.problems.append(problem("gpu", "nvidia-smi", message))
        facts.update(present=bool(devices), count=len(devices), devices=devices)
        if not devices:
            facts["error"] = "nvidia-smi lists no GPU"
        else:
            facts["clock_latch"] = judge_clock_latch([devices])
        return facts

    # ------------------------------------------------------------ rdma
    def rdma(self) -> dict[str, Any]:
        names = self.sysfs.rdma_device_names()
        if not names:
            return {
                "present": False,
                "error": f"no RDMA devices in {self.sysfs.ib_root}",
                "devices": {},
                "roce_v2_ipv4": [],
            }
        devices = {name: self.sysfs.rdma_device(name) for name in names}
        roce = [
            {"device": name, "port": port["port"], "index": gid["index"], "ipv4": gid["ipv4"], "netdev": gid["netdev"]}
            for name, device in devices.items()
            for port in device["ports"]
            for gid in port["gids"]
            if gid["ipv4"] and gid["roce_version"] == "v2"
        ]
        return {"present": True, "error": None, "devices": devices, "roce_v2_ipv4": roce}

    # ------------------------------------------------------------ fabric
    def fabric(self, rdma: dict[str, Any]) -> dict[str, Any]:
        mapped: dict[str, str] = {}
        for name, device in rdma["devices"].items():
            for netdev in device["netdevs"]:
                mapped.setdefault(netdev, name)
        wanted = self.options.fabric_interfaces
        names = (
            list(wanted) if wanted is not None else default_fabric_interfaces(list(mapped), self.sysfs.netdev_names())
        )
        addresses, error = self.ipv4_addresses() if names else ({}, None)
        interfaces: dict[str, Any] = {}
        for name in names:
            facts = self.sysfs.netdev(name)
            facts["rdma_device"] = mapped.get(name)
            facts["gid_ipv4"] = sorted({entry["ipv4"] for entry in rdma["roce_v2_ipv4"] if entry["netdev"] == name})
            facts["ipv4"] = None if addresses is None else list(addresses.get(name, []))
            interfaces[name] = facts
        # every interface's IPv4 addresses with their prefix (None when unknown): the preflight reads the management
        # interface's subnet there (fabric-not-management: no fabric address inside a management subnet)
        return {
            "interfaces": interfaces,
            "error": error,
            "default_routes": self.default_routes(),
            "addresses": None if addresses is None else {name: list(found) for name, found in addresses.items()},
        }

    def default_routes(self) -> list[dict[str, Any]] | None:
        """The IPv4 default routes of the main table (/proc/net/route), preferred first; None when unreadable.
        A preflight reads them to tell a fabric port that is the management interface."""
        path = self.proc("net", "route")
        text = self.files.read(path, "fabric")
        if text is None:
            return None
        try:
            return default_routes(parse_routes(text))
        except ValueError as error:
            self.parse_problem("fabric", path, error)
            return None

    def ipv4_addresses(self) -> tuple[dict[str, list[str]] | None, str | None]:
        """Every interface's IPv4 addresses from one ``ip -j -4 addr show``, or (None, why not)."""
        tool = self.options.ip
        if tool.path is None:
            return None, tool.missing
        result = self.run(ip_addr_argv(tool.path))
        if result.timed_out:
            return None, f"ip did not answer within {self.options.timeout:g} s"
        if result.rc != 0:
            said = (result.stderr or result.stdout).strip().splitlines()
            return None, f"ip exited {result.rc}: {said[0] if said else 'no message'}"
        try:
            return parse_ip_addresses(result.stdout), None
        except ValueError as error:
            self.parse_problem("fabric", " ".join(["ip", *IP_ADDR_ARGS]), error)
            return None, f"could not read ip's output: {error}"

    # ------------------------------------------------------------ docker
    def docker(self) -> dict[str, Any]:
        options = self.options
        try:
            path = socket_path(options.docker_host)
        except ValueError as error:
            return _docker_absent(str(error), None, options.container_name)
        if not os.path.exists(path):
            return _docker_absent(f"no Docker engine socket at {path}", path, options.container_name)
        facts = docker_facts(self.engine_factory(path, options.timeout), options.container_name)
        # Docker gives a container GPUs (--gpus, the device driver "nvidia") through the NVIDIA Container Toolkit's
        # hook on dockerd's PATH, or its "nvidia" runtime (facts["runtimes"], from the engine)
        facts["gpu_hook"] = shutil.which(GPU_HOOK, path=os.pathsep.join([os.environ.get("PATH", ""), *GPU_HOOK_DIRS]))
        return facts

    # ------------------------------------------------------------ ranks
    def ranks(self) -> dict[str, Any]:
        """The collection's rank containers by their label, whatever the profile says (a recovery's evidence)."""
        options = self.options
        try:
            path = socket_path(options.docker_host)
        except ValueError as error:
            return {"error": str(error), "containers": [], "records": [], "problems": []}
        if not os.path.exists(path):
            return {"error": f"no Docker engine socket at {path}", "containers": [], "records": [], "problems": []}
        return rank_facts(self.engine_factory(path, options.timeout), options.rank_records_dir, options.rank_log_lines)

    # ------------------------------------------------------------ limits
    def limits(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "nr_open": self.files.read_int(self.proc("sys", "fs", "nr_open"), "limits"),
            "module": self.process_limits("self"),
        }
        pids = self.find_processes(DAEMONS)
        for daemon in DAEMONS:
            pid = pids.get(daemon)
            facts[daemon] = (
                None
                if pid is None
                else {"pid": int(pid), **self.process_limits(pid), "cap_sys_resource": self.cap_sys_resource(pid)}
            )
        return facts

    def cap_sys_resource(self, pid: str) -> bool | None:
        """Whether the process may raise hard limits above its own (what runc needs to give a container
        more than dockerd has); None when its status cannot be read."""
        path = self.proc(pid, "status")
        text = self.files.read(path, "limits")
        if text is None:
            return None
        try:
            return bool(parse_cap_eff(text) >> CAP_SYS_RESOURCE & 1)
        except ValueError as error:
            self.parse_problem("limits", path, error)
            return None

    def process_limits(self, pid: str) -> dict[str, Any]:
        path = self.proc(pid, "limits")
        text = self.files.read(path, "limits")
        parsed = {}
        if text is not None:
            try:
                parsed = parse_limits(text)
            except ValueError as error:
                self.parse_problem("limits", path, error)
        return {name: parsed[name].as_dict() if name in parsed else None for name in REPORTED_LIMITS}

    def find_processes(self, names: Sequence[str]) -> dict[str, str]:
        """The lowest pid running each of ``names`` (by /proc/<pid>/comm); one pass over /proc."""
        found: dict[str, str] = {}
        for entry in sorted((e for e in self.files.listdir(self.options.proc_root, "limits") if e.isdigit()), key=int):
            try:
                with open(self.proc(entry, "comm"), encoding="utf-8", errors="replace") as handle:
                    comm = handle.read().strip()
            except OSError:
                continue  # the process ended, or is not ours to read: not a problem
            if comm in names and comm not in found:
                found[comm] = entry
                if len(found) == len(names):
                    break
        return found

    # ------------------------------------------------------------ disk
    def disk(self) -> dict[str, Any]:
        path = self.options.weights_path
        facts: dict[str, Any] = {"path": None}
        if path:
            facts = self.free_space(path)
        wanted = [p for p in (path, *self.options.disk_paths) if p]
        if wanted:
            mounts = self.mount_table()
            devices = BlockDevices(self.files, self.options.sys_root, "disk")
            facts["mounts"] = {p: storage_facts(p, mounts, devices) for p in dict.fromkeys(wanted)}
        return facts

    def free_space(self, path: str) -> dict[str, Any]:
        """Free space where ``path`` is, or would be (its nearest existing parent)."""
        probe = os.path.abspath(path)
        while not os.path.exists(probe) and os.path.dirname(probe) != probe:
            probe = os.path.dirname(probe)
        facts: dict[str, Any] = {"path": path, "exists": os.path.exists(path), "checked_path": probe}
        try:
            stat = os.statvfs(probe)
        except OSError as error:
            self.problems.append(problem("disk", probe, error.strerror or str(error)))
            return facts
        facts.update(
            total_bytes=stat.f_blocks * stat.f_frsize,
            free_bytes=stat.f_bfree * stat.f_frsize,
            available_bytes=stat.f_bavail * stat.f_frsize,
            read_only=bool(stat.f_flag & os.ST_RDONLY),
        )
        return facts

    def mount_table(self) -> list[Mount] | None:
        """This process's mounts (``/proc/self/mountinfo``), or None when unreadable (a problem says why)."""
        path = self.proc("self", "mountinfo")
        text = self.files.read(path, "disk")
        if text is None:
            return None
        try:
            return parse_mountinfo(text)
        except ValueError as error:
            self.parse_problem("disk", path, error)
            return None

    # ------------------------------------------------------------ services
    def services(self) -> dict[str, Any]:
        units = list(self.options.services)
        unknown = dict.fromkeys(fact for _prop, fact in PROPERTIES)
        facts: dict[str, Any] = {"present": None, "error": None, "units": {}}
        if not units:
            return facts
        facts["units"] = {unit: dict(unknown) for unit in units}
        tool = self.options.systemctl
        if tool.path is None:
            facts.update(present=False, error=tool.missing)
            return facts
        result = self.run(show_argv(tool.path, units))
        if result.timed_out:
            facts.update(present=True, error=f"systemctl did not answer within {self.options.timeout:g} s")
        elif result.rc != 0:
            said = (result.stderr or result.stdout).strip().splitlines()
            facts.update(present=False, error=f"systemctl exited {result.rc}: {said[0] if said else 'no message'}")
        else:
            facts["present"] = True
            try:
                facts["units"] = parse_show(result.stdout, units)
            except ValueError as error:
                self.parse_problem("services", "systemctl show", error)
                facts["error"] = f"could not read systemctl's output: {error}"
        return facts

    # ------------------------------------------------------------ memguard
    def memguard(self) -> dict[str, Any]:
        options = self.options
        return memguard_facts(
            self.files,
            options.memguard_state_path,
            options.memguard_trip_path,
            options.memguard_log_path,
            options.proc_root,
            self.wall,
        )

    # ------------------------------------------------------------ ports
    def ports(self, docker: dict[str, Any] | None) -> dict[str, Any]:
        facts = listening_facts(self.files, self.options.proc_root, self.options.ports)
        names = {c.get("id"): c.get("name") for c in (docker or {}).get("containers") or []}
        for entry in facts["listening"]:
            entry["container_name"] = names.get(entry["container"]) if entry["container"] else None
        return facts

    # ------------------------------------------------------------ weights
    def weights(self, clock: Callable[[], float]) -> dict[str, Any]:
        options = self.options
        facts, unexpected = weights_facts(
            options.weights_path,
            options.weights_cache_dir,
            options.weights_hash_seconds,
            options.write_cache,
            clock,
        )
        if facts.get("path"):
            # the KV-relevant keys of the model's config.json, for the preflight's KV fit (never the whole file)
            facts["model_configs"], met = model_configs(facts.get("root") or "")
            unexpected += met
        for source, message in unexpected:
            self.problems.append(problem("weights", source, message))
        return facts

    # ------------------------------------------------------------ files
    def watched_files(self) -> dict[str, Any]:
        paths, unexpected = files_facts(self.options.files)
        for path, message in unexpected:
            self.problems.append(problem("files", path, message))
        return {"paths": paths}

    # ------------------------------------------------------------ secrets
    def secret_files(self) -> dict[str, Any]:
        """The secrets' files by ``stat`` alone (never opened), and the uid this module runs as: the preflight
        accepts a file owned by root or by that uid (the SSH user's, without become)."""
        paths, unexpected = secret_files_facts(self.options.secret_files)
        for path, message in unexpected:
            self.problems.append(problem("secrets", path, message))
        return {"uid": os.geteuid(), "paths": paths}


def _docker_absent(error: str, path: str | None, container_name: str | None) -> dict[str, Any]:
    return {
        "present": False,
        "error": error,
        "socket": path,
        "engine": None,
        "containers": [],
        "images": [],
        "container": {"exists": False, "name": container_name} if container_name else None,
        "runtimes": None,
        "default_runtime": None,
        "gpu_hook": None,
    }


def gather(
    options: Options,
    run: Runner,
    engine_factory: Callable[[str, float], DockerEngine] = DockerEngine,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The node's facts for ``options.sections``, plus ``sections``, ``problems`` and ``elapsed_ms``.
    ``clock`` times the gathering; ``wall`` (epoch seconds) dates the memory guard's state."""
    start = clock()
    gatherer = _Gatherer(options, run, engine_factory, wall)
    wanted = set(options.sections)
    node: dict[str, Any] = {}
    rdma = functools.lru_cache(maxsize=None)(gatherer.rdma)  # the fabric section reads it too: asked once
    # a reader per section, called in SECTIONS' order (ports reads what docker found)
    readers: dict[str, Callable[[], Any]] = {
        "memory": gatherer.memory,
        "kernel": gatherer.kernel,
        "gpu": gatherer.gpu,
        "rdma": rdma,
        "fabric": lambda: gatherer.fabric(rdma()),
        "docker": gatherer.docker,
        "limits": gatherer.limits,
        "disk": gatherer.disk,
        "services": gatherer.services,
        "memguard": gatherer.memguard,
        "ports": lambda: gatherer.ports(node.get("docker")),
        "files": gatherer.watched_files,
        "releases": lambda: releases_facts(options.releases_dir),
        "weights": lambda: gatherer.weights(clock),
        "secrets": gatherer.secret_files,
        "ranks": gatherer.ranks,
        "journal": lambda: journal_facts(options.journal_path),
        "api": lambda: api_facts(
            options.api_url, options.api_key_file, options.api_ca_file, options.api_smoke, options.timeout
        ),
    }
    for section in SECTIONS:
        if section in wanted:
            node[section] = readers[section]()
    node["sections"] = [section for section in SECTIONS if section in wanted]
    node["problems"] = gatherer.problems
    node["elapsed_ms"] = round((clock() - start) * 1000, 1)
    return node
