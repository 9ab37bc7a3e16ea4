# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard on every simulated node, after converge (twice) and side_effect.yml's switches through the
role's entry point (idle -> startup -> idle): read with systemd, the files, /proc, ss and the guard's own command."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

testinfra_hosts = ["ansible://dgxspark"]

UNIT = "dgxspark-memguard"
COMMAND = "/usr/local/sbin/dgxspark-memguard"
SCRIPT = "/usr/local/lib/dgxspark-memguard/dgxspark_memguard.py"
CONFIG = "/etc/dgxspark-memguard/config.json"
LOG = "/var/log/dgxspark-memguard/decisions.jsonl"
PEER_PORT = "7391"
MIB = 1024**2
# The daemon as the role ships it, in this checkout (extensions/molecule/memguard/tests/ is four levels down).
SHIPPED_SCRIPT = Path(__file__).resolve().parents[4] / "roles" / "memguard" / "files" / "dgxspark_memguard.py"

# What the role installs (roles/memguard/tasks/install.yml): path, mode, all root:root.
FILES = {
    SCRIPT: 0o644,
    CONFIG: 0o600,
    COMMAND: 0o755,
    f"/etc/systemd/system/{UNIT}.service": 0o644,
}
DIRECTORIES = ("/etc/dgxspark-memguard", "/var/lib/dgxspark-memguard", "/var/log/dgxspark-memguard")


def test_unit_enabled_and_running(host):
    service = host.service(UNIT)
    assert service.is_running
    assert service.is_enabled
    # `systemctl show`, as the systemd_service module reads it
    shown = service.systemd_properties
    assert (shown["ActiveState"], shown["UnitFileState"], shown["OOMScoreAdjust"]) == ("active", "enabled", "-1000")


@pytest.mark.parametrize("path", sorted(FILES))
def test_file_installed(host, path):
    installed = host.file(path)
    assert installed.is_file
    assert (installed.user, installed.group, installed.mode) == ("root", "root", FILES[path])


@pytest.mark.parametrize("path", DIRECTORIES)
def test_directory_root_only(host, path):
    directory = host.file(path)
    assert directory.is_directory
    assert (directory.user, directory.group, directory.mode) == ("root", "root", 0o700)


def test_daemon_is_the_shipped_one(host):
    assert host.file(SCRIPT).sha256sum == hashlib.sha256(SHIPPED_SCRIPT.read_bytes()).hexdigest()


def test_guard_samples_idle_not_tripped(host):
    meminfo = host.file("/proc/meminfo").content_string
    available = int(re.search(r"MemAvailable:\s+(\d+)", meminfo).group(1)) * 1024
    state = json.loads(host.check_output("%s status", COMMAND))["state"]
    assert state["phase"] == "idle"
    assert not state["tripped"]
    assert state["container"] == "vllm_dsv41"
    # the guard's last sample is this node's MemAvailable, give or take what moved since (512 MiB)
    assert abs(state["last_sample"]["mem_available"] - available) < 512 * MIB


def test_configuration_from_the_sim_profile(host, inventory):
    name = host.ansible.get_variables()["inventory_hostname"]
    config = json.loads(host.file(CONFIG).content_string)
    # the sim profile: steady 1 GiB / 2 s / 30 s, startup 1.5 GiB / 0.25 s / 45 s
    assert config["phases"]["steady"] == {"floor_bytes": 1073741824, "interval_s": 2, "grace_s": 30}
    assert config["phases"]["startup"] == {"floor_bytes": 1610612736, "interval_s": 0.25, "grace_s": 45}
    assert sorted(peer["host"] for peer in config["peers"]) == [h for h in inventory["groups"]["dgxspark"] if h != name]


def test_guards_listen_for_each_other(host):
    listening = host.check_output("ss -Hltn sport = :%s", PEER_PORT).splitlines()
    assert len(listening) == 1
    # on this host's own address on the peers' network (config.json's peer_listen), never a wildcard
    listen = json.loads(host.file(CONFIG).content_string)["peer_listen"]
    assert listening[0].split()[3] == f"{listen['address']}:{PEER_PORT}"


def test_decision_log_has_both_switches(host):
    last_two = host.check_output("tail -n 2 %s", LOG).splitlines()
    assert [json.loads(line)["reason"] for line in last_two] == ["idle -> startup", "startup -> idle"]
