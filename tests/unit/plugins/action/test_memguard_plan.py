# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memguard_plan action: one node's guard planned on the controller - the key (made once, never in check
mode), the configuration from the inventory's addresses, the files' texts and what differs on a node."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import stat
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest.mock import MagicMock

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.dgxspark.cluster.plugins.action import memguard_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import SETTINGS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "memguard"
SCRIPT = ROLE / "files" / "dgxspark_memguard.py"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
PROFILE = validate_profile(json.loads(SPARK3.read_text())).data
HOSTVARS = {
    "spark-head": {"ansible_host": "10.0.0.10", "dgxspark_fabric_address": "198.51.100.10"},
    "spark-w1": {"ansible_host": "10.0.0.11", "dgxspark_fabric_address": "198.51.100.11"},
    "spark-w2": {"dgxspark_fabric_address": "198.51.100.12"},  # no ansible_host: its inventory name
}


def run(args: dict[str, Any], host: str = "spark-w1", check_mode: bool = False) -> dict[str, Any]:
    task = MagicMock(Task)
    task.args = {
        "host_section": PROFILE["host"],
        "container_name": PROFILE["container"]["name"],
        "settings": {name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS},
        **args,
    }
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    loader = DataLoader()
    action = memguard_plan.ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=PlayContext(),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    task_vars = {"inventory_hostname": host, "hostvars": HOSTVARS, "ansible_play_hosts_all": list(HOSTVARS)}
    return action.run(task_vars=task_vars)


def matching_facts(expected: dict[str, Any]) -> dict[str, Any]:
    return {
        "files": {"paths": {p: {"exists": True, "sha256": d} for p, d in expected["files"].items()}},
        "services": {"units": {u: {"active_state": "active", "unit_file_state": "enabled"} for u in expected["units"]}},
    }


def test_the_key_is_made_once_0600_and_read_back(tmp_path: pathlib.Path) -> None:
    key_file = tmp_path / "key"
    first = run({"key_file": str(key_file)})
    assert not first.get("failed"), first
    mode = stat.S_IMODE(os.stat(key_file).st_mode)
    key = key_file.read_text().strip()
    assert (mode, len(key), key.isalnum()) == (0o600, 40, True)
    assert first["config"]["peer_key"] == key and first["key_missing"] is False
    assert run({"key_file": str(key_file)}, host="spark-head")["config"]["peer_key"] == key
    assert [p.name for p in tmp_path.iterdir()] == ["key"]  # nothing staged is left behind


def test_hosts_racing_to_make_the_key_all_get_the_same_one(tmp_path: pathlib.Path) -> None:
    key_file = str(tmp_path / "key")
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda h: run({"key_file": key_file}, host=h), list(HOSTVARS) * 4))
    assert {r["config"]["peer_key"] for r in results} == {pathlib.Path(key_file).read_text().strip()}


def test_check_mode_and_a_preflight_write_no_key(tmp_path: pathlib.Path) -> None:
    key_file = tmp_path / "key"
    for result in (
        run({"key_file": str(key_file)}, check_mode=True),
        run({"key_file": str(key_file), "key_create": False}),
    ):
        assert not result.get("failed"), result
        assert result["key_missing"] is True and result["config"]["peer_key"] == ""
    assert not key_file.exists() and list(tmp_path.iterdir()) == []


def test_a_given_key_wins_and_the_peers_come_from_the_inventory(tmp_path: pathlib.Path) -> None:
    result = run({"key_file": str(tmp_path / "key"), "key": "k" * 20})
    config = result["config"]
    assert config["peer_key"] == "k" * 20 and not (tmp_path / "key").exists()
    assert config["peer_listen"]["address"] == "10.0.0.11"
    assert {p["host"]: p["address"] for p in config["peers"]} == {"spark-head": "10.0.0.10", "spark-w2": "spark-w2"}
    fabric = run(
        {
            "key_file": str(tmp_path / "key"),
            "key": "k" * 20,
            "settings": {**{n: copy.deepcopy(DEFAULTS[n]) for n in SETTINGS}, "memguard_peer_network": "fabric"},
        }
    )
    assert fabric["config"]["peer_listen"]["address"] == "198.51.100.11"


def test_a_matching_node_has_no_difference_and_a_changed_file_is_named(tmp_path: pathlib.Path) -> None:
    args = {"key_file": str(tmp_path / "key"), "key": "k" * 20}
    expected = run(args)["expected"]
    assert run({**args, "node_facts": matching_facts(expected)})["difference"] == []
    facts = matching_facts(expected)
    facts["files"]["paths"]["/etc/dgxspark-memguard/config.json"]["sha256"] = "0" * 64
    facts["services"]["units"]["dgxspark-memguard.service"]["active_state"] = "failed"
    assert run({**args, "node_facts": facts})["difference"] == [
        f"/etc/dgxspark-memguard/config.json: sha256 000000000000 → "
        f"{expected['files']['/etc/dgxspark-memguard/config.json'][:12]}",
        "dgxspark-memguard.service: failed, enabled → active, enabled",
    ]


def test_an_unusable_setting_fails_naming_it(tmp_path: pathlib.Path) -> None:
    settings = {name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS}
    result = run({"key_file": str(tmp_path / "key"), "settings": {**settings, "memguard_python": "python3"}})
    assert result["failed"] and "memguard_python: expected an absolute path" in result["msg"]
    del settings["memguard_python"]
    result = run({"key_file": str(tmp_path / "key"), "settings": settings})
    assert result["failed"] and result["msg"] == "dgxspark.cluster.memguard_plan: settings lacks memguard_python"


def test_every_host_at_once_gives_each_hosts_difference_as_one_host_would(tmp_path: pathlib.Path) -> None:
    """node_facts_by_host (the boot's preflight, run once): each host's difference is what that host's own
    plan gives; a host whose facts are missing differs (never counted as a match); no key is made."""
    args = {"key_file": str(tmp_path / "key"), "key_create": False}
    one = {host: run(args, host=host)["expected"] for host in HOSTVARS}
    facts = {host: matching_facts(expected) for host, expected in one.items()}
    facts["spark-w1"]["files"]["paths"]["/usr/local/sbin/dgxspark-memguard"]["sha256"] = "1" * 64
    del facts["spark-w2"]
    result = run({**args, "node_facts_by_host": facts}, host="spark-head")
    assert not result.get("failed"), result
    assert set(result) >= {"differences", "key_missing"} and "texts" not in result
    assert result["differences"]["spark-head"] == []
    assert result["differences"]["spark-w1"] == [
        f"/usr/local/sbin/dgxspark-memguard: sha256 111111111111 → "
        f"{one['spark-w1']['files']['/usr/local/sbin/dgxspark-memguard'][:12]}"
    ]
    missing = result["differences"]["spark-w2"]
    assert missing and all("not looked at" in line for line in missing[:4])
    assert result["key_missing"] is True and not (tmp_path / "key").exists()


def test_every_host_at_once_takes_each_hosts_own_settings(tmp_path: pathlib.Path) -> None:
    """A setting a host's inventory gives (memguard_settings is documented per host) is that host's, also when
    every host is planned at once from the first host's task: the preflight never misses its difference."""
    args = {"key_file": str(tmp_path / "key"), "key": "k" * 20}
    own = {"memguard_psi_full_avg10_max": 20}
    expected = {host: run(args, host=host)["expected"] for host in HOSTVARS}
    facts = {host: matching_facts(e) for host, e in expected.items()}  # every node as the defaults plan it
    HOSTVARS["spark-w2"].update(own)
    try:
        result = run({**args, "node_facts_by_host": facts}, host="spark-head")
    finally:
        for name in own:
            del HOSTVARS["spark-w2"][name]
    assert result["differences"]["spark-head"] == [] and result["differences"]["spark-w1"] == []
    assert (
        result["differences"]["spark-w2"]
        == [line for line in result["differences"]["spark-w2"] if line.startswith("/etc/dgxspark-memguard/config.json")]
        != []
    )
