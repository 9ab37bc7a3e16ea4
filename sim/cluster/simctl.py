#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start, check and remove a simulated DGX Spark cluster on the local Docker engine.

    sim/cluster/simctl.py up CLUSTER [--no-engine]   start (or verify) sim3, sim4 or sim8
    sim/cluster/simctl.py status CLUSTER             check a running cluster; non-zero if unwell
    sim/cluster/simctl.py down CLUSTER               remove it and everything it made
    sim/cluster/simctl.py describe CLUSTER           nodes, addresses and cabling as JSON
    sim/cluster/simctl.py leftovers CLUSTER          what of CLUSTER exists (JSON); non-zero if any
    sim/cluster/simctl.py cut CLUSTER HOST PORT      make the cable on HOST's PORT pass nothing
    sim/cluster/simctl.py mend CLUSTER HOST PORT     make it pass traffic again

Every node is a container of dgxspark-sim/node (sim/images/build.sh) running systemd, sshd and an
inner dockerd; root logs in with the cluster's own key (.cache/sim/CLUSTER/id_ed25519). The
ConnectX-7 ports are veth links moved into the node containers' network namespaces, cabled like the
real clusters (sim/cluster/clusters.json, sim/README.md). Standard library only; needs root, the
docker CLI and iproute2 (`ip`, `nsenter`) on the host.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ipaddress
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("SIM_CACHE", REPO / ".cache" / "sim"))
CLUSTERS = json.loads((HERE / "clusters.json").read_text(encoding="utf-8"))
LABEL = "org.dgxspark-sim.cluster"
PORT0, PORT1 = "enp1s0f0np0", "enp1s0f1np1"
# every capability but SYS_RESOURCE, which this kind of machine lacks (so --privileged fails), and
# those Docker 20.10 does not know (BPF, PERFMON, CHECKPOINT_RESTORE).
CAPABILITIES = (
    "AUDIT_CONTROL AUDIT_READ AUDIT_WRITE BLOCK_SUSPEND CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID "
    "IPC_LOCK IPC_OWNER KILL LEASE LINUX_IMMUTABLE MAC_ADMIN MAC_OVERRIDE MKNOD NET_ADMIN NET_BIND_SERVICE "
    "NET_BROADCAST NET_RAW SETFCAP SETGID SETPCAP SETUID SYS_ADMIN SYS_BOOT SYS_CHROOT SYS_MODULE SYS_NICE "
    "SYS_PACCT SYS_PTRACE SYS_RAWIO SYS_TIME SYS_TTY_CONFIG SYSLOG WAKE_ALARM"
).split()
SWITCH_MTU = 9000  # the simulated switch takes jumbo frames, like the real one
BOOT_TIMEOUT = float(os.environ.get("SIM_BOOT_TIMEOUT", "180"))
# parallel `docker load`s of the engine image (disk-bound on two cores: more is slower)
LOAD_JOBS = max(1, int(os.environ.get("SIM_LOAD_JOBS", "2")))

_T0 = time.monotonic()
_PRINT_LOCK = threading.Lock()


class SimError(Exception):
    """A failure to report in one line (no traceback)."""


def say(message: str) -> None:
    with _PRINT_LOCK:
        print(f"[{time.monotonic() - _T0:6.1f}s] {message}", flush=True)


def run(argv: list[str], *, check: bool = True, input_file=None, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        argv,
        stdin=input_file if input_file is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise SimError(f"{shlex.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def docker(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, timeout=timeout)


def node_exec(node: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return docker("exec", node, *args, check=check, timeout=timeout)


# --------------------------------------------------------------------------- the model
class Cluster:
    """Names, addresses and cabling of one simulated cluster (derived from clusters.json)."""

    def __init__(self, name: str):
        if name not in CLUSTERS or name.startswith("_"):
            known = ", ".join(k for k in CLUSTERS if not k.startswith("_"))
            raise SimError(f"unknown cluster {name!r} (known: {known})")
        spec = CLUSTERS[name]
        self.name = name
        self.size: int = spec["nodes"]
        self.topology: str = spec["topology"]
        self.shape: str = spec["shape"]
        self.subnet = ipaddress.ip_network(spec["management_subnet"])
        self.fabric_prefix: str = spec["fabric_prefix"]
        self.network = f"dgxspark-{name}-mgmt"
        self.network_bridge = f"dgxsim{name[3:]}-mgmt"  # host interface name (15 characters at most)
        self.switch = f"dgxsim{name[3:]}-sw" if self.topology == "switch" else None
        self.state_dir = CACHE / name
        self.key = self.state_dir / "id_ed25519"
        self.nodes = [self.hostname(rank) for rank in range(self.size)]

    def hostname(self, rank: int) -> str:
        return f"{self.name}-head" if rank == 0 else f"{self.name}-worker{rank}"

    def address(self, rank: int) -> str:
        return str(self.subnet.network_address + 10 + rank)

    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def fabric_address(self, rank: int) -> str:
        return f"{self.fabric_prefix}.{rank + 1}"

    def volume(self, rank: int) -> str:
        return f"dgxspark-{self.hostname(rank)}-docker"

    def switch_port(self, rank: int) -> str:
        return f"dgxsim{self.name[3:]}-p{rank}"

    def links(self) -> list[dict]:
        """Each cable: for direct cabling both ends are node ports; for the switch, node port <-> switch port."""
        if self.topology in ("triangle", "ring"):
            # node i's second port to node i+1's first port, wrapping: with three nodes a triangle
            # (every pair on its own cable), with four a ring.
            return [
                {"a": (self.hostname(i), PORT1), "b": (self.hostname((i + 1) % self.size), PORT0)}
                for i in range(self.size)
            ]
        if self.topology == "switch":
            return [
                {"a": (self.hostname(i), PORT1), "switch": (self.switch, self.switch_port(i))} for i in range(self.size)
            ]
        raise SimError(f"{self.name}: unknown topology {self.topology!r}")

    def cabling(self, rank: int) -> dict:
        """The machine-readable cabling facts of one node (/etc/dgxspark-sim/cabling.json)."""
        host = self.hostname(rank)
        ports: dict[str, dict] = {}
        for link in self.links():
            if "switch" in link:
                if link["a"][0] == host:
                    ports[link["a"][1]] = {
                        "peer_host": link["switch"][0],
                        "peer_port": link["switch"][1],
                        "via": "switch",
                        "reaches": [h for h in self.nodes if h != host],
                    }
                continue
            for near, far in ((link["a"], link["b"]), (link["b"], link["a"])):
                if near[0] == host:
                    ports[near[1]] = {"peer_host": far[0], "peer_port": far[1], "via": "direct", "reaches": [far[0]]}
        return {
            "cluster": self.name,
            "topology": self.topology,
            "host": host,
            "rank": rank,
            "management_address": self.address(rank),
            "fabric_address": self.fabric_address(rank),
            "link_speed_mbps": 10000,
            "mtu": "default (1500): the fabric role sets 9000",
            "ports": dict(sorted(ports.items())),
        }

    def describe(self) -> dict:
        return {
            "cluster": self.name,
            "shape": self.shape,
            "topology": self.topology,
            "management_network": self.network,
            "management_subnet": str(self.subnet),
            "host_address": self.gateway(),
            "switch": self.switch,
            "ssh_key": str(self.key),
            "nodes": [
                {
                    "host": self.hostname(r),
                    "rank": r,
                    "role": "head" if r == 0 else "worker",
                    "management_address": self.address(r),
                    "fabric_address": self.fabric_address(r),
                }
                for r in range(self.size)
            ],
            "links": [
                {"a": "/".join(link["a"]), "b": "/".join(link.get("b") or link["switch"])} for link in self.links()
            ],
            "cabling": {self.hostname(r): self.cabling(r)["ports"] for r in range(self.size)},
        }


# --------------------------------------------------------------------------- pieces
# host tools simctl uses, and the Debian package that has each
HOST_TOOLS = {"ip": "iproute2", "ss": "iproute2", "nsenter": "util-linux", "ssh": "openssh-client",
              "ssh-keygen": "openssh-client"}  # fmt: skip


def check_host_tools() -> None:
    missing = sorted({pkg for tool, pkg in HOST_TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise SimError(f"missing host tools: apt-get install -y {' '.join(missing)}")


def ensure_engine_running() -> None:
    proc = run([str(HERE / "ensure-docker.sh")], check=False, timeout=900)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise SimError("no Docker engine (sim/cluster/ensure-docker.sh failed; see above)")


def build_images(with_engine: bool) -> dict[str, str]:
    say("images: sim/images/build.sh " + ("all" if with_engine else "node"))
    proc = subprocess.run(
        [str(REPO / "sim" / "images" / "build.sh"), "all" if with_engine else "node"],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SimError("image build failed (sim/images/build.sh; see above)")
    env = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return env


def ensure_key(cluster: Cluster) -> None:
    cluster.state_dir.mkdir(parents=True, exist_ok=True)
    if cluster.key.exists() and cluster.key.with_suffix(".pub").exists():
        return
    cluster.key.unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"dgxspark-sim-{cluster.name}", "-f", str(cluster.key)])
    cluster.key.chmod(0o600)
    shown = cluster.key.relative_to(REPO) if cluster.key.is_relative_to(REPO) else cluster.key
    say(f"{cluster.name}: new SSH key {shown}")


def ensure_network(cluster: Cluster) -> None:
    proc = docker("network", "inspect", cluster.network, check=False)
    if proc.returncode == 0:
        subnets = [c.get("Subnet") for c in json.loads(proc.stdout)[0]["IPAM"]["Config"] or []]
        if str(cluster.subnet) not in subnets:
            raise SimError(f"network {cluster.network} exists with subnet {subnets}, expected {cluster.subnet}")
        return
    proc = docker(
        "network",
        "create",
        "--driver",
        "bridge",
        "--subnet",
        str(cluster.subnet),
        "--gateway",
        cluster.gateway(),
        "--opt",
        f"com.docker.network.bridge.name={cluster.network_bridge}",
        "--label",
        f"{LABEL}={cluster.name}",
        cluster.network,
        check=False,
    )
    if proc.returncode != 0:
        raise SimError(
            f"cannot create the management network {cluster.network} on {cluster.subnet}: {proc.stderr.strip()}"
            " (another Docker network on an overlapping subnet? `docker network ls`)"
        )
    say(f"{cluster.name}: management network {cluster.network} ({cluster.subnet}, host {cluster.gateway()})")


def container_state(name: str) -> dict | None:
    proc = docker("inspect", name, check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)[0]


def start_node(cluster: Cluster, rank: int, image: str) -> str:
    """Create the node container, or start it again; returns what was done."""
    name = cluster.hostname(rank)
    state = container_state(name)
    if state is not None:
        if state["Config"]["Labels"].get(LABEL) != cluster.name:
            raise SimError(f"a container named {name} exists that is not part of {cluster.name}; remove it first")
        if state["Config"]["Image"] != image:
            say(f"{name}: runs {state['Config']['Image']}, the current image is {image} (make sim-down to refresh)")
        if state["State"]["Running"]:
            return "running"
        docker("start", name)
        return "restarted"
    docker("volume", "create", "--label", f"{LABEL}={cluster.name}", cluster.volume(rank))
    argv = [
        "run",
        "--detach",
        "--name",
        name,
        "--hostname",
        name,
        "--label",
        f"{LABEL}={cluster.name}",
        "--label",
        f"org.dgxspark-sim.rank={rank}",
        "--label",
        f"org.dgxspark-sim.role={'head' if rank == 0 else 'worker'}",
        "--network",
        cluster.network,
        "--ip",
        cluster.address(rank),
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--cgroupns=host",
        "--volume",
        "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/run/lock",
        "--tmpfs",
        "/tmp",
        "--stop-signal",
        "SIGRTMIN+3",
        "--mount",
        f"type=volume,src={cluster.volume(rank)},dst=/var/lib/docker",
        "--volume",
        f"{cluster.key.with_suffix('.pub')}:/root/.ssh/authorized_keys:ro",
        # the login that is not root (sim/node/configure.sh): the same key
        "--volume",
        f"{cluster.key.with_suffix('.pub')}:/home/spark/.ssh/authorized_keys:ro",
    ]
    for cap in CAPABILITIES:
        argv += ["--cap-add", cap]
    docker(*argv, image)
    return "created"


def wait_node(cluster: Cluster, rank: int) -> float:
    """Wait until systemd, sshd (a real key login from here) and the inner dockerd are up."""
    name, start = cluster.hostname(rank), time.monotonic()
    deadline = start + BOOT_TIMEOUT

    def remaining(what: str) -> None:
        if time.monotonic() > deadline:
            raise SimError(f"{name}: {what} not ready after {BOOT_TIMEOUT:.0f}s (docker logs {name}; SIM_BOOT_TIMEOUT)")
        time.sleep(0.5)

    while True:
        proc = node_exec(name, "systemctl", "is-system-running", check=False)
        status = proc.stdout.strip()
        if status in ("running", "degraded"):
            break
        remaining(f"systemd (is-system-running: {status or proc.stderr.strip()!r})")
    if status == "degraded":
        failed = node_exec(name, "systemctl", "--failed", "--plain", "--no-legend", "--no-pager", check=False).stdout
        units = " ".join(line.split()[0] for line in failed.splitlines() if line)
        say(f"{name}: systemd degraded; failed units: {units}")
    else:
        say(f"{name}: systemd running ({time.monotonic() - start:.1f}s)")
    while node_exec(name, "systemctl", "is-active", "--quiet", "ssh", check=False).returncode != 0:
        remaining("sshd")
    while True:
        try:
            with socket.create_connection((cluster.address(rank), 22), timeout=2):
                pass
            probe = run(ssh_argv(cluster, rank, "true"), check=False, timeout=30)
            if probe.returncode == 0:
                break
            detail = probe.stderr.strip()
        except OSError as err:
            detail = str(err)
        remaining(f"SSH to root@{cluster.address(rank)} ({detail})")
    while True:
        proc = node_exec(name, "docker", "info", "--format", "{{.Driver}}", check=False)
        if proc.returncode == 0:
            if proc.stdout.strip() != "overlay2":
                raise SimError(
                    f"{name}: inner dockerd uses storage driver {proc.stdout.strip()!r}, expected overlay2 "
                    "(on the node's /var/lib/docker volume; make sim-down, then sim-up, after an image change)"
                )
            break
        remaining("inner dockerd")
    took = time.monotonic() - start
    say(f"{name}: sshd and inner dockerd ready ({took:.1f}s)")
    return took


def ssh_argv(cluster: Cluster, rank: int, *command: str) -> list[str]:
    return [
        "ssh",
        "-i",
        str(cluster.key),
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=5",
        f"root@{cluster.address(rank)}",
        *command,
    ]


def pid_of(node: str) -> int:
    state = container_state(node)
    if state is None or not state["State"]["Running"]:
        raise SimError(f"{node} is not running")
    return int(state["State"]["Pid"])


def ns_ip(pid: int, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["nsenter", "-t", str(pid), "-n", "ip", *args], check=check)


def link_info(pid: int | None, ifname: str) -> dict | None:
    argv = ["nsenter", "-t", str(pid), "-n", "ip"] if pid else ["ip"]
    proc = run([*argv, "-j", "-d", "link", "show", "dev", ifname], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return json.loads(proc.stdout)[0]


def alias_for(host: str, port: str) -> str:
    return f"dgxspark-sim peer={host}/{port}"


def link_ok(pid: int | None, ifname: str, peer_host: str, peer_port: str) -> bool:
    info = link_info(pid, ifname)
    return bool(info and info.get("ifalias") == alias_for(peer_host, peer_port) and "UP" in info.get("flags", []))


def ensure_fabric(cluster: Cluster) -> list[str]:
    """Cable the fabric (idempotent: a cable already in place is left alone). Returns what was made."""
    made: list[str] = []
    pids = {host: pid_of(host) for host in cluster.nodes}
    if cluster.switch:
        if link_info(None, cluster.switch) is None:
            run(["ip", "link", "add", cluster.switch, "type", "bridge"])
            run(["ip", "link", "set", cluster.switch, "mtu", str(SWITCH_MTU)])
            made.append(f"switch {cluster.switch}")
        run(["ip", "link", "set", cluster.switch, "up"])
        allow_switch_forwarding(cluster)
    for link in cluster.links():
        a_host, a_port = link["a"]
        if "switch" in link:
            switch, sw_port = link["switch"]
            if link_ok(pids[a_host], a_port, switch, sw_port) and link_ok(None, sw_port, a_host, a_port):
                continue
            ns_ip(pids[a_host], "link", "del", a_port, check=False)
            run(["ip", "link", "del", sw_port], check=False)
            run(
                [
                    "ip",
                    "link",
                    "add",
                    sw_port,
                    "mtu",
                    str(SWITCH_MTU),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    a_port,
                    "netns",
                    str(pids[a_host]),
                ]
            )
            run(["ip", "link", "set", sw_port, "alias", alias_for(a_host, a_port)])
            run(["ip", "link", "set", sw_port, "master", switch, "up"])
            ns_ip(pids[a_host], "link", "set", a_port, "alias", alias_for(switch, sw_port))
            ns_ip(pids[a_host], "link", "set", a_port, "up")
            made.append(f"{a_host}/{a_port} <-> {switch}/{sw_port}")
            continue
        b_host, b_port = link["b"]
        if link_ok(pids[a_host], a_port, b_host, b_port) and link_ok(pids[b_host], b_port, a_host, a_port):
            continue
        ns_ip(pids[a_host], "link", "del", a_port, check=False)
        ns_ip(pids[b_host], "link", "del", b_port, check=False)
        # created straight in the two namespaces: nothing of it ever shows on the host
        ns_ip(pids[a_host], "link", "add", a_port, "type", "veth", "peer", "name", b_port, "netns", str(pids[b_host]))
        ns_ip(pids[a_host], "link", "set", a_port, "alias", alias_for(b_host, b_port), "up")
        ns_ip(pids[b_host], "link", "set", b_port, "alias", alias_for(a_host, a_port), "up")
        made.append(f"{a_host}/{a_port} <-> {b_host}/{b_port}")
    return made


def _switch_rule(cluster: Cluster) -> list[str]:
    return ["DOCKER-USER", "-i", cluster.switch, "-o", cluster.switch, "-m", "comment", "--comment",
            f"dgxspark-sim {cluster.name} switch", "-j", "ACCEPT"]  # fmt: skip


def allow_switch_forwarding(cluster: Cluster) -> None:
    """Docker sets FORWARD to DROP and br_netfilter sends bridged frames through it: let the switch switch."""
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists() or not shutil.which("iptables"):
        return
    if run(["iptables", "-C", *_switch_rule(cluster)], check=False).returncode != 0:
        run(["iptables", "-I", *_switch_rule(cluster)])


def remove_switch_forwarding(cluster: Cluster) -> None:
    if not cluster.switch or not shutil.which("iptables"):
        return
    while run(["iptables", "-C", *_switch_rule(cluster)], check=False).returncode == 0:
        run(["iptables", "-D", *_switch_rule(cluster)])


# Docker mounts /proc/sys read-only in a container. The node's network sysctls belong to its own network
# namespace (rp_filter, forwarding: what the fabric role sets), so /proc/sys/net is made writable; the rest
# of /proc/sys stays read-only, since those settings would be the build machine's own.
NET_SYSCTLS_WRITABLE = (
    "f=/proc/sys/net/ipv4/ip_forward; cat $f > $f 2>/dev/null || "
    "{ mount --bind /proc/sys/net /proc/sys/net && mount -o remount,bind,rw /proc/sys/net; }"
)


def writable_net_sysctls(cluster: Cluster, rank: int) -> None:
    proc = node_exec(cluster.hostname(rank), "sh", "-c", NET_SYSCTLS_WRITABLE, check=False)
    if proc.returncode != 0:
        raise SimError(f"{cluster.hostname(rank)}: cannot make /proc/sys/net writable: {proc.stderr.strip()}")


def write_cabling(cluster: Cluster, rank: int) -> None:
    data = json.dumps(cluster.cabling(rank), indent=2) + "\n"
    proc = subprocess.run(
        ["docker", "exec", "-i", cluster.hostname(rank), "sh", "-c",
         "mkdir -p /etc/dgxspark-sim && cat > /etc/dgxspark-sim/cabling.json.tmp && "
         "mv /etc/dgxspark-sim/cabling.json.tmp /etc/dgxspark-sim/cabling.json"],
        input=data, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SimError(f"{cluster.hostname(rank)}: cannot write cabling.json: {proc.stderr.strip()}")


def load_engine(cluster: Cluster, rank: int, image: str, tar: str) -> str:
    name = cluster.hostname(rank)
    if node_exec(name, "docker", "image", "inspect", image, check=False).returncode != 0:
        start = time.monotonic()
        with open(tar, "rb") as stream:
            proc = subprocess.run(
                ["docker", "exec", "-i", name, "docker", "load", "--quiet"],
                stdin=stream, capture_output=True, text=True, check=False, timeout=600,
            )  # fmt: skip
        if proc.returncode != 0:
            raise SimError(f"{name}: docker load of {tar} failed: {proc.stderr.strip()}")
        result = f"loaded in {time.monotonic() - start:.1f}s"
    else:
        result = "already there"
    node_exec(name, "docker", "tag", image, "dgxspark-sim/engine:latest")
    # engine images of older inputs: untag them (a container still using one keeps its image)
    tags = node_exec(name, "docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "dgxspark-sim/engine")
    stale = [tag for tag in tags.stdout.split() if tag not in (image, "dgxspark-sim/engine:latest")]
    if stale:
        node_exec(name, "docker", "rmi", *stale, check=False)
        result += f"; removed {' '.join(stale)}"
    return result


def ssh_clients_of(cluster: Cluster) -> list[int]:
    """PIDs of this machine's processes with a TCP connection into the cluster's management subnet
    (SSH ControlPersist masters left by ansible), so that they can be ended with the cluster."""
    proc = run(["ss", "-Htnp", "dst", str(cluster.subnet)], check=False)
    pids = set()
    for line in proc.stdout.splitlines():
        for part in line.split("pid=")[1:]:
            pid = part.split(",", 1)[0]
            if pid.isdigit():
                pids.add(int(pid))
    return sorted(pid for pid in pids if Path(f"/proc/{pid}/comm").exists()
                  and Path(f"/proc/{pid}/comm").read_text().strip() == "ssh")  # fmt: skip


def cgroup_dirs(cluster: Cluster) -> list[Path]:
    """The inner dockerds' cgroups (/sys/fs/cgroup/<controller>/dgxspark-sim/<host>) of this cluster."""
    found = []
    root = Path("/sys/fs/cgroup")
    if not root.is_dir():
        return found
    for controller in sorted(root.iterdir()):
        if controller.is_symlink():
            continue
        for host in cluster.nodes:
            path = controller / "dgxspark-sim" / host
            if path.is_dir():
                found.append(path)
    return found


def remove_cgroup_tree(path: Path) -> None:
    for dirpath, _dirs, _files in sorted(os.walk(path), key=lambda item: -item[0].count("/")):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
    parent = path.parent
    if parent.name == "dgxspark-sim":
        try:
            parent.rmdir()  # only when no other cluster uses it
        except OSError:
            pass


# --------------------------------------------------------------------------- commands
def cmd_up(cluster: Cluster, with_engine: bool) -> int:
    start = time.monotonic()
    say(f"{cluster.name}: up ({cluster.size} nodes, {cluster.topology})")
    check_host_tools()
    ensure_engine_running()
    images = build_images(with_engine)
    node_image = images["SIM_NODE_IMAGE"]
    ensure_key(cluster)
    ensure_network(cluster)
    actions = {}
    for rank in range(cluster.size):
        actions[cluster.hostname(rank)] = start_node(cluster, rank, node_image)
    say(f"{cluster.name}: nodes " + ", ".join(f"{host} {what}" for host, what in actions.items()))
    with concurrent.futures.ThreadPoolExecutor(max_workers=cluster.size) as pool:
        list(pool.map(lambda rank: wait_node(cluster, rank), range(cluster.size)))
    made = ensure_fabric(cluster)
    for line in made:
        say(f"{cluster.name}: cabled {line}")
    if not made:
        say(f"{cluster.name}: fabric already cabled ({len(cluster.links())} links)")
    for rank in range(cluster.size):
        writable_net_sysctls(cluster, rank)
        write_cabling(cluster, rank)
    if with_engine:
        image, tar = images["SIM_ENGINE_IMAGE"], images["SIM_ENGINE_TAR"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=LOAD_JOBS) as pool:
            results = list(pool.map(lambda rank: load_engine(cluster, rank, image, tar), range(cluster.size)))
        for rank, result in enumerate(results):
            say(f"{cluster.hostname(rank)}: engine image {image} {result}")
    problems = check(cluster, with_engine, images.get("SIM_ENGINE_IMAGE") if with_engine else None)
    if problems:
        for problem in problems:
            say(f"PROBLEM: {problem}")
        return 1
    (cluster.state_dir / "state.json").write_text(
        json.dumps({"images": images, "up_seconds": time.monotonic() - start}, indent=2)
    )
    say(f"{cluster.name}: up in {time.monotonic() - start:.1f}s; `ansible all -i inventories/{cluster.name} -m ping`")
    for rank in range(cluster.size):
        host, address, fabric = cluster.hostname(rank), cluster.address(rank), cluster.fabric_address(rank)
        say(f"  {host:<14} root@{address:<12} fabric address {fabric} (the fabric role assigns it)")
    return 0


def check(cluster: Cluster, with_engine: bool = True, engine_image: str | None = None) -> list[str]:
    problems = []
    for rank, host in enumerate(cluster.nodes):
        state = container_state(host)
        if state is None or not state["State"]["Running"]:
            problems.append(f"{host}: not running")
            continue
        status = node_exec(host, "systemctl", "is-system-running", check=False).stdout.strip()
        if status not in ("running", "degraded"):
            problems.append(f"{host}: systemd is {status!r}")
        if run(ssh_argv(cluster, rank, "true"), check=False, timeout=30).returncode != 0:
            problems.append(f"{host}: no SSH login as root@{cluster.address(rank)} with {cluster.key}")
        pid = int(state["State"]["Pid"])
        for port, peer in cluster.cabling(rank)["ports"].items():
            if not link_ok(pid, port, peer["peer_host"], peer["peer_port"]):
                problems.append(f"{host}: {port} is not up and cabled to {peer['peer_host']}/{peer['peer_port']}")
        if with_engine:
            image = engine_image or "dgxspark-sim/engine:latest"
            if node_exec(host, "docker", "image", "inspect", image, check=False).returncode != 0:
                problems.append(f"{host}: engine image {image} missing from the inner dockerd")
    if cluster.switch:
        for rank in range(cluster.size):
            info = link_info(None, cluster.switch_port(rank))
            if not info or info.get("master") != cluster.switch:
                problems.append(f"{cluster.switch}: port {cluster.switch_port(rank)} missing")
    return problems


def cmd_status(cluster: Cluster) -> int:
    problems = check(cluster)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not problems:
        print(f"{cluster.name}: {cluster.size} nodes up, SSH, fabric ({cluster.topology}) and engine image in place")
    return 1 if problems else 0


def leftovers(cluster: Cluster) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    names = docker("ps", "-a", "--filter", f"label={LABEL}={cluster.name}", "--format", "{{.Names}}").stdout.split()
    names += [n for n in cluster.nodes if container_state(n) is not None and n not in names]
    found["containers"] = names
    found["volumes"] = docker("volume", "ls", "-q", "--filter", f"label={LABEL}={cluster.name}").stdout.split()
    found["networks"] = docker("network", "ls", "-q", "--filter", f"name=^{cluster.network}$").stdout.split()
    prefix = f"dgxsim{cluster.name[3:]}-"
    proc = run(["ip", "-j", "link", "show"], check=False)
    found["host_links"] = [i["ifname"] for i in json.loads(proc.stdout or "[]") if i["ifname"].startswith(prefix)]
    found["cgroups"] = [str(p) for p in cgroup_dirs(cluster)]
    found["files"] = [str(cluster.state_dir)] if cluster.state_dir.exists() else []
    found["ssh_clients"] = [str(p) for p in ssh_clients_of(cluster)]
    if cluster.switch and shutil.which("iptables"):
        if run(["iptables", "-C", *_switch_rule(cluster)], check=False).returncode == 0:
            found["iptables"] = [" ".join(_switch_rule(cluster))]
    return {k: v for k, v in found.items() if v}


def cmd_down(cluster: Cluster) -> int:
    start = time.monotonic()
    say(f"{cluster.name}: down")
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        raise SimError("no Docker engine answers: nothing to tear down here (sim/cluster/ensure-docker.sh starts one)")
    for pid in ssh_clients_of(cluster):
        try:
            os.kill(pid, 15)
            say(f"{cluster.name}: ended SSH client {pid} (a ControlPersist master into {cluster.subnet})")
        except ProcessLookupError:
            pass
    found = leftovers(cluster)
    if found.get("containers"):
        docker("rm", "--force", "--volumes", *found["containers"])
        say(f"{cluster.name}: removed containers {' '.join(found['containers'])}")
    volumes = docker("volume", "ls", "-q", "--filter", f"label={LABEL}={cluster.name}").stdout.split()
    if volumes:
        docker("volume", "rm", "--force", *volumes)
        say(f"{cluster.name}: removed volumes {' '.join(volumes)}")
    if found.get("networks"):
        docker("network", "rm", cluster.network)
        say(f"{cluster.name}: removed network {cluster.network}")
    remove_switch_forwarding(cluster)
    prefix = f"dgxsim{cluster.name[3:]}-"
    proc = run(["ip", "-j", "link", "show"], check=False)
    for link in json.loads(proc.stdout or "[]"):
        if link["ifname"].startswith(prefix):
            run(["ip", "link", "del", link["ifname"]], check=False)
            say(f"{cluster.name}: removed host link {link['ifname']}")
    for path in cgroup_dirs(cluster):
        remove_cgroup_tree(path)
    if cluster.state_dir.exists():
        shutil.rmtree(cluster.state_dir)
        say(f"{cluster.name}: removed {cluster.state_dir} (SSH key, state)")
    time.sleep(0.2)
    rest = leftovers(cluster)
    if rest:
        say(f"{cluster.name}: still present after down: {json.dumps(rest)}")
        return 1
    say(f"{cluster.name}: down in {time.monotonic() - start:.1f}s, nothing left")
    return 0


# A cut cable passes nothing while both ports stay up, as a broken cable or transceiver does: DROP rules
# in the node, on that port only, which nothing of the collection touches (a port set down by hand
# would be mended by the fabric role, which brings planned ports up).
CUT_COMMENT = "dgxspark-sim-cut"


def cut_rules(port: str) -> list[list[str]]:
    return [
        ["INPUT", "-i", port, "-m", "comment", "--comment", CUT_COMMENT, "-j", "DROP"],
        ["OUTPUT", "-o", port, "-m", "comment", "--comment", CUT_COMMENT, "-j", "DROP"],
    ]


def cmd_cut(cluster: Cluster, host: str, port: str, cut: bool) -> int:
    hosts = [cluster.hostname(rank) for rank in range(cluster.size)]
    if host not in hosts:
        raise SimError(f"{host} is not a node of {cluster.name} ({', '.join(hosts)})")
    ports = cluster.cabling(hosts.index(host)).get("ports", {})
    if port not in ports:
        raise SimError(f"{host} has no cabled port {port} (cabled: {', '.join(sorted(ports)) or 'none'})")
    peer = ports[port]
    for rule in cut_rules(port):
        present = node_exec(host, "iptables", "-w", "-C", *rule, check=False).returncode == 0
        if cut and not present:
            node_exec(host, "iptables", "-w", "-I", rule[0], "1", *rule[1:])
        elif not cut and present:
            node_exec(host, "iptables", "-w", "-D", *rule)
    far = f"{peer.get('peer_host', 'the switch')} {peer.get('peer_port', '')}".rstrip()
    say(f"{cluster.name}: the cable {host} {port} <-> {far} {'passes nothing' if cut else 'passes traffic again'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["up", "down", "status", "describe", "leftovers", "cut", "mend"])
    parser.add_argument("cluster", help="sim3, sim4 or sim8")
    parser.add_argument("host", nargs="?", help="cut, mend: the node, such as sim3-worker1")
    parser.add_argument("port", nargs="?", help="cut, mend: its port, such as enp1s0f0np0")
    parser.add_argument("--no-engine", action="store_true", help="up: skip the engine image (faster)")
    args = parser.parse_args(argv)
    try:
        cluster = Cluster(args.cluster)
        if args.command == "describe":
            print(json.dumps(cluster.describe(), indent=2))
            return 0
        if os.geteuid() != 0:
            raise SimError("needs root (veth links in container namespaces, iptables, the Docker engine)")
        if args.command == "up":
            return cmd_up(cluster, with_engine=not args.no_engine)
        if args.command == "down":
            return cmd_down(cluster)
        if args.command in ("cut", "mend"):
            if not (args.host and args.port):
                raise SimError(f"{args.command} needs HOST and PORT, e.g. {args.command} sim3 sim3-worker1 {PORT0}")
            return cmd_cut(cluster, args.host, args.port, args.command == "cut")
        if args.command == "leftovers":
            found = leftovers(cluster)
            print(json.dumps(found, indent=2))
            return 1 if found else 0
        return cmd_status(cluster)
    except SimError as err:
        print(f"simctl: ERROR: {err}", file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired as err:
        print(f"simctl: ERROR: timed out: {shlex.join(err.cmd)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
