# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tools/awx/run_workflow.py, offline: what each node of the file's workflows gets, and what AWX would refuse
(issue 28). The runs themselves are on the simulated clusters (tests/sim/cluster/test_awx_workflows.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "awx"))
import run_workflow  # noqa: E402 - tools/awx is not a package
import runner_job  # noqa: E402

MAIN = "dgxspark preflight, boot, bench"
FLEET = "dgxspark fleet boot"


def _node(workflow: str, identifier: str) -> dict[str, Any]:
    (node,) = [n for n in run_workflow.workflow(workflow)["related"]["workflow_nodes"] if n["identifier"] == identifier]
    return node


def test_the_fleet_nodes_run_on_their_own_cluster() -> None:
    wf = run_workflow.workflow(FLEET)
    for cluster in ("sim3", "sim4"):
        template, inventory, limit, refusals = run_workflow.node_launch(_node(FLEET, cluster), wf, None, {}, {})
        assert (template["name"], inventory, limit, refusals) == (
            f"dgxspark boot (fleet {cluster})",
            "fleet",
            cluster,
            [],
        )


def test_a_fleet_node_with_another_limit_is_refused() -> None:
    wf = run_workflow.workflow(FLEET)
    node = {**_node(FLEET, "sim3"), "limit": "sim3:sim4"}
    refusals = run_workflow.node_launch(node, wf, None, {}, {})[3]
    assert refusals == ["limit 'sim3:sim4': dgxspark boot (fleet sim3) does not prompt for a limit on launch"]


def test_the_promote_node_is_refused_without_its_candidate_and_runs_with_it() -> None:
    """AWX does not start a node's job without a required answer: promote's candidate, which no default fits."""
    wf = run_workflow.workflow(MAIN)
    refusals = run_workflow.node_launch(_node(MAIN, "promote"), wf, "sim3", {}, {})[3]
    assert refusals == ["variables_needed_to_start: 'dgxspark_candidate' value missing"]
    template, inventory, limit, refusals = run_workflow.node_launch(
        _node(MAIN, "promote"), wf, "sim3", {"dgxspark_candidate": "/x.json"}, {}
    )
    assert (template["name"], inventory, limit, refusals) == ("dgxspark promote", "sim3", "", [])
    # every other node needs no answer: its survey's defaults suffice
    for step in ("preflight", "boot", "bench"):
        assert run_workflow.node_launch(_node(MAIN, step), wf, "sim3", {}, {})[3] == [], step


def test_a_refused_node_fails_the_workflow_and_skips_what_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order and the verdict, with the jobs stood in for: preflight, boot and bench succeed, promote is refused
    (no candidate), and the workflow fails; a node after a failed one never runs."""
    launched: list[tuple[str, str, dict[str, Any]]] = []

    def launch(name: str, inventory: str, *_: Any, extra_vars: dict[str, Any], **__: Any) -> runner_job.Job:
        launched.append((name, inventory, extra_vars))
        return runner_job.Job(tmp_path, "1", "failed" if name == "dgxspark boot" and fail_boot else "successful", 0)

    monkeypatch.setattr(runner_job, "launch", launch)
    cluster = run_workflow.Cluster(tmp_path / "key", "net", {"memguard_peer_key": "k"})
    fail_boot = False
    runs = run_workflow.run(
        MAIN, tmp_path, {"sim3": cluster}, "sim3", {}, {"bench": {"dgxspark_bench_requests": 8}}, log=lambda _: None
    )
    assert [call[0] for call in launched] == ["dgxspark preflight", "dgxspark boot", "dgxspark bench"]
    assert launched[2][2] == {"dgxspark_bench_requests": 8, "memguard_peer_key": "k"}
    assert runs["promote"].status == "refused" and not run_workflow.succeeded(runs)

    launched.clear()
    fail_boot = True
    runs = run_workflow.run(
        MAIN, tmp_path, {"sim3": cluster}, "sim3", {"dgxspark_candidate": "/x.json"}, log=lambda _: None
    )
    assert [call[0] for call in launched] == ["dgxspark preflight", "dgxspark boot"]
    assert {k: r.status for k, r in runs.items()} == {
        "preflight": "successful",
        "boot": "failed",
        "bench": "skipped",
        "promote": "skipped",
    }


def test_the_fleet_workflow_takes_no_launch_variables(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not prompt for extra variables"):
        run_workflow.run(FLEET, tmp_path, {}, None, {"x": 1})
