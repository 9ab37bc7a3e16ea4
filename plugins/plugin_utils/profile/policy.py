# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a rank may get of its node, and what the profile may ask of the node: the allow-lists, in one place.

Each table here is an allow-list (issue 26): what is not on it is refused, with the option, the rule and the waiver
that would allow it. The privilege policy of ``docker_args.py`` (the ``policy`` column of its option table, which
the validator and the renderer read alike) judges a rank's ``docker run`` options by these tables; the profile's
checks judge its secrets' paths and kernel command-line words by them. docs/security.md says what each holds and
why, and what a waiver costs.

No Ansible imports: plain data and small functions over strings.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

# ----------------------------------------------------------------------------- the checks, by waiver name
PRIVILEGED = "privileged"
HOST_MOUNTS = "host-mounts"
BIND_SOURCES = "bind-sources"
VOLUME_DRIVERS = "volume-drivers"
PID_HOST = "pid-host"
HOST_NAMESPACES = "host-namespaces"
CAPABILITIES = "dangerous-capabilities"
DEVICES = "dangerous-devices"
APPARMOR = "apparmor-unconfined"
OOM_PROTECTED = "oom-protected"
WEIGHTS_READ_ONLY = "weights-read-only"
KERNEL_WORDS = "kernel-words"

# Each check, by the name a profile's ``waivers`` accepts it under, with what it keeps (schema.WAIVABLE_CHECKS).
CHECKS = {
    PRIVILEGED: "no --privileged",
    HOST_MOUNTS: "no bind of the node's /, /etc, /proc, /sys, /root, /home, /run, /var/run, /boot, /dev, /usr, "
    "/var/lib/docker or an engine socket, read-only or not",
    BIND_SOURCES: "binds only of host.weights_path, host.secrets_dir and host.engram_path",
    VOLUME_DRIVERS: "no volume driver, no volume driver option and no --volumes-from",
    PID_HOST: "no --pid=host",
    HOST_NAMESPACES: "no --userns=host, --cgroupns=host or --uts=host",
    CAPABILITIES: "no capability but IPC_LOCK and SYS_NICE",
    DEVICES: "devices of the GPU and /dev/infiniband only, no --device-cgroup-rule",
    APPARMOR: "Docker's AppArmor profile kept",
    OOM_PROTECTED: "no --oom-kill-disable, no negative --oom-score-adj",
    WEIGHTS_READ_ONLY: "host.weights_path bound read-only",
    KERNEL_WORDS: "kernel command-line words the collection knows only",
}

# ----------------------------------------------------------------------------- mounts
# The host paths a rank may have bound (bind sources): the profile's host settings that name them. Anything else
# needs the waiver bind-sources; the system paths below stay refused even under it (host-mounts).
BIND_ROOTS = ("weights_path", "secrets_dir", "engram_path")
# Host paths no bind may be, hold or lie under, read-only or not: the node's configuration (/etc: the guard's key,
# the SSH host keys, sudoers), its kernel's interfaces (/proc: /proc/1/root is the node's whole filesystem; /sys),
# root's and the users' homes (their SSH keys), the runtime directories (/run, /var/run: the engines' sockets, the
# guard's control socket), the boot loader and kernels (/boot), the devices (/dev), the system's programs (/usr),
# the engine's state (/var/lib/docker). The GPU's files under /proc and /sys come with --gpus (the NVIDIA runtime
# mounts them), never by a bind of the profile's.
SYSTEM_PATHS = (
    "/etc",
    "/proc",
    "/sys",
    "/root",
    "/home",
    "/run",
    "/var/run",
    "/boot",
    "/dev",
    "/usr",
    "/var/lib/docker",
)
# Names of the container engines' sockets, wherever they are bound from.
SOCKET_NAMES = ("docker.sock", "containerd.sock")

# ----------------------------------------------------------------------------- devices
# The devices a rank may have (--device): the GPU's (/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm,
# /dev/nvidia-caps/...; --gpus gives them already) and the RDMA devices (/dev/infiniband: uverbs, rdma_cm).
DEVICE_PATTERNS = (
    re.compile(r"/dev/nvidia[a-z0-9-]*"),
    re.compile(r"/dev/nvidia-caps(/[a-z0-9-]+)?"),
    re.compile(r"/dev/infiniband(/(uverbs[0-9]+|rdma_cm|umad[0-9]+|issm[0-9]+|ucm[0-9]+))?"),
)
DEVICES_ALLOWED = "the GPU (/dev/nvidia*, better --gpus) and /dev/infiniband (uverbs, rdma_cm)"

# ----------------------------------------------------------------------------- capabilities
# What the seeds give a rank: IPC_LOCK (RDMA pins memory: seed 000's --cap-add=IPC_LOCK, seed 002's cap_add), and
# SYS_NICE where a profile asks for it (the engine's thread priorities). Docker's default set stays as it is.
CAPABILITIES_ALLOWED = ("IPC_LOCK", "SYS_NICE")
# What the others would give, for the refusal's message (any other name: "a capability no seed needs").
CAPABILITY_REACH = {
    "ALL": "every capability, those below included",
    "SYS_ADMIN": "mount, namespaces and most of what root may do: the usual way out of a container",
    "SYS_MODULE": "loading kernel modules: code in the node's kernel",
    "SYS_PTRACE": "tracing other processes and reading their memory (the node's, with --pid=host)",
    "SYS_RAWIO": "raw I/O ports and memory: the node's memory read and written",
    "SYS_BOOT": "rebooting the node",
    "SYS_TIME": "setting the node's clock (the memory guards refuse peer messages by their date)",
    "SYS_RESOURCE": "lifting resource limits and quotas",
    "NET_ADMIN": "reconfiguring the node's interfaces, routes and firewall (ranks run on --network=host)",
    "DAC_READ_SEARCH": "opening any file of the node by its handle (open_by_handle_at, the 'shocker' escape)",
    "BPF": "loading BPF programs into the node's kernel",
    "PERFMON": "watching the node's processes and kernel with perf",
    "AUDIT_CONTROL": "changing the node's audit rules",
    "LINUX_IMMUTABLE": "changing immutable and append-only files",
    "MAC_ADMIN": "changing the AppArmor policy",
    "MAC_OVERRIDE": "overriding the AppArmor policy",
    "SYSLOG": "reading the kernel log and the kernel addresses it holds",
}

# ----------------------------------------------------------------------------- namespaces
# Host namespaces: the network (required: NCCL and the rendezvous use the fabric) and IPC (seed 000) as the plan and
# the profile set them; no other. (--pid=host is its own check, pid-host.)
HOST_NAMESPACE_OPTIONS = {
    "--userns": "the node's user namespace: the rank's root is the node's root, without Docker's remapping",
    "--cgroupns": "the node's cgroup namespace: the rank sees and names every cgroup of the node",
    "--uts": "the node's UTS namespace: the rank may set the node's host name",
}

# ----------------------------------------------------------------------------- kernel command-line words
# The words the collection knows and may write into GRUB's configuration, each with the values it takes and where
# it comes from. A word off this list needs the waiver kernel-words (what it does to the node is the waiver's).
KERNEL_WORD_VALUES: dict[str, tuple[str, str]] = {
    # key: (a pattern of its values, why the collection knows it)
    "kho": (r"off", "kernel 7.x needs kho=off for RoCE memory registration (field report 6)"),
    "transparent_hugepage": (r"always|madvise|never", "the transparent huge page mode"),
    "hugepagesz": (r"[0-9]+[KMG]", "a huge page size (64K, 2M, 512M, 1G)"),
    "default_hugepagesz": (r"[0-9]+[KMG]", "the default huge page size"),
    "hugepages": (r"[0-9]+", "how many huge pages to reserve at boot"),
}
KERNEL_WORDS_KNOWN = "kho=off, transparent_hugepage=always|madvise|never, hugepagesz=<size>, " + (
    "default_hugepagesz=<size>, hugepages=<count>"
)


def known_kernel_word(word: str) -> bool:
    """Whether ``word`` is a kernel command-line word the collection knows (:data:`KERNEL_WORD_VALUES`)."""
    key, sep, value = word.partition("=")
    known = KERNEL_WORD_VALUES.get(key)
    return bool(sep) and known is not None and re.fullmatch(known[0], value) is not None


# ----------------------------------------------------------------------------- secrets
# The one directory a secret's file is in (host.secrets_dir): inside one of the collection's own trees, or clear of
# every system path (it neither lies in nor holds one): never a system directory (a secret named
# /etc/ssh/ssh_host_ed25519_key would have secrets.yml overwrite the node's SSH host key as root, one in
# /etc/dgxspark-memguard the guard's configuration).
DEFAULT_SECRETS_DIR = "/etc/dgxspark/secrets"
SECRETS_DIR_TREES = ("/etc/dgxspark", "/var/lib/dgxspark", "/opt/dgxspark", "/srv/dgxspark")
# System paths a secrets directory may not be in or hold, besides SYSTEM_PATHS: the programs, libraries and spools
# that root runs or reads.
SECRETS_DIR_NEVER = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/var/spool", "/var/lib/containerd")


def normal(path: str) -> str:
    """``path`` without ``.``, ``..``, repeated or trailing slashes (``//./etc/`` is ``/etc``)."""
    return "/" + "/".join(part for part in posixpath.normpath(path).split("/") if part)


def under(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or inside it (both normal)."""
    return parent == "/" or path == parent or path.startswith(parent + "/")


def secrets_dir_problem(directory: str) -> str:
    """Why ``directory`` cannot be the secrets directory; empty when it can: written as it is meant (no ``..``, no
    trailing slash), and strictly inside one of :data:`SECRETS_DIR_TREES` or clear of every system path
    (:data:`SYSTEM_PATHS`, :data:`SECRETS_DIR_NEVER`: neither in one nor holding one)."""
    if normal(directory) != directory:
        return f"write it plainly ({normal(directory)})"
    if any(directory != tree and under(directory, tree) for tree in SECRETS_DIR_TREES):
        return ""
    if any(under(directory, top) or under(top, directory) for top in SYSTEM_PATHS + SECRETS_DIR_NEVER):
        return (
            "a directory of the collection's own (inside "
            + ", ".join(SECRETS_DIR_TREES)
            + "), or one clear of the system's ("
            + ", ".join(SYSTEM_PATHS + SECRETS_DIR_NEVER)
            + ")"
        )
    return ""


def in_secrets_dir(path: str, directory: str) -> bool:
    """Whether ``path`` names a file directly in ``directory`` (not the directory, not a subdirectory's file)."""
    return normal(path) == path and posixpath.dirname(path) == directory


def host_roots(host: Mapping[str, object] | None) -> dict[str, str]:
    """The profile's bind roots (:data:`BIND_ROOTS`) that it sets, by name, as normal paths; the secrets
    directory always (its default when unset)."""
    host = host or {}
    roots: dict[str, str] = {}
    for name in BIND_ROOTS:
        value = host.get(name, DEFAULT_SECRETS_DIR if name == "secrets_dir" else None)
        if isinstance(value, str) and value.startswith("/"):
            roots[name] = normal(value)
    return roots
