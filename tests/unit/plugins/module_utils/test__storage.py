# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a path is stored (node_facts' disk.mounts): the GB10 tree's mounts, and trees of other layouts."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles
from ansible_collections.dgxspark.cluster.plugins.module_utils._storage import (
    BlockDevices,
    mount_of,
    parse_mountinfo,
    storage_facts,
    unescape,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import GB10

MOUNTS = tuple(parse_mountinfo((GB10 / "proc" / "self" / "mountinfo").read_text(encoding="utf-8")))


def where(path: str, sys_root: pathlib.Path = GB10 / "sys", mounts: Any = MOUNTS) -> dict[str, Any]:
    problems: list[dict[str, str]] = []
    facts = storage_facts(path, mounts, BlockDevices(HostFiles(problems), str(sys_root)))
    assert problems == []
    return facts


def test_mountinfo_fields_as_proc5_lays_them_out() -> None:
    root = MOUNTS[0]
    assert (root.mount_point, root.major_minor, root.root, root.fstype, root.source) == (
        "/",
        "259:2",
        "/",
        "ext4",
        "/dev/nvme0n1p2",
    )
    assert root.super_options == "rw,errors=remount-ro"
    usb = next(m for m in MOUNTS if m.fstype == "exfat")
    assert usb.mount_point == "/media/usb stick"  # the kernel writes the space as \040
    assert unescape(r"a\011b\134c") == "a\tb\\c"


@pytest.mark.parametrize(
    "line,words",
    [
        ("24 1 259:2 / / rw,relatime shared:1 ext4 /dev/nvme0n1p2 rw", "no ' - ' separator"),
        ("24 1 259:2 / / rw - ext4", "at least 10 fields"),
        ("24 1 nvme / / rw - ext4 /dev/x rw", "not a major:minor"),
    ],
)
def test_a_line_that_is_not_mountinfo_is_named(line: str, words: str) -> None:
    with pytest.raises(ValueError, match=f"line 2: .*{words}|line 2: {words}"):
        parse_mountinfo("24 1 259:2 / / rw shared:1 - ext4 /dev/nvme0n1p2 rw\n" + line)


def test_the_longest_mount_point_wins_and_a_later_mount_hides_an_earlier() -> None:
    assert mount_of(MOUNTS, "/models/DeepSeek-V4.1-Flash").mount_point == "/"  # type: ignore[union-attr]
    assert mount_of(MOUNTS, "/run/engram-rows/x").mount_point == "/run/engram-rows"  # type: ignore[union-attr]
    assert mount_of(MOUNTS, "/runaway").mount_point == "/"  # type: ignore[union-attr]
    stacked = parse_mountinfo(
        "24 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
        "90 24 259:2 / /models rw - ext4 /dev/nvme0n1p2 rw\n"
        "91 24 0:53 / /models rw - nfs head:/models ro\n"
    )
    assert mount_of(stacked, "/models/a").fstype == "nfs"  # type: ignore[union-attr]


def test_the_sparks_root_is_its_nvme_ssd() -> None:
    facts = where("/models/DeepSeek-V4.1-Flash")
    assert facts["kind"] == "block"
    assert (facts["mount_point"], facts["fstype"], facts["source"], facts["device"]) == (
        "/",
        "ext4",
        "/dev/nvme0n1p2",
        "nvme0n1p2",
    )
    assert facts["disks"] == [
        {
            "name": "nvme0n1",
            "nvme": True,
            "transport": "pcie",
            "model": "NVMe SSD 4TB (illustrative model name)",
            "rotational": False,
            "removable": False,
        }
    ]


@pytest.mark.parametrize(
    "path,kind,fstype",
    [
        ("/mnt/head-models/DeepSeek-V4.1-Flash", "network", "nfs"),
        ("/run/engram-rows", "memory", "tmpfs"),
        ("/dev/shm/engram", "memory", "tmpfs"),
    ],
)
def test_network_and_memory_file_systems_have_no_disk(path: str, kind: str, fstype: str) -> None:
    facts = where(path)
    assert (facts["kind"], facts["fstype"], facts["disks"]) == (kind, fstype, [])


def test_a_usb_stick_is_a_disk_but_not_nvme() -> None:
    facts = where("/media/usb stick/engram")
    assert facts["device"] == "sda1" and [d["name"] for d in facts["disks"]] == ["sda"]
    assert facts["disks"][0]["nvme"] is False and facts["disks"][0]["removable"] is True


def test_an_overlay_is_judged_by_the_mount_under_its_upper_layer() -> None:
    facts = where("/var/lib/docker/overlay2/5e0c3f1b9a7d/merged/models")
    assert facts["fstype"] == "overlay" and facts["kind"] == "block"
    assert facts["via"] == "overlay layer /var/lib/docker/overlay2/5e0c3f1b9a7d/diff on ext4 /dev/nvme0n1p2 (/)"
    assert [d["name"] for d in facts["disks"]] == ["nvme0n1"]


def test_an_overlay_on_tmpfs_has_no_local_device() -> None:
    mounts = parse_mountinfo(
        "24 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
        "30 24 0:40 / /scratch rw - tmpfs tmpfs rw\n"
        "31 24 0:41 / /merged rw - overlay overlay rw,lowerdir=/scratch/l,upperdir=/scratch/u,workdir=/scratch/w\n"
    )
    facts = where("/merged/x", mounts=mounts)
    assert facts["kind"] == "overlay" and facts["via"] == "overlay layer /scratch/u on tmpfs tmpfs (/scratch)"


def block_tree(root: pathlib.Path, entries: dict[str, dict[str, str]]) -> pathlib.Path:
    """A /sys/class/block under ``root``: entry name -> files (relative path -> content; a trailing '/' a dir)."""
    for name, files in entries.items():
        base = root / "class" / "block" / name
        base.mkdir(parents=True, exist_ok=True)
        for relative, content in files.items():
            target = base / relative
            if relative.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content + "\n")
    return root


def test_device_mapper_is_followed_through_its_slaves_to_the_nvme_disks(tmp_path: pathlib.Path) -> None:
    # LVM on the SSD's third partition and on a second NVMe SSD (a volume group over two disks)
    sys_root = block_tree(
        tmp_path,
        {
            "nvme0n1": {"dev": "259:0", "device/transport": "pcie", "queue/rotational": "0", "nvme0n1p3/": ""},
            "nvme0n1p3": {"dev": "259:3", "partition": "3"},
            "nvme1n1": {"dev": "259:4", "device/transport": "pcie", "queue/rotational": "0"},
            "dm-0": {"dev": "252:0", "dm/name": "spark--vg-models", "slaves/nvme0n1p3/": "", "slaves/nvme1n1/": ""},
        },
    )
    mounts = parse_mountinfo(
        "24 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
        "40 24 252:0 / /models rw,relatime - xfs /dev/mapper/spark--vg-models rw\n"
    )
    facts = where("/models/DeepSeek-V4.1-Flash", sys_root, mounts)
    assert facts["device"] == "dm-0"
    assert [(d["name"], d["nvme"], d["transport"]) for d in facts["disks"]] == [
        ("nvme0n1", True, "pcie"),
        ("nvme1n1", True, "pcie"),
    ]


def test_an_anonymous_device_number_is_found_by_its_source(tmp_path: pathlib.Path) -> None:
    # btrfs reports 0:NN in mountinfo; the source names the partition (or /dev/mapper/<name>)
    sys_root = block_tree(
        tmp_path,
        {
            "nvme0n1": {"dev": "259:0", "device/transport": "pcie", "nvme0n1p2/": ""},
            "nvme0n1p2": {"dev": "259:2", "partition": "2"},
            "dm-1": {"dev": "252:1", "dm/name": "cryptdata", "slaves/nvme0n1p2/": ""},
        },
    )
    btrfs = parse_mountinfo("24 1 0:31 /@ / rw - btrfs /dev/nvme0n1p2 rw,ssd,subvol=/@\n")
    assert where("/models", sys_root, btrfs)["device"] == "nvme0n1p2"
    crypt = parse_mountinfo("24 1 0:32 / / rw - btrfs /dev/mapper/cryptdata rw\n")
    assert [d["name"] for d in where("/models", sys_root, crypt)["disks"]] == ["nvme0n1"]


def test_nvme_over_fabrics_names_its_transport(tmp_path: pathlib.Path) -> None:
    sys_root = block_tree(tmp_path, {"nvme2n1": {"dev": "259:9", "device/transport": "tcp"}})
    mounts = parse_mountinfo(
        "24 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n50 24 259:9 / /models rw - ext4 /dev/nvme2n1 rw\n"
    )
    disk = where("/models", sys_root, mounts)["disks"][0]
    assert (disk["nvme"], disk["transport"]) == (True, "tcp")


def test_no_mount_table_or_no_device_is_said() -> None:
    assert where("/models", mounts=None)["error"] == "the mount table (mountinfo) could not be read"
    zfs = parse_mountinfo("24 1 0:45 / / rw - zfs rpool/ROOT/ubuntu rw,xattr,posixacl\n")
    facts = where("/models", mounts=zfs)
    assert (facts["kind"], facts["device"], facts["error"]) == ("unknown", None, None)
    assert where("/models", mounts=[])["error"] == "no mount in the mount table holds /models"
