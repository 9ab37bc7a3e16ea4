# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`docker run` options in a profile: one table, read by the validator and by the renderer alike.

The table (:data:`DOCKER_RUN_OPTIONS`) has every option of Docker CLI 28.2's `docker run --help` (the
engine the simulated cluster runs), so a misspelt option is caught here instead of by `docker run` in the
middle of a boot. Each option either renders as a parameter of ``community.docker.docker_container`` (the
module the vllm_container role starts a rank with), with its value read and checked the way that
parameter needs it, or is refused with the reason and what to do instead. :func:`render_docker_args` is
the only reader: the profile's validator reports its problems and the plan keeps its parameters, so an
option the validator accepts is an option that starts.

The table also holds the privilege policy (each row's ``policy``, read by :func:`privilege_policy` on the
value the row's own reader gives), which judges the options by the allow-lists of ``policy.py``: binds only of
the profile's bind roots and never of a system path, no volume driver, the GPU's and the RDMA devices only,
IPC_LOCK and SYS_NICE only, no host namespace but the network and IPC, no OOM protection, no ``--privileged`` or
``apparmor=unconfined``. Each finding is an error a profile may waive by name with a reason;
``seccomp=unconfined`` is a warning.
"""

from __future__ import annotations

import csv
import ipaddress
import math
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import did_you_mean
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import policy as _policy

# How an option's value is kept in its parameter: one value (a later option wins, as with Docker), a list
# (the option repeats), a map (NAME=VALUE pairs), one key of a map parameter (``healthcheck.interval``),
# or a flag (``--init``, ``--init=false``).
ONE = "one"
LIST = "list"
MAP = "map"
KEY = "key"
FLAG = "flag"

Convert = Callable[[str | None], Any]


@dataclass(frozen=True)
class Risk:
    """What the privilege policy finds in one option: the rank gets more of the host than serving needs."""

    check: str
    """The check, by the name a profile's ``waivers`` accepts it under; empty for a warning alone."""
    message: str
    expected: str
    warning: bool = False


Policy = Callable[[Any], "list[Risk]"]


@dataclass(frozen=True)
class DockerRunOption:
    """One `docker run` option: what it renders as, or why a rank cannot have it."""

    takes_value: bool
    parameter: str = ""
    """The ``community.docker.docker_container`` parameter it sets; empty when it is refused."""
    kind: str = ONE
    convert: Convert | None = None
    """Reads the value (None for a flag written alone); raises ``ValueError`` saying what is wrong."""
    key: str = ""
    """For :data:`KEY`: the key of the parameter's map that the option sets."""
    expected: str = ""
    """The value's form, for a problem."""
    example: str = ""
    """A value that renders, for the documentation and the tests."""
    refused: str = ""
    """Why a rank cannot have this option and what to do instead; empty when it renders."""
    requires: tuple[str, ...] = ()
    """Options this one needs (any of them)."""
    conflicts: tuple[str, ...] = ()
    """Options Docker (or the module) refuses together with this one."""
    why: str = ""
    """Why ``requires`` or ``conflicts`` hold."""
    policy: Policy | None = None
    """The privilege policy's look at the value ``convert`` read: what it gives the rank over the host."""

    @property
    def renders(self) -> bool:
        return not self.refused


# ----------------------------------------------------------------------------- values


def _text(value: str | None) -> str:
    return value or ""


def _bool(value: str | None) -> bool:
    """A flag: alone it is true; ``=true``/``=false`` as Go's strconv.ParseBool reads them."""
    if value is None:
        return True
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"'{value}' is not true or false")


def _integer(low: int | None = None, high: int | None = None) -> Convert:
    def convert(value: str | None) -> int:
        text = _text(value).strip()
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"'{text}' is not an integer") from None
        if (low is not None and number < low) or (high is not None and number > high):
            raise ValueError(
                f"{number} is outside {low if low is not None else ''}..{high if high is not None else ''}"
            )
        return number

    return convert


def _cpus(value: str | None) -> float:
    text = _text(value).strip()
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number of CPUs") from None
    if math.isnan(number) or number <= 0:
        raise ValueError(f"{text}: the number of CPUs must be above 0")
    return number


_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_MODULE_SIZE = re.compile(r"^\d+(\.\d+)?[bkmgtBKMGT]?$")


def parse_size(text: str) -> int:
    """Docker's size syntax (``112g``, ``16g``, ``512m``) in bytes."""
    raw = text.strip().lower()
    number = raw.rstrip("bkmgt")
    unit = raw[len(number) :]
    unit = unit[:-1] if unit.endswith("b") and len(unit) == 2 else unit
    if unit not in _SIZE_UNITS or not number:
        raise ValueError(f"'{text}' is not a size such as 112g")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"'{text}' is not a size such as 112g") from None
    return int(value * _SIZE_UNITS[unit])


def _size(value: str | None) -> str:
    """A size as the module reads it (``112g`` as written; ``8kb`` as 8192, since the module wants one letter)."""
    text = _text(value).strip()
    size = parse_size(text)
    if size < 0:
        raise ValueError(f"'{text}' is not a size such as 112g")
    return text if _MODULE_SIZE.match(text) else str(size)


def _swap(value: str | None) -> str:
    """``--memory-swap``: a size, or -1 for unlimited swap."""
    return "-1" if _text(value).strip() == "-1" else _size(value)


def _pair(value: str | None) -> tuple[str, str]:
    name, sep, setting = _text(value).partition("=")
    if not sep or not name.strip():
        raise ValueError(f"'{value}' is not NAME=VALUE")
    return name.strip(), setting


def _namespace(*modes: str, container: bool = False) -> Convert:
    """A namespace mode: one of ``modes``, or ``container:<name>`` where Docker allows it."""

    def convert(value: str | None) -> str:
        text = _text(value).strip()
        if text in modes or (container and text.startswith("container:") and len(text) > len("container:")):
            return text
        raise ValueError(f"'{text}' is not a mode Docker knows here")

    return convert


def _absolute(what: str) -> Convert:
    def convert(value: str | None) -> str:
        text = _text(value).strip()
        if not text.startswith("/"):
            raise ValueError(f"'{text}': {what} must be an absolute path")
        return text

    return convert


def _gpus(value: str | None) -> dict[str, Any]:
    """``--gpus all``, ``--gpus 2``, ``--gpus device=0,1`` as a device request."""
    request: dict[str, Any] = {"driver": "nvidia", "capabilities": [["gpu"]]}
    text = _text(value).strip().strip('"')
    if text == "all":
        request["count"] = -1
    elif text.isdigit():
        request["count"] = int(text)
    elif text.startswith("device=") and text[len("device=") :].strip(","):
        request["device_ids"] = [d for d in text[len("device=") :].split(",") if d]
    else:
        raise ValueError(f"'{text}': expected all, a count or device=<ids>")
    return request


@dataclass(frozen=True)
class Ulimit:
    soft: int
    hard: int
    """-1 means unlimited."""

    def as_dict(self) -> dict[str, int]:
        return {"soft": self.soft, "hard": self.hard}


def parse_ulimit(text: str) -> tuple[str, Ulimit]:
    """``memlock=-1:-1`` -> ("memlock", Ulimit(-1, -1)); ``nofile=1048576`` sets soft and hard alike."""
    name, sep, limits = text.partition("=")
    if not sep or not name:
        raise ValueError(f"'{text}' is not NAME=SOFT[:HARD]")
    soft_text, _sep, hard_text = limits.partition(":")
    try:
        soft = int(soft_text)
        hard = int(hard_text) if hard_text else soft
    except ValueError:
        raise ValueError(f"'{text}': limits must be integers (-1 for unlimited)") from None
    for value in (soft, hard):
        if value < -1:
            raise ValueError(f"'{text}': a limit below -1")
    if hard != -1 and (soft == -1 or soft > hard):
        raise ValueError(f"'{text}': the soft limit exceeds the hard limit")
    return name, Ulimit(soft, hard)


def _ulimit(value: str | None) -> str:
    name, limit = parse_ulimit(_text(value))
    return f"{name}:{limit.soft}:{limit.hard}"


def _capability(value: str | None) -> str:
    text = _text(value).strip()
    if not re.fullmatch(r"[A-Za-z_]+", text):
        raise ValueError(f"'{text}': one capability per option, such as IPC_LOCK")
    return text


def _device(value: str | None) -> str:
    """``/dev/x``, ``/dev/x:/dev/y`` or ``/dev/x:/dev/y:rwm``, the forms the module reads."""
    text = _text(value).strip()
    parts = text.split(":")
    if len(parts) > 3 or not all(p.startswith("/") for p in parts[:2]):
        raise ValueError(f"'{text}': expected HOST-PATH[:CONTAINER-PATH[:PERMISSIONS]] with absolute paths")
    if len(parts) == 3 and (not parts[2] or set(parts[2]) - set("rwm")):
        raise ValueError(f"'{text}': permissions are letters of rwm")
    return text


_VOLUME_MODES = frozenset(
    "ro rw z Z consistent delegated cached rprivate private rshared shared rslave slave nocopy".split()
)


def _volume(value: str | None) -> str:
    """``[SOURCE:]/container/path[:MODES]`` as the module reads it."""
    text = _text(value).strip()
    parts = text.split(":")
    target = parts[1] if len(parts) > 1 else parts[0]
    if len(parts) > 3 or not target.startswith("/") or (len(parts) > 1 and not parts[0]):
        raise ValueError(f"'{text}': expected [SOURCE:]CONTAINER-PATH[:MODES] with an absolute container path")
    if len(parts) == 3 and not all(m in _VOLUME_MODES for m in parts[2].split(",")):
        raise ValueError(f"'{text}': modes are among " + ", ".join(sorted(_VOLUME_MODES)))
    return text


def _tmpfs(value: str | None) -> str:
    text = _text(value).strip()
    if not text.startswith("/"):
        raise ValueError(f"'{text}': expected /CONTAINER-PATH[:OPTIONS]")
    return text


# `--mount` key -> (mounts key, how the value is read, the mount types it is valid for (None: any)).
_MOUNT_KEYS: dict[str, tuple[str, Callable[[str | None], Any], tuple[str, ...] | None]] = {
    "type": ("type", _text, None),
    "source": ("source", _text, None),
    "src": ("source", _text, None),
    "target": ("target", _text, None),
    "destination": ("target", _text, None),
    "dst": ("target", _text, None),
    "readonly": ("read_only", _bool, None),
    "ro": ("read_only", _bool, None),
    "consistency": ("consistency", _text, None),
    "bind-propagation": ("propagation", _text, ("bind",)),
    "bind-nonrecursive": ("non_recursive", _bool, ("bind",)),
    "volume-nocopy": ("no_copy", _bool, ("volume",)),
    "volume-driver": ("volume_driver", _text, ("volume",)),
    "volume-subpath": ("subpath", _text, ("volume",)),
    "image-subpath": ("subpath", _text, ("image",)),
    "tmpfs-size": ("tmpfs_size", _size, ("tmpfs",)),
    "tmpfs-mode": ("tmpfs_mode", lambda v: _octal(_text(v)), ("tmpfs",)),
}
_MOUNT_MAPS = {"volume-label": "labels", "volume-opt": "volume_options"}
_MOUNT_TYPES = ("bind", "volume", "tmpfs", "image")
_BIND_RECURSIVE = {
    "enabled": None,
    "disabled": "non_recursive",
    "writable": "read_only_non_recursive",
    "readonly": "read_only_force_recursive",
}


def _mount(value: str | None) -> dict[str, Any]:
    """``type=bind,source=/models,target=/models,readonly`` as one of the module's ``mounts``."""
    text = _text(value)
    fields = next(csv.reader([text]), [])
    mount: dict[str, Any] = {"type": "volume"}
    typed: list[tuple[str, tuple[str, ...]]] = []
    for item in fields:
        name, sep, setting = item.strip().partition("=")
        name = name.strip().lower()
        if name in _MOUNT_MAPS:
            key, inner = _pair(setting)
            mount.setdefault(_MOUNT_MAPS[name], {})[key] = inner
            typed.append((name, ("volume",)))
        elif name == "bind-recursive":
            if setting not in _BIND_RECURSIVE:
                raise ValueError(f"bind-recursive={setting}: expected one of " + ", ".join(_BIND_RECURSIVE))
            if _BIND_RECURSIVE[setting]:
                mount[str(_BIND_RECURSIVE[setting])] = True
            typed.append((name, ("bind",)))
        elif name in _MOUNT_KEYS:
            key, read, types = _MOUNT_KEYS[name]
            if not sep and read is not _bool:
                raise ValueError(f"'{item}': expected {name}=VALUE")
            mount[key] = read(setting if sep else None)
            if types:
                typed.append((name, types))
        else:
            raise ValueError(f"'{name}' is not a --mount key this collection renders: " + ", ".join(_mount_keys()))
    if mount["type"] not in _MOUNT_TYPES:
        raise ValueError(f"type={mount['type']}: expected one of " + ", ".join(_MOUNT_TYPES))
    if not str(mount.get("target", "")).startswith("/"):
        raise ValueError(f"'{text}': target=/CONTAINER-PATH is needed")
    if mount["type"] == "bind" and not mount.get("source"):
        raise ValueError(f"'{text}': a bind mount needs source=/HOST-PATH")
    for name, types in typed:
        if mount["type"] not in types:
            raise ValueError(f"{name} is for a {' or '.join(types)} mount, not {mount['type']}")
    return mount


def _octal(text: str) -> str:
    if not re.fullmatch(r"[0-7]{1,4}", text):
        raise ValueError(f"tmpfs-mode={text}: expected an octal mode such as 1777")
    return text


def _mount_keys() -> list[str]:
    return sorted([*_MOUNT_KEYS, *_MOUNT_MAPS, "bind-recursive"])


def _extra_host(value: str | None) -> tuple[str, str]:
    """``name:ip`` or ``name=ip`` (an IPv6 address may be in brackets; ``host-gateway`` is allowed)."""
    text = _text(value).strip()
    name, sep, address = text.partition("=")
    if not sep:
        name, sep, address = text.partition(":")
    address = address.strip().removeprefix("[").removesuffix("]")
    if not sep or not name or not address:
        raise ValueError(f"'{text}': expected HOST:IP")
    if address != "host-gateway":
        _ip(address)
    return name, address


def _ip(value: str | None) -> str:
    text = _text(value).strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"'{text}' is not an IP address") from None


def _port(value: str | None) -> str:
    text = _text(value).strip()
    match = re.fullmatch(r"(\d+)(?:-(\d+))?(?:/(tcp|udp|sctp))?", text)
    if not match or int(match[1]) > 65535 or (match[2] and not int(match[1]) <= int(match[2]) <= 65535):
        raise ValueError(f"'{text}': expected PORT[-PORT][/tcp|udp|sctp]")
    return text


def _security_opt(value: str | None) -> str:
    text = _text(value).strip()
    if text.startswith(("seccomp=", "seccomp:")) and text[len("seccomp=") :] not in ("unconfined", "builtin"):
        raise ValueError(
            f"'{text}': the docker CLI reads a seccomp profile file itself; "
            "community.docker.docker_container would pass the path as it is"
        )
    return text


_DURATION = re.compile(r"^((\d+)h)?((\d+)m(?!s))?((\d+)s)?((\d+)ms)?((\d+)us)?$")


def _duration(value: str | None) -> str:
    """A duration as the module reads it: ``30s``, ``1m30s``, ``500ms``."""
    text = _text(value).strip()
    if not text or not _DURATION.match(text):
        raise ValueError(f"'{text}': expected a duration such as 30s, 1m30s or 500ms (units h, m, s, ms, us)")
    return text


def _health_cmd(value: str | None) -> list[str]:
    return ["CMD-SHELL", _text(value)]


def _no_healthcheck(value: str | None) -> list[str]:
    if not _bool(value):
        raise ValueError("write --no-healthcheck alone, or leave it out")
    return ["NONE"]


def _rate(read: Callable[[str], Any]) -> Convert:
    """``PATH:RATE`` as ``{"path": ..., "rate": ...}``."""

    def convert(value: str | None) -> dict[str, Any]:
        text = _text(value).strip()
        path, sep, rate = text.rpartition(":")
        if not sep or not path.startswith("/"):
            raise ValueError(f"'{text}': expected /DEVICE-PATH:RATE")
        return {"path": path, "rate": read(rate)}

    return convert


def _bytes_rate(text: str) -> str:
    rate = _size(text)
    if parse_size(rate) <= 0:
        raise ValueError(f"'{text}': a rate above 0")
    return rate


def _iops(text: str) -> int:
    return int(_integer(1)(text))


def _restart(value: str | None) -> str:
    if _text(value).strip() != "no":
        raise ValueError(
            "automatic restarts make a memory-starved node worse (one report: ~35 restarts leaked "
            "memory until sshd hung); the collection never restarts a rank on its own"
        )
    return "no"


# ----------------------------------------------------------------------------- the privilege policy
# A rank serves a model: it needs the GPU, the RDMA devices, IPC_LOCK (RDMA pins memory), SYS_NICE where the profile
# asks (the engine's thread priorities), the weights, its secrets and the Engram rows, and nothing that reaches past
# its container into the node. What it may have is an allow-list per kind (profile/policy.py, the one place of the
# tables); each option that can give more says so here, next to how it renders, and a profile that needs it anyway
# names a waiver with its reason (``waivers``: the check's name). Every refusal names the option, the rule and that
# waiver.

PRIVILEGED = _policy.PRIVILEGED
HOST_MOUNTS = _policy.HOST_MOUNTS
BIND_SOURCES = _policy.BIND_SOURCES
VOLUME_DRIVERS = _policy.VOLUME_DRIVERS
PID_HOST = _policy.PID_HOST
HOST_NAMESPACES = _policy.HOST_NAMESPACES
CAPABILITIES = _policy.CAPABILITIES
DEVICES = _policy.DEVICES
APPARMOR = _policy.APPARMOR
OOM_PROTECTED = _policy.OOM_PROTECTED
WEIGHTS_READ_ONLY = _policy.WEIGHTS_READ_ONLY
PRIVILEGE_CHECKS = (
    PRIVILEGED,
    HOST_MOUNTS,
    BIND_SOURCES,
    VOLUME_DRIVERS,
    PID_HOST,
    HOST_NAMESPACES,
    CAPABILITIES,
    DEVICES,
    APPARMOR,
    OOM_PROTECTED,
    WEIGHTS_READ_ONLY,
)
NEEDED_CAPABILITIES = _policy.CAPABILITIES_ALLOWED

_under = _policy.under
_normal = _policy.normal


def bind(name: str, value: Any) -> tuple[str, bool] | None:
    """The host path an option binds into the rank and whether the bind is read-only; None for no bind
    (an anonymous or named volume without driver options, a tmpfs)."""
    if name == "--volume":
        parts = str(value).split(":")
        if len(parts) < 2 or not parts[0].startswith("/"):
            return None
        modes = parts[2].split(",") if len(parts) == 3 else []
        return _normal(parts[0]), "ro" in modes
    if name == "--mount" and isinstance(value, Mapping) and value.get("type") == "bind":
        # bind-recursive=writable (read_only_non_recursive) keeps only the top read-only: the mounts under it
        # stay writable in the rank, so the bind does not count as read-only.
        read_only = bool(value.get("read_only") or value.get("read_only_force_recursive"))
        return _normal(str(value.get("source", ""))), read_only and not value.get("read_only_non_recursive")
    return None


def host_path(args: Sequence[str], container_path: str) -> tuple[str, str] | None:
    """The node's path behind a path inside the rank, through the bind mounts of ``args`` (the one whose
    container path holds it most closely, the last of equals, as Docker stacks them): (the node's path, the
    option as written). None when no bind holds it (a path in the image, a named volume, a hub id)."""
    if not container_path.startswith("/"):
        return None
    wanted = _normal(container_path)
    best: tuple[str, str, str] | None = None  # (target, source, option)
    for option in parse_docker_args(args):
        value: Any = option.value
        if option.name == "--mount" and value is not None:
            try:
                value = _mount(value)
            except ValueError:
                continue
        found = bind(option.name, value) if value is not None else None
        target = _target(option.name, value) if found is not None else None
        if found is None or target is None:
            continue
        target = _normal(target)
        if _under(wanted, target) and (best is None or len(target) >= len(best[0])):
            best = (target, found[0], option.text)
    if best is None:
        return None
    target, source, text = best
    rest = wanted[len(target) :].lstrip("/") if target != "/" else wanted.lstrip("/")
    return (_normal(posixpath.join(source, rest)) if rest else source), text


def _writable_under(value: Any) -> str:
    """What a bind read-only at the top only leaves writable, for a risk's message; empty otherwise."""
    if isinstance(value, Mapping) and value.get("read_only_non_recursive"):
        return " (read-only at the top only: bind-recursive=writable leaves the mounts under it writable)"
    return ""


def system_path(source: str) -> str | None:
    """The system path (:data:`policy.SYSTEM_PATHS`) a bind of ``source`` is, lies in or holds; None for none."""
    for top in _policy.SYSTEM_PATHS:
        if _under(source, top) or _under(top, source):
            return top
    return None


def _bind_risks(name: str) -> Policy:
    def policy(value: Any) -> list[Risk]:
        found = bind(name, value)
        if found is None:
            return []
        source, _read_only = found
        if source.endswith(_policy.SOCKET_NAMES):
            reach = "a container engine's socket, root on the node"
        elif source == "/":
            reach = "the node's whole filesystem"
        else:
            top = system_path(source)
            if top is None:
                return []
            where = "in" if _under(source, top) and source != top else ("it holds" if source != top else "")
            reach = (
                f"{where + ' ' if where else ''}the system directory {top}: the node's configuration and keys, kernel "
                "interfaces, homes, runtime sockets, boot files, devices or programs, read-only or not"
            )
        return [
            Risk(
                HOST_MOUNTS,
                f"{source} of the host is bound into the rank: {reach}",
                "a bind of host.weights_path, host.secrets_dir or host.engram_path only; never of or under "
                + ", ".join(_policy.SYSTEM_PATHS),
            )
        ]

    return policy


def _privileged_risks(value: Any) -> list[Risk]:
    if value is not True:
        return []
    return [
        Risk(
            PRIVILEGED,
            "--privileged gives the rank every capability and every device of the node, without AppArmor or seccomp",
            "--gpus=all, --device=/dev/infiniband:/dev/infiniband:rwm and --cap-add=IPC_LOCK (seed 000), "
            "not --privileged",
        )
    ]


def _pid_risks(value: Any) -> list[Risk]:
    if value != "host":
        return []
    return [
        Risk(
            PID_HOST,
            "--pid=host shows the rank every process of the node, to signal and (with SYS_PTRACE) to trace",
            "no --pid (the rank's own PID namespace)",
        )
    ]


def _host_namespace_risks(option: str) -> Policy:
    def policy(value: Any) -> list[Risk]:
        if value != "host":
            return []
        return [
            Risk(
                HOST_NAMESPACES,
                f"{option}=host gives the rank {_policy.HOST_NAMESPACE_OPTIONS[option]}",
                "the host's network and IPC only (--network=host, --ipc=host), every other namespace the rank's own",
            )
        ]

    return policy


def _capability_risks(value: Any) -> list[Risk]:
    name = str(value).upper().removeprefix("CAP_")
    if name in _policy.CAPABILITIES_ALLOWED:
        return []
    reach = _policy.CAPABILITY_REACH.get(name, "a capability no seed needs")
    return [
        Risk(
            CAPABILITIES,
            f"--cap-add={value} gives the rank {reach}",
            f"only the capabilities ranks need: {', '.join(_policy.CAPABILITIES_ALLOWED)}",
        )
    ]


def _device_risks(value: Any) -> list[Risk]:
    source = _normal(str(value).split(":", maxsplit=1)[0])
    if any(pattern.fullmatch(source) for pattern in _policy.DEVICE_PATTERNS):
        return []
    if source in _MEMORY_DEVICES:
        what = "gives the rank the node's physical memory or I/O ports"
    elif source == "/dev" or _BLOCK_DEVICE.fullmatch(source):
        what = "gives the rank the node's disks (a block device): every file on them, whatever their permissions"
    else:
        what = (
            "is not a device a rank needs: anything else may be the node's memory, disks (block or SCSI/NVMe "
            "character devices), consoles or firmware"
        )
    return [Risk(DEVICES, f"--device {source} {what}", _policy.DEVICES_ALLOWED)]


# Devices that are the node's memory or its disks, named in a refusal's message (every device off the allow-list is
# refused; these say what they are).
_MEMORY_DEVICES = ("/dev/mem", "/dev/kmem", "/dev/port")
_BLOCK_DEVICE = re.compile(
    r"/dev/((sd|hd|vd|xvd)[a-z]+[0-9]*|nvme[0-9]+(n[0-9]+(p[0-9]+)?)?|mmcblk[0-9]+(p[0-9]+)?|(dm-|md|loop|nbd|sr|zram)[0-9]+"
    r"|(mapper|disk|md|block)(/.*)?)"
)


def _cgroup_rule_risks(value: Any) -> list[Risk]:
    return [
        Risk(
            DEVICES,
            f"--device-cgroup-rule '{value}' lets the rank open the devices it names once they exist in it (with "
            "Docker's default MKNOD: 'c 1:1 rwm' is /dev/mem)",
            "no --device-cgroup-rule: " + _policy.DEVICES_ALLOWED + " with --device or --gpus",
        )
    ]


def _volume_driver_risks(option: str) -> Policy:
    def policy(value: Any) -> list[Risk]:
        if option == "--mount":
            keys = [k for k in ("volume_driver", "volume_options") if isinstance(value, Mapping) and value.get(k)]
            if not keys:
                return []
            what = "volume-driver=" if "volume_driver" in keys else "volume-opt="
            message = (
                f"--mount {what}...: a volume driver's options mount whatever they name "
                "(type=none,o=bind,device=/ is a writable bind of the node's /), past the bind allow-list"
            )
        elif option == "--volumes-from":
            message = f"--volumes-from {value}: the rank gets another container's mounts, whatever they bind"
        else:
            message = f"{option} {value}: a volume driver mounts whatever its options name, past the bind allow-list"
        return [
            Risk(
                VOLUME_DRIVERS,
                message,
                "binds (--volume, --mount type=bind) of host.weights_path, host.secrets_dir or host.engram_path",
            )
        ]

    return policy


def _oom_kill_risks(value: Any) -> list[Risk]:
    if value is not True:
        return []
    return [
        Risk(
            OOM_PROTECTED,
            "--oom-kill-disable keeps the kernel's OOM killer off the rank: a GB10 out of memory then freezes "
            "instead of losing the rank",
            "no --oom-kill-disable",
        )
    ]


def _oom_score_risks(value: Any) -> list[Risk]:
    if not isinstance(value, int) or value >= 0:
        return []
    return [
        Risk(
            OOM_PROTECTED,
            f"--oom-score-adj={value} makes the kernel's OOM killer take the node's other processes (sshd, the "
            "memory guard) before the rank",
            "no --oom-score-adj, or one of 0 or above",
        )
    ]


def _security_opt_risks(value: Any) -> list[Risk]:
    key, _sep, setting = str(value).replace(":", "=", 1).partition("=")
    if key == "apparmor" and setting == "unconfined":
        return [
            Risk(
                APPARMOR,
                "apparmor=unconfined lifts Docker's AppArmor profile, which keeps a rank off /proc and /sys "
                "files that reach the node's kernel",
                "Docker's default AppArmor profile (no apparmor= option)",
            )
        ]
    if key == "systempaths" and setting == "unconfined":
        return [
            Risk(
                HOST_MOUNTS,
                "systempaths=unconfined unmasks the node's kernel files under /proc and /sys in the rank",
                "no systempaths= option",
            )
        ]
    if key == "seccomp" and setting == "unconfined":
        return [
            Risk(
                "",
                "seccomp=unconfined lifts Docker's system-call filter (seed 000 runs so); keep it only where "
                "the engine needs it",
                "Docker's default seccomp profile where the image allows it",
                warning=True,
            )
        ]
    return []


def weights_risks(name: str, value: Any, weights_path: str | None) -> list[Risk]:
    """A bind that holds the profile's ``host.weights_path`` (or lies inside it) and is not read-only."""
    found = bind(name, value)
    if found is None or not weights_path:
        return []
    source, read_only = found
    weights = _normal(weights_path)
    if read_only or not (_under(source, weights) or _under(weights, source)):
        return []
    return [
        Risk(
            WEIGHTS_READ_ONLY,
            f"the weights (host.weights_path {weights}) are bound writable into the rank through {source}"
            f"{_writable_under(value)}: a rank that is compromised or buggy could change what every later boot "
            "serves",
            f"{source}:<path>:ro (or readonly on --mount, without bind-recursive=writable)",
        )
    ]


def bind_source_risks(name: str, value: Any, roots: Mapping[str, str]) -> list[Risk]:
    """A bind whose source is not inside one of the profile's bind roots (:data:`policy.BIND_ROOTS`: the weights,
    the secrets directory, the Engram rows). A system path is host-mounts' (refused whatever the roots)."""
    found = bind(name, value)
    if found is None:
        return []
    source = found[0]
    if any(_under(source, root) for root in roots.values()) or source == "/" or system_path(source):
        return []
    if source.endswith(_policy.SOCKET_NAMES):
        return []  # host-mounts' already
    named = ", ".join(f"host.{key} {path}" for key, path in roots.items())
    return [
        Risk(
            BIND_SOURCES,
            f"{source} of the host is bound into the rank, outside the paths a rank may have ({named})",
            "a bind of or inside host.weights_path, host.secrets_dir or host.engram_path (set the one it is)",
        )
    ]


def _secret_bind(name: str, value: Any, roots: Mapping[str, str]) -> bool:
    """A read-only bind inside the secrets directory, which is a directory of the collection's own
    (``policy.secrets_dir_problem``): the one bind inside /etc that host-mounts lets through."""
    found = bind(name, value)
    directory = roots.get("secrets_dir")
    if found is None or not directory or _policy.secrets_dir_problem(directory):
        return False
    return found[1] and _under(found[0], directory)


def privilege_policy(
    args: Sequence[str], weights_path: str | None = None, roots: Mapping[str, str] | None = None
) -> list[OptionProblem]:
    """What the options give the rank over the host, read through :data:`DOCKER_RUN_OPTIONS` (each row's
    ``policy``) as the renderer reads them: an error per risk, named by its check (a profile's ``waivers``
    accept it with a reason), or a warning. An option that does not render is left to the renderer.

    ``roots`` are the host paths a rank may have bound (``policy.host_roots`` of the profile's host section); the
    bind allow-list is judged when it is given."""
    found: list[OptionProblem] = []
    for option in parse_docker_args(args):
        row = DOCKER_RUN_OPTIONS.get(option.name)
        if row is None or not row.renders or (row.takes_value and not (option.value or "").strip()):
            continue
        try:
            value = row.convert(option.value) if row.convert else option.value
        except ValueError:
            continue
        risks = (row.policy(value) if row.policy else []) + weights_risks(option.name, value, weights_path)
        if roots is not None:
            risks = [r for r in risks if not (r.check == HOST_MOUNTS and _secret_bind(option.name, value, roots))]
            risks += bind_source_risks(option.name, value, roots)
        found += [
            OptionProblem(
                option.index, option.name, r.message, option.text, r.expected, check=r.check, warning=r.warning
            )
            for r in risks
        ]
    return found


# ----------------------------------------------------------------------------- the table


def _renders(
    parameter: str,
    convert: Convert | None = None,
    *,
    kind: str = ONE,
    key: str = "",
    expected: str = "",
    example: str = "",
    requires: tuple[str, ...] = (),
    conflicts: tuple[str, ...] = (),
    why: str = "",
    takes_value: bool = True,
    policy: Policy | None = None,
) -> DockerRunOption:
    return DockerRunOption(
        takes_value,
        parameter,
        kind,
        convert,
        key,
        expected,
        example,
        "",
        requires,
        conflicts,
        why,
        policy,
    )


def _both(*policies: Policy) -> Policy:
    """Several policies' risks for one option."""

    def policy(value: Any) -> list[Risk]:
        return [risk for each in policies for risk in each(value)]

    return policy


def _flag(parameter: str, policy: Policy | None = None) -> DockerRunOption:
    return DockerRunOption(False, parameter, FLAG, _bool, expected="the flag alone, or =true / =false", policy=policy)


def _refused(reason: str, takes_value: bool = True) -> DockerRunOption:
    return DockerRunOption(takes_value, refused=reason)


_HOST_NETWORK = (
    "ranks run on the host's network (--network=host): there is no container network to give addresses, "
    "aliases, links or published ports on"
)
_NO_PARAMETER = "community.docker.docker_container has no parameter for it"
_WINDOWS = "a Windows container option; " + _NO_PARAMETER
_ENVIRONMENT = "put variables in shapes.<shape>.environment, so the plan and the rank agreement see them"
_NO_TERMINAL = "ranks run detached, without a terminal, under Ansible"
_HEALTH = ("--health-cmd", "--health-interval", "--health-retries", "--health-start-interval")
_HEALTH += ("--health-start-period", "--health-timeout")

DOCKER_RUN_OPTIONS: dict[str, DockerRunOption] = {
    "--add-host": _renders(
        "etc_hosts",
        _extra_host,
        kind=MAP,
        expected="HOST:IP (or HOST=IP, IP may be host-gateway)",
        example="head:10.99.3.1",
    ),
    "--annotation": _refused(_NO_PARAMETER),
    "--attach": _refused(_NO_TERMINAL),
    "--blkio-weight": _renders("blkio_weight", _integer(0, 1000), expected="10..1000 (0: off)", example="500"),
    "--blkio-weight-device": _refused(_NO_PARAMETER + " (use --blkio-weight)"),
    "--cap-add": _renders(
        "capabilities",
        _capability,
        kind=LIST,
        expected="one capability",
        example="SYS_NICE",
        policy=_capability_risks,
    ),
    "--cap-drop": _renders("cap_drop", _capability, kind=LIST, expected="one capability", example="MKNOD"),
    "--cgroup-parent": _renders("cgroup_parent", expected="a cgroup", example="dgxspark.slice"),
    "--cgroupns": _renders(
        "cgroupns_mode",
        _namespace("host", "private"),
        expected="host | private",
        example="private",
        policy=_host_namespace_risks("--cgroupns"),
    ),
    "--cidfile": _refused("the docker CLI writes that file; the collection finds a rank by its container name"),
    "--cpu-count": _refused(_WINDOWS),
    "--cpu-percent": _refused(_WINDOWS),
    "--cpu-period": _renders("cpu_period", _integer(1000, 1000000), expected="microseconds", example="100000"),
    "--cpu-quota": _renders("cpu_quota", _integer(-1), expected="microseconds (-1: none)", example="800000"),
    "--cpu-rt-period": _refused(_NO_PARAMETER),
    "--cpu-rt-runtime": _refused(_NO_PARAMETER),
    "--cpu-shares": _renders("cpu_shares", _integer(0), expected="a relative weight", example="1024"),
    "--cpus": _renders(
        "cpus",
        _cpus,
        expected="a number of CPUs",
        example="16",
        conflicts=("--cpu-period", "--cpu-quota"),
        why="Docker refuses --cpus together with a CFS period or quota",
    ),
    "--cpuset-cpus": _renders("cpuset_cpus", expected="CPUs such as 0-15 or 0,2", example="0-15"),
    "--cpuset-mems": _renders("cpuset_mems", expected="memory nodes such as 0", example="0"),
    "--detach-keys": _refused(_NO_TERMINAL),
    "--device": _renders(
        "devices",
        _device,
        kind=LIST,
        expected="HOST-PATH[:CONTAINER-PATH[:rwm]]",
        example="/dev/nvidia0",
        policy=_device_risks,
    ),
    "--device-cgroup-rule": _renders(
        "device_cgroup_rules",
        kind=LIST,
        expected="a cgroup rule such as 'c 231:* rwm'",
        example="c 231:* rwm",
        policy=_cgroup_rule_risks,
    ),
    "--device-read-bps": _renders(
        "device_read_bps",
        _rate(_bytes_rate),
        kind=LIST,
        expected="/DEVICE:RATE such as /dev/nvme0n1:500m",
        example="/dev/nvme0n1:500m",
    ),
    "--device-read-iops": _renders(
        "device_read_iops", _rate(_iops), kind=LIST, expected="/DEVICE:IOPS", example="/dev/nvme0n1:20000"
    ),
    "--device-write-bps": _renders(
        "device_write_bps",
        _rate(_bytes_rate),
        kind=LIST,
        expected="/DEVICE:RATE such as /dev/nvme0n1:500m",
        example="/dev/nvme0n1:500m",
    ),
    "--device-write-iops": _renders(
        "device_write_iops", _rate(_iops), kind=LIST, expected="/DEVICE:IOPS", example="/dev/nvme0n1:20000"
    ),
    "--dns": _renders("dns_servers", _ip, kind=LIST, expected="an IP address", example="10.99.0.53"),
    "--dns-option": _renders("dns_opts", kind=LIST, expected="a resolv.conf option", example="ndots:1"),
    "--dns-search": _renders("dns_search_domains", kind=LIST, expected="a domain", example="cluster.internal"),
    "--domainname": _renders("domainname", expected="a domain", example="cluster.internal"),
    "--entrypoint": _refused("set container.entrypoint: the collection renders it for every rank"),
    "--env": _refused(_ENVIRONMENT),
    "--env-file": _refused(_ENVIRONMENT),
    "--expose": _renders("exposed_ports", _port, kind=LIST, expected="PORT[-PORT][/PROTOCOL]", example="8000"),
    "--gpus": _renders("device_requests", _gpus, kind=LIST, expected="all, a count or device=<ids>", example="all"),
    "--group-add": _renders("groups", kind=LIST, expected="a group name or id", example="video"),
    "--health-cmd": _renders(
        "healthcheck",
        _health_cmd,
        kind=KEY,
        key="test",
        expected="a shell command",
        example="curl -fs http://127.0.0.1:8000/health",
    ),
    "--health-interval": _renders(
        "healthcheck", _duration, kind=KEY, key="interval", expected="a duration such as 30s", example="30s"
    ),
    "--health-retries": _renders(
        "healthcheck", _integer(0), kind=KEY, key="retries", expected="an integer", example="3"
    ),
    "--health-start-interval": _renders(
        "healthcheck", _duration, kind=KEY, key="start_interval", expected="a duration such as 5s", example="5s"
    ),
    "--health-start-period": _renders(
        "healthcheck", _duration, kind=KEY, key="start_period", expected="a duration such as 10m", example="10m"
    ),
    "--health-timeout": _renders(
        "healthcheck", _duration, kind=KEY, key="timeout", expected="a duration such as 5s", example="5s"
    ),
    "--hostname": _renders("hostname", expected="a host name", example="spark-rank"),
    "--io-maxbandwidth": _refused(_WINDOWS),
    "--io-maxiops": _refused(_WINDOWS),
    "--ip": _refused(_HOST_NETWORK),
    "--ip6": _refused(_HOST_NETWORK),
    "--ipc": _renders(
        "ipc_mode",
        _namespace("none", "private", "shareable", "host", container=True),
        expected="host | private | shareable | none | container:<name>",
        example="host",
    ),
    "--isolation": _refused(_WINDOWS),
    "--kernel-memory": _refused("deprecated: Docker ignores it on cgroup v2 (DGX OS); use --memory"),
    "--label": _refused("the collection labels every rank itself (profile and spec digests)"),
    "--label-file": _refused("the collection labels every rank itself (profile and spec digests)"),
    "--link": _refused(_HOST_NETWORK),
    "--link-local-ip": _refused(_HOST_NETWORK),
    "--log-driver": _renders("log_driver", expected="a logging driver", example="json-file"),
    "--log-opt": _renders(
        "log_options",
        _pair,
        kind=MAP,
        expected="NAME=VALUE",
        example="max-size=100m",
        requires=("--log-driver",),
        why="community.docker.docker_container applies log options only with a log driver named "
        "(json-file is Docker's default)",
    ),
    "--mac-address": _refused(_HOST_NETWORK),
    "--memory": _renders("memory", _size, expected="a size such as 112g", example="112g"),
    "--memory-reservation": _renders("memory_reservation", _size, expected="a size such as 100g", example="100g"),
    "--memory-swap": _renders(
        "memory_swap",
        _swap,
        expected="a size such as 112g, or -1",
        example="112g",
        requires=("--memory",),
        why="Docker refuses a swap limit without a memory limit",
    ),
    "--memory-swappiness": _renders("memory_swappiness", _integer(-1, 100), expected="0..100", example="0"),
    "--mount": _renders(
        "mounts",
        _mount,
        kind=LIST,
        expected="type=bind,source=/HOST-PATH,target=/CONTAINER-PATH[,readonly]",
        example="type=bind,source=/models,target=/models,readonly",
        policy=_both(_bind_risks("--mount"), _volume_driver_risks("--mount")),
    ),
    "--name": _refused("set container.name: every rank's container has the plan's name"),
    "--network": _renders("network_mode", expected="host", example="host"),
    "--network-alias": _refused(_HOST_NETWORK),
    "--oom-score-adj": _renders(
        "oom_score_adj", _integer(-1000, 1000), expected="-1000..1000", example="500", policy=_oom_score_risks
    ),
    "--pid": _renders(
        "pid_mode",
        _namespace("host", container=True),
        expected="host | container:<name>",
        example="host",
        policy=_pid_risks,
    ),
    "--pids-limit": _renders("pids_limit", _integer(-1), expected="an integer (-1: unlimited)", example="65536"),
    "--platform": _renders("platform", expected="os[/arch[/variant]]", example="linux/arm64"),
    "--publish": _refused(_HOST_NETWORK + "; the head serves on container.api_port of the host"),
    "--pull": _refused("ranks never pull (images come without a registry): load the image on every node"),
    "--restart": _renders("restart_policy", _restart, expected='"no", or no --restart', example="no"),
    "--runtime": _renders("runtime", expected="a runtime such as nvidia", example="nvidia"),
    "--security-opt": _renders(
        "security_opts",
        _security_opt,
        kind=LIST,
        expected="an option such as seccomp=unconfined",
        example="seccomp=unconfined",
        policy=_security_opt_risks,
    ),
    "--shm-size": _renders("shm_size", _size, expected="a size such as 16g", example="16g"),
    "--stop-signal": _renders("stop_signal", expected="a signal", example="SIGINT"),
    "--stop-timeout": _renders("stop_timeout", _integer(-1), expected="seconds", example="60"),
    "--storage-opt": _renders("storage_opts", _pair, kind=MAP, expected="NAME=VALUE", example="size=120G"),
    "--sysctl": _renders("sysctls", _pair, kind=MAP, expected="NAME=VALUE", example="net.core.somaxconn=4096"),
    "--tmpfs": _renders("tmpfs", _tmpfs, kind=LIST, expected="/CONTAINER-PATH[:OPTIONS]", example="/scratch:size=1g"),
    "--ulimit": _renders(
        "ulimits", _ulimit, kind=LIST, expected="NAME=SOFT[:HARD], -1 for unlimited", example="nofile=1048576:1048576"
    ),
    "--user": _renders("user", expected="USER[:GROUP]", example="1000:1000"),
    "--userns": _renders(
        "userns_mode", _namespace("host"), expected="host", example="host", policy=_host_namespace_risks("--userns")
    ),
    "--uts": _renders(
        "uts", _namespace("host"), expected="host", example="host", policy=_host_namespace_risks("--uts")
    ),
    "--volume": _renders(
        "volumes",
        _volume,
        kind=LIST,
        expected="[SOURCE:]/CONTAINER-PATH[:MODES]",
        example="/models:/models:ro",
        policy=_bind_risks("--volume"),
    ),
    "--volume-driver": _renders(
        "volume_driver",
        expected="a volume driver",
        example="local",
        policy=_volume_driver_risks("--volume-driver"),
    ),
    "--volumes-from": _renders(
        "volumes_from",
        kind=LIST,
        expected="a container",
        example="model-cache",
        policy=_volume_driver_risks("--volumes-from"),
    ),
    "--workdir": _renders(
        "working_dir", _absolute("the working directory"), expected="an absolute path", example="/workspace"
    ),
    # flags
    "--detach": _refused("every rank is started detached already", takes_value=False),
    "--disable-content-trust": _refused("ranks never pull, so there is no image to verify", takes_value=False),
    "--init": _flag("init"),
    "--interactive": _refused(_NO_TERMINAL, takes_value=False),
    "--no-healthcheck": _renders(
        "healthcheck",
        _no_healthcheck,
        kind=KEY,
        key="test",
        expected="the flag alone",
        conflicts=_HEALTH,
        why="Docker refuses --no-healthcheck with any --health-* option",
        takes_value=False,
    ),
    "--oom-kill-disable": _flag("oom_killer", _oom_kill_risks),
    "--privileged": _flag("privileged", _privileged_risks),
    "--publish-all": _refused(_HOST_NETWORK, takes_value=False),
    "--quiet": _refused("it only quiets the docker CLI's pull output; ranks never pull", takes_value=False),
    "--read-only": _flag("read_only"),
    "--rm": _refused(
        "a removed container takes its logs with it; the boot needs them to report a failure", takes_value=False
    ),
    "--sig-proxy": _refused(_NO_TERMINAL + ": there is no client to proxy signals from", takes_value=False),
    "--tty": _refused(_NO_TERMINAL, takes_value=False),
    "--use-api-socket": _refused(_NO_PARAMETER + " (and a rank has no use for the Docker API)", takes_value=False),
}
SHORT_OPTIONS = {
    "-a": "--attach",
    "-c": "--cpu-shares",
    "-d": "--detach",
    "-e": "--env",
    "-h": "--hostname",
    "-i": "--interactive",
    "-l": "--label",
    "-m": "--memory",
    "-p": "--publish",
    "-P": "--publish-all",
    "-q": "--quiet",
    "-t": "--tty",
    "-u": "--user",
    "-v": "--volume",
    "-w": "--workdir",
}
RENDERED = frozenset(name for name, row in DOCKER_RUN_OPTIONS.items() if row.renders)
"""The options that render: the only ones a "did you mean" suggests."""


# ----------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class DockerOption:
    name: str
    """The long option, e.g. ``--ulimit``; an unknown one is kept as written."""
    value: str | None
    index: int
    """Index of the option's first element in the argument list."""
    known: bool
    text: str = ""
    """The option as written (both elements of ``--ipc host``)."""
    end: int = 0
    """Index of the element after the option's last one (``args[index:end]`` holds it)."""


def parse_docker_args(args: Sequence[str], until_image: bool = False) -> list[DockerOption]:
    """Split ``["--ulimit=memlock=-1:-1", "--ipc", "host", "-e", "A=1"]`` into options, as Docker's CLI (its flag
    library, pflag) reads them: the one reader of ``docker run`` options.

    ``--name value`` and ``--name=value``; a short option ``-e A=1``, ``-eA=1`` or ``-e=A=1``; short switches
    together (``-it``); a switch takes a value only after '=' (``--init=false``), a value option the next element
    whatever it looks like. No abbreviation and no '_' for '-': pflag has neither. An unknown option is kept as
    written (a short one whole). With ``until_image``, reading stops at the first element that is not an option
    (the image: ``docker run`` reads no option after it) or at ``--``.
    """
    options: list[DockerOption] = []
    i = 0
    while i < len(args):
        start, item = i, str(args[i])
        i += 1
        if until_image and (not item.startswith("-") or item in ("-", "--")):
            break
        if item.startswith("-") and not item.startswith("--") and len(item) > 1:
            shorts = _short_options(item, args, i)
            if shorts is not None:
                parsed, i = shorts
                text = " ".join(str(a) for a in args[start:i])
                options.extend(DockerOption(name, value, start, True, text, i) for name, value in parsed)
                continue
        name, sep, inline = item.partition("=") if item.startswith("--") else (item, "", "")
        row = DOCKER_RUN_OPTIONS.get(name)
        value: str | None = inline if sep else None
        if row is not None and row.takes_value and not sep and i < len(args):
            # Like Docker's own parser: a value option takes the next element, whatever it looks like.
            value = str(args[i])
            i += 1
        options.append(DockerOption(name, value, start, row is not None, " ".join(str(a) for a in args[start:i]), i))
    return options


def _short_options(item: str, args: Sequence[str], i: int) -> tuple[list[tuple[str, str | None]], int] | None:
    """pflag's reading of one ``-xyz`` element (and the next, for ``-e A=1``): the long options and values, and the
    index after them; None when a letter is no option (the element is then kept whole as an unknown option)."""
    parsed: list[tuple[str, str | None]] = []
    rest = item[1:]
    while rest:
        letter, rest = rest[0], rest[1:]
        name = SHORT_OPTIONS.get("-" + letter)
        row = DOCKER_RUN_OPTIONS.get(name or "")
        if name is None or row is None:
            return None
        value: str | None = None
        if len(rest) > 1 and rest[0] == "=":
            value, rest = rest[1:], ""  # -e=A=1, -d=false
        elif row.takes_value and rest:
            value, rest = rest, ""  # -eA=1, -m8g
        elif row.takes_value and i < len(args):
            value = str(args[i])  # -e A=1
            i += 1
        parsed.append((name, value))
    return parsed, i


# ----------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class OptionProblem:
    """Why one option of a ``docker_run_args`` list cannot start a rank."""

    index: int
    """Index of the option's first element, to name its JSON path."""
    option: str
    message: str
    found: Any = None
    expected: str = ""
    hint: str = ""
    check: str = ""
    """The privilege policy's check (a waiver's name) for a risk; empty for an option that cannot start."""
    warning: bool = False


@dataclass
class RenderedArgs:
    params: dict[str, Any] = field(default_factory=dict)
    """The ``community.docker.docker_container`` parameters the options set."""
    problems: list[OptionProblem] = field(default_factory=list)


def render_docker_args(args: Sequence[str]) -> RenderedArgs:
    """Read every option through :data:`DOCKER_RUN_OPTIONS`: its parameters, or a problem naming it."""
    result = RenderedArgs()
    params = result.params
    kept: list[tuple[DockerOption, Any]] = []
    for option in parse_docker_args(args):
        row = DOCKER_RUN_OPTIONS.get(option.name)
        problem = _problem(option, row)
        if problem is not None:
            result.problems.append(problem)
            continue
        if row is None:  # unknown: _problem reported it
            continue
        try:
            value = row.convert(option.value) if row.convert else option.value
        except ValueError as exc:
            result.problems.append(
                OptionProblem(option.index, option.name, f"bad {option.name}: {exc}", option.value, row.expected)
            )
            continue
        kept.append((option, value))
        if row.kind == LIST:
            params.setdefault(row.parameter, []).append(value)
        elif row.kind == MAP:
            params.setdefault(row.parameter, {})[value[0]] = value[1]
        elif row.kind == KEY:
            params.setdefault(row.parameter, {})[row.key] = value
        else:
            params[row.parameter] = value
    result.problems += _between_options(kept, params)
    health = params.get("healthcheck")
    if health is not None and "test" not in health:
        # As the docker CLI does: --health-interval alone keeps the image's own test.
        health["test_cli_compatible"] = True
    return result


def _problem(option: DockerOption, row: DockerRunOption | None) -> OptionProblem | None:
    if row is None:
        hint = did_you_mean(option.name, RENDERED)
        return OptionProblem(option.index, option.name, "not a `docker run` option", option.text, hint=hint)
    if row.refused:
        return OptionProblem(
            option.index, option.name, f"{option.name} is not allowed here", option.text, hint=row.refused
        )
    if row.takes_value and not (option.value or "").strip():
        return OptionProblem(
            option.index, option.name, f"{option.name} needs a value", option.text, f"{option.name}={row.expected}"
        )
    return None


# Sysctls Docker allows in a container (its CLI's list; runc's validator agrees), by their namespace.
_IPC_SYSCTLS = frozenset(
    "kernel.msgmax kernel.msgmnb kernel.msgmni kernel.sem kernel.shmall kernel.shmmax kernel.shmmni "
    "kernel.shm_rmid_forced".split()
)


def _sysctl_namespace(name: str) -> tuple[str, str] | None:
    """The option sharing a sysctl's namespace and the namespace's name; None when it has none."""
    if name in _IPC_SYSCTLS or name.startswith("fs.mqueue."):
        return "--ipc", "IPC"
    if name.startswith("net."):
        return "--network", "network"
    return None


def _between_options(kept: Sequence[tuple[DockerOption, Any]], params: Mapping[str, Any]) -> list[OptionProblem]:
    """What Docker (or the module) refuses about options together, each at the option it concerns."""
    problems: list[OptionProblem] = []
    present = {option.name for option, _value in kept}
    modes = {"--ipc": params.get("ipc_mode"), "--network": params.get("network_mode"), "--uts": params.get("uts")}
    targets: dict[str, str] = {}
    for option, value in kept:
        row = DOCKER_RUN_OPTIONS[option.name]
        if row.requires and not present & set(row.requires):
            problems.append(
                OptionProblem(
                    option.index,
                    option.name,
                    f"{option.name} without {' or '.join(row.requires)}",
                    option.text,
                    f"{row.requires[0]} as well",
                    row.why,
                )
            )
        clashing = sorted(present & set(row.conflicts))
        if clashing:
            problems.append(
                OptionProblem(
                    option.index,
                    option.name,
                    f"{option.name} together with {', '.join(clashing)}",
                    option.text,
                    "one or the other",
                    row.why,
                )
            )
        if option.name == "--sysctl":
            namespace = _sysctl_namespace(value[0])
            if namespace is None or modes[namespace[0]] == "host":
                why = (
                    "it is not in a namespace of its own, so Docker refuses to set it for one container"
                    if namespace is None
                    else f"the rank shares the host's {namespace[1]} namespace ({namespace[0]}=host), "
                    "where Docker refuses to set it"
                )
                problems.append(
                    OptionProblem(
                        option.index,
                        option.name,
                        f"--sysctl {value[0]} cannot be set in a rank: {why}",
                        option.text,
                        hint="set it on the node instead (sysctl.d)",
                    )
                )
        target = _target(option.name, value)
        if target is not None:
            if target in targets:
                problems.append(
                    OptionProblem(
                        option.index,
                        option.name,
                        f"{option.name}: {target} is mounted twice (first by {targets[target]})",
                        option.text,
                        "one mount per container path",
                        "Docker refuses a duplicate mount point",
                    )
                )
            targets.setdefault(target, option.text)
    return problems


def _target(name: str, value: Any) -> str | None:
    """The container path an option mounts on, if it mounts."""
    if name == "--volume":
        parts = str(value).split(":")
        return parts[1] if len(parts) > 1 else parts[0]
    if name == "--mount":
        return str(value["target"])
    if name == "--tmpfs":
        return str(value).split(":", 1)[0]
    return None


# ----------------------------------------------------------------------------- reading limits


def container_ulimits(args: Sequence[str]) -> dict[str, Ulimit]:
    """The ulimits ``--ulimit`` options give; later options win, as with Docker. Bad ones are skipped."""
    result: dict[str, Ulimit] = {}
    for option in parse_docker_args(args):
        if option.name == "--ulimit" and option.value is not None:
            try:
                name, limit = parse_ulimit(option.value)
            except ValueError:
                continue
            result[name] = limit
    return result


def option_values(args: Sequence[str], name: str) -> list[str]:
    """Every value given to the long option ``name`` (its short form too), in order: the last one is Docker's for a
    one-value option."""
    return [o.value for o in parse_docker_args(args) if o.name == name and o.value is not None]
