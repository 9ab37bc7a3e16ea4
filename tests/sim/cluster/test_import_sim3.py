# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/import_sparkrun.yml on sim3 (issue 29): a recipe that sparkrun launches is imported, booted by boot.yml,
and serves the same `vllm serve` arguments.

The recipe is the one tools/bench_peer.py gives sparkrun on sim3 (`recipe_for` of sim3's plan, the recipe sparkrun
0.4.2 launched there). The import's files are used as written but for the two things an operator of this simulated
cluster changes, each asserted below: the profile's host section (and the two waivers that go with it) and the
connection variables of the nodes. Then boot.yml, the head's API, every rank's container against the recipe's
command, stop.yml.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import yaml
from simcluster import REPO, ansible_bin, http_json, node_sh, rank_containers

SIM3 = REPO / "inventories" / "sim3"
FABRIC = ["10.99.3.1", "10.99.3.2", "10.99.3.3"]  # sim3's: 10.99.3.<rank+1>
# The options a rank's command carries that the recipe's does not: sparkrun appends the rendezvous per node itself
# (bench_peer's RENDEZVOUS_FLAGS and --headless), and so does our plan; and our plan gives the API's --port and --host
# to rank 0 only (a headless rank serves no API), where sparkrun renders the head's command for every rank.
PER_RANK = {"--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless"}
HEAD_ONLY = {"--port", "--host"}


def bench_peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peer", REPO / "tools" / "bench_peer.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_peer"] = module
    spec.loader.exec_module(module)
    return module


def playbook(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """ansible-playbook playbooks/<name> from the repository root, the inventory given in ``args``."""
    return subprocess.run(
        [ansible_bin("ansible-playbook"), f"playbooks/{name}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )


def test_a_recipe_sparkrun_launches_is_imported_booted_and_serves_the_same_arguments(sim3, tmp_path: Path):
    nodes = sorted(sim3["nodes"], key=lambda n: int(n["rank"]))
    addresses = [n["management_address"] for n in nodes]
    head = addresses[0]

    # 1. the recipe bench_peer gives sparkrun on sim3: sim3's plan (plan.yml), then recipe_for, written as YAML
    peer = bench_peer()
    plan = peer.read_plan(SIM3, [peer.Node(n["host"], int(n["rank"]), n["management_address"]) for n in nodes])
    recipe, _left = peer.recipe_for(plan, plan.image)
    recipe_path = tmp_path / "recipe-sim3.yaml"
    recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    argv = shlex.split(recipe["command"])
    assert argv[:2] == ["vllm", "serve"], argv

    # 2. the import, with sim3's hosts by their management addresses (as `sparkrun run --hosts` takes them)
    dest = tmp_path / "imported"
    imported = playbook(
        "import_sparkrun.yml",
        "-e", f"sparkrun_recipe={recipe_path}",
        "-e", f"sparkrun_hosts={','.join(addresses)}",
        "-e", f"import_fabric={','.join(FABRIC)}",
        "-e", f"import_dest={dest}",
    )  # fmt: skip
    assert imported.returncode == 0, imported.stdout[-6000:] + imported.stderr[-3000:]
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "group_vars",
        "group_vars/dgxspark.yml",
        "hosts.yml",
        "serving-profile.json",
    ]
    written = {p: (dest / p).read_text(encoding="utf-8") for p in ("hosts.yml", "group_vars/dgxspark.yml")}
    profile_text = (dest / "serving-profile.json").read_text(encoding="utf-8")
    profile = json.loads(profile_text)
    inventory = yaml.safe_load(written["hosts.yml"])["dgxspark"]["children"]
    ranks = [(n, v) for g in ("dgxspark_head", "dgxspark_workers") for n, v in inventory[g]["hosts"].items()]
    assert [(v["dgxspark_rank"], v["ansible_host"], v["dgxspark_fabric_address"]) for _n, v in ranks] == list(
        zip(range(3), addresses, FABRIC, strict=True)
    )

    # 3. bootable on the simulated nodes, as their operator makes it. The recipe has no host section: the import
    # writes seed 000's (a 100 GiB pre-boot floor, guard floors of 3 and 5 GiB) for GB10s of 128 GiB, which these
    # containers of a few GiB cannot meet. The operator puts sim3's host section in its place with the two waivers
    # that go with it (memguard-floors, min-mem-available: "simulated cluster"), drops the import's sources that cite
    # seed 000 for the host settings it no longer has, and gives the nodes sim3's connection and role variables
    # (root with the cluster's key, no host keys, the emergency floor, the image by tag, the guard's textfile
    # directory) in a group_vars file of its own. A recipe says nothing of the cables either: the import leaves the
    # link speed to the plan's default, a ConnectX-7's 200000 Mb/s, which the boot's fabric check compares with the
    # ports; sim3's cables are veths at 10000 Mb/s, so the operator gives the shape sim3's link_speed_mbps. Nothing the
    # recipe said is touched: hosts.yml and the import's group_vars/dgxspark.yml stay as written, and so does every
    # other key of the profile.
    sim3_profile = json.loads((SIM3 / "serving-profile.json").read_text(encoding="utf-8"))
    assert "waivers" not in profile and "helper_services" not in profile["host"]
    assert profile["host"]["min_mem_available_gib"] == 100  # seed 000's, not the sim's 4
    shape = profile["default_shape"]
    assert "link_speed_mbps" not in profile["shapes"][shape]["fabric"]
    bootable = copy.deepcopy(profile)
    bootable["host"] = sim3_profile["host"]
    bootable["waivers"] = sim3_profile["waivers"]
    speed = sim3_profile["shapes"][shape]["fabric"]["link_speed_mbps"]
    bootable["shapes"][shape]["fabric"]["link_speed_mbps"] = speed
    bootable["sources"] = {k: v for k, v in profile["sources"].items() if not k.startswith("$.host.")}
    (dest / "serving-profile.json").write_text(json.dumps(bootable, indent=2) + "\n", encoding="utf-8")
    sim3_vars = yaml.safe_load((SIM3 / "group_vars" / "dgxspark.yml").read_text(encoding="utf-8"))
    connection = {k: v for k, v in sim3_vars.items() if k not in ("dgxspark_profile", "dgxspark_shape")}
    connection["ansible_ssh_private_key_file"] = sim3["ssh_key"]  # sim3's is relative to its inventory directory
    (dest / "group_vars" / "all.yml").write_text("---\n" + yaml.safe_dump(connection, sort_keys=False))

    changed = {k for k in set(profile) | set(bootable) if profile.get(k) != bootable.get(k)}
    assert changed == {"host", "waivers", "sources", "shapes"}, changed
    assert bootable["shapes"][shape]["fabric"] == {**profile["shapes"][shape]["fabric"], "link_speed_mbps": 10000}
    assert {**bootable["shapes"][shape], "fabric": None} == {**profile["shapes"][shape], "fabric": None}
    assert set(bootable["shapes"]) == set(profile["shapes"]) == {shape}
    assert sorted(set(profile["sources"]) - set(bootable["sources"])) == sorted(f"$.host.{k}" for k in profile["host"])
    assert set(bootable["sources"]) <= set(profile["sources"])
    assert set(connection) == {
        "ansible_user",
        "ansible_ssh_private_key_file",
        "ansible_python_interpreter",
        "ansible_host_key_checking",
        "ansible_ssh_common_args",
        "memguard_emergency_floor_gib",
        "dgxspark_image_by_tag",
        "memguard_textfile_dir",
    }
    assert {p: (dest / p).read_text(encoding="utf-8") for p in written} == written
    group = yaml.safe_load(written["group_vars/dgxspark.yml"])
    assert group == {"dgxspark_profile": "{{ inventory_dir }}/serving-profile.json", "dgxspark_shape": "tp3-triangle"}

    # 4. boot.yml on that inventory, the head's API, the ranks' commands against the recipe's, stop.yml
    names = [n for n, _v in ranks]
    try:
        boot = playbook("boot.yml", "-i", str(dest))
        assert boot.returncode == 0, boot.stdout[-8000:] + boot.stderr[-3000:]
        flat = " ".join(boot.stdout.split())
        assert f"endpoint: http://{head}:8000/v1 serving {profile['model']}" in flat, boot.stdout[-4000:]
        assert "ranks: " + "; ".join(f"{i} {n} running" for i, n in enumerate(names)) in flat, boot.stdout[-4000:]
        models = http_json(f"http://{head}:8000/v1/models")
        assert [m["id"] for m in models["data"]] == [profile["model"]]

        recipe_positional, recipe_options = peer.options(argv[2:])
        for rank, node in enumerate(nodes):
            assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]
            config = json.loads(node_sh(node["host"], "docker inspect -f '{{json .Config}}' vllm_dsv41").stdout)
            assert config["Image"] == recipe["container"]
            running = [*(config["Entrypoint"] or []), *(config["Cmd"] or [])]
            assert running[:2] == ["vllm", "serve"], running
            positional, found = peer.options(running[2:])
            assert positional == recipe_positional, (node["host"], positional)
            # the same serve arguments, but for those the plan adds or leaves out per rank (PER_RANK, HEAD_ONLY)
            theirs = {k: v for k, v in found.items() if k not in PER_RANK}
            ours = {k: v for k, v in recipe_options.items() if rank == 0 or k not in HEAD_ONLY}
            assert theirs == ours, (node["host"], theirs, ours)
            rendezvous = {k: v for k, v in found.items() if k in PER_RANK}
            assert rendezvous == {
                "--nnodes": "3",
                "--node-rank": str(rank),
                "--master-addr": FABRIC[0],  # the head's fabric address (sparkrun advertises its management one)
                "--master-port": str(plan.master_port),
                **({"--headless": None} if rank else {}),
            }, (node["host"], rendezvous)
            assert set(recipe_options) & HEAD_ONLY == HEAD_ONLY  # the recipe's --port 8000 --host <head>
            environment = dict(e.split("=", 1) for e in config["Env"])
            assert {k: environment.get(k) for k in recipe["env"]} == recipe["env"], node["host"]
    finally:
        stop = playbook("stop.yml", "-i", str(dest))
    assert stop.returncode == 0, stop.stdout[-6000:] + stop.stderr[-3000:]
    for node in nodes:
        assert rank_containers(node["host"]) == {}, node["host"]
