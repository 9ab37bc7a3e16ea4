# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sim4 as one cluster of inventories/fleet: the roles take sim4's own head, never sim3's, though the fleet's
dgxspark_head holds both. Only sim4 and loopback are contacted: sim3's hosts are pointed at closed ports on loopback
(sim3 itself is never started here, and a sim3 someone else runs is never reached)."""

from __future__ import annotations

from simcluster import rank_containers

from ansible_collections.dgxspark.cluster.tests.unit.playbooks.test_fleet import (
    NCCL_TASK,
    RANK_TASK,
    fleet_copy,
    head_run,
)


def test_sim4_of_the_fleet_runs_the_nccl_test_on_its_head_and_plans_its_own_ranks(sim4, tmp_path):
    """tests/unit/playbooks/fleet-cluster-head.yml, --limit sim4: the NCCL test's command runs on sim4-head (it
    prints the node's name), each of sim4's hosts takes its own rank of a sim4 plan (the head rank 0, every master
    address sim4-head's fabric address), and the rank's stop looks at each sim4 node and finds nothing to stop."""
    hosts = [node["host"] for node in sim4["nodes"]]
    head = sim4["nodes"][0]
    results = head_run(fleet_copy(tmp_path, loopback=("sim3",)), "sim4")
    [(runner, nccl)] = results[NCCL_TASK].items()
    assert runner in hosts and not nccl.get("unreachable") and not nccl.get("failed"), nccl
    assert nccl["stdout"].strip() == head["host"] == "sim4-head", nccl
    ranks = {host: result["ansible_facts"]["vllm_container_this"] for host, result in results[RANK_TASK].items()}
    assert sorted(ranks) == sorted(hosts)
    expected = {node["host"]: node["rank"] for node in sim4["nodes"]}
    assert {host: rank["rank"] for host, rank in ranks.items()} == expected
    for rank in ranks.values():
        argv = rank["argv"]
        assert argv[argv.index("--master-addr") + 1] == head["fabric_address"], argv
    looked = results["Look at the rank's container on the node"]
    assert sorted(looked) == sorted(hosts) and not any(r.get("failed") or r.get("unreachable") for r in looked.values())
    assert all(rank_containers(host) == {} for host in hosts)
