# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A planned rank as community.docker.docker_container parameters."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._container import docker_container_params
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8


def ranks(path: Any, shape: str, nodes: int, edit: Any = None) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    if edit:
        edit(data)
    hosts = [HostSpec(f"spark-{i}", i, i == 0, f"198.51.100.{10 + i}") for i in range(nodes)]
    return build_plan(validate_profile(data), shape, hosts)["ranks"]


def test_seed000_head_as_docker_container_parameters() -> None:
    head = ranks(SPARK3, "tp3-triangle", 3)[0]
    params = docker_container_params(head)
    assert params["name"] == "vllm_dsv41" and params["image"] == "spark-ds41f:1030"
    assert params["entrypoint"] == ["vllm"] and params["command"][0] == "serve"
    assert params["command"] == head["command"] and params["command_handling"] == "correct"
    assert params["network_mode"] == "host" and params["ipc_mode"] == "host"
    assert params["device_requests"] == [{"driver": "nvidia", "capabilities": [["gpu"]], "count": -1}]
    assert params["devices"] == ["/dev/infiniband:/dev/infiniband:rwm"]
    assert params["capabilities"] == ["IPC_LOCK"]
    assert params["ulimits"] == ["memlock:-1:-1", "stack:67108864:67108864", "core:0:0"]
    assert params["security_opts"] == ["seccomp=unconfined"]
    assert (params["shm_size"], params["memory"], params["memory_swap"]) == ("16g", "112g", "112g")
    # never pulled, never restarted, kept when it exits
    assert (params["pull"], params["restart_policy"], params["auto_remove"], params["detach"]) == (
        "never",
        "no",
        False,
        True,
    )
    assert params["env"] == head["environment"] and params["labels"] == head["labels"]


def test_seed002_volumes_and_nofile() -> None:
    params = docker_container_params(ranks(SPARK8, "tp8-1m", 8)[5])
    assert params["volumes"] == ["/models:/models:ro"]
    assert "nofile:1048576:1048576" in params["ulimits"]


def test_every_option_maps_or_is_an_error_naming_it() -> None:
    def add(data: dict[str, Any]) -> None:
        data["container"]["docker_run_args"] += ["--cpuset-cpus=0-15", "--init", "--sysctl", "net.core.somaxconn=1024"]

    params = docker_container_params(ranks(SPARK3, "tp3-triangle", 3, add)[1])
    assert params["cpuset_cpus"] == "0-15" and params["init"] is True
    assert params["sysctls"] == {"net.core.somaxconn": "1024"}

    def unmapped(data: dict[str, Any]) -> None:
        data["container"]["docker_run_args"] += ["--publish=8000:8000", "--gpus=some"]

    with pytest.raises(ProfileError) as info:
        docker_container_params(ranks(SPARK3, "tp3-triangle", 3, unmapped)[0])
    rendered = [p.render() for p in info.value.problems]
    assert any(
        "rank 0 (spark-0): docker_run_args --publish: no community.docker.docker_container parameter" in r
        for r in rendered
    ), rendered
    assert any("--gpus 'some': expected all, a count or device=<ids>" in r for r in rendered), rendered
