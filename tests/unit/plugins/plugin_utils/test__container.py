# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A planned rank as community.docker.docker_container parameters, and the validator agreeing with it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.container import docker_container_params
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import (
    DOCKER_RUN_OPTIONS,
    KEY,
    PRIVILEGE_CHECKS,
    SHORT_OPTIONS,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, spark3_without_weights

HOSTS = [Host(f"spark-{i}", i, f"198.51.100.{10 + i}", head=i == 0) for i in range(8)]


def ranks(path: Any, shape: str, nodes: int, extra: list[str] | None = None) -> list[dict[str, Any]]:
    data = spark3_without_weights() if path == SPARK3 else json.loads(path.read_text())
    data["container"]["docker_run_args"] += extra or []
    data["host"].setdefault("weights_path", "/models")  # the binds of /models are of the weights
    return build_plan(validate_profile(data), shape, HOSTS[:nodes])["ranks"]


def test_seed000_head_as_docker_container_parameters() -> None:
    head = ranks(SPARK3, "tp3-triangle", 3)[0]
    params = docker_container_params(head, "vllm_dsv41")
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
    # the plan carries exactly these parameters: the role starts what was checked, without rendering again
    assert head["container"] == params


def test_seed002_volumes_and_nofile() -> None:
    rank = ranks(SPARK8, "tp8-1m", 8)[5]
    assert rank["container"]["volumes"] == ["/models:/models:ro"]
    assert "nofile:1048576:1048576" in rank["container"]["ulimits"]


def test_options_that_used_to_fail_inside_the_boot_render() -> None:
    extra = ["--restart=no", "--pids-limit=4096", "--add-host", "head:10.99.3.1", "--dns=10.99.0.53"]
    extra += ["--mount=type=bind,source=/models,target=/models,readonly", "--init=false"]
    params = ranks(SPARK3, "tp3-triangle", 3, extra)[1]["container"]
    assert (params["restart_policy"], params["pids_limit"], params["init"]) == ("no", 4096, False)
    assert params["etc_hosts"] == {"head": "10.99.3.1"} and params["dns_servers"] == ["10.99.0.53"]
    assert params["mounts"] == [{"type": "bind", "source": "/models", "target": "/models", "read_only": True}]


def test_a_rank_the_validator_never_saw_fails_naming_the_rank_and_the_option() -> None:
    rank = dict(ranks(SPARK3, "tp3-triangle", 3)[0])
    rank["docker_run_args"] = [*rank["docker_run_args"], "--publish=8000:8000", "--gpus=some"]
    with pytest.raises(ProfileError) as info:
        docker_container_params(rank, "vllm_dsv41")
    rendered = [p.render() for p in info.value.problems]
    assert rendered[0].startswith("rank 0 (spark-0): docker_run_args --publish: --publish is not allowed here"), (
        rendered
    )
    assert "--gpus: bad --gpus: 'some': expected all, a count or device=<ids>" in rendered[1], rendered


def _written(name: str, separate: bool) -> list[str]:
    """``name`` as a profile would write it, with a value that renders where the option takes one."""
    row = DOCKER_RUN_OPTIONS[name]
    value = row.example or ("x" if row.takes_value else "")
    if not row.takes_value:
        return [name]
    return [name, value] if separate else [f"{name}={value}"]


def _outcome(name: str, separate: bool) -> tuple[str, dict[str, Any] | list[str]]:
    """Validate and plan seed 000's tp3 with ``name`` added: the rank's parameters, or the problems."""
    row = DOCKER_RUN_OPTIONS[name]
    extra = [arg for needed in row.requires[:1] for arg in _written(needed, False)] + _written(name, separate)
    data = spark3_without_weights()  # the options' examples bind /models themselves
    at = len(data["container"]["docker_run_args"]) + len(extra) - len(_written(name, separate))
    data["container"]["docker_run_args"] += extra
    # what renders is tested here; what the privilege policy refuses (waivable) is tested in test__profile.py
    data["waivers"] = dict.fromkeys(PRIVILEGE_CHECKS, "the rendering of every option is tested here")
    try:
        rank = build_plan(validate_profile(data, "profile.json"), "tp3-triangle", HOSTS[:3])["ranks"][2]
    except ProfileError as exc:
        rendered = [p.render() for p in exc.problems]
        assert all(f"$.container.docker_run_args[{at}]: " in p and name in p for p in rendered), (name, rendered)
        return "refused", rendered
    assert rank["container"] == docker_container_params(rank, "vllm_dsv41")
    return "rendered", rank["container"]


# The options the exhaustive test below may see refused although they render elsewhere: every sysctl Docker
# namespaces belongs to the network or IPC namespace, and seed 000 shares both with the host.
REFUSED_BY_THE_PROFILE = {"--sysctl"}


@pytest.mark.parametrize("separate", [False, True], ids=["name=value", "name value"])
@pytest.mark.parametrize("name", sorted(DOCKER_RUN_OPTIONS))
def test_every_option_the_validator_knows_is_refused_naming_it_or_renders(name: str, separate: bool) -> None:
    row = DOCKER_RUN_OPTIONS[name]
    outcome, detail = _outcome(name, separate)
    if not row.renders or name in REFUSED_BY_THE_PROFILE:
        assert outcome == "refused", (name, detail)
        return
    assert outcome == "rendered", (name, detail)
    assert isinstance(detail, dict) and row.parameter in detail, (name, detail)
    if row.kind == KEY:
        assert row.key in detail[row.parameter], (name, detail)


@pytest.mark.parametrize("short,name", sorted(SHORT_OPTIONS.items()))
def test_short_options_are_read_as_their_long_name(short: str, name: str) -> None:
    row = DOCKER_RUN_OPTIONS[name]
    data = spark3_without_weights()
    data["host"]["weights_path"] = "/models"  # -v's example binds the weights
    data["container"]["docker_run_args"] += [short, row.example] if row.takes_value else [short]
    if row.renders:
        rank = build_plan(validate_profile(data), "tp3-triangle", HOSTS[:3])["ranks"][0]
        assert row.parameter in rank["container"]
    else:
        with pytest.raises(ProfileError, match=f"{name} is not allowed here"):
            validate_profile(data)


def test_a_rendering_problem_is_a_plan_problem_before_anything_is_touched() -> None:
    # A profile object that skipped validation (as one built by hand would): build_plan still refuses it.
    profile = validate_profile(json.loads(SPARK3.read_text()))
    data = json.loads(json.dumps(profile.data))
    data["container"]["docker_run_args"].append("--publish=8000:8000")
    with pytest.raises(ProfileError) as info:
        build_plan(replace(profile, data=data), "tp3-triangle", HOSTS[:3])
    rendered = [p.render() for p in info.value.problems]
    assert len(rendered) == 3, rendered
    assert rendered[0].startswith("inventory: rank 0 (spark-0): docker_run_args --publish: --publish is not allowed")
