# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 15, the guard's files: the systemd unit (watchdog, start limits) and the shell wrapper as the role
writes them (plugin_utils/plan/memguard.py renders them; the memguard_plan action hands them to the role), and the
allow-list that keeps every value written into them harmless (memguard_config)."""

from __future__ import annotations

import configparser
import copy
import hashlib
import json
import pathlib
import shlex
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import (
    OPTIONAL_SETTINGS,
    SETTINGS,
    MemguardConfigError,
    expectation,
    memguard_config,
    unit_text,
    wrapper_text,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "memguard"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
KEY = "a-shared-key-of-40-characters-0123456789"
PEERS = {"spark-head": "10.0.0.10", "spark-w1": "10.0.0.11", "spark-w2": "10.0.0.12"}
SETTINGS_PLAIN = {
    "memguard_python": "/usr/bin/python3",
    "memguard_install_dir": "/usr/local/lib/dgxspark-memguard",
    "memguard_config_dir": "/etc/dgxspark-memguard",
}


def unit(**changes: Any) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    config = {"container": "vllm_dsv41", "watchdog_s": 49, **changes}
    parser.read_string(unit_text(config, SETTINGS_PLAIN))
    return parser


def built(**changes: Any) -> dict[str, Any]:
    data = validate_profile(json.loads(SPARK3.read_text())).data
    settings = {**{name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS}, **changes}
    return memguard_config(data["host"], data["container"]["name"], settings, "spark-w1", PEERS, KEY)


def test_the_unit_has_a_watchdog_and_start_limits() -> None:
    """Finding: no WatchdogSec and no start limits, so a dead guard went unnoticed."""
    parsed = unit()
    assert parsed["Unit"]["StartLimitIntervalSec"] == "300" and parsed["Unit"]["StartLimitBurst"] == "5"
    service = parsed["Service"]
    assert (service["Type"], service["NotifyAccess"], service["WatchdogSec"]) == ("notify", "main", "49")
    assert service["Restart"] == "on-failure"
    assert service["ExecStart"] == (
        "/usr/bin/python3 /usr/local/lib/dgxspark-memguard/dgxspark_memguard.py "
        "--config /etc/dgxspark-memguard/config.json run"
    )


def test_the_watchdog_outlasts_a_trip() -> None:
    """WatchdogSec covers the longest the loop can be busy: lookup (10 s), stop (timeout + 10 s), kill (10 s)
    and two tries of 1 s per peer."""
    assert built()["watchdog_s"] == 40 + 5 + 2 * 2
    assert built(memguard_stop_timeout_seconds=30)["watchdog_s"] == 40 + 30 + 2 * 2
    assert built(memguard_cluster_policy="local")["watchdog_s"] == 40 + 5


def test_the_wrapper_quotes_every_value(tmp_path: pathlib.Path) -> None:
    """Finding: the wrapper pasted its variables unquoted. Each is quoted for the shell now, so even a value
    that got past the allow-list stays one word and runs nothing."""
    hostile = "/opt/my dir/$(touch pwned);x'y"
    text = wrapper_text({**SETTINGS_PLAIN, "memguard_install_dir": hostile, "memguard_config_dir": "/etc/a b"})
    (tmp_path / "wrapper.sh").write_text(text)
    subprocess.run(["sh", "-n", str(tmp_path / "wrapper.sh")], check=True)
    [line] = [line for line in text.splitlines() if line.startswith("exec ")]
    assert shlex.split(line) == [
        "exec",
        "/usr/bin/python3",
        f"{hostile}/dgxspark_memguard.py",
        "--config",
        "/etc/a b/config.json",
        "$@",
    ]


def test_the_wrapper_is_unchanged_for_plain_values() -> None:
    """Plain paths need no quotes: a node installed before keeps the same file (no needless restart)."""
    assert wrapper_text(SETTINGS_PLAIN).splitlines()[-1] == (
        "exec /usr/bin/python3 /usr/local/lib/dgxspark-memguard/dgxspark_memguard.py "
        '--config /etc/dgxspark-memguard/config.json "$@"'
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memguard_container": "abc\nExecStartPre=/bin/sh"}, "memguard_container: expected a Docker container name"),
        ({"memguard_container": "vllm%n"}, "memguard_container: expected a Docker container name"),
        ({"memguard_container": "-x"}, "memguard_container: expected a Docker container name"),
        ({"memguard_python": "python3"}, "memguard_python: expected an absolute path"),
        ({"memguard_python": "/usr/bin/python3 -c 'import os'"}, "memguard_python: expected an absolute path"),
        ({"memguard_install_dir": "/opt/$(id)"}, "memguard_install_dir: expected an absolute path"),
        ({"memguard_install_dir": "/opt/a\nExecStartPre=/x"}, "memguard_install_dir: expected an absolute path"),
        ({"memguard_config_dir": "/etc/../tmp"}, "memguard_config_dir: expected an absolute path"),
        ({"memguard_config_dir": "/etc/%h"}, "memguard_config_dir: expected an absolute path"),
        ({"memguard_docker_socket": "/run/docker sock"}, "memguard_docker_socket: expected an absolute path"),
        ({"memguard_peer_network": "wifi"}, "memguard_peer_network: expected one of management, fabric"),
    ],
    ids=[
        "name-newline",
        "name-specifier",
        "name-dash",
        "python-relative",
        "python-arguments",
        "dir-substitution",
        "dir-newline",
        "dir-dotdot",
        "dir-specifier",
        "socket-space",
        "network",
    ],
)
def test_values_for_the_unit_and_the_wrapper_are_allow_listed(changes: dict[str, Any], message: str) -> None:
    """Finding: the guard's variables landed unquoted in its unit and its wrapper. Anything a unit or a shell
    would read as more than one plain word is refused before a node is touched."""
    with pytest.raises(MemguardConfigError, match=message):
        built(**changes)


def test_the_guard_listens_on_its_own_management_address() -> None:
    config = built()
    assert config["peer_listen"] == {"address": "10.0.0.11", "port": 7391}
    assert [p["address"] for p in config["peers"]] == ["10.0.0.10", "10.0.0.12"]


def test_the_fabric_network() -> None:
    data = validate_profile(json.loads(SPARK3.read_text())).data
    settings = {**{name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS}, "memguard_peer_network": "fabric"}
    fabric = {"spark-head": "198.51.100.10", "spark-w1": "198.51.100.11", "spark-w2": "198.51.100.12"}
    config = memguard_config(data["host"], "vllm_dsv41", settings, "spark-w1", fabric, KEY)
    assert config["peer_listen"]["address"] == "198.51.100.11"
    with pytest.raises(MemguardConfigError, match="spark-w2: no dgxspark_fabric_address"):
        memguard_config(data["host"], "vllm_dsv41", settings, "spark-w1", {**fabric, "spark-w2": ""}, KEY)


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "*"])
def test_a_wildcard_address_is_refused(address: str) -> None:
    with pytest.raises(MemguardConfigError, match="never on every address"):
        memguard_config(
            validate_profile(json.loads(SPARK3.read_text())).data["host"],
            "vllm_dsv41",
            {name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS},
            "spark-w1",
            {**PEERS, "spark-w1": address},
            KEY,
        )


def test_the_role_hands_the_plan_each_setting() -> None:
    """The role's planning entry point and the boot's preflight (every node at once) hand the guard's planning
    every setting memguard_config reads, by its variable's name (vars/main.yml's memguard_plan_settings)."""
    settings = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["memguard_plan_settings"]
    assert sorted(settings) == sorted([*SETTINGS, *OPTIONAL_SETTINGS])
    tasks = yaml.safe_load((ROLE / "tasks" / "difference.yml").read_text())
    [plan] = [t for t in tasks if "dgxspark.cluster.memguard_plan" in t]
    assert plan["dgxspark.cluster.memguard_plan"]["settings"] == "{{ memguard_plan_settings }}"
    preflight = yaml.safe_load((ROLE.parent / "boot" / "tasks" / "preflight.yml").read_text())
    [check] = [t for t in preflight if "dgxspark.cluster.boot_preflight" in t]
    assert check["dgxspark.cluster.boot_preflight"]["memguard"]["settings"] == "{{ memguard_plan_settings }}"
    assert not (ROLE / "templates").exists()  # one rendering, in Python: what is compared is what is written


def test_the_expectation_hashes_what_is_written() -> None:
    config = built()
    settings = {name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS}
    texts, expected = expectation(config, settings, "ab" * 32)
    assert expected["units"] == ["dgxspark-memguard.service"]
    files = expected["files"]
    assert files["/usr/local/lib/dgxspark-memguard/dgxspark_memguard.py"] == "ab" * 32
    assert files["/etc/dgxspark-memguard/config.json"] == hashlib.sha256(texts["config"].encode()).hexdigest()
    assert files["/usr/local/sbin/dgxspark-memguard"] == hashlib.sha256(texts["wrapper"].encode()).hexdigest()
    assert files["/etc/systemd/system/dgxspark-memguard.service"] == (
        hashlib.sha256(texts["unit"].encode()).hexdigest()
    )
    assert json.loads(texts["config"]) == config
    # as ansible.builtin.to_nice_json wrote it before: a node installed then keeps its file (no restart)
    assert texts["config"] == json.dumps(config, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
    assert "WatchdogSec=49\n" in texts["unit"]


VERIFY = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["memguard_unit_verify"]


def verified(tmp_path: pathlib.Path, text: str) -> subprocess.CompletedProcess:
    """The unit task's validate as the copy module runs it: the template rendered (``quote`` is shlex.quote), the
    temporary copy's path put in with Python's ``%``, the command split as a shell would."""
    copy_path = tmp_path / "tmpXYZ"  # copy's temporary name: not a unit name (why the check copies it)
    copy_path.write_text(text)
    command = f"sh -c {shlex.quote(VERIFY)} verify %s" % copy_path
    return subprocess.run(shlex.split(command), capture_output=True, text=True, check=False)


def test_the_unit_is_verified_by_systemd_before_it_is_installed(tmp_path: pathlib.Path) -> None:
    """Finding: files another program parses were installed unvalidated. systemd-analyze verify passes the unit
    the role writes and fails one systemd would only half read (it says "ignoring" and exits 0 on its own)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    [task] = [
        t
        for t in tasks
        if t.get("ansible.builtin.copy", {}).get("dest") == "/etc/systemd/system/dgxspark-memguard.service"
    ]
    assert task["ansible.builtin.copy"]["validate"] == "sh -c {{ memguard_unit_verify | quote }} verify %s"
    assert shutil.which("systemd-analyze"), "the unit's check needs systemd-analyze (systemd), as every node has"
    good = unit_text({"container": "vllm_dsv41", "watchdog_s": 49}, SETTINGS_PLAIN)
    passed = verified(tmp_path, good)
    assert passed.returncode == 0, passed.stderr
    broken = good.replace("Restart=on-failure", "Restart=sometimes")
    failed = verified(tmp_path, broken)
    assert failed.returncode != 0 and "Failed to parse service restart specifier" in failed.stderr, failed.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "tmpXYZ"]  # its own directory is gone
