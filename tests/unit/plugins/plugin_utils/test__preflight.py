# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight against real node facts (the GB10 tree) and seed 000's plan."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.boot import FilterModule
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, gather
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._preflight import preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import GB10

GIB = 1024**3
PROFILE = validate_profile(json.loads(SPARK3.read_text()))
HOSTS = ["spark-head", "spark-w1", "spark-w2"]
PLAN = build_plan(
    PROFILE, "tp3-triangle", [HostSpec(h, i, i == 0, f"198.51.100.{10 + i}") for i, h in enumerate(HOSTS)]
)
GB10_NODE = gather(
    Options(
        sections=("memory", "kernel", "fabric", "limits"), proc_root=str(GB10 / "proc"), sys_root=str(GB10 / "sys")
    ),
    lambda argv: CommandResult(1, "", "no tools here"),
)


def node(
    rank: int, available_gib: float = 110, containers: list[dict[str, Any]] | None = None, image_id: str = "sha256:aa"
) -> dict[str, Any]:
    facts = copy.deepcopy(GB10_NODE)
    facts["memory"]["mem_available_bytes"] = int(available_gib * GIB)
    # the GB10 tree's f1 ports are down (as in its samples): this node's fabric is its up port only
    facts["fabric"]["interfaces"] = {k: v for k, v in facts["fabric"]["interfaces"].items() if v.get("carrier")}
    facts["docker"] = {
        "present": True,
        "engine": {"version": "28.2.2"},
        "containers": containers or [],
        "images": [{"id": image_id, "tags": ["spark-ds41f:1030"]}],
    }
    facts["disk"] = {"path": None}
    return facts


def facts(**per_host: dict[str, Any]) -> dict[str, Any]:
    return {host: per_host.get(host, node(i)) for i, host in enumerate(HOSTS)}


def by(result: dict[str, Any], check: str, host: str) -> dict[str, str]:
    return next(line for line in result["lines"] if line["check"] == check and line["host"] == host)


def test_a_ready_cluster_passes_with_a_line_per_check_and_node() -> None:
    result = preflight(facts(), PLAN, PROFILE.data)
    assert not result["failed"], result["report"]
    assert {line["check"] for line in result["lines"]} >= {"mem-available", "previous-container", "image-id", "kernel"}
    assert by(result, "mem-available", "spark-w1")["message"] == "MemAvailable 110.0 GiB, needs >= 100 GiB"
    assert by(result, "image-id", "all")["message"] == "the same image ID on 3 node(s): sha256:aa"
    assert by(result, "weights", "spark-head")["status"] == "SKIP"
    assert result["report"][0].startswith("PASS  node-facts")


def test_every_failure_is_named_with_its_node() -> None:
    running = [{"name": "vllm_dsv41", "state": "running", "labels": {"dgxspark.cluster.spec_sha256": "old"}}]
    result = preflight(
        facts(
            **{"spark-w1": node(1, available_gib=42.5, containers=running), "spark-w2": node(2, image_id="sha256:bb")}
        ),
        PLAN,
        PROFILE.data,
    )
    failed = {(line["check"], line["host"]): line["message"] for line in result["failures"]}
    assert failed[("mem-available", "spark-w1")] == "MemAvailable 42.5 GiB, needs >= 100 GiB"
    assert failed[("previous-container", "spark-w1")].startswith("vllm_dsv41 is running with another spec")
    assert failed[("image-id", "all")] == (
        "the nodes hold different images under the same name: sha256:aa: spark-head, spark-w1; sha256:bb: spark-w2"
    )


def test_a_rank_already_serving_as_planned_is_left_alone() -> None:
    same = [
        {
            "name": "vllm_dsv41",
            "state": "running",
            "labels": {"dgxspark.cluster.spec_sha256": PLAN["ranks"][1]["spec_sha256"]},
        }
    ]
    result = preflight(facts(**{"spark-w1": node(1, containers=same)}), PLAN, PROFILE.data)
    assert by(result, "previous-container", "spark-w1") == {
        "check": "previous-container",
        "host": "spark-w1",
        "status": "PASS",
        "message": "vllm_dsv41 already runs exactly as planned: left alone",
    }


def test_replace_and_skip_say_what_they_did() -> None:
    exited = [{"name": "vllm_dsv41", "state": "exited", "labels": {}}]
    low = facts(**{"spark-head": node(0, available_gib=10, containers=exited)})
    result = preflight(low, PLAN, PROFILE.data, replace=True, skip=["mem-available"])
    assert not result["failed"]
    assert by(result, "previous-container", "spark-head")["status"] == "WARN"
    assert by(result, "mem-available", "spark-head")["message"] == (
        "skipped on purpose (would be FAIL: MemAvailable 10.0 GiB, needs >= 100 GiB)"
    )
    with pytest.raises(AnsibleFilterError, match="unknown preflight checks to skip: mem"):
        FilterModule().filters()["boot_preflight"](low, PLAN, PROFILE.data, skip=["mem"])


def test_a_node_without_facts_or_image_fails() -> None:
    missing = node(2)
    missing["docker"]["images"] = []
    result = preflight({"spark-head": node(0), "spark-w2": missing}, PLAN, PROFILE.data)
    failed = {(line["check"], line["host"]) for line in result["failures"]}
    assert ("node-facts", "spark-w1") in failed and ("image-present", "spark-w2") in failed
