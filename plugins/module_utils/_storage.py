# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a path is stored: its mount and the block devices under it (node_facts' ``disk.mounts``).

Seed 002 puts the Engram tables "op lokale NVMe" (sections 1 and 5.2): Engram on disk reads rows during every
forward pass, so the path it reads must sit on the node's own NVMe SSD, not on a network file system, in memory
or on another disk. This module says which, from what the kernel publishes, read under ``proc_root`` and
``sys_root`` so that a test can point them at a fixture tree:

- the mount: ``/proc/self/mountinfo`` (proc(5)): the line whose mount point is the longest prefix of the path
  (the last of equal ones: a later mount hides an earlier one), giving the file system type, the mount source
  and the device number (``major:minor``);
- the device: the ``/sys/class/block/<name>`` entry whose ``dev`` file holds that number (for a file system
  with an anonymous device number, such as btrfs, the mount source ``/dev/<name>``, or a device-mapper name
  ``/dev/mapper/<name>`` found by ``dm/name``);
- the disks: a partition's whole disk (the entry with a ``<partition>`` directory, where sysfs keeps it), and a
  device-mapper or md device's ``slaves``, followed down to whole disks;
- each disk: NVMe when its name is ``nvme*``, with the controller's ``device/transport`` (``pcie`` is the local
  SSD; ``tcp``, ``rdma`` and ``fc`` are NVMe over Fabrics, another machine's disk), ``device/model``,
  ``queue/rotational`` and ``removable``;
- an overlay mount (Docker's) is judged by the mount that holds its ``upperdir`` (else its first ``lowerdir``).

``kind`` sums it up: ``block`` (disks found), ``network``, ``memory`` (tmpfs, ramfs), ``overlay`` (no local
device behind it) or ``unknown`` (no device could be found, e.g. zfs). No Ansible imports; Pythons 3.8+.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles

NETWORK_FSTYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "9p",
        "lustre",
        "beegfs",
        "gpfs",
        "afs",
        "davfs",
        "fuse.sshfs",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
        "fuse.juicefs",
        "fuse.glusterfs",
        "fuse.ceph",
        "fuse.davfs2",
    }
)
MEMORY_FSTYPES = frozenset({"tmpfs", "ramfs"})
OVERLAY = "overlay"
MAX_DEPTH = 8
_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field: str) -> str:
    """A mountinfo path as the kernel escapes it (``\\040`` for a space, ``\\011``, ``\\012``, ``\\134``)."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    mount_point: str
    major_minor: str
    root: str
    fstype: str
    source: str
    super_options: str


def parse_mountinfo(text: str) -> list[Mount]:
    """Every line of ``/proc/<pid>/mountinfo``; raises ValueError, naming the line, on one that is not one."""
    mounts: list[Mount] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            separator = fields.index("-", 6)
        except ValueError:
            raise ValueError(f"line {number}: no ' - ' separator after the optional fields: {line[:120]!r}") from None
        if separator < 6 or len(fields) < separator + 3:
            raise ValueError(f"line {number}: expected at least 10 fields: {line[:120]!r}")
        if not re.fullmatch(r"\d+:\d+", fields[2]):
            raise ValueError(f"line {number}: {fields[2]!r} is not a major:minor device number")
        mounts.append(
            Mount(
                mount_point=unescape(fields[4]),
                major_minor=fields[2],
                root=unescape(fields[3]),
                fstype=fields[separator + 1],
                source=unescape(fields[separator + 2]),
                super_options=fields[separator + 3] if len(fields) > separator + 3 else "",
            )
        )
    return mounts


def _holds(mount_point: str, path: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def mount_of(mounts: list[Mount], path: str) -> Mount | None:
    """The mount ``path`` (absolute, normalised) lies on: the longest mount point holding it, the last of equals."""
    best: Mount | None = None
    for mount in mounts:
        if _holds(mount.mount_point, path) and (best is None or len(mount.mount_point) >= len(best.mount_point)):
            best = mount
    return best


def _option(options: str, name: str) -> str | None:
    for item in options.split(","):
        key, _sep, value = item.partition("=")
        if key == name and value:
            return value
    return None


class BlockDevices:
    """``/sys/class/block`` (under ``sys_root``): device numbers to names, partitions to disks, slaves."""

    def __init__(self, files: HostFiles, sys_root: str, section: str = "disk") -> None:
        self.files = files
        self.root = os.path.join(sys_root, "class", "block")
        self.section = section
        self._names: list[str] | None = None
        self._by_number: dict[str, str] = {}

    def names(self) -> list[str]:
        if self._names is None:
            self._names = self.files.listdir(self.root, self.section)
            for name in self._names:
                number = self.files.read(os.path.join(self.root, name, "dev"), self.section)
                if number:
                    self._by_number.setdefault(number.strip(), name)
        return self._names

    def read(self, name: str, *parts: str) -> str | None:
        return self.files.read(os.path.join(self.root, name, *parts), self.section)

    def name_of(self, major_minor: str, source: str) -> str | None:
        """The kernel's name of the device a mount is on (``nvme0n1p2``, ``dm-0``), or None."""
        names = self.names()
        if not major_minor.startswith("0:") and major_minor in self._by_number:
            return self._by_number[major_minor]
        if source.startswith("/dev/mapper/"):
            wanted = source[len("/dev/mapper/") :]
            return next((n for n in names if (self.read(n, "dm", "name") or "") == wanted), None)
        if source.startswith("/dev/"):
            base = os.path.basename(source)
            if base in names:
                return base
        return None

    def parent(self, name: str) -> str | None:
        """The whole disk a partition belongs to (sysfs keeps a partition inside its disk's directory)."""
        real = os.path.realpath(os.path.join(self.root, name))
        above = os.path.basename(os.path.dirname(real))
        if above in self.names() and above != name:
            return above
        return next((n for n in self.names() if n != name and os.path.isdir(os.path.join(self.root, n, name))), None)

    def disks(self, name: str, depth: int = 0) -> list[str]:
        """The whole disks under a device: through a partition's disk, and a device-mapper or md device's
        ``slaves``, down to the disks; the device itself when it is one."""
        if depth > MAX_DEPTH:
            return []
        slaves = self.files.listdir(os.path.join(self.root, name, "slaves"), self.section)
        if slaves:
            found: list[str] = []
            for slave in slaves:
                for disk in self.disks(slave, depth + 1):
                    if disk not in found:
                        found.append(disk)
            return found
        if self.read(name, "partition") is not None:
            disk = self.parent(name)
            return [disk] if disk else [name]
        return [name]

    def disk(self, name: str) -> dict[str, Any]:
        """One whole disk: ``nvme``, ``transport`` (NVMe: pcie, tcp, rdma, fc, loop), ``model``, ``rotational``
        and ``removable`` (null where sysfs has no value)."""
        rotational = self.read(name, "queue", "rotational")
        removable = self.read(name, "removable")
        model = self.read(name, "device", "model")
        nvme = name.startswith("nvme")
        return {
            "name": name,
            "nvme": nvme,
            "transport": (self.read(name, "device", "transport") or None) if nvme else None,
            "model": model.strip() if model else None,
            "rotational": None if rotational is None else rotational.strip() == "1",
            "removable": None if removable is None else removable.strip() == "1",
        }


def storage_facts(path: str, mounts: list[Mount] | None, devices: BlockDevices) -> dict[str, Any]:
    """Where ``path`` is stored: its mount, its device and the disks under it, and ``kind``. ``mounts`` None:
    mountinfo could not be read (``error`` says so)."""
    resolved = os.path.realpath(path)
    facts: dict[str, Any] = {
        "path": path,
        "resolved": resolved,
        "mount_point": None,
        "fstype": None,
        "source": None,
        "major_minor": None,
        "device": None,
        "disks": [],
        "via": None,
        "kind": "unknown",
        "error": None,
    }
    if mounts is None:
        facts["error"] = "the mount table (mountinfo) could not be read"
        return facts
    mount = mount_of(mounts, resolved)
    if mount is None:
        facts["error"] = f"no mount in the mount table holds {resolved}"
        return facts
    facts.update(mount_point=mount.mount_point, fstype=mount.fstype, source=mount.source, major_minor=mount.major_minor)
    if mount.fstype in NETWORK_FSTYPES:
        facts["kind"] = "network"
        return facts
    if mount.fstype in MEMORY_FSTYPES:
        facts["kind"] = "memory"
        return facts
    if mount.fstype == OVERLAY:
        layer = _option(mount.super_options, "upperdir")
        lower = _option(mount.super_options, "lowerdir")
        layer = layer or (lower.split(":", 1)[0] if lower else None)
        below = mount_of([m for m in mounts if m is not mount], os.path.normpath(layer)) if layer else None
        if below is None or below.fstype in (OVERLAY, *MEMORY_FSTYPES, *NETWORK_FSTYPES):
            facts["kind"] = OVERLAY
            facts["via"] = f"overlay {'layer ' + layer if layer else 'without an upperdir or lowerdir'}" + (
                f" on {below.fstype} {below.source} ({below.mount_point})" if below else ""
            )
            return facts
        facts["via"] = f"overlay layer {layer} on {below.fstype} {below.source} ({below.mount_point})"
        mount = below
    name = devices.name_of(mount.major_minor, mount.source)
    if name is None:
        return facts
    facts["device"] = name
    facts["disks"] = [devices.disk(disk) for disk in devices.disks(name)]
    facts["kind"] = "block" if facts["disks"] else "unknown"
    return facts
