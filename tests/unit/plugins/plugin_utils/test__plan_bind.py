# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bind(): the fabric names the nodes report, bound into the plan as an overlay (issue 25: the plan is built once).

What binding gives must be what planning with those names would give: the same environment, spec hash, argv and
container parameters, rank by rank.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.filter.serving import plan_bound
from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import SPEC_LABEL
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import TRACE_VAR, Plan, Rank, bind, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8

NAMES = {
    "spark-w1": {"hca": ["rocep1s0f1", "roceP2p1s0f1"], "socket_ifname": "enp1s0f1np1", "gid_index": 3},
    "spark-w2": {"hca": ["rocep1s0f0"], "socket_ifname": "enp1s0f0np0", "gid_index": 1},
}


def cluster(n: int, **per_host: dict[str, Any]) -> list[Host]:
    names = ["spark-head"] + [f"spark-w{i}" for i in range(1, n)]
    return [
        Host(name, rank=i, head=i == 0, fabric_address=f"198.51.100.{10 + i}", **per_host.get(name, {}))
        for i, name in enumerate(names)
    ]


@pytest.mark.parametrize("path,shape,nodes", [(SPARK3, "tp3-triangle", 3), (SPARK8, "tp8-300k", 8)])
def test_binding_gives_what_planning_with_the_names_gives(path: Any, shape: str, nodes: int) -> None:
    profile = load_profile(str(path))
    hosts = cluster(nodes)
    planned = build_plan(profile, shape, hosts)
    bound = bind(planned, NAMES)
    with_names = build_plan(profile, shape, [dataclasses.replace(h, discovered=NAMES.get(h.name)) for h in hosts])
    assert json.dumps(bound, sort_keys=True) == json.dumps(with_names, sort_keys=True)
    w1 = bound["ranks"][1]
    assert w1["environment"]["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    assert w1["environment"]["NCCL_IB_GID_INDEX"] == "3"
    assert w1["environment"]["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert w1["spec_sha256"] != planned["ranks"][1]["spec_sha256"]
    assert f"{SPEC_LABEL}={w1['spec_sha256']}" in w1["argv"]
    assert w1["container"]["labels"][SPEC_LABEL] == w1["spec_sha256"]
    assert "NCCL_IB_GID_INDEX=3" in w1["argv"] and w1["container"]["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert bound["ranks"][0] is planned["ranks"][0]  # a host without names keeps its rank as it was


def test_a_name_the_profile_sets_wins_over_the_nodes() -> None:
    profile = load_profile(str(SPARK3))
    hosts = cluster(
        3,
        **{
            "spark-w1": {"overrides": {"fabric": {"gid_index": 5}}},
            "spark-w2": {"overrides": {"environment": {"NCCL_IB_HCA": "=mlx5_9"}}},
        },
    )
    bound = bind(build_plan(profile, "tp3-triangle", hosts), NAMES)
    w1, w2 = bound["ranks"][1]["environment"], bound["ranks"][2]["environment"]
    assert w1["NCCL_IB_GID_INDEX"] == "5" and w1["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    assert w2["NCCL_IB_HCA"] == "=mlx5_9" and w2["NCCL_IB_GID_INDEX"] == "1"


def test_binding_the_same_names_again_changes_nothing() -> None:
    planned = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    once = bind(planned, NAMES)
    twice = bind(once, NAMES)
    assert all(a is b for a, b in zip(once["ranks"], twice["ranks"], strict=True))
    assert bind(planned, {}) == planned


def test_the_filter_binds_what_each_hosts_fabric_role_found() -> None:
    planned = {"plan": build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3)), "shape": "tp3-triangle"}
    hostvars = {"spark-head": {}, "spark-w1": {"fabric_nccl": NAMES["spark-w1"]}, "spark-w2": {"fabric_nccl": None}}
    bound = plan_bound(planned, hostvars, ["spark-head", "spark-w1", "spark-w2"])
    assert bound["shape"] == "tp3-triangle"
    assert bound["plan"]["ranks"][1]["environment"]["NCCL_IB_GID_INDEX"] == "3"
    assert bound["plan"]["ranks"][2] == planned["plan"]["ranks"][2]


def test_every_plan_built_is_traced_when_asked(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_VAR, str(trace))
    planned = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    bind(planned, NAMES)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [(line["shape"], line["hosts"]) for line in lines] == [
        ("tp3-triangle", ["spark-head", "spark-w1", "spark-w2"])
    ]


@pytest.mark.parametrize("path,shape,nodes", [(SPARK3, "tp3-triangle", 3), (SPARK8, "tp8-1m", 8)])
def test_the_plan_has_the_declared_vocabulary_and_no_other(path: Any, shape: str, nodes: int) -> None:
    """Plan and Rank (TypedDicts) name every key the plan has: one vocabulary, no key that is not declared."""
    planned = build_plan(load_profile(str(path)), shape, cluster(nodes))
    assert set(planned) == set(Plan.__required_keys__)
    for rank in bind(planned, NAMES)["ranks"]:
        assert set(rank) == set(Rank.__required_keys__)
