# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's configuration: the shipped profiles and the role's own defaults, checked by the daemon."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.memguard import FilterModule
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import (
    SETTINGS,
    MemguardConfigError,
    memguard_config,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, SPARK8

GIB = 1024**3
KEY = "a-shared-key-of-40-characters-0123456789"
ROLE = ROOT / "roles" / "memguard"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
PEERS = {"spark-head": "10.0.0.10", "spark-w1": "10.0.0.11", "spark-w2": ""}


def profile(path: pathlib.Path = SPARK3) -> dict[str, Any]:
    return validate_profile(json.loads(path.read_text())).data


def settings(**changes: Any) -> dict[str, Any]:
    """The role's defaults (defaults/main.yml itself), with ``changes`` by variable name."""
    return {**{name: copy.deepcopy(DEFAULTS[name]) for name in SETTINGS}, **changes}


def config(**changes: Any) -> dict[str, Any]:
    data = profile()
    return memguard_config(data["host"], data["container"]["name"], settings(**changes), "spark-w1", PEERS, KEY)


def test_the_role_passes_every_setting_it_has() -> None:
    """SETTINGS are role variables, and the role's tasks hand every one of them to the filter."""
    tasks = (ROLE / "vars" / "main.yml").read_text()
    for name in SETTINGS:
        assert name in DEFAULTS, name
        assert f'{name}: "{{{{ {name} }}}}"' in tasks, name


def test_seed_000s_guard_from_the_spark3_profile_and_the_role_defaults() -> None:
    assert config() == {
        "host": "spark-w1",
        "container": "vllm_dsv41",
        "docker_socket": "/var/run/docker.sock",
        "stop_timeout_s": 5,
        "phases": {
            "startup": {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 45},
            "steady": {"floor_bytes": 3 * GIB, "interval_s": 2, "grace_s": 30},
        },
        "startup_wait_s": 120,
        "emergency_floor_bytes": 1 * GIB,
        "psi_full_avg10_max": 50,
        "cluster_policy": "stop-all",
        "peer_listen": {"address": "10.0.0.11", "port": 7391},  # its own address only, never a wildcard
        "peers": [
            {"host": "spark-head", "address": "10.0.0.10", "port": 7391},
            {"host": "spark-w2", "address": "spark-w2", "port": 7391},  # no ansible_host: its inventory name
        ],
        "peer_key": KEY,
        "state_path": "/run/dgxspark-memguard/state.json",
        "trip_path": "/var/lib/dgxspark-memguard/tripped.json",
        "log_path": "/var/log/dgxspark-memguard/decisions.jsonl",
        "log_max_bytes": 16 * 1024**2,
        "log_backups": 3,
        "control_socket": "/run/dgxspark-memguard/control.sock",
        "watchdog_s": 49,  # 40 s + the 5 s stop timeout + two tries of 1 s for each of the two peers
    }


@pytest.mark.parametrize("path", [SPARK3, SPARK8], ids=["spark3", "spark8"])
@pytest.mark.parametrize("policy", ["stop-all", "local"])
def test_the_daemon_accepts_what_is_built(path: pathlib.Path, policy: str) -> None:
    spec = importlib.util.spec_from_file_location(
        "dgxspark_memguard_config_check", ROLE / "files" / "dgxspark_memguard.py"
    )
    assert spec is not None and spec.loader is not None
    daemon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(daemon)
    data = profile(path)
    built = memguard_config(
        data["host"], data["container"]["name"], settings(memguard_cluster_policy=policy), "spark-w1", PEERS, KEY
    )
    checked = daemon.Config(json.loads(json.dumps(built)))  # as config.json carries it
    assert checked.phases["steady"].floor_bytes == built["phases"]["steady"]["floor_bytes"]
    assert (len(checked.peers), checked.peer_listen is None) == ((2, False) if policy == "stop-all" else (0, True))


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"memguard_psi_full_avg10_max": 0}, {"psi_full_avg10_max": None}),
        ({"memguard_container": "vllm_other"}, {"container": "vllm_other"}),
        ({"memguard_cluster_policy": "local"}, {"cluster_policy": "local", "peer_listen": None, "peers": []}),
        ({"memguard_emergency_floor_gib": 0.5}, {"emergency_floor_bytes": GIB // 2}),
        (
            {"memguard_settings": {"memguard_gib": 4, "startup_memguard_grace_seconds": 60}},
            {"phases": {"startup": {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 60},
                        "steady": {"floor_bytes": 4 * GIB, "interval_s": 2, "grace_s": 30}}},
        ),
        ({"memguard_peer_port": 7400}, {"peer_listen": {"address": "10.0.0.11", "port": 7400}}),
    ],
)  # fmt: skip
def test_the_role_settings(changes: dict[str, Any], expected: dict[str, Any]) -> None:
    built = config(**changes)
    assert {key: built[key] for key in expected} == expected


def test_check_mode_without_a_key_yet() -> None:
    data = profile()
    built = memguard_config(data["host"], "vllm_dsv41", settings(), "spark-w1", PEERS, None)
    assert built["peer_key"] == "" and len(built["peers"]) == 2


@pytest.mark.parametrize(
    "changes,key,message",
    [
        (
            {"memguard_emergency_floor_gib": 3},
            KEY,
            "spark-w1: memguard_emergency_floor_gib 3 must be below both phases' floors (5 GiB startup, 3 GiB steady): "
            "lower it, or raise memguard_gib; nothing was changed",
        ),
        (
            {"memguard_emergency_floor_gib": 6},
            KEY,
            "memguard_emergency_floor_gib 6 must be below both phases' floors (5 GiB startup, 3 GiB steady): "
            "lower it, or raise startup_memguard_gib and memguard_gib",
        ),
        (
            {"memguard_settings": {"memguard_gib": 0.5}},
            KEY,
            "memguard_emergency_floor_gib 1 must be below both phases' floors (5 GiB startup, 0.5 GiB steady)",
        ),
        ({}, "short", "memguard_peer_key: the guards' shared key needs at least 16 characters, found 5"),
        ({"memguard_settings": {"memguard_gb": 4}}, KEY, "memguard_settings: unknown field(s) memguard_gb (known: "),
        (
            {"memguard_settings": {"memguard_gib": "4"}},
            KEY,
            "memguard_settings.memguard_gib: expected a positive number",
        ),
        (
            {"memguard_cluster_policy": "all"},
            KEY,
            "memguard_cluster_policy: expected one of stop-all, local, found 'all'",
        ),
        ({"memguard_peer_port": 70000}, KEY, "memguard_peer_port: expected a TCP port (1-65535), found 70000"),
        (
            {"memguard_stop_timeout_seconds": 0},
            KEY,
            "memguard_stop_timeout_seconds: expected a positive number, found 0",
        ),
    ],
)
def test_settings_that_cannot_work(changes: dict[str, Any], key: str, message: str) -> None:
    data = profile()
    with pytest.raises(MemguardConfigError) as raised:
        memguard_config(data["host"], "vllm_dsv41", settings(**changes), "spark-w1", PEERS, key)
    assert message in str(raised.value)


def test_every_problem_at_once() -> None:
    data = profile()
    host = {**data["host"], "memguard_interval_seconds": None}
    with pytest.raises(MemguardConfigError) as raised:
        memguard_config(
            host, "", settings(memguard_peer_port=True, memguard_psi_full_avg10_max=-1), "spark-w1", {}, KEY
        )
    assert str(raised.value) == (
        "spark-w1: the profile's host.memguard_interval_seconds: expected a positive number, found None; "
        "memguard_psi_full_avg10_max: expected a non-negative number, found -1; "
        "memguard_peer_port: expected a TCP port (1-65535), found True; "
        "memguard_container: no container to guard (the profile's container.name is ''); nothing was changed"
    )


def test_missing_settings_are_named() -> None:
    with pytest.raises(MemguardConfigError, match="missing role settings: memguard_docker_socket"):
        memguard_config(
            profile()["host"],
            "vllm_dsv41",
            {k: v for k, v in settings().items() if k != "memguard_docker_socket"},
            "a",
            {},
            KEY,
        )


def test_the_filter() -> None:
    data = profile()
    memguard_filter = FilterModule().filters()["memguard_config"]
    built = memguard_filter(data["host"], data["container"]["name"], settings(), "spark-w1", PEERS, KEY)
    assert built == config()
    with pytest.raises(AnsibleFilterError, match=r"^dgxspark.cluster.memguard_config: spark-w1: memguard_emergency"):
        memguard_filter(data["host"], "vllm_dsv41", settings(memguard_emergency_floor_gib=9), "spark-w1", PEERS, KEY)
    with pytest.raises(AnsibleFilterError, match="the input is the profile's host section"):
        memguard_filter("spark3", "vllm_dsv41", settings(), "spark-w1", PEERS, KEY)
    with pytest.raises(AnsibleFilterError, match="settings and peers must be mappings"):
        memguard_filter(data["host"], "vllm_dsv41", settings(), "spark-w1", ["spark-head"], KEY)


# ------------------------------------------------------------------ what the role says
STORED_STATE = json.loads((ROOT / "tests/unit/fixtures/memguard/node-facts/state.json").read_text())


def test_the_status_line_says_the_phase_a_trip_memavailable_the_trips_and_the_guard_s_problems() -> None:
    line = FilterModule().filters()["memguard_status_line"]
    assert line(STORED_STATE, {"rc": 0, "stderr": ""}) == (
        "memory guard: phase steady, TRIPPED: MemAvailable under the steady floor 3.00 GiB (last 2.50 GiB) for "
        "30.00 s (grace 30 s, phase steady); MemAvailable 2.5 GiB; 1 trip(s) since install"
    )
    idle = {**STORED_STATE, "phase": "idle", "tripped": None, "trips": 0, "last_sample": None}
    assert (
        line(idle, {"rc": 0}) == "memory guard: phase idle, not tripped; MemAvailable 0.0 GiB; 0 trip(s) since install"
    )
    sick = {**idle, "health": {"ok": False, "problems": ["peer listener: down", "clock skew"]}}
    assert line(sick, {"rc": 0}).endswith("since install; PROBLEMS: peer listener: down; clock skew")
    assert line({**idle, "health": None}, {"rc": 0}).endswith("since install")  # a guard that writes no health


def test_a_guard_that_does_not_answer_says_why() -> None:
    line = FilterModule().filters()["memguard_status_line"]
    assert line(None, {"rc": 1, "stderr": "connection refused"}) == "memory guard: not answering (connection refused)"
    assert line(None, {"rc": 2, "msg": "no such file"}) == "memory guard: not answering (not installed yet)"
    with pytest.raises(AnsibleFilterError, match="memguard_status_line: needs the guard's state"):
        line("idle", {"rc": 0})


def test_the_difference_report_names_the_node_each_difference_and_a_key_not_made_in_check_mode() -> None:
    report = FilterModule().filters()["memguard_difference_report"]
    planned = {"difference": ["/etc/dgxspark-memguard/config.json: absent → sha256 0123456789ab"], "key_missing": False}
    assert report(planned, "spark-w1", "/inv/.memguard-key", False) == [
        "spark-w1: the memory guard differs; installing it:",
        "/etc/dgxspark-memguard/config.json: absent → sha256 0123456789ab",
    ]
    lines = report({**planned, "key_missing": True}, "spark-w1", "/inv/.memguard-key", True)
    assert lines[0] == "spark-w1: the memory guard would change (check mode):"
    assert lines[-1] == (
        "(check mode: /inv/.memguard-key does not exist yet and is not created now; a real run creates it, so the "
        "configuration compared has no key)"
    )
    with pytest.raises(AnsibleFilterError, match="memguard_difference_report: needs memguard_plan's answer"):
        report(["x"], "h", "k")
