# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gather() against the GB10 and bare fixture trees, with fake tools and a fake Docker engine."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import (
    DEFAULT_SECTIONS,
    SECTIONS,
    CommandResult,
    Options,
    Tool,
    gather,
    make_runner,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import query_argv
from ansible_collections.dgxspark.cluster.plugins.module_utils._systemctl import show_argv
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    BARE,
    GB10,
    fake_docker_engine,
    sample_body,
)

SERVICES = ("ollama.service", "nv-cpu-governor.service", "open-webui.service")
NVIDIA_SMI = "/usr/bin/nvidia-smi"
SYSTEMCTL = "/usr/bin/systemctl"


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
        }
    )


def options(tree: pathlib.Path, **changes: Any) -> Options:
    fields: dict[str, Any] = {
        "proc_root": str(tree / "proc"),
        "sys_root": str(tree / "sys"),
        "nvidia_smi": Tool("nvidia-smi", NVIDIA_SMI),
        "systemctl": Tool("systemctl", SYSTEMCTL),
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


def test_gb10_runs_two_processes_and_four_requests(gb10_node: Any) -> None:
    node, tools, requests = gb10_node
    assert tools.calls == [query_argv(NVIDIA_SMI), show_argv(SYSTEMCTL, SERVICES)]
    assert requests == ["/version", "/containers/json?all=1", "/images/json", "/containers/vllm_dsv41/json"]
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
    interfaces = gb10_node[0]["fabric"]["interfaces"]
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
    }
    down = interfaces["enP2p1s0f1np1"]
    assert (down["carrier"], down["speed_mbps"], down["rdma_device"], down["gid_ipv4"]) == (
        False,
        None,
        "roceP2p1s0f1",
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
    assert node["gpu"] == {"present": False, "error": "nvidia-smi not found", "count": 0, "devices": []}
    assert node["rdma"] == {
        "present": False,
        "error": f"no RDMA devices in {BARE / 'sys' / 'class' / 'infiniband'}",
        "devices": {},
        "roce_v2_ipv4": [],
    }
    assert node["fabric"] == {"interfaces": {}}
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
    node = gather(options(BARE, sections=("fabric",), fabric_interfaces=("eth0", "enp1s0f0np0")), FakeTools({}))
    assert list(node["fabric"]["interfaces"]) == ["eth0", "enp1s0f0np0"]
    assert node["fabric"]["interfaces"]["enp1s0f0np0"] == {"present": False, "rdma_device": None, "gid_ipv4": []}
    assert "rdma" not in node


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
def test_memguard_and_ports_are_gathered_only_when_named() -> None:
    assert set(SECTIONS) - set(DEFAULT_SECTIONS) == {"memguard", "ports"}
    node = gather(options(GB10, sections=("memory",)), FakeTools({}))
    assert "memguard" not in node and "ports" not in node


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
