# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
import os
import socket
import tempfile
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    REDACTED,
    DockerEngine,
    container_detail,
    container_summary,
    docker_facts,
    image_summary,
    redacted_environment,
    socket_path,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    GB10,
    docker_routes,
    fake_docker_engine,
)

API = GB10 / "docker-api"


def load(name: str) -> Any:
    return json.loads((API / name).read_text())


@pytest.mark.parametrize(
    "host,path",
    [
        ("unix:///var/run/docker.sock", "/var/run/docker.sock"),
        ("unix:///run/user/1000/docker.sock", "/run/user/1000/docker.sock"),
    ],
)
def test_socket_path(host: str, path: str) -> None:
    assert socket_path(host) == path


@pytest.mark.parametrize(
    "host", ["tcp://127.0.0.1:2375", "/var/run/docker.sock", "unix://relative.sock", "ssh://spark"]
)
def test_socket_path_rejects(host: str) -> None:
    with pytest.raises(ValueError, match="unix:// socket URL"):
        socket_path(host)


@pytest.mark.parametrize(
    "env,expected",
    [
        (["NCCL_NET=IB", "HF_TOKEN=hf_x"], {"NCCL_NET": "IB", "HF_TOKEN": REDACTED}),
        (["A=b=c", "EMPTY=", "BARE"], {"A": "b=c", "EMPTY": "", "BARE": ""}),
        (
            ["AWS_SECRET_ACCESS_KEY=1", "OPENAI_API_KEY=2", "DB_PASSWORD=3", "hf_token=4", "NCCL_IB_HCA=mlx5"],
            {
                "AWS_SECRET_ACCESS_KEY": REDACTED,
                "OPENAI_API_KEY": REDACTED,
                "DB_PASSWORD": REDACTED,
                "hf_token": REDACTED,
                "NCCL_IB_HCA": "mlx5",
            },
        ),
        (None, {}),
    ],
)
def test_redacted_environment(env: Any, expected: dict[str, str]) -> None:
    assert redacted_environment(env) == expected


def test_container_summary_of_the_gb10_fixture() -> None:
    rows = [container_summary(c) for c in load("containers.json")]
    assert [(r["name"], r["image"], r["state"]) for r in rows] == [
        ("vllm_dsv41", "spark-ds41f:1030", "running"),
        ("open-webui", "ghcr.io/open-webui/open-webui:main", "exited"),
    ]
    assert rows[0]["image_id"].startswith("sha256:4f0d7c3b")
    assert rows[0]["labels"]["dgxspark.cluster.rank"] == "1"


def test_image_summary_of_the_gb10_fixture() -> None:
    images = [image_summary(i) for i in load("images.json")]
    assert images[0]["tags"] == ["spark-ds41f:1030"] and images[0]["digests"] == [] and images[0]["labels"] == {}
    assert images[3]["tags"] == ["nvcr.io/nvidia/vllm:25.11-py3"]


def test_container_detail_of_the_gb10_fixture() -> None:
    detail = container_detail(load("container-vllm_dsv41.json"))
    assert detail["exists"] is True and detail["name"] == "vllm_dsv41"
    assert detail["image"] == "spark-ds41f:1030" and detail["image_id"].startswith("sha256:4f0d7c3b")
    assert detail["state"]["status"] == "running" and detail["state"]["running"] is True
    assert detail["state"]["health"] is None and detail["state"]["error"] is None
    assert detail["entrypoint"] == ["vllm"] and detail["cmd"][:2] == ["serve", "deepseek-ai/DeepSeek-V4.1-Flash-1017"]
    assert detail["env"]["HF_TOKEN"] == REDACTED and detail["env"]["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    assert "hf_fixtureSecretValue" not in json.dumps(detail)
    assert detail["ulimits"] == {
        "memlock": {"soft": -1, "hard": -1},
        "stack": {"soft": 67108864, "hard": 67108864},
        "core": {"soft": 0, "hard": 0},
    }
    assert (detail["network_mode"], detail["ipc_mode"], detail["cap_add"]) == ("host", "host", ["CAP_IPC_LOCK"])
    assert detail["devices"] == ["/dev/infiniband"]
    assert detail["gpus"] == [{"driver": "", "count": -1, "capabilities": [["gpu"]]}]
    assert detail["mounts"] == [
        {"type": "bind", "source": "/data/models", "destination": "/root/.cache/huggingface", "rw": True}
    ]
    assert detail["labels"]["dgxspark.cluster.shape"] == "tp3-triangle"


def test_docker_facts_over_a_socket() -> None:
    with fake_docker_engine() as (path, requests):
        facts = docker_facts(DockerEngine(path, 5.0), "vllm_dsv41")
    assert facts["present"] is True and facts["error"] is None and facts["socket"] == path
    assert facts["engine"] == {
        "version": "29.2.1",
        "api_version": "1.52",
        "os": "linux",
        "arch": "arm64",
        "kernel_version": "7.0.0-1019-nvidia-64k",
    }
    assert [c["name"] for c in facts["containers"]] == ["vllm_dsv41", "open-webui"]
    assert len(facts["images"]) == 4
    assert facts["container"]["exists"] is True
    assert requests == ["/version", "/containers/json?all=1", "/images/json", "/containers/vllm_dsv41/json", "/info"]


def test_the_engines_runtimes_are_facts() -> None:
    """/info's Runtimes (the NVIDIA runtime or not: whether --gpus can work), in the shape Docker's API documents;
    an engine that does not answer /info says nothing (None), not "no runtime"."""
    info = {
        "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
        "DefaultRuntime": "runc",
    }
    routes = {**docker_routes(), "/info": (200, json.dumps(info).encode())}
    with fake_docker_engine(routes) as (path, _requests):
        facts = docker_facts(DockerEngine(path, 5.0), None)
    assert (facts["runtimes"], facts["default_runtime"], facts["error"]) == (["nvidia", "runc"], "runc", None)
    with fake_docker_engine() as (path, _requests):
        facts = docker_facts(DockerEngine(path, 5.0), None)
    assert (facts["runtimes"], facts["default_runtime"], facts["present"]) == (None, None, True)


def test_a_missing_container_is_a_fact() -> None:
    with fake_docker_engine() as (path, _requests):
        facts = docker_facts(DockerEngine(path, 5.0), "vllm dsv41/x")
    assert facts["error"] is None
    assert facts["container"] == {"exists": False, "name": "vllm dsv41/x"}


def test_no_container_asked_for() -> None:
    with fake_docker_engine() as (path, requests):
        facts = docker_facts(DockerEngine(path, 5.0), None)
    assert facts["container"] is None and requests[-1] == "/info" and len(requests) == 4


@pytest.mark.parametrize(
    "route,answer,message",
    [
        ("/version", (500, b'{"message":"engine is sick"}'), "GET /version: HTTP 500: engine is sick"),
        ("/images/json", (200, b"<html>"), "GET /images/json: the engine's answer is not JSON"),
        ("/images/json", (200, b'{"a": 1}'), "GET /images/json: expected a JSON list, found dict"),
        ("/containers/vllm_dsv41/json", (500, b"[1]"), "GET /containers/vllm_dsv41/json: HTTP 500: [1]"),
    ],
)
def test_engine_errors_are_reported(route: str, answer: tuple[int, bytes], message: str) -> None:
    routes = docker_routes()
    routes[route] = answer
    with fake_docker_engine(routes) as (path, _requests):
        facts = docker_facts(DockerEngine(path, 5.0), "vllm_dsv41")
    assert facts["error"].startswith(message)
    assert facts["present"] is (route != "/version")


def test_no_socket() -> None:
    facts = docker_facts(DockerEngine("/nonexistent/docker.sock", 1.0), "vllm_dsv41")
    assert (facts["present"], facts["error"]) == (False, "no Docker engine socket at /nonexistent/docker.sock")


def test_nothing_listening() -> None:
    directory = tempfile.mkdtemp(prefix="nf-")
    path = os.path.join(directory, "docker.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)  # bound but not listening: connect() is refused
    try:
        facts = docker_facts(DockerEngine(path, 1.0), None)
    finally:
        sock.close()
        os.unlink(path)
        os.rmdir(directory)
    assert facts["error"] == f"nothing answers on {path} (dockerd is not running)"


def test_an_engine_that_does_not_answer() -> None:
    directory = tempfile.mkdtemp(prefix="nf-")
    path = os.path.join(directory, "docker.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)  # accepts the connection (backlog) but never answers
    try:
        facts = docker_facts(DockerEngine(path, 0.2), None)
    finally:
        sock.close()
        os.unlink(path)
        os.rmdir(directory)
    assert facts["error"] == "the Docker engine did not answer GET /version within 0.2 s"
