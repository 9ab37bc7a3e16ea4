# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import errno
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles, is_quiet
from ansible_collections.dgxspark.cluster.plugins.module_utils._sysfs import (
    SysfsReader,
    default_fabric_interfaces,
    gid_ipv4,
    normalize_speed,
    parse_gid,
    parse_port_state,
    parse_rate_gbps,
    roce_version,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    BARE,
    GB10,
    sample_body,
)


def reader(root: pathlib.Path) -> tuple[SysfsReader, list[dict[str, str]]]:
    problems: list[dict[str, str]] = []
    return SysfsReader(HostFiles(problems), str(root / "sys")), problems


# ---------------------------------------------------------------- pure parsers
def rate_state_rows() -> list[tuple[str, str, str]]:
    """(device, rate, state) from the ZGX Nano sysfs sample: `<dev>  <rate>  <state>`."""
    rows = []
    for line in sample_body("sysfs-ib-rate-state.zgx-nano.stondo-4-roce-devs.txt").splitlines():
        if line.strip():
            device, rest = line.split(None, 1)
            rate, _sep, state = rest.partition(")")
            rows.append((device, rate.strip() + ")", state.strip()))
    return rows


@pytest.mark.parametrize("device,rate,state", rate_state_rows())
def test_rate_and_state_from_the_zgx_sample(device: str, rate: str, state: str) -> None:
    if device.endswith("f1"):
        assert parse_rate_gbps(rate) == 200.0 and parse_port_state(state) == (4, "ACTIVE")
    else:
        assert parse_rate_gbps(rate) == 40.0 and parse_port_state(state) == (1, "DOWN")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4: ACTIVE", (4, "ACTIVE")),
        ("5: LinkUp\n", (5, "LinkUp")),
        ("3: Disabled", (3, "Disabled")),
        ("odd", (None, "odd")),
    ],
)
def test_port_state(text: str, expected: tuple[Any, str]) -> None:
    assert parse_port_state(text) == expected


@pytest.mark.parametrize(
    "text,gbps",
    [("200 Gb/sec (4X HDR)", 200.0), ("40 Gb/sec (4X QDR)", 40.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("unknown", None)],
)
def test_rate(text: str, gbps: float | None) -> None:
    assert parse_rate_gbps(text) == gbps


@pytest.mark.parametrize(
    "gid,ipv4",
    [
        ("0000:0000:0000:0000:0000:ffff:c0a8:640a", "192.168.100.10"),  # show_gids sample, rocep1s0f0 index 3
        ("0000:0000:0000:0000:0000:ffff:c0a8:640e", "192.168.100.14"),  # show_gids sample, roceP2p1s0f0 index 3
        ("0000:0000:0000:0000:0000:FFFF:C633:640B", "198.51.100.11"),
        ("fe80:0000:0000:0000:32c5:99ff:fe3e:6a13", None),
        ("0000:0000:0000:0000:0000:0000:0000:0000", None),
        ("0000:0000:0000:0000:0001:ffff:c0a8:640a", None),
    ],
)
def test_gid_ipv4(gid: str, ipv4: str | None) -> None:
    assert gid_ipv4(gid) == ipv4


@pytest.mark.parametrize("text", ["fe80::1", "0000:0000", "zzzz:0000:0000:0000:0000:0000:0000:0000", ""])
def test_parse_gid_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a GID"):
        parse_gid(text)


@pytest.mark.parametrize(
    "gid_type,version", [("RoCE v2", "v2"), ("IB/RoCE v1", "v1"), (None, None), ("", None), ("IB", None)]
)
def test_roce_version(gid_type: str | None, version: str | None) -> None:
    assert roce_version(gid_type) == version


@pytest.mark.parametrize(
    "value,speed", [(200000, 200000), (100000, 100000), (-1, None), (0xFFFFFFFF, None), (None, None), (-5, None)]
)
def test_normalize_speed(value: int | None, speed: int | None) -> None:
    assert normalize_speed(value) == speed


@pytest.mark.parametrize(
    "mapped,netdevs,expected",
    [
        ([], ["lo", "eth0", "docker0"], []),
        (["enp1s0f0np0"], ["enp1s0f0np0", "enp1s0f1np1", "enP7s7", "wlP9s9", "lo"], ["enp1s0f0np0", "enp1s0f1np1"]),
        (["ib0"], ["ib0", "enP2p1s0f1np1"], ["enP2p1s0f1np1", "ib0"]),
    ],
)
def test_default_fabric_interfaces(mapped: list[str], netdevs: list[str], expected: list[str]) -> None:
    assert default_fabric_interfaces(mapped, netdevs) == expected


# ---------------------------------------------------------------- file errors
@pytest.mark.parametrize(
    "code,quiet",
    [
        (errno.ENOENT, True),
        (errno.EINVAL, True),  # speed of a link that is down, type of an unused GID
        (errno.ENODEV, True),
        (errno.EACCES, False),
        (errno.EIO, False),
        (errno.EISDIR, False),
    ],
)
def test_quiet_errors(code: int, quiet: bool) -> None:
    assert is_quiet(OSError(code, "x")) is quiet


def test_host_files_records_unexpected_errors(tmp_path: pathlib.Path) -> None:
    problems: list[dict[str, str]] = []
    files = HostFiles(problems)
    (tmp_path / "number").write_text("abc\n")
    assert files.read(str(tmp_path / "missing"), "s") is None
    assert files.listdir(str(tmp_path / "missing"), "s") == []
    assert files.read(str(tmp_path), "s") is None  # a directory: EISDIR
    assert files.read_int(str(tmp_path / "number"), "s") is None
    assert files.first_line_with(str(tmp_path / "number"), "x", "s") is None
    assert [p["source"] for p in problems] == [str(tmp_path), str(tmp_path / "number")]
    assert problems[1]["message"] == "expected an integer, found 'abc'"


# ---------------------------------------------------------------- the GB10 tree
def test_gb10_rdma_devices() -> None:
    sysfs, problems = reader(GB10)
    assert sysfs.rdma_device_names() == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    device = sysfs.rdma_device("rocep1s0f0")
    assert device["netdevs"] == ["enp1s0f0np0"]
    assert (device["node_guid"], device["fw_ver"], device["hca_type"]) == (
        "30c5:9903:003e:6a13",
        "28.45.4028",
        "MT4129",
    )
    port = device["ports"][0]
    assert (port["port"], port["state"], port["state_code"], port["phys_state"]) == (1, "ACTIVE", 4, "LinkUp")
    assert (port["link_layer"], port["rate"], port["rate_gbps"]) == ("Ethernet", "200 Gb/sec (4X HDR)", 200.0)
    assert [(g["index"], g["roce_version"], g["ipv4"]) for g in port["gids"]] == [
        (0, "v1", None),
        (1, "v2", None),
        (2, "v1", "192.168.100.10"),
        (3, "v2", "192.168.100.10"),
    ]
    down = sysfs.rdma_device("rocep1s0f1")["ports"][0]
    assert (down["state"], down["phys_state"], down["rate_gbps"], len(down["gids"])) == ("DOWN", "Disabled", 40.0, 2)
    assert problems == []


def show_gids_rows() -> list[tuple[str, int, int, str, str | None, str, str]]:
    """(dev, port, index, gid, ipv4, ver, netdev) of every row of the show_gids sample (gb10-1)."""
    rows = []
    for line in sample_body("show_gids.spark.blog-rocev2-gb10-1.txt").splitlines():
        fields = line.split()
        if len(fields) < 6 or not fields[1].isdigit():
            continue
        ipv4 = fields[4] if len(fields) == 7 else None
        rows.append((fields[0], int(fields[1]), int(fields[2]), fields[3], ipv4, fields[-2], fields[-1]))
    return rows


def test_gb10_gid_tables_are_the_show_gids_sample() -> None:
    """The tree holds exactly the GIDs show_gids printed on gb10-1 (link-local IDs were redacted there)."""
    sysfs, _problems = reader(GB10)
    found = []
    for name in sysfs.rdma_device_names():
        for port in sysfs.rdma_device(name)["ports"]:
            for gid in port["gids"]:
                found.append(
                    (name, port["port"], gid["index"], gid["gid"], gid["ipv4"], gid["roce_version"], gid["netdev"])
                )
    expected = show_gids_rows()
    assert len(expected) == 12
    assert sorted(found, key=lambda r: (r[0], r[2])) == sorted(
        [(d, p, i, found_gid(found, d, i) if "xxxx" in g else g, ip, v, n) for d, p, i, g, ip, v, n in expected],
        key=lambda r: (r[0], r[2]),
    )
    assert all(row[3].startswith("fe80:0000:0000:0000:") for row in found if row[4] is None)


def found_gid(found: list[tuple[Any, ...]], device: str, index: int) -> str:
    return next(row[3] for row in found if row[0] == device and row[2] == index)


def test_gb10_port_states_are_the_rdma_link_sample() -> None:
    """`link <dev>/1 state ACTIVE physical_state LINK_UP netdev <netdev>` on the same host."""
    sysfs, _problems = reader(GB10)
    for line in sample_body("rdma-link.spark.blog-rocev2-gb10-1.txt").splitlines():
        if not line.startswith("link "):
            continue
        words = line.split()
        device, port = words[1].split("/")
        facts = sysfs.rdma_device(device)
        state = facts["ports"][int(port) - 1]
        assert state["state"] == words[3]
        assert {"LinkUp": "LINK_UP", "Disabled": "DISABLED"}[state["phys_state"]] == words[5]
        assert facts["netdevs"] == [words[7]]


def test_gb10_netdevs() -> None:
    sysfs, problems = reader(GB10)
    assert sysfs.netdev("enp1s0f0np0") == {
        "present": True,
        "operstate": "up",
        "carrier": True,
        "speed_mbps": 200000,
        "mtu": 9000,
        "address": "30:c5:99:3e:6a:13",
    }
    down = sysfs.netdev("enp1s0f1np1")
    assert (down["carrier"], down["speed_mbps"], down["mtu"], down["operstate"]) == (False, None, 9000, "down")
    assert sysfs.netdev("wlP9s9")["speed_mbps"] is None  # no speed file: reads as unknown
    assert sysfs.netdev("enp9s9np0") == {"present": False}
    assert problems == []


def test_bare_tree_has_no_rdma() -> None:
    sysfs, problems = reader(BARE)
    assert sysfs.rdma_device_names() == []
    assert sysfs.netdev_names() == ["docker0", "eth0", "lo"]
    eth0 = sysfs.netdev("eth0")
    assert (eth0["carrier"], eth0["speed_mbps"], eth0["mtu"]) == (True, None, 1400)
    assert problems == []
