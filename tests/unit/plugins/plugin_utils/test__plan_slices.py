# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's slices (issue 25): the fabric, the kernel's expectations, the guard's fields and what each host's
preflight gathers all live in the one plan, and the roles read their slice of it, not the profile again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import plan_shares
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kernel import required
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import HOST_FIELDS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import Preflight, bind, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan_bind import cluster

NAMES = {"spark-w1": {"hca": ["rocep1s0f1"], "socket_ifname": "enp1s0f1np1", "gid_index": 3}}


@pytest.mark.parametrize("path,shape,nodes", [(SPARK3, "tp3-triangle", 3), (SPARK8, "tp8-300k", 8)])
def test_the_fabric_share_of_every_host_is_the_fabric_plans(path: Any, shape: str, nodes: int) -> None:
    profile = load_profile(str(path))
    hosts = cluster(nodes)
    plan = build_plan(profile, shape, hosts)
    assert plan["fabric"] == plan_shares(profile.data["shapes"][shape], shape, hosts)
    for host, share in plan["fabric"].items():
        assert plan["preflight"][host]["fabric_interfaces"] == share["interfaces"]


@pytest.mark.parametrize("path,shape,nodes", [(SPARK3, "tp3-triangle", 3), (SPARK8, "tp8-1m", 8)])
def test_each_hosts_preflight_slice_says_what_it_gathers(path: Any, shape: str, nodes: int) -> None:
    profile = load_profile(str(path))
    plan = build_plan(profile, shape, cluster(nodes))
    host = profile.data["host"]
    assert set(plan["preflight"]) == {r["host"] for r in plan["ranks"]}
    for expects in plan["preflight"].values():
        assert set(expects) == set(Preflight.__required_keys__)
        assert expects["ports"] == [plan["ranks"][0]["api_port"], plan["master_port"]]
        assert expects["weights_path"] == host.get("weights_path")
        assert expects["helper_services"] == host["helper_services"]
        assert expects["min_mem_available_gib"] == host["min_mem_available_gib"]
        assert expects["secret_files"] == list(plan["secrets"].values())


def test_the_guard_reads_the_host_sections_guard_fields_only() -> None:
    profile = load_profile(str(SPARK3))
    plan = build_plan(profile, "tp3-triangle", cluster(3))
    assert plan["guard"] == {f: profile.data["host"][f] for f in HOST_FIELDS if f in profile.data["host"]}
    assert "helper_services" not in plan["guard"] and plan["guard"]


def test_the_kernel_slice_carries_each_ranks_own_limits_overrides_included() -> None:
    """An inventory override that adds a limit on one worker changes that node's expectation, and only its: the
    profile alone cannot say it."""
    profile = load_profile(str(SPARK3))
    bigger = {"container": {"docker_run_args": ["--ulimit=nofile=2097152:2097152"]}}
    plan = build_plan(profile, "tp3-triangle", cluster(3, **{"spark-w2": {"overrides": bigger}}))
    by_host = {r["host"]: r for r in plan["ranks"]}
    for host, kernel in plan["kernel"].items():
        assert kernel["ulimits"] == by_host[host]["ulimits"]
    assert plan["kernel"]["spark-w2"]["ulimits"]["nofile"]["soft"] == 2097152
    assert plan["kernel"]["spark-head"]["ulimits"] != plan["kernel"]["spark-w2"]["ulimits"]
    planned = {"profile": profile.data, "shape": "tp3-triangle", "plan": plan}
    from_plan = required(planned, {"page_size": 4096}, True, True, "spark-w2")
    assert from_plan["ulimits"]["nofile"]["soft"] == 2097152 and from_plan["page_size"] == 4096
    # the same without a plan (the kernel role on its own): the profile's, its shape's container limits
    alone = required({"profile": profile.data, "shape": "tp3-triangle", "plan": None}, None, True, True, "spark-w2")
    assert alone["ulimits"] == plan["kernel"]["spark-head"]["ulimits"]
    assert required(planned, None, True, False, "spark-w2")["ulimits"] is None


def test_the_kernel_slice_is_the_profiles_kernel_section() -> None:
    profile = load_profile(str(SPARK8))
    data = copy.deepcopy(profile.data)
    plan = build_plan(profile, "tp8-300k", cluster(8))
    for kernel in plan["kernel"].values():
        assert {k: v for k, v in kernel.items() if k != "ulimits"} == (data["host"].get("kernel") or {})


def test_binding_keeps_every_slice() -> None:
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    bound = bind(plan, NAMES)
    for key in ("fabric", "kernel", "guard", "preflight", "container_name"):
        assert bound[key] == plan[key]
    assert bound["ranks"][1] != plan["ranks"][1]


def test_the_container_name_is_held_once_by_the_plan_and_rendered_into_each_rank() -> None:
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    for rank in plan["ranks"]:
        assert "container_name" not in rank
        assert rank["container"]["name"] == plan["container_name"]
        assert rank["argv"][rank["argv"].index("--name") + 1] == plan["container_name"]


def test_binding_the_heads_facts_judges_the_kv_fit_once(tmp_path: Any) -> None:
    """bind() with the nodes' facts recomputes the KV fit from the head's config.json, and only that: the preflight
    then reads the plan's verdict instead of judging again."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import kv_fit
    from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__kv_fit import spark3, weights

    plan, _profile = spark3({"shapes/tp3-triangle/sizing/max_model_len": 16384})
    assert plan["kv"]["fit"] is None and plan["kv"]["model_directory"] == "DeepSeek-V4.1-Flash-1017"
    node = weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "qwen3-8b"})
    bound = bind(plan, {}, {"spark-head": node, "spark-w1": {}})
    assert bound["kv"]["fit"] == kv_fit("spark-head", node, plan)
    assert bound["kv"]["fit"]["status"] == "PASS" and "16,384 tokens" in bound["kv"]["fit"]["message"]
    assert {k: v for k, v in bound["kv"].items() if k != "fit"} == {k: v for k, v in plan["kv"].items() if k != "fit"}
    assert all(a is b for a, b in zip(bound["ranks"], plan["ranks"], strict=True))  # nothing else redone
    assert bind(plan, {}, {"spark-w1": node})["kv"]["fit"] is None  # the head's facts, or no verdict
    assert plan["kv"]["fit"] is None  # the plan given is left alone
