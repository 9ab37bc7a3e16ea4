# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
import pathlib
import sys

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import (
    KernelModule,
    Limit,
    Route,
    default_routes,
    memory_facts,
    parse_cgroup_container,
    parse_cmdline,
    parse_limits,
    parse_meminfo,
    parse_modules,
    parse_page_size,
    parse_routes,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    BARE,
    FIXTURES,
    GB10,
    H200,
    sample_body,
)

KIB = 1024


def sample_meminfo(name: str) -> str:
    """The /proc/meminfo lines of a host-state sample (it holds other commands' output too)."""
    return "\n".join(line for line in sample_body(name).splitlines() if line.split(":")[0].strip() in MEMINFO_KEYS)


MEMINFO_KEYS = {line.split(":")[0] for line in (GB10 / "proc" / "meminfo").read_text().splitlines()}


@pytest.mark.parametrize(
    "text,total_kib,available_kib,hugepage_kib",
    [
        # GB10, 64 KiB-page kernel 7.0.0-1019-nvidia-64k (christopherowen/spark-ds41f dgx1)
        (sample_meminfo("host-state.spark-dgx1-after-64k.meminfo-cmdline.txt"), 129798784, 123387328, 524288),
        # GB10, 4 KiB kernel, long-lived and loaded
        (
            sample_meminfo("host-state.spark-dgx1-before-4k.uname-pagesize-meminfo-cmdline-smi.txt"),
            127598768,
            6784224,
            2048,
        ),
        # GB10, 4 KiB kernel, fresh and idle
        (sample_meminfo("host-state.spark-dgx1-fresh-4k-idle.meminfo.txt"), 127598768, 122578828, 2048),
        # The H200 machine (lead's capture) and the GB10 fixture tree
        ((H200 / "meminfo.txt").read_text(), 131981020, 131487776, 2048),
        ((GB10 / "proc" / "meminfo").read_text(), 129798784, 123387328, 524288),
    ],
)
def test_meminfo_samples(text: str, total_kib: int, available_kib: int, hugepage_kib: int) -> None:
    facts = memory_facts(parse_meminfo(text))
    assert facts["mem_total_bytes"] == total_kib * KIB
    assert facts["mem_available_bytes"] == available_kib * KIB
    assert facts["hugepage_size_bytes"] == hugepage_kib * KIB
    assert set(facts) == {
        "mem_total_bytes",
        "mem_available_bytes",
        "mem_free_bytes",
        "swap_total_bytes",
        "swap_free_bytes",
        "hugepage_size_bytes",
    }


def test_meminfo_counts_stay_counts_and_missing_keys_are_null() -> None:
    values = parse_meminfo("MemTotal: 10 kB\nHugePages_Total:       7\n")
    assert values == {"MemTotal": 10 * KIB, "HugePages_Total": 7}
    assert memory_facts(values)["mem_available_bytes"] is None


def test_meminfo_this_machine_parses() -> None:
    assert memory_facts(parse_meminfo((BARE / "proc" / "meminfo").read_text()))["mem_total_bytes"] > 0


@pytest.mark.parametrize("text", ["MemTotal 10 kB", "MemTotal: ten kB", "MemTotal: 10 MB"])
def test_meminfo_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a meminfo line"):
        parse_meminfo(text)


@pytest.mark.parametrize(
    "text,words",
    [
        ("ro quiet kho=off\n", ["ro", "quiet", "kho=off"]),
        ('a  b="x y"   c', ["a", "b=x y", "c"]),
        ('dyndbg="file x.c +p" kho=off', ["dyndbg=file x.c +p", "kho=off"]),
        ('empty="" z', ["empty=", "z"]),
        ("", []),
    ],
)
def test_cmdline(text: str, words: list[str]) -> None:
    assert parse_cmdline(text) == words


def test_cmdline_of_the_64k_sample_has_kho_off() -> None:
    line = next(
        x
        for x in sample_body("host-state.spark-dgx1-after-64k.meminfo-cmdline.txt").splitlines()
        if x.startswith("BOOT_IMAGE=")
    )
    words = parse_cmdline(line)
    assert words[0] == "BOOT_IMAGE=/boot/vmlinuz-7.0.0-1019-nvidia-64k"
    assert "kho=off" in words and "pci=pcie_bus_safe" in words


@pytest.mark.parametrize(
    "line,module",
    [
        ("nvidia_uvm 2162688 4 - Live 0x0000000000000000 (O)", KernelModule("nvidia_uvm", 2162688, 4, (), "Live")),
        (
            "nvidia 14811136 9 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (O)",
            KernelModule("nvidia", 14811136, 9, ("nvidia_uvm", "nvidia_modeset"), "Live"),
        ),
        ("mlx5_ib 589824 0 - Loading 0xffff800080000000", KernelModule("mlx5_ib", 589824, 0, (), "Loading")),
    ],
)
def test_modules_lines(line: str, module: KernelModule) -> None:
    assert parse_modules(line + "\n") == [module]


def test_modules_of_the_gb10_tree() -> None:
    names = [m.name for m in parse_modules((GB10 / "proc" / "modules").read_text())]
    assert {"nvidia", "nvidia_uvm", "mlx5_ib", "mlx5_core"} <= set(names)


@pytest.mark.parametrize("line", ["nvidia 1 2", "nvidia big 2 - Live 0x0"])
def test_modules_rejects(line: str) -> None:
    with pytest.raises(ValueError, match="not a /proc/modules line"):
        parse_modules(line)


@pytest.mark.parametrize(
    "path,expected",
    [
        (
            BARE / "proc" / "self" / "limits",
            {"nofile": Limit(20000, 20000), "memlock": Limit(8388608, 8388608), "stack": Limit(8388608, -1)},
        ),
        (BARE / "proc" / "27470" / "limits", {"nofile": Limit(20000, 20000), "core": Limit(0, -1)}),
        (
            GB10 / "proc" / "self" / "limits",
            {"nofile": Limit(1024, 524288), "memlock": Limit(8388608, 8388608), "cpu": Limit(-1, -1)},
        ),
        (GB10 / "proc" / "2741" / "limits", {"nofile": Limit(524288, 524288), "nproc": Limit(-1, -1)}),
    ],
)
def test_limits(path: pathlib.Path, expected: dict[str, Limit]) -> None:
    limits = parse_limits(path.read_text())
    assert len(limits) == 16
    for name, limit in expected.items():
        assert limits[name] == limit
    assert limits["nice"] == Limit(0, 0)


def test_limit_as_dict() -> None:
    assert Limit(-1, -1).as_dict() == {"soft": -1, "hard": -1}


@pytest.mark.parametrize(
    "line",
    ["Max open files  lots  1024  files", "Max bananas  1  1  units", "Open files 1 1 files"],
)
def test_limits_rejects(line: str) -> None:
    with pytest.raises(ValueError, match="limits line"):
        parse_limits("Limit                     Soft Limit           Hard Limit           Units     \n" + line)


@pytest.mark.parametrize(
    "line,size",
    [("KernelPageSize:       64 kB", 65536), ("KernelPageSize:        4 kB\n", 4096), ("KernelPageSize: 16 kB", 16384)],
)
def test_page_size(line: str, size: int) -> None:
    assert parse_page_size(line) == size


def test_page_size_rejects() -> None:
    with pytest.raises(ValueError, match="KernelPageSize"):
        parse_page_size("MMUPageSize: 4 kB")


ID_A = "962259347e84a7e84abd0a7422096c3aab2a03d03c3900bcdb1327e89302c457"
ID_B = "5d0c1e0f6a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5"


@pytest.mark.parametrize(
    "text,container",
    [
        (f"0::/system.slice/docker-{ID_A}.scope\n", ID_A),  # cgroup v2, Docker's systemd driver
        (f"0::/docker/{ID_A}\n", ID_A),  # cgroup v2, the cgroupfs driver
        (f"12:memory:/docker/{ID_A}\n4:pids:/docker/{ID_A}\n1:name=systemd:/docker/{ID_A}\n", ID_A),  # cgroup v1
        (f"0::/system.slice/docker-{ID_B}.scope/system.slice/docker-{ID_A}.scope\n", ID_A),  # Docker in Docker
        (f"0::/machine.slice/libpod-{ID_A}.scope/container\n", ID_A),  # Podman
        (f"12:pids:/dgxspark-sim/sim3-head/{ID_A}\n", ID_A),  # dockerd --cgroup-parent (the simulated nodes)
        (f"0::/docker/{ID_A}x\n", None),  # not an ID: a longer word
        (f"0::/x{ID_A}\n", None),
        (f"0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-{ID_A}.scope\n", ID_A),
        ("0::/system.slice/docker.service\n", None),  # dockerd itself, on the host
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        (f"0::/system.slice/docker-{ID_A[:12]}.scope\n", None),  # not a whole ID
        ("9:name=systemd:/\n8:pids:/\n4:memory:/process_api/9ec2f4eee0ec776c84bc31edb8e09a15\n0::/\n", None),
        ("", None),
    ],
)
def test_cgroup_container(text: str, container: str | None) -> None:
    assert parse_cgroup_container(text) == container


# ---------------------------------------------------------------- /proc/net/route
little_endian = pytest.mark.skipif(sys.byteorder != "little", reason="the fixtures were written on little-endian hosts")


@little_endian
def test_routes_of_this_build_machine_agree_with_iproute2() -> None:
    """bare/proc/net/route and ip/route-bare.json were read on the build machine at the same moment (see the
    fixtures' READMEs): every route ip lists is one parse_routes reads, with its gateway, and the default one."""
    routes = parse_routes((BARE / "proc" / "net" / "route").read_text())
    listed = json.loads((FIXTURES / "ip" / "route-bare.json").read_text())
    assert len(routes) == len(listed)
    for entry in listed:
        dst = "0.0.0.0/0" if entry["dst"] == "default" else entry["dst"]
        network, prefix = dst.split("/")
        (route,) = [r for r in routes if r.interface == entry["dev"] and r.destination == network]
        assert sum(bin(int(part)).count("1") for part in route.mask.split(".")) == int(prefix)
        assert route.gateway == entry.get("gateway") and route.metric == entry.get("metric", 0)
    assert default_routes(routes) == [{"interface": "eth0", "gateway": "192.0.2.1", "metric": 0}]


@little_endian
def test_routes_of_the_gb10_tree() -> None:
    routes = parse_routes((GB10 / "proc" / "net" / "route").read_text())
    assert routes[0] == Route("wlP9s9", "0.0.0.0", "0.0.0.0", "192.168.10.254", 600)
    assert [(r.interface, r.destination, r.mask, r.gateway) for r in routes[1:]] == [
        ("docker0", "172.17.0.0", "255.255.0.0", None),
        ("wlP9s9", "192.168.10.0", "255.255.255.0", None),
        ("enp1s0f0np0", "192.168.100.0", "255.255.255.0", None),
        ("enP2p1s0f0np0", "192.168.100.0", "255.255.255.0", None),
    ]
    assert default_routes(routes) == [{"interface": "wlP9s9", "gateway": "192.168.10.254", "metric": 600}]


HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"


@little_endian
def test_the_preferred_default_route_comes_first() -> None:
    text = "\n".join(
        [
            HEADER,
            "enp1s0f0np0\t00000000\t0164A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0",
            "enP7s7\t00000000\t010AA8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0",
            "enP7s7\t000AA8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0",
        ]
    )
    assert default_routes(parse_routes(text)) == [
        {"interface": "enP7s7", "gateway": "192.168.10.1", "metric": 100},
        {"interface": "enp1s0f0np0", "gateway": "192.168.100.1", "metric": 200},
    ]
    assert parse_routes("") == [] and parse_routes(HEADER) == []


@pytest.mark.parametrize(
    "text,message",
    [
        ("Iface Destination Gateway\n", "not the /proc/net/route header"),
        (HEADER + "\neth0\t00000000\t010200C0\t0003\n", "not a /proc/net/route line: 'eth0"),
        (HEADER + "\neth0\tXYZ\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "not a /proc/net/route line"),
        (HEADER + "\neth0\t100000000\t0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "not a /proc/net/route line"),
    ],
    ids=["header", "short line", "not hex", "too wide"],
)
def test_parse_routes_refuses_what_is_not_proc_net_route(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_routes(text)
