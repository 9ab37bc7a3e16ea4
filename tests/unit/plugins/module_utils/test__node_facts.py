# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gather() against the GB10 and bare fixture trees, with fake tools and a fake Docker engine."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _files
from ansible_collections.dgxspark.cluster.plugins.module_utils._files import (
    MAX_HASH_BYTES,
    file_facts,
    relative_paths,
    sha256_of,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import (
    DEFAULT_SECTIONS,
    SECTIONS,
    CommandResult,
    Options,
    Tool,
    gather,
    ip_addr_argv,
    make_runner,
    parse_ip_addresses,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import query_argv
from ansible_collections.dgxspark.cluster.plugins.module_utils._systemctl import show_argv
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    BARE,
    GB10,
    IP_ADDR_GB10,
    fake_docker_engine,
    sample_body,
)

SERVICES = ("ollama.service", "nv-cpu-governor.service", "open-webui.service")
NVIDIA_SMI = "/usr/bin/nvidia-smi"
SYSTEMCTL = "/usr/bin/systemctl"
IP = "/usr/sbin/ip"


class FakeTools:
    """A Runner answering the two commands node_facts runs, from a tree's tool outputs."""

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> CommandResult:
        self.calls.append(argv)
        return self.answers[argv[0]]


def gb10_tools() -> FakeTools:
    return FakeTools(
        {
            NVIDIA_SMI: CommandResult(0, (GB10 / "tools" / "nvidia-smi-query.csv").read_text(), ""),
            SYSTEMCTL: CommandResult(0, (GB10 / "tools" / "systemctl-show.txt").read_text(), ""),
            IP: CommandResult(0, IP_ADDR_GB10.read_text(), ""),
        }
    )


def options(tree: pathlib.Path, **changes: Any) -> Options:
    fields: dict[str, Any] = {
        "proc_root": str(tree / "proc"),
        "sys_root": str(tree / "sys"),
        "nvidia_smi": Tool("nvidia-smi", NVIDIA_SMI),
        "systemctl": Tool("systemctl", SYSTEMCTL),
        "ip": Tool("ip", IP),
        "services": SERVICES,
        "docker_host": "unix:///nonexistent/docker.sock",
    }
    fields.update(changes)
    return Options(**fields)


@pytest.fixture(scope="module")
def gb10_node() -> Iterator[tuple[dict[str, Any], FakeTools, list[str]]]:
    tools = gb10_tools()
    with fake_docker_engine() as (path, requests):
        node = gather(options(GB10, docker_host=f"unix://{path}", weights_path="/"), tools)
    yield node, tools, requests


def test_gb10_runs_three_processes_and_four_requests(gb10_node: Any) -> None:
    node, tools, requests = gb10_node
    assert tools.calls == [
        query_argv(NVIDIA_SMI),
        [IP, "-j", "-4", "addr", "show"],
        show_argv(SYSTEMCTL, SERVICES),
    ]
    assert requests == ["/version", "/containers/json?all=1", "/images/json", "/containers/vllm_dsv41/json", "/info"]
    assert node["problems"] == []
    assert node["sections"] == list(DEFAULT_SECTIONS)
    assert list(node) == [*DEFAULT_SECTIONS, "sections", "problems", "elapsed_ms"]
    assert isinstance(node["elapsed_ms"], float)
    json.dumps(node)  # plain data only


def test_gb10_memory(gb10_node: Any) -> None:
    memory = gb10_node[0]["memory"]
    assert memory == {
        "mem_total_bytes": 129798784 * 1024,
        "mem_available_bytes": 123387328 * 1024,
        "mem_free_bytes": 121745344 * 1024,
        "swap_total_bytes": 16777152 * 1024,
        "swap_free_bytes": 16777152 * 1024,
        "hugepage_size_bytes": 524288 * 1024,
    }


def test_gb10_kernel(gb10_node: Any) -> None:
    kernel = gb10_node[0]["kernel"]
    assert kernel["release"] == "7.0.0-1019-nvidia-64k"
    assert kernel["page_size"] == 65536
    assert "kho=off" in kernel["cmdline"] and kernel["cmdline"][0].startswith("BOOT_IMAGE=")
    assert {"nvidia", "nvidia_uvm", "mlx5_ib"} <= set(kernel["modules"])
    assert kernel["nvidia"] == {
        "version": "580.178.04",
        "uvm_loaded": True,
        "uvm_srcversion": "34683B82C2D3339BBD2EEC9",
    }
    assert kernel["memory_saver"] == {"loaded": True, "packing_enabled": True}


def test_gb10_gpu_memory_is_null(gb10_node: Any) -> None:
    gpu = gb10_node[0]["gpu"]
    assert (gpu["present"], gpu["error"], gpu["count"]) == (True, None, 1)
    device = gpu["devices"][0]
    assert device["name"] == "NVIDIA GB10" and device["compute_cap"] == "12.1"
    assert device["memory_total_mib"] is None and device["memory_used_mib"] is None
    assert (device["clocks_graphics_mhz"], device["clocks_max_graphics_mhz"]) == (2522, 3003)


def test_gb10_rdma(gb10_node: Any) -> None:
    rdma = gb10_node[0]["rdma"]
    assert rdma["present"] is True and rdma["error"] is None
    assert sorted(rdma["devices"]) == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    assert rdma["roce_v2_ipv4"] == [
        {"device": "roceP2p1s0f0", "port": 1, "index": 3, "ipv4": "192.168.100.14", "netdev": "enP2p1s0f0np0"},
        {"device": "rocep1s0f0", "port": 1, "index": 3, "ipv4": "192.168.100.10", "netdev": "enp1s0f0np0"},
    ]


def test_gb10_fabric(gb10_node: Any) -> None:
    fabric = gb10_node[0]["fabric"]
    assert fabric["error"] is None
    interfaces = fabric["interfaces"]
    assert sorted(interfaces) == ["enP2p1s0f0np0", "enP2p1s0f1np1", "enp1s0f0np0", "enp1s0f1np1"]
    assert interfaces["enp1s0f0np0"] == {
        "present": True,
        "operstate": "up",
        "carrier": True,
        "speed_mbps": 200000,
        "mtu": 9000,
        "address": "30:c5:99:3e:6a:13",
        "rdma_device": "rocep1s0f0",
        "gid_ipv4": ["192.168.100.10"],
        "ipv4": ["192.168.100.10/24", "10.99.3.1/32"],
    }
    assert interfaces["enP2p1s0f0np0"]["ipv4"] == ["192.168.100.14/24"]
    # the management network's default route (gb10/proc/net/route), not a fabric port's
    assert fabric["default_routes"] == [{"interface": "wlP9s9", "gateway": "192.168.10.254", "metric": 600}]
    # every interface's addresses with their prefix, from the same ip call: the management interface's subnet
    assert fabric["addresses"]["enp1s0f0np0"] == ["192.168.100.10/24", "10.99.3.1/32"]
    assert {"lo", "wlP9s9", "docker0"} <= set(fabric["addresses"])
    down = interfaces["enP2p1s0f1np1"]
    assert (down["carrier"], down["speed_mbps"], down["rdma_device"], down["gid_ipv4"], down["ipv4"]) == (
        False,
        None,
        "roceP2p1s0f1",
        [],
        [],
    )


def test_gb10_fabric_matches_ibdev2netdev_style_mapping() -> None:
    """The mapping node_facts derives is the one ibdev2netdev prints on a Spark (same four pairs)."""
    node = gather(options(GB10, sections=("fabric",)), gb10_tools())
    mapping = {name: facts["rdma_device"] for name, facts in node["fabric"]["interfaces"].items()}
    expected = {}
    for line in sample_body(
        "host-env.spark-node0.colonel-otto-2spark-baseline.uname-smi-free-ibdev2netdev-ipbr.txt"
    ).splitlines():
        if " port 1 ==> " in line:
            device, _sep, rest = line.partition(" port 1 ==> ")
            expected[rest.split()[0]] = device
    assert mapping == expected


def test_gb10_docker(gb10_node: Any) -> None:
    docker = gb10_node[0]["docker"]
    assert docker["present"] is True and docker["engine"]["version"] == "29.2.1"
    assert [(c["name"], c["state"]) for c in docker["containers"]] == [
        ("vllm_dsv41", "running"),
        ("open-webui", "exited"),
    ]
    assert docker["container"]["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    assert docker["container"]["env"]["HF_TOKEN"] == "<redacted>"


def test_gb10_limits(gb10_node: Any) -> None:
    limits = gb10_node[0]["limits"]
    assert limits["nr_open"] == 1048576
    assert limits["module"] == {
        "nofile": {"soft": 1024, "hard": 524288},
        "memlock": {"soft": 8388608, "hard": 8388608},
        "stack": {"soft": 8388608, "hard": -1},
        "core": {"soft": 0, "hard": -1},
    }
    assert limits["dockerd"]["pid"] == 2741 and limits["dockerd"]["nofile"] == {"soft": 524288, "hard": 524288}
    assert limits["containerd"]["pid"] == 1893 and limits["containerd"]["core"] == {"soft": -1, "hard": -1}


def test_gb10_services(gb10_node: Any) -> None:
    services = gb10_node[0]["services"]
    assert (services["present"], services["error"]) == (True, None)
    assert [(u, s["active_state"], s["load_state"]) for u, s in services["units"].items()] == [
        ("ollama.service", "active", "loaded"),
        ("nv-cpu-governor.service", "inactive", "loaded"),
        ("open-webui.service", "inactive", "not-found"),
    ]


def test_gb10_disk(gb10_node: Any) -> None:
    disk = gb10_node[0]["disk"]
    assert disk["path"] == "/" and disk["exists"] is True and disk["checked_path"] == "/"
    assert disk["total_bytes"] >= disk["free_bytes"] >= disk["available_bytes"] >= 0
    assert isinstance(disk["read_only"], bool)


def test_fixture_tree_matches_samples() -> None:
    """gb10/proc/meminfo and cmdline are the 64k sample's lines, verbatim."""
    body = sample_body("host-state.spark-dgx1-after-64k.meminfo-cmdline.txt").splitlines()
    meminfo = (GB10 / "proc" / "meminfo").read_text().splitlines()
    assert body[: len(meminfo)] == meminfo
    assert (GB10 / "proc" / "cmdline").read_text().rstrip("\n") == body[len(meminfo)]


# ---------------------------------------------------------------- the bare tree (this build machine)
def test_bare_tree_missing_things_are_facts() -> None:
    tools = FakeTools(
        {
            SYSTEMCTL: CommandResult(
                1,
                "",
                "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
                "Failed to connect to bus: Host is down\n",
            )
        }
    )
    node = gather(options(BARE, nvidia_smi=Tool("nvidia-smi", None, "nvidia-smi not found")), tools)
    assert node["problems"] == []
    assert node["gpu"] == {
        "present": False,
        "error": "nvidia-smi not found",
        "count": 0,
        "devices": [],
        "clock_latch": None,
    }
    assert node["rdma"] == {
        "present": False,
        "error": f"no RDMA devices in {BARE / 'sys' / 'class' / 'infiniband'}",
        "devices": {},
        "roce_v2_ipv4": [],
    }
    # no netdev to ask ip about: ip is not run; the default route is this build machine's (its /proc/net/route)
    assert node["fabric"] == {
        "interfaces": {},
        "error": None,
        "default_routes": [{"interface": "eth0", "gateway": "192.0.2.1", "metric": 0}],
        "addresses": {},
    }
    assert [call[0] for call in tools.calls] == [SYSTEMCTL]
    assert node["kernel"]["page_size"] == 4096 and node["kernel"]["modules"] is None
    assert node["kernel"]["memory_saver"] == {"loaded": False, "packing_enabled": None}
    assert node["kernel"]["nvidia"] == {"version": None, "uvm_loaded": False, "uvm_srcversion": None}
    assert node["docker"]["present"] is False
    assert node["docker"]["error"] == "no Docker engine socket at /nonexistent/docker.sock"
    assert node["docker"]["container"] == {"exists": False, "name": "vllm_dsv41"}
    assert node["limits"]["dockerd"]["pid"] == 27470 and node["limits"]["dockerd"]["memlock"]["hard"] == 8388608
    assert node["services"]["present"] is False
    assert node["services"]["error"] == (
        "systemctl exited 1: System has not been booted with systemd as init system (PID 1). Can't operate."
    )
    assert node["services"]["units"]["ollama.service"]["active_state"] is None
    assert node["disk"] == {"path": None}


def test_asked_for_interfaces_are_reported_even_when_absent() -> None:
    ip_output = '[{"ifindex":4,"ifname":"eth0","addr_info":[{"family":"inet","local":"192.0.2.2","prefixlen":24}]}]'
    tools = FakeTools({IP: CommandResult(0, ip_output, "")})
    node = gather(options(BARE, sections=("fabric",), fabric_interfaces=("eth0", "enp1s0f0np0")), tools)
    assert list(node["fabric"]["interfaces"]) == ["eth0", "enp1s0f0np0"]
    assert node["fabric"]["interfaces"]["enp1s0f0np0"] == {
        "present": False,
        "rdma_device": None,
        "gid_ipv4": [],
        "ipv4": [],
    }
    assert node["fabric"]["interfaces"]["eth0"]["ipv4"] == ["192.0.2.2/24"]
    assert "rdma" not in node


def test_default_routes_unknown_when_proc_net_route_cannot_be_read(tmp_path: pathlib.Path) -> None:
    """No /proc/net/route (a kernel without IPv4) is not a problem; a file that is not the routing table is."""
    tree = tmp_path / "tree"
    shutil.copytree(BARE, tree)
    route = tree / "proc" / "net" / "route"
    route.unlink()
    node = gather(options(tree, sections=("fabric",)), FakeTools({}))
    assert node["fabric"]["default_routes"] is None and node["problems"] == []
    route.write_text("Iface\tDestination\n")
    node = gather(options(tree, sections=("fabric",)), FakeTools({}))
    assert node["fabric"]["default_routes"] is None
    assert node["problems"] == [
        {
            "section": "fabric",
            "source": str(route),
            "message": "not the /proc/net/route header: 'Iface\\tDestination'",
        }
    ]


def test_only_the_sections_asked_for() -> None:
    tools = gb10_tools()
    node = gather(options(GB10, sections=("memory", "kernel")), tools)
    assert list(node) == ["memory", "kernel", "sections", "problems", "elapsed_ms"]
    assert tools.calls == []


def test_no_services_means_no_systemctl() -> None:
    tools = gb10_tools()
    node = gather(options(GB10, sections=("services",), services=()), tools)
    assert node["services"] == {"present": None, "error": None, "units": {}}
    assert tools.calls == []


@pytest.mark.parametrize(
    "result,error",
    [
        (CommandResult(124, "", "", timed_out=True), "nvidia-smi did not answer within 20 s"),
        (
            CommandResult(9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", ""),
            "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ),
        (CommandResult(0, "index, name\n", ""), "nvidia-smi lists no GPU"),
        (CommandResult(0, "index, name\n0\n", ""), "could not read nvidia-smi's output: expected 2 values"),
    ],
)
def test_gpu_failures_are_facts(result: CommandResult, error: str) -> None:
    node = gather(options(GB10, sections=("gpu",)), FakeTools({NVIDIA_SMI: result}))
    assert node["gpu"]["present"] is False
    assert node["gpu"]["error"].startswith(error)
    assert [p["section"] for p in node["problems"]] == (["gpu"] if "could not read" in error else [])


def test_an_odd_gpu_value_is_a_problem_not_a_failure() -> None:
    text = (GB10 / "tools" / "nvidia-smi-query.csv").read_text().replace(", 50, 15.57", ", hot, 15.57")
    node = gather(options(GB10, sections=("gpu",)), FakeTools({NVIDIA_SMI: CommandResult(0, text, "")}))
    assert node["gpu"]["present"] is True and node["gpu"]["devices"][0]["temperature_c"] is None
    assert node["problems"] == [
        {
            "section": "gpu",
            "source": "nvidia-smi",
            "message": "GPU row 0: temperature.gpu: expected a number, found 'hot'",
        }
    ]


def test_services_timeout_and_unreadable_output() -> None:
    timed_out = gather(options(GB10, sections=("services",)), FakeTools({SYSTEMCTL: CommandResult(124, "", "", True)}))
    assert timed_out["services"]["error"] == "systemctl did not answer within 20 s"
    odd = gather(options(GB10, sections=("services",)), FakeTools({SYSTEMCTL: CommandResult(0, "Id=a\n", "")}))
    assert (
        odd["services"]["error"] == "could not read systemctl's output: asked about 3 unit(s), systemctl answered for 1"
    )
    assert odd["problems"][0]["section"] == "services"


def test_unreadable_files_are_problems(tmp_path: pathlib.Path) -> None:
    """A proc tree whose files hold nonsense: every value null, every file named in problems."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: lots\n")
    (proc / "modules").write_text("nvidia\n")
    (proc / "self" / "limits").write_text("Max open files lots lots files\n")
    (proc / "self" / "smaps").write_text("KernelPageSize: big\n")
    (proc / "cmdline").mkdir()  # EISDIR: not a quiet error
    node = gather(
        Options(sections=("memory", "kernel", "limits"), proc_root=str(proc), sys_root=str(tmp_path / "sys")),
        FakeTools({}),
    )
    assert node["memory"]["mem_total_bytes"] is None
    assert node["kernel"]["modules"] is None and node["kernel"]["cmdline"] is None
    assert node["kernel"]["page_size"] is None  # not the real /proc: no fallback to this machine's page size
    assert node["limits"]["module"]["nofile"] is None and node["limits"]["dockerd"] is None
    assert sorted(os.path.basename(p["source"]) for p in node["problems"]) == [
        "cmdline",
        "limits",
        "meminfo",
        "modules",
        "smaps",
    ]


def test_docker_host_that_is_not_a_socket() -> None:
    node = gather(options(GB10, sections=("docker",), docker_host="tcp://10.0.0.1:2375"), FakeTools({}))
    assert node["docker"]["present"] is False and "unix:// socket URL" in node["docker"]["error"]


def test_weights_path_that_does_not_exist_yet(tmp_path: pathlib.Path) -> None:
    node = gather(options(GB10, sections=("disk",), weights_path=str(tmp_path / "models" / "v41")), FakeTools({}))
    disk = node["disk"]
    assert (disk["exists"], disk["checked_path"]) == (False, str(tmp_path))
    assert disk["available_bytes"] > 0


def test_elapsed_ms_uses_the_clock() -> None:
    ticks = iter([10.0, 10.0123])
    node = gather(options(GB10, sections=("memory",)), FakeTools({}), clock=lambda: next(ticks))
    assert node["elapsed_ms"] == 12.3


# ---------------------------------------------------------------- runner and tools
def test_runner_bounds_commands_with_timeout() -> None:
    seen: list[list[str]] = []

    def run_command(argv: list[str]) -> tuple[int, str, str]:
        seen.append(argv)
        return (124, "", "") if argv[-1] == "hang" else (0, "ok", "")

    run = make_runner(run_command, "/usr/bin/timeout", 20.0)
    assert run(["/usr/bin/nvidia-smi", "hang"]) == CommandResult(124, "", "", timed_out=True)
    assert run(["/usr/bin/nvidia-smi", "x"]) == CommandResult(0, "ok", "")
    assert seen[0] == ["/usr/bin/timeout", "--kill-after=5", "20", "/usr/bin/nvidia-smi", "hang"]
    unbounded = make_runner(run_command, None, 20.0)
    assert unbounded(["a", "hang"]) == CommandResult(124, "", "", timed_out=False)
    assert seen[-1] == ["a", "hang"]


def test_runner_turns_os_errors_into_results() -> None:
    def run_command(argv: list[str]) -> tuple[int, str, str]:
        raise PermissionError(13, "Permission denied")

    assert make_runner(run_command, None, 5)(["/opt/nvidia-smi"]) == CommandResult(
        -1, "", "/opt/nvidia-smi: Permission denied"
    )


def test_tool_resolution(tmp_path: pathlib.Path) -> None:
    executable = tmp_path / "nvidia-smi"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("")
    assert Tool.resolve("nvidia-smi", str(executable), None) == Tool("nvidia-smi", str(executable))
    assert Tool.resolve("nvidia-smi", str(plain), "/usr/bin/nvidia-smi").missing == f"nvidia-smi not found at {plain}"
    assert Tool.resolve("nvidia-smi", None, "/usr/bin/nvidia-smi") == Tool("nvidia-smi", "/usr/bin/nvidia-smi")
    assert Tool.resolve("nvidia-smi", None, None) == Tool("nvidia-smi", None, "nvidia-smi not found")


# ---------------------------------------------------------------- memguard and ports (asked for by name)
def test_memguard_ports_files_releases_and_weights_are_gathered_only_when_named(tmp_path: pathlib.Path) -> None:
    named = {"memguard", "ports", "files", "releases", "weights", "secrets", "ranks", "journal", "api"}
    assert set(SECTIONS) - set(DEFAULT_SECTIONS) == named
    node = gather(options(GB10, sections=("memory",), files=("/etc/hostname",)), FakeTools({}))
    assert not named & set(node)
    asked = gather(options(GB10, sections=("releases",), releases_dir=str(tmp_path / "none")), FakeTools({}))
    assert asked["releases"]["present"] is False and asked["releases"]["releases"] == []


def test_journal_says_whether_a_boot_left_one(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "boot-journal.json"
    none = gather(options(GB10, sections=("journal",), journal_path=str(path)), FakeTools({}))["journal"]
    assert none == {"path": str(path), "open": False, "entry": None, "error": None}
    path.write_text('{"helpers": ["comfyui.service"], "rank": "vllm_dsv41"}')
    left = gather(options(GB10, sections=("journal",), journal_path=str(path)), FakeTools({}))["journal"]
    assert left["open"] is True and left["entry"]["helpers"] == ["comfyui.service"]
    path.write_text("[1]")
    odd = gather(options(GB10, sections=("journal",), journal_path=str(path)), FakeTools({}))["journal"]
    assert odd["open"] is True and odd["error"] == f"{path}: a journal is a JSON object, found list"


def test_ranks_reads_the_labelled_containers_and_the_saved_records(tmp_path: pathlib.Path) -> None:
    socket_file = tmp_path / "docker.sock"
    socket_file.touch()
    ranks_dir = tmp_path / "ranks"
    ranks_dir.mkdir()
    (ranks_dir / "vllm_dsv41-20261202T030000Z.json").write_text('{"name": "vllm_dsv41", "exit_code": 1}')
    labels = {"dgxspark.cluster.rank": "1"}

    class Engine:
        path = str(socket_file)

        def get(self, url: str) -> tuple[int, Any]:
            if url.startswith("/containers/json"):
                return 200, [{"Id": "c1", "Names": ["/vllm_dsv41"], "Labels": labels}]
            state = {"Running": False, "Status": "exited", "ExitCode": 1}
            return 200, {"Id": "c1", "Name": "/vllm_dsv41", "State": state, "Config": {"Labels": labels}}

        def get_raw(self, url: str) -> tuple[int, bytes]:
            assert url.endswith("tail=2")
            return 200, b"ValueError: bad\nexiting\n"

        def close(self) -> None:
            pass

    asked = options(
        GB10,
        sections=("ranks",),
        docker_host=f"unix://{socket_file}",
        rank_records_dir=str(ranks_dir),
        rank_log_lines=2,
    )
    ranks = gather(asked, FakeTools({}), engine_factory=lambda path, timeout: Engine())["ranks"]
    assert ranks["error"] is None and ranks["problems"] == []
    [found] = ranks["containers"]
    assert (found["name"], found["rank"], found["exit_code"]) == ("vllm_dsv41", "1", 1)
    assert found["log_tail"] == ["ValueError: bad", "exiting"]
    assert [r["exit_code"] for r in ranks["records"]] == [1]
    without = gather(options(GB10, sections=("ranks",)), FakeTools({}))["ranks"]
    assert without["error"] == "no Docker engine socket at /nonexistent/docker.sock" and without["containers"] == []


def test_a_fresh_node_has_no_guard_and_no_listener(tmp_path: pathlib.Path) -> None:
    """The GB10 tree has no guard files and no /proc/net/tcp: facts, not problems."""
    node = gather(
        options(
            GB10,
            sections=("memguard", "ports"),
            memguard_state_path=str(tmp_path / "state.json"),
            memguard_trip_path=str(tmp_path / "tripped.json"),
            memguard_log_path=str(tmp_path / "decisions.jsonl"),
            ports=(8000, 29501),
        ),
        FakeTools({}),
    )
    assert node["problems"] == []
    assert (node["memguard"]["installed"], node["memguard"]["running"], node["memguard"]["tripped"]) == (
        False,
        None,
        None,
    )
    assert node["ports"] == {"asked": [8000, 29501], "listening": [], "unreadable_processes": 0}
    assert node["sections"] == ["memguard", "ports"]


# ---------------------------------------------------------------- fabric: IPv4 addresses from ip
@pytest.mark.parametrize(
    "text,expected",
    [
        pytest.param(
            IP_ADDR_GB10.read_text(),
            {
                "lo": ["127.0.0.1/8"],
                "enp1s0f0np0": ["192.168.100.10/24", "10.99.3.1/32"],
                "enP2p1s0f0np0": ["192.168.100.14/24"],
                "wlP9s9": ["192.168.10.1/24"],
                "docker0": ["172.17.0.1/16"],
            },
            id="gb10-fixture",
        ),
        pytest.param("[]\n", {}, id="no-links"),
        pytest.param("", {}, id="empty-output"),
        pytest.param(
            '[{},{},{"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.2","prefixlen":31}]},{}]',
            {"eth0": ["10.0.0.2/31"]},
            id="older-iproute2-empty-objects",
        ),
        pytest.param(
            '[{"ifname":"eth0","addr_info":[{"family":"inet6","local":"fe80::1","prefixlen":64},'
            '{"family":"inet","local":"10.0.0.2","prefixlen":24}]},{"ifname":"eth1"},{"ifname":"eth2","addr_info":[]}]',
            {"eth0": ["10.0.0.2/24"], "eth1": [], "eth2": []},
            id="other-families-and-no-addresses",
        ),
    ],
)
def test_parse_ip_addresses(text: str, expected: dict[str, list[str]]) -> None:
    assert parse_ip_addresses(text) == expected


@pytest.mark.parametrize(
    "text,message",
    [
        pytest.param('Object "addr" is unknown, try "ip help".', "Expecting value", id="not-json"),
        pytest.param('[{"ifname": "eth0", "addr_info": [', "Expecting value", id="truncated"),
        pytest.param('{"ifname": "eth0"}', "expected a JSON list of links, found dict", id="not-a-list"),
        pytest.param('[{"ifname": "eth0", "addr_info": {}}]', "eth0: expected addr_info to be a list", id="info"),
        pytest.param(
            '[{"ifname": "eth0", "addr_info": [{"family": "inet", "local": "10.0.0.2"}]}]',
            "eth0: expected local and prefixlen",
            id="no-prefixlen",
        ),
    ],
)
def test_parse_ip_addresses_refuses_what_is_not_ip_json(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_ip_addresses(text)


@pytest.mark.parametrize(
    "tool,result,error,problem_sources",
    [
        pytest.param(Tool("ip", None, "ip not found"), None, "ip not found", [], id="ip-missing"),
        pytest.param(
            Tool("ip", None, "ip not found at /opt/ip"), None, "ip not found at /opt/ip", [], id="ip-not-at-path"
        ),
        pytest.param(
            Tool("ip", IP),
            CommandResult(255, "", "Cannot open netlink socket: Permission denied\n"),
            "ip exited 255: Cannot open netlink socket: Permission denied",
            [],
            id="ip-fails",
        ),
        pytest.param(Tool("ip", IP), CommandResult(1, "", ""), "ip exited 1: no message", [], id="ip-fails-silently"),
        pytest.param(
            Tool("ip", IP),
            CommandResult(124, "", "", timed_out=True),
            "ip did not answer within 20 s",
            [],
            id="ip-hangs",
        ),
        pytest.param(
            Tool("ip", IP),
            CommandResult(0, "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n", ""),
            "could not read ip's output: Extra data: line 1 column 2 (char 1)",
            ["ip -j -4 addr show"],
            id="ip-prints-invalid-json",
        ),
    ],
)
def test_ipv4_unknown_when_ip_cannot_tell(
    tool: Tool, result: CommandResult | None, error: str, problem_sources: list[str]
) -> None:
    tools = FakeTools({} if result is None else {IP: result})
    node = gather(options(GB10, sections=("fabric",), ip=tool), tools)
    fabric = node["fabric"]
    assert fabric["error"] == error
    assert {name: facts["ipv4"] for name, facts in fabric["interfaces"].items()} == dict.fromkeys(
        ["enP2p1s0f0np0", "enP2p1s0f1np1", "enp1s0f0np0", "enp1s0f1np1"]
    )
    assert fabric["interfaces"]["enp1s0f0np0"]["gid_ipv4"] == ["192.168.100.10"]  # the rest is still there
    assert [(p["section"], p["source"]) for p in node["problems"]] == [("fabric", s) for s in problem_sources]
    assert tools.calls == ([] if result is None else [ip_addr_argv(IP)])


# ---------------------------------------------------------------- files
MIB = 1024 * 1024


def _write(path: pathlib.Path, data: bytes, mode: int = 0o644) -> pathlib.Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _sparse(path: pathlib.Path, size: int) -> pathlib.Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
    path.chmod(0o600)
    return path


def _directory(path: pathlib.Path) -> pathlib.Path:
    path.mkdir()
    path.chmod(0o750)
    return path


def _symlink(target: Callable[[pathlib.Path], pathlib.Path]) -> Callable[[pathlib.Path], pathlib.Path]:
    def make(path: pathlib.Path) -> pathlib.Path:
        path.symlink_to(target(path.with_name(path.name + ".target")))
        return path

    return make


def _fifo(path: pathlib.Path) -> pathlib.Path:
    os.mkfifo(path, 0o600)
    return path


ABSENT = {"exists": False, "type": None, "sha256": None, "mode": None, "owner": None, "group": None, "size": None}
HELLO = b"hello, spark\n"


@pytest.mark.parametrize(
    "make,expected",
    [
        pytest.param(
            lambda p: _write(p, HELLO),
            {"exists": True, "type": "file", "sha256": hashlib.sha256(HELLO).hexdigest(), "mode": "0644", "size": 13},
            id="file",
        ),
        pytest.param(
            lambda p: _write(p, b"", 0o4755),
            {"exists": True, "type": "file", "sha256": hashlib.sha256(b"").hexdigest(), "mode": "4755", "size": 0},
            id="empty-setuid-file",
        ),
        pytest.param(lambda p: p, {**ABSENT, "error": None}, id="missing"),
        pytest.param(lambda p: p / "below", {**ABSENT, "error": None}, id="missing-parent"),
        pytest.param(_directory, {"exists": True, "type": "directory", "sha256": None, "mode": "0750"}, id="directory"),
        pytest.param(
            _symlink(lambda p: _write(p, HELLO, 0o600)),
            {"exists": True, "type": "file", "sha256": hashlib.sha256(HELLO).hexdigest(), "mode": "0600", "size": 13},
            id="symlink-to-file",
        ),
        pytest.param(
            _symlink(_directory),
            {"exists": True, "type": "directory", "sha256": None, "mode": "0750"},
            id="symlink-to-directory",
        ),
        pytest.param(
            _symlink(lambda p: p),
            {**ABSENT, "error": "a symlink to a missing target ({target})"},
            id="dangling-symlink",
        ),
        pytest.param(
            lambda p: _sparse(p, MAX_HASH_BYTES),
            {"exists": True, "type": "file", "sha256": hashlib.sha256(bytes(16 * MIB)).hexdigest(), "size": 16 * MIB},
            id="16-MiB-is-hashed",
        ),
        pytest.param(
            lambda p: _sparse(p, MAX_HASH_BYTES + 1),
            {
                "exists": True,
                "type": "file",
                "sha256": None,
                "mode": "0600",
                "size": 16 * MIB + 1,
                "error": f"larger than 16 MiB ({16 * MIB + 1} bytes): not hashed",
            },
            id="over-16-MiB-is-not-hashed",
        ),
        pytest.param(
            _fifo,
            {"exists": True, "type": "fifo", "sha256": None, "mode": "0600", "error": None},
            id="fifo-is-not-opened",
        ),
    ],
)
def test_files(tmp_path: pathlib.Path, make: Callable[[pathlib.Path], pathlib.Path], expected: dict[str, Any]) -> None:
    path = make(tmp_path / "watched")
    node = gather(options(GB10, sections=("files",), files=(str(path),)), FakeTools({}))
    assert list(node) == ["files", "sections", "problems", "elapsed_ms"]
    assert node["problems"] == []
    assert list(node["files"]["paths"]) == [str(path)]
    facts = node["files"]["paths"][str(path)]
    assert set(facts) == {"exists", "type", "sha256", "mode", "owner", "group", "size", "error"}
    error = expected.get("error")
    expected = {**expected, "error": error.format(target=f"{path}.target") if error else None}
    assert {key: facts[key] for key in expected} == expected
    if facts["exists"]:
        assert (facts["owner"], facts["group"]) == (os.getuid(), os.getgid())
        assert isinstance(facts["size"], int)


NOBODY = 65534


def as_user(fn: Callable[[], Any], uid: int = NOBODY) -> Any:
    """``fn()``'s result (JSON), run in a forked child as ``uid`` when this runs as root (root reads a mode-000
    file and searches a mode-000 directory anyway), else here: the permission cases run for real either way."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, answer through the pipe, never return into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, json.dumps(fn()).encode())
        except Exception:  # noqa: BLE001 - any failure is the parent's to report
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    return json.loads(data)


@pytest.fixture
def open_dir() -> Iterator[pathlib.Path]:
    """A directory an unprivileged user can reach (pytest's tmp_path is root's own, mode 0700)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="nf-perm-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for child in sorted(path.rglob("*"), reverse=True):
            child.chmod(0o700)
        shutil.rmtree(path, ignore_errors=True)


def test_unreadable_file(open_dir: pathlib.Path) -> None:
    path = _write(open_dir / "secret", HELLO, 0o000)
    facts, message = as_user(lambda: file_facts(str(path)))
    assert (facts["exists"], facts["type"], facts["mode"], facts["size"]) == (True, "file", "0000", 13)
    assert (facts["sha256"], facts["error"], message) == (None, "Permission denied", "Permission denied")


def test_a_path_under_an_unsearchable_directory(open_dir: pathlib.Path) -> None:
    _write(_directory(open_dir / "closed") / "inside", HELLO)
    (open_dir / "closed").chmod(0o000)
    facts, message = as_user(lambda: file_facts(str(open_dir / "closed" / "inside")))
    assert (facts["exists"], facts["sha256"], facts["error"], message) == (
        None,
        None,
        "Permission denied",
        "Permission denied",
    )


def test_unreadable_file_even_as_root(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an unreadable file gives, whoever runs the tests: opening it is made to fail as it does for a
    non-root user on a mode-000 file (root can read one, so the chmod case above is skipped under root)."""
    path = _write(tmp_path / "secret", HELLO, 0o000)

    def refuse(name: str, flags: int, *args: Any) -> int:
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(_files.os, "open", refuse)
    node = gather(options(GB10, sections=("files",), files=(str(path),)), FakeTools({}))
    facts = node["files"]["paths"][str(path)]
    assert facts == {
        "exists": True,
        "type": "file",
        "sha256": None,
        "mode": "0000",
        "owner": os.getuid(),
        "group": os.getgid(),
        "size": 13,
        "error": "Permission denied",
    }
    assert node["problems"] == [{"section": "files", "source": str(path), "message": "Permission denied"}]


def test_files_keeps_the_order_given_and_reports_each_path_once(tmp_path: pathlib.Path) -> None:
    one = _write(tmp_path / "one", b"1")
    two = _directory(tmp_path / "two")
    paths = (str(two), str(one), str(tmp_path / "absent"), str(one))
    node = gather(options(GB10, sections=("files",), files=paths), FakeTools({}))
    assert list(node["files"]["paths"]) == [str(two), str(one), str(tmp_path / "absent")]
    assert node["sections"] == ["files"]


def test_no_files_asked_for() -> None:
    node = gather(options(GB10, sections=("files",)), FakeTools({}))
    assert node["files"] == {"paths": {}}


def test_a_file_that_grows_past_the_limit_while_read_is_not_hashed(tmp_path: pathlib.Path) -> None:
    path = _write(tmp_path / "growing", b"0123456789")
    assert sha256_of(str(path), limit=4) == (None, "grew over 4 bytes while being read: not hashed")
    assert sha256_of(str(path), limit=10) == (hashlib.sha256(b"0123456789").hexdigest(), None)


def test_relative_paths() -> None:
    assert relative_paths(["/etc/hosts", "etc/hosts", "./x", "", "/"]) == ["etc/hosts", "./x", ""]


# ---------------------------------------------------------------- secrets (stat alone, never opened)
def test_secret_files_are_stat_only_never_opened(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "hf_" + "S3cretPlanted" * 3
    secret = _write(tmp_path / "hf_token", token.encode())
    os.chmod(secret, 0o600)
    loose = _write(tmp_path / "loose", b"x")
    os.chmod(loose, 0o644)
    folder = _directory(tmp_path / "folder")
    opened: list[str] = []
    real_open = os.open

    def watch(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(_files.os, "open", watch)
    paths = (str(secret), str(loose), str(folder), str(tmp_path / "absent"), str(secret))
    node = gather(options(GB10, sections=("secrets",), secret_files=paths), FakeTools({}))
    assert opened == []
    found = node["secrets"]
    assert found["uid"] == os.geteuid()
    assert list(found["paths"]) == [str(secret), str(loose), str(folder), str(tmp_path / "absent")]
    assert found["paths"][str(secret)] == {
        "exists": True,
        "type": "file",
        "mode": "0600",
        "owner": os.getuid(),
        "group": os.getgid(),
        "error": None,
    }
    assert found["paths"][str(loose)]["mode"] == "0644"
    assert found["paths"][str(folder)]["type"] == "directory"
    assert found["paths"][str(tmp_path / "absent")] == {
        "exists": False,
        "type": None,
        "mode": None,
        "owner": None,
        "group": None,
        "error": None,
    }
    assert node["problems"] == [] and node["sections"] == ["secrets"]
    assert token not in json.dumps(node) and "size" not in found["paths"][str(secret)]


def test_a_secret_file_that_cannot_be_looked_at_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(_files.os, "stat", refuse)
    node = gather(options(GB10, sections=("secrets",), secret_files=("/srv/secret",)), FakeTools({}))
    assert node["secrets"]["paths"]["/srv/secret"]["exists"] is None
    assert node["problems"] == [{"section": "secrets", "source": "/srv/secret", "message": "Permission denied"}]


def no_tools(argv: list[str]) -> CommandResult:
    return CommandResult(1, "", "no tools here")


def test_the_weights_config_and_the_mounts_reach_the_facts(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "models" / "DeepSeek-V3"
    model.mkdir(parents=True)
    config = pathlib.Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "model_configs" / "deepseek-v3"
    shutil.copy(config / "config.json", model / "config.json")
    (tmp_path / "models" / "broken").mkdir()
    (tmp_path / "models" / "broken" / "config.json").write_text("{")
    options = Options(
        sections=("disk", "weights"),
        proc_root=str(GB10 / "proc"),
        sys_root=str(GB10 / "sys"),
        weights_path=str(tmp_path / "models"),
        disk_paths=("/run/engram-rows",),
        weights_cache_dir="",
    )
    node = gather(options, no_tools)
    configs = node["weights"]["model_configs"]
    assert configs["DeepSeek-V3/config.json"]["keys"]["kv_lora_rank"] == 512
    assert configs["broken/config.json"]["error"].startswith("not JSON: Expecting property name")
    assert node["problems"] == [
        {
            "section": "weights",
            "source": str(tmp_path / "models" / "broken" / "config.json"),
            "message": configs["broken/config.json"]["error"],
        }
    ]
    # the weights path is this machine's tmp directory, looked up in the GB10 tree's mount table: its root
    assert node["disk"]["mounts"][str(tmp_path / "models")]["device"] == "nvme0n1p2"
    assert node["disk"]["mounts"]["/run/engram-rows"]["kind"] == "memory"


def test_an_unreadable_mount_table_is_a_disk_problem(tmp_path: pathlib.Path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text("24 1 259:2 / / rw shared:1 ext4 /dev/nvme0n1p2 rw\n")
    node = gather(Options(sections=("disk",), proc_root=str(proc), disk_paths=("/models",)), no_tools)
    assert node["disk"]["mounts"]["/models"]["error"] == "the mount table (mountinfo) could not be read"
    assert node["problems"] == [
        {
            "section": "disk",
            "source": str(proc / "self" / "mountinfo"),
            "message": "line 1: no ' - ' separator after the optional fields: "
            "'24 1 259:2 / / rw shared:1 ext4 /dev/nvme0n1p2 rw'",
        }
    ]
    assert node["disk"]["path"] is None  # disk_paths alone: no weights path, no free space reported
