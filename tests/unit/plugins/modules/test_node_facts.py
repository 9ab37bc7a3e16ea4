# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' main() end to end: fixture trees, fake nvidia-smi and systemctl executables, a fake engine."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import QUERY
from ansible_collections.dgxspark.cluster.plugins.modules import node_facts
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    BARE,
    GB10,
    IP_ADDR_GB10,
    fake_docker_engine,
    tools_copy,
)

ROOT = pathlib.Path(__file__).resolve().parents[4]
SERVICES = ["ollama.service", "nv-cpu-governor.service", "open-webui.service"]


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    def exit_json(self: Any, **kwargs: Any) -> None:
        raise ExitJson(kwargs)

    def fail_json(self: Any, **kwargs: Any) -> None:
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module(args: dict[str, Any]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(ExitJson) as exited:
        node_facts.main()
    return exited.value.args[0]


def fail_module(args: dict[str, Any]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(FailJson) as failed:
        node_facts.main()
    return failed.value.args[0]


def fake_ip(directory: pathlib.Path) -> pathlib.Path:
    """An ``ip`` that logs its arguments like the GB10 tree's fake tools and prints the GB10 addresses."""
    path = directory / "ip"
    path.write_text(
        "#!/bin/sh\n"
        'if [ -n "${NODE_FACTS_ARGV_LOG:-}" ]; then echo "ip $*" >> "$NODE_FACTS_ARGV_LOG"; fi\n'
        f"cat '{IP_ADDR_GB10}'\n"
    )
    path.chmod(0o755)
    return path


def gb10_args(tools: pathlib.Path, docker_sock: str, **more: Any) -> dict[str, Any]:
    args = {
        "proc_root": str(GB10 / "proc"),
        "sys_root": str(GB10 / "sys"),
        "nvidia_smi": str(tools / "nvidia-smi"),
        "systemctl": str(tools / "systemctl"),
        "ip_bin": str(fake_ip(tools)),
        "services": SERVICES,
        "docker_host": f"unix://{docker_sock}",
        "weights_path": str(ROOT),
    }
    args.update(more)
    return args


@pytest.mark.parametrize("check_mode", [False, True])
def test_gb10_end_to_end(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, check_mode: bool) -> None:
    tools = tools_copy(GB10, tmp_path)
    argv_log = tmp_path / "argv.log"
    monkeypatch.setenv("NODE_FACTS_ARGV_LOG", str(argv_log))
    with fake_docker_engine() as (sock, requests):
        result = run_module({**gb10_args(tools, sock), "_ansible_check_mode": check_mode})
    node = result["node"]
    assert result["changed"] is False
    assert result["ansible_facts"] == {"dgxspark_node": node}
    assert result["elapsed_ms"] == node["elapsed_ms"]
    assert node["problems"] == []
    # one call per tool, with the documented arguments
    assert argv_log.read_text().splitlines() == [
        f"nvidia-smi --query-gpu={QUERY} --format=csv,nounits",
        "ip -j -4 addr show",
        "systemctl show --no-pager --property=Id,LoadState,ActiveState,SubState,UnitFileState,Result,NRestarts -- "
        + " ".join(SERVICES),
    ]
    assert len(requests) == 5  # /version, containers, images, the container, /info
    assert node["gpu"]["devices"][0]["memory_total_mib"] is None
    assert node["gpu"]["devices"][0]["clocks_graphics_mhz"] == 2522
    assert node["kernel"]["page_size"] == 65536 and "kho=off" in node["kernel"]["cmdline"]
    assert node["kernel"]["memory_saver"]["loaded"] is True
    assert [e["index"] for e in node["rdma"]["roce_v2_ipv4"]] == [3, 3]
    assert node["fabric"]["interfaces"]["enp1s0f0np0"]["speed_mbps"] == 200000
    assert node["fabric"]["interfaces"]["enp1s0f0np0"]["ipv4"] == ["192.168.100.10/24", "10.99.3.1/32"]
    assert node["fabric"]["error"] is None
    assert "files" not in node
    assert node["docker"]["container"]["state"]["status"] == "running"
    assert node["services"]["units"]["ollama.service"]["active_state"] == "active"
    assert node["disk"]["exists"] is True
    json.dumps(result)


def test_bare_end_to_end(tmp_path: pathlib.Path) -> None:
    tools = tools_copy(BARE, tmp_path)
    result = run_module(
        {
            "proc_root": str(BARE / "proc"),
            "sys_root": str(BARE / "sys"),
            "nvidia_smi": "/nonexistent/nvidia-smi",
            "systemctl": str(tools / "systemctl"),
            "services": ["ollama.service"],
            "docker_host": "unix:///nonexistent/docker.sock",
        }
    )
    node = result["node"]
    assert node["problems"] == []
    assert node["gpu"]["error"] == "nvidia-smi not found at /nonexistent/nvidia-smi"
    assert node["rdma"]["present"] is False and node["fabric"]["interfaces"] == {}
    assert node["services"]["error"].startswith("systemctl exited 1: System has not been booted with systemd")
    assert node["docker"]["error"] == "no Docker engine socket at /nonexistent/docker.sock"


def test_nvidia_smi_not_on_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    result = run_module({"sections": ["gpu"], "proc_root": str(BARE / "proc"), "sys_root": str(BARE / "sys")})
    assert result["node"]["gpu"] == {
        "present": False,
        "error": "nvidia-smi not found",
        "count": 0,
        "devices": [],
        "clock_latch": None,
    }
    assert list(result["node"]) == ["gpu", "sections", "problems", "elapsed_ms"]


@pytest.mark.parametrize(
    "script,error",
    [
        (
            'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9',
            "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ),
        ("exec sleep 30", "nvidia-smi did not answer within 1 s"),
    ],
)
def test_a_failing_or_hanging_gpu_is_a_fact(tmp_path: pathlib.Path, script: str, error: str) -> None:
    assert shutil.which("timeout"), "coreutils timeout is part of every Debian system: the hang case needs it"
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    result = run_module({"sections": ["gpu"], "nvidia_smi": str(fake), "timeout": 1})
    assert result["node"]["gpu"]["present"] is False
    assert result["node"]["gpu"]["error"] == error


@pytest.mark.parametrize(
    "args,message",
    [
        ({"sections": ["memory", "gpus"]}, "value of sections must be one or more of"),
        ({"timeout": 0}, "timeout must be a positive number of seconds, found 0"),
        (
            {"sections": ["files"], "files": ["/etc/hosts", "etc/hosts", "./x"]},
            "files must be absolute paths, found ['etc/hosts', './x']",
        ),
        ({"files": ["~/.bashrc"]}, "files must be absolute paths, found ['~/.bashrc']"),
        ({"weights_hash_seconds": -1}, "weights_hash_seconds must be 0 or more seconds, found -1.0"),
        ({"disk_paths": ["/models", "models/x"]}, "disk_paths must be absolute paths, found ['models/x']"),
    ],
)
def test_invalid_options_fail(args: dict[str, Any], message: str) -> None:
    assert message in fail_module(args)["msg"]


def test_runs_on_this_machine() -> None:
    """The real /proc and /sys, whatever this machine has: no crash, plain data, every section present."""
    result = run_module({"weights_path": str(ROOT)})
    node = result["node"]
    assert node["sections"] == ["memory", "kernel", "gpu", "rdma", "fabric", "docker", "limits", "disk", "services"]
    assert node["memory"]["mem_total_bytes"] > 0 and node["kernel"]["page_size"] in (4096, 16384, 65536)
    json.dumps(result)


def test_as_a_process_with_an_args_file(tmp_path: pathlib.Path) -> None:
    """How Ansible runs it: a separate Python reading its arguments from a JSON file."""
    args = tmp_path / "args.json"
    args.write_text(
        json.dumps(
            {
                "ANSIBLE_MODULE_ARGS": {
                    "sections": ["memory", "kernel", "fabric"],
                    "proc_root": str(GB10 / "proc"),
                    "sys_root": str(GB10 / "sys"),
                }
            }
        )
    )
    collections = ROOT / ".ansible" / "collections"
    completed = subprocess.run(
        [sys.executable, "-m", "ansible_collections.dgxspark.cluster.plugins.modules.node_facts", str(args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PYTHONPATH": str(collections), "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["changed"] is False
    assert result["node"]["memory"]["mem_total_bytes"] == 129798784 * 1024
    assert sorted(result["ansible_facts"]["dgxspark_node"]["fabric"]["interfaces"]) == [
        "enP2p1s0f0np0",
        "enP2p1s0f1np1",
        "enp1s0f0np0",
        "enp1s0f1np1",
    ]


def test_files_end_to_end(tmp_path: pathlib.Path) -> None:
    written = tmp_path / "fabric.conf"
    written.write_text("mtu 9000\n")
    written.chmod(0o640)
    (tmp_path / "link").symlink_to(written)
    paths = [str(written), str(tmp_path / "link"), str(tmp_path), str(tmp_path / "absent.conf")]
    result = run_module({"sections": ["files"], "files": paths})
    node = result["node"]
    assert node["sections"] == ["files"] and node["problems"] == []
    found = node["files"]["paths"]
    assert list(found) == paths
    digest = hashlib.sha256(b"mtu 9000\n").hexdigest()
    assert (found[str(written)]["sha256"], found[str(written)]["mode"], found[str(written)]["size"]) == (
        digest,
        "0640",
        9,
    )
    assert found[str(tmp_path / "link")] == found[str(written)]
    assert (found[str(tmp_path)]["type"], found[str(tmp_path)]["sha256"]) == ("directory", None)
    assert found[str(tmp_path / "absent.conf")]["exists"] is False
    json.dumps(result)


@pytest.mark.parametrize(
    "args,error",
    [
        ({"ip_bin": "/nonexistent/ip"}, "ip not found at /nonexistent/ip"),
        ({}, "ip not found"),  # nothing on PATH (get_bin_path finds nothing)
    ],
)
def test_ip_missing_leaves_ipv4_unknown(monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], error: str) -> None:
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    result = run_module(
        {"sections": ["fabric"], "proc_root": str(GB10 / "proc"), "sys_root": str(GB10 / "sys"), **args}
    )
    fabric = result["node"]["fabric"]
    assert fabric["error"] == error
    assert {facts["ipv4"] for facts in fabric["interfaces"].values()} == {None}
    assert fabric["interfaces"]["enp1s0f0np0"]["mtu"] == 9000
    assert result["node"]["problems"] == []


@pytest.mark.parametrize(
    "script,error",
    [
        (
            'echo "Cannot open netlink socket: Operation not permitted" >&2; exit 255',
            "ip exited 255: Cannot open netlink socket: Operation not permitted",
        ),
        ("echo 'not json'", "could not read ip's output: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_a_failing_ip_leaves_ipv4_unknown(tmp_path: pathlib.Path, script: str, error: str) -> None:
    fake = tmp_path / "ip"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    result = run_module(
        {"sections": ["fabric"], "ip_bin": str(fake), "proc_root": str(GB10 / "proc"), "sys_root": str(GB10 / "sys")}
    )
    fabric = result["node"]["fabric"]
    assert fabric["error"] == error
    assert {facts["ipv4"] for facts in fabric["interfaces"].values()} == {None}


@pytest.mark.parametrize("check_mode", [False, True])
def test_weights_end_to_end(tmp_path: pathlib.Path, check_mode: bool) -> None:
    weights = tmp_path / "models"
    weights.mkdir()
    (weights / "config.json").write_text('{"num_hidden_layers": 43}\n')
    cache = tmp_path / "cache"
    args = {"sections": ["weights"], "weights_path": str(weights), "weights_cache_dir": str(cache)}
    result = run_module({**args, "_ansible_check_mode": check_mode})
    facts = result["node"]["weights"]
    assert result["changed"] is False
    assert facts["files"] == {
        "config.json": {"size": 26, "sha256": hashlib.sha256(b'{"num_hidden_layers": 43}\n').hexdigest()}
    }
    assert facts["budget_seconds"] == 60.0
    # the config.json's KV keys come back too: only those, never the file
    assert facts["model_configs"] == {
        "config.json": {"size": 26, "keys": {"num_hidden_layers": 43}, "skipped": [], "error": None}
    }
    assert facts["cache"]["written"] is not check_mode and cache.exists() is not check_mode
    again = run_module(args)["node"]["weights"]
    assert again["from_cache"] == (0 if check_mode else 1)


def test_disk_mounts_end_to_end() -> None:
    """The weights path and each of disk_paths, on the GB10 tree's mounts (the module as the boot calls it)."""
    result = run_module(
        {
            "sections": ["disk"],
            "weights_path": "/models",
            "disk_paths": ["/models/DeepSeek-V4.1-Flash", "/mnt/head-models/DeepSeek-V4.1-Flash"],
            "proc_root": str(GB10 / "proc"),
            "sys_root": str(GB10 / "sys"),
        }
    )
    mounts = result["node"]["disk"]["mounts"]
    assert list(mounts) == ["/models", "/models/DeepSeek-V4.1-Flash", "/mnt/head-models/DeepSeek-V4.1-Flash"]
    assert [(m["kind"], m["device"], [d["name"] for d in m["disks"]]) for m in mounts.values()] == [
        ("block", "nvme0n1p2", ["nvme0n1"]),
        ("block", "nvme0n1p2", ["nvme0n1"]),
        ("network", None, []),
    ]
    assert result["node"]["problems"] == []
