# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet: inventories/fleet holds two clusters, sim3 and sim4, side by side (docs/awx.md). A run acts on one
cluster, limited to its group; one whose hosts span both is refused by the plan, before any node is contacted.
The fleet's clusters are the same hosts as inventories/sim3 and inventories/sim4, and share nothing that would
let one cluster's boot, guard or results reach the other's."""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, other_clusters_hosts
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

BIN = pathlib.Path(sys.executable).parent
FLEET = ROOT / "inventories" / "fleet"
CLUSTERS = ("sim3", "sim4")


def _hosts(tree: dict, group: str) -> dict[str, dict]:
    """Every host under ``group`` of an inventory tree, with its variables."""
    found: dict[str, dict] = {}

    def walk(body: dict | None, inside: bool) -> None:
        for name, child in ((body or {}).get("children") or {}).items():
            walk(child, inside or name == group)
        if inside:
            found.update({host: dict(variables or {}) for host, variables in ((body or {}).get("hosts") or {}).items()})

    for name, body in tree.items():
        walk(body, name == group)
    return found


def _run(playbook: str, inventory: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "ansible-playbook"), f"playbooks/{playbook}", "-i", str(inventory), *extra]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_other_clusters_hosts_are_the_run_s_hosts_with_a_rank_outside_this_cluster() -> None:
    ours = [Host("sim3-head", head=True), Host("sim3-worker1")]
    hostvars = {
        "sim3-head": {"dgxspark_rank": 0},
        "sim3-worker1": {"dgxspark_rank": 1},
        "sim4-head": {"dgxspark_rank": 0},
        "controller": {},
    }
    assert other_clusters_hosts(["sim3-head", "sim3-worker1"], ours, hostvars) == []
    # a host with no rank (a controller, a client) is not another cluster's node
    assert other_clusters_hosts(["sim3-head", "controller"], ours, hostvars) == []
    assert other_clusters_hosts(["sim4-head", "sim3-head", "sim3-worker1"], ours, hostvars) == ["sim4-head"]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_each_cluster_of_the_fleet_is_its_own_inventory_s_hosts(cluster: str) -> None:
    """The fleet's cluster has exactly the hosts, addresses and ranks of inventories/<cluster> (one source each)."""
    fleet = yaml.safe_load((FLEET / "hosts.yml").read_text())
    alone = yaml.safe_load((ROOT / "inventories" / cluster / "hosts.yml").read_text())
    assert _hosts(fleet, cluster) == _hosts(alone, "dgxspark")
    assert _hosts(fleet, f"{cluster}_head") == _hosts(alone, "dgxspark_head")
    assert _hosts(fleet, f"{cluster}_workers") == _hosts(alone, "dgxspark_workers")


def _members(inventory: pathlib.Path) -> dict[str, set[str]]:
    """Every group's hosts (its children's included), as Ansible reads the inventory."""
    listed = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(inventory), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    tree = yaml.safe_load(listed.stdout)

    def members(group: str) -> set[str]:
        body = tree.get(group) or {}
        return set(body.get("hosts") or []).union(*(members(child) for child in body.get("children") or []))

    return {group: members(group) for group in tree if group != "_meta"}


def test_the_clusters_share_no_host_head_subnet_profile_or_guard_key() -> None:
    fleet = yaml.safe_load((FLEET / "hosts.yml").read_text())
    settings = {c: yaml.safe_load((FLEET / "group_vars" / f"{c}.yml").read_text()) for c in CLUSTERS}
    hosts = {c: _hosts(fleet, c) for c in CLUSTERS}
    assert not set(hosts["sim3"]) & set(hosts["sim4"])
    # the playbooks' plays run on dgxspark_head and dgxspark_workers: every cluster's are in them
    groups = _members(FLEET)
    assert groups["dgxspark_head"] == groups["sim3_head"] | groups["sim4_head"] == {"sim3-head", "sim4-head"}
    assert groups["dgxspark_workers"] == groups["sim3_workers"] | groups["sim4_workers"]
    assert groups["dgxspark"] == set(hosts["sim3"]) | set(hosts["sim4"])
    subnets = {
        c: {ipaddress.ip_network(f"{v['dgxspark_fabric_address']}/24", strict=False) for v in hosts[c].values()}
        for c in CLUSTERS
    }
    assert all(len(s) == 1 for s in subnets.values()) and not subnets["sim3"] & subnets["sim4"]
    for key in (
        "dgxspark_cluster_groups",
        "dgxspark_profile",
        "memguard_peer_key_file",
        "dgxspark_bench_dir",
        "ansible_ssh_private_key_file",
    ):
        assert settings["sim3"][key] != settings["sim4"][key], key
    for cluster in CLUSTERS:
        named = {"head": f"{cluster}_head", "workers": f"{cluster}_workers"}
        assert settings[cluster]["dgxspark_cluster_groups"] == named
        assert not {"boot_head_group", "boot_workers_group"} & set(settings[cluster])  # the deprecated names
        profile = settings[cluster]["dgxspark_profile"].replace("{{ inventory_dir }}", str(FLEET))
        assert pathlib.Path(profile).resolve() == (ROOT / "inventories" / cluster / "serving-profile.json").resolve()


@pytest.mark.parametrize(("cluster", "nodes"), [("sim3", 3), ("sim4", 4)])
def test_plan_limited_to_one_cluster_plans_that_cluster(cluster: str, nodes: int) -> None:
    run = _run("plan.yml", FLEET, "--limit", cluster)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert f"{nodes} nodes" in out and f"head: {cluster}-head" in out, out[-3000:]
    other = "sim4" if cluster == "sim3" else "sim3"
    assert f"{other}-" not in out.replace(f"{cluster}-", ""), out[-3000:]


def _unreachable_fleet(tmp_path: pathlib.Path) -> pathlib.Path:
    """The fleet with every host's SSH pointed at a closed port on loopback: a task that contacts a node says so."""
    copy = tmp_path / "fleet"
    shutil.copytree(FLEET, copy, ignore=shutil.ignore_patterns(".*"))
    tree = yaml.safe_load((copy / "hosts.yml").read_text())

    def walk(body: dict | None) -> None:
        for variables in ((body or {}).get("hosts") or {}).values():
            variables.update(ansible_host="127.0.0.1", ansible_port=1)
        for child in ((body or {}).get("children") or {}).values():
            walk(child)

    for body in tree.values():
        walk(body)
    (copy / "hosts.yml").write_text(yaml.safe_dump(tree))
    for cluster in CLUSTERS:  # the profiles next to the copy, where group_vars point
        (tmp_path / cluster).mkdir()
        shutil.copy(ROOT / "inventories" / cluster / "serving-profile.json", tmp_path / cluster)
    return copy


# every playbook that plans, or reads a cluster to judge it, before it changes anything (stop.yml acts on each node
# alone, by label, and releases.yml only lists each head's releases: over a fleet they do so on every cluster)
JUDGING = [
    "plan.yml",
    "preflight.yml",
    "boot.yml",
    "bench.yml",
    "promote.yml",
    "rollback.yml",
    "recover.yml",
    "window.yml",
    "images.yml",
]


@pytest.mark.parametrize("playbook", JUDGING)
def test_a_run_over_both_clusters_is_refused_before_any_node_is_contacted(
    tmp_path: pathlib.Path, playbook: str
) -> None:
    fleet = _unreachable_fleet(tmp_path)
    given = [
        "-e",
        f"dgxspark_candidate={tmp_path / 'sim3' / 'serving-profile.json'}",  # promote.yml's candidate
        "-e",
        "window_image=captioner:1",
        "-e",
        '{"window_command": ["caption"]}',
    ]  # window.yml's job
    run = _run(playbook, fleet, *given)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert "the inventory holds more than one cluster, and a run acts on one" in out, out[-3000:]
    assert "Limit it to one cluster's group" in out and "nothing was touched" in out
    assert "UNREACHABLE" not in out, out[-3000:]
    # nothing written next to the inventory either (the guard's key is made by a converge, never by a plan)
    assert not list(fleet.glob(".*"))


# ------------------------------------------------------------------------------------------ the cluster's head
HEAD_PLAYBOOK = "tests/unit/playbooks/fleet-cluster-head.yml"


def fleet_copy(tmp_path: pathlib.Path, loopback: tuple[str, ...] = CLUSTERS) -> pathlib.Path:
    """The fleet, copied, with the hosts of the ``loopback`` clusters pointed at a closed port of their own loopback
    address (127.0.<N>.<last octet of the node's address>): a task that contacts one says which, and nothing else
    is contacted. The other clusters' hosts keep their addresses, their SSH key and profile paths made absolute."""
    copy = tmp_path / "fleet"
    shutil.copytree(FLEET, copy, ignore=shutil.ignore_patterns(".*"))
    tree = yaml.safe_load((copy / "hosts.yml").read_text())
    for cluster in CLUSTERS:
        for host, variables in _hosts(tree, cluster).items():
            if cluster in loopback:
                address = ipaddress.ip_address(variables["ansible_host"]).packed
                _set_host(tree, host, ansible_host=f"127.0.{address[2]}.{address[3]}", ansible_port=1)
        group_vars = copy / "group_vars" / f"{cluster}.yml"
        text = group_vars.read_text().replace("{{ inventory_dir }}/../", f"{FLEET.parent}/")
        group_vars.write_text(text.replace("{{ inventory_dir }}", str(copy)))
    (copy / "hosts.yml").write_text(yaml.safe_dump(tree, sort_keys=False))
    return copy


def _set_host(tree: dict, host: str, **values: object) -> None:
    def walk(body: dict | None) -> None:
        for name, variables in ((body or {}).get("hosts") or {}).items():
            if name == host:
                variables.update(values)
        for child in ((body or {}).get("children") or {}).values():
            walk(child)

    for body in tree.values():
        walk(body)


def head_run(inventory: pathlib.Path, cluster: str) -> dict[str, dict[str, dict]]:
    """tests/unit/playbooks/fleet-cluster-head.yml on ``inventory`` limited to ``cluster``: each task's result per
    host (the ansible.posix.json callback), by task name."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    run = subprocess.run(
        [str(BIN / "ansible-playbook"), HEAD_PLAYBOOK, "-i", str(inventory), "--limit", cluster],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    results: dict[str, dict[str, dict]] = {}
    for play in json.loads(run.stdout)["plays"]:
        for task in play["tasks"]:
            results.setdefault(task["task"]["name"].split(" : ")[-1], {}).update(task["hosts"])
    return results


NCCL_TASK = "Run the NCCL bandwidth test from the head"
RANK_TASK = "Take this host's rank"


def test_one_cluster_of_the_fleet_takes_its_own_head_for_the_nccl_test_and_the_ranks(tmp_path: pathlib.Path) -> None:
    """On sim4 of the fleet (--limit sim4), the NCCL test is delegated to sim4's head and vllm_container plans sim4
    alone, its head at rank 0, every rank's master address the head's: sim3's head, also in dgxspark_head, is never
    taken. Every host is on loopback (closed ports): the one the NCCL test tried to reach is sim4-head's address."""
    results = head_run(fleet_copy(tmp_path), "sim4")
    [(runner, nccl)] = results[NCCL_TASK].items()  # run once
    assert runner.startswith("sim4-") and nccl.get("unreachable"), nccl
    assert "127.0.4.10" in nccl["msg"] and "127.0.3." not in nccl["msg"], nccl["msg"]
    ranks = {host: r.get("ansible_facts", {}).get("vllm_container_this") for host, r in results[RANK_TASK].items()}
    assert set(ranks) == {"sim4-head", "sim4-worker1", "sim4-worker2", "sim4-worker3"}
    assert all(rank and rank["host"] == host for host, rank in ranks.items()), results[RANK_TASK]
    assert ranks["sim4-head"]["rank"] == 0 and ranks["sim4-head"]["role"] == "head"
    for rank in ranks.values():
        argv = rank["argv"]
        assert argv[argv.index("--master-addr") + 1] == "10.99.4.1", argv
