# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.dgxspark.cluster.plugins.action.serving_profile import ActionModule
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, read

HOSTVARS = {
    "spark-head": {"dgxspark_rank": 0, "dgxspark_fabric_address": "198.51.100.10"},
    "spark-w1": {"dgxspark_rank": 1, "dgxspark_fabric_address": "198.51.100.11"},
    "spark-w2": {"dgxspark_rank": 2, "dgxspark_fabric_address": "198.51.100.12"},
}
GROUPS = {"dgxspark_head": ["spark-head"], "dgxspark_workers": ["spark-w1", "spark-w2"]}


def run(args: dict[str, Any], task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
    task = MagicMock(Task)
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    loader = DataLoader()
    action = ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=PlayContext(),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    return action.run(task_vars=task_vars or {})


def test_validates_without_hosts() -> None:
    result = run(
        {"src": str(SPARK3)}, {"ansible_play_hosts_all": ["localhost"], "groups": GROUPS, "hostvars": HOSTVARS}
    )
    assert not result.get("failed"), result
    assert result["changed"] is False and result["plan"] is None
    assert result["shape"] == "tp3-triangle" and result["shapes"] == ["tp3-triangle", "tp4-ring"]
    assert "no plan" in result["msg"]


def test_plans_the_play_hosts() -> None:
    result = run(
        {"src": str(SPARK3)}, {"ansible_play_hosts_all": list(HOSTVARS), "groups": GROUPS, "hostvars": HOSTVARS}
    )
    assert not result.get("failed"), result
    assert [r["host"] for r in result["plan"]["ranks"]] == ["spark-head", "spark-w1", "spark-w2"]
    assert isinstance(result["elapsed_ms"], float)  # how long it takes is tools/bench_plan.py's to measure


def test_plans_explicit_hosts_and_reports_disagreement() -> None:
    hostvars = dict(
        HOSTVARS, **{"spark-w2": dict(HOSTVARS["spark-w2"], dgxspark_overrides={"sizing": {"max_num_seqs": 8}})}
    )
    result = run({"src": str(SPARK3), "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": hostvars})
    assert result["failed"] is True
    assert "nothing was touched" in result["msg"]
    assert "rank agreement: --max-num-seqs: ranks disagree: spark-head (rank 0) = 4" in result["msg"]
    assert "spark-w2 (rank 2) = 8" in result["msg"]
    assert any(p["where"] == "rank agreement: --max-num-seqs" for p in result["problems"])


def test_wrong_shape_for_the_inventory() -> None:
    result = run({"src": str(SPARK8), "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": HOSTVARS})
    assert result["failed"] is True
    assert "shape tp8-300k runs on 8 nodes but the inventory has 3" in result["msg"]


def test_unknown_shape_and_host() -> None:
    result = run({"src": str(SPARK3), "shape": "tp3-ring"}, {"groups": GROUPS, "hostvars": HOSTVARS})
    assert result["failed"] is True and "did you mean" in result["msg"]
    result = run({"src": str(SPARK3), "hosts": ["nope"]}, {"groups": GROUPS, "hostvars": HOSTVARS})
    assert result["failed"] is True and "nope" in result["msg"]


def test_broken_profile_file(tmp_path: Any) -> None:
    broken = tmp_path / "p.json"
    broken.write_text('{"schema_version": 2,,}')
    result = run({"src": str(broken)})
    assert result["failed"] is True and f"{broken}: line 1, column 22: malformed JSON" in result["msg"]


def test_bad_arguments() -> None:
    for args in ({"shape": "x"}, {"src": str(SPARK3), "content": "{}"}):
        result = run(args)
        assert result["failed"] is True and "src (a file) or as content (its text), one of them" in result["msg"]
    with pytest.raises(Exception, match="hosts"):
        run({"src": str(SPARK3), "hosts": {"a": 1}})


def test_content_plans_as_src_does() -> None:
    from_file = run({"src": str(SPARK3), "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": HOSTVARS})
    given = run({"content": from_file["text"], "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": HOSTVARS})
    assert not given.get("failed"), given
    assert given["text"] == SPARK3.read_text()
    assert given["profile_sha256"] == from_file["profile_sha256"]
    assert [r["spec_sha256"] for r in given["plan"]["ranks"]] == [r["spec_sha256"] for r in from_file["plan"]["ranks"]]


def test_profile_is_returned_with_defaults() -> None:
    result = run({"src": str(SPARK3)})
    assert result["profile"]["container"]["name"] == "vllm_dsv41"
    assert result["profile"]["model"] == read(SPARK3)["model"]


def test_every_planned_rank_carries_its_docker_container_parameters() -> None:
    result = run({"src": str(SPARK3), "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": HOSTVARS})
    assert not result.get("failed"), result
    for rank in result["plan"]["ranks"]:
        assert rank["container"]["name"] == "vllm_dsv41" and rank["container"]["labels"] == rank["labels"]
        assert rank["container"]["env"]["VLLM_HOST_IP"] == HOSTVARS[rank["host"]]["dgxspark_fabric_address"]


@pytest.mark.parametrize(
    "address,problem",
    [
        ("fd00::12", 'dgxspark_fabric_address: not an IPv4 address (found "fd00::12"'),
        ("127.0.0.1", "dgxspark_fabric_address: a loopback address, which peers cannot reach"),
    ],
)
def test_a_fabric_address_the_fabric_cannot_use_fails_the_plan(address: str, problem: str) -> None:
    hostvars = dict(HOSTVARS, **{"spark-w2": dict(HOSTVARS["spark-w2"], dgxspark_fabric_address=address)})
    result = run({"src": str(SPARK3), "hosts": list(HOSTVARS)}, {"groups": GROUPS, "hostvars": hostvars})
    assert result["failed"] is True and "nothing was touched" in result["msg"]
    assert f"inventory: host spark-w2: {problem}" in result["msg"], result["msg"]


def test_given_the_fabric_roles_settings_the_plan_names_what_node_facts_reads_for_it() -> None:
    """fabric_settings (the fabric role's fabric_fact_settings): every host's files the role's converge-from-facts
    compares, in its own directories (a host's own inventory value wins for it), and nothing without them."""
    task_vars = {"ansible_play_hosts_all": list(HOSTVARS), "groups": GROUPS, "hostvars": HOSTVARS}
    assert "fabric_fact_paths" not in run({"src": str(SPARK3)}, task_vars)
    own = {**HOSTVARS, "spark-w2": {**HOSTVARS["spark-w2"], "fabric_backend": "netplan"}}
    settings = {"backend": "networkd", "networkd_dir": "/run/net", "sysctl_dir": "/run/sysctl"}
    result = run({"src": str(SPARK3), "fabric_settings": settings}, {**task_vars, "hostvars": own})
    assert not result.get("failed"), result
    assert result["fabric_fact_settings"]["spark-head"] == {**settings, "netplan_dir": None}
    assert result["fabric_fact_settings"]["spark-w2"]["backend"] == "netplan"
    head = result["fabric_fact_paths"]["spark-head"]
    ports = result["plan"]["fabric"]["spark-head"]["interfaces"]
    assert [f"/run/net/10-dgxspark-fabric-{port}.network" for port in ports] == [p for p in head if "/run/net/" in p]
    assert "/run/sysctl/60-dgxspark-fabric.conf" in head and not any("netplan" in p for p in head)
    w2 = result["fabric_fact_paths"]["spark-w2"]  # netplan: its file in the role's default directory
    assert "/etc/netplan/60-dgxspark-fabric.yaml" in w2 and not any(".network" in p for p in w2)
    # the live sysctls are read whatever the backend
    assert [p for p in head if p.startswith("/proc/sys/")] == [p for p in w2 if p.startswith("/proc/sys/")] != []
