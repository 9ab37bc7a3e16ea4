# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guard's Prometheus textfile (issue 29): its state in the text format node_exporter's textfile collector
reads, written atomically beside the state file at every sample, with real files and a running daemon."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from daemon_rig import GIB, GRACE, HIGH, INTERVAL, LOW, SERVING_ID, SLACK, container, wait_for

# `make prometheus-check`, which installs promtool first, runs this file again with DGXSPARK_PROMTOOL set: there the
# promtool test fails when promtool is missing, so that it cannot skip through CI (the units stage runs earlier).
PROMTOOL = os.environ.get("DGXSPARK_PROMTOOL") or shutil.which("promtool")


def parse(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of a text-format exposition (comments left out)."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            found[key] = float(value)
    return found


def textfile(settings: dict[str, Any]) -> pathlib.Path:
    return pathlib.Path(settings["textfile_dir"]) / "dgxspark_memguard.prom"


def test_a_relative_directory_is_refused(memguard: ModuleType, settings: Callable) -> None:
    with pytest.raises(ValueError, match="textfile_dir: expected an absolute directory"):
        memguard.Config(settings(textfile_dir="metrics"))
    assert memguard.Config(settings()).textfile_dir == ""  # off unless asked for


def test_the_text_of_a_guard_under_its_floor(memguard: ModuleType, settings: Callable) -> None:
    """Steady, 20 s into a dip of a 30 s grace: low 20 s, 10 s of grace left; the floors and the phase one-hot."""
    config = memguard.Config(settings(host='spark-"a"'))
    samples = iter([HIGH, 2 * GIB, 2 * GIB])
    guard = memguard.Guard(config, lambda: next(samples), lambda: None, lambda: {"ok": True}, lambda _d: None)
    guard.set_phase("steady", 100.0)
    guard.sample(100.0)
    guard.sample(110.0)
    guard.sample(130.0)
    state = {**guard.state(130.0), "peers": {}, "health": {"ok": True, "stale_after_s": 30.0, "write_errors": 0}}
    text = memguard.prometheus_text(state, config, 130.0, last_decision=100.0)
    found = parse(text)
    assert found['dgxspark_memguard_info{host="spark-\\"a\\"",container="vllm_dsv41"}'] == 1
    assert found['dgxspark_memguard_phase{phase="steady"}'] == 1 and found['dgxspark_memguard_phase{phase="idle"}'] == 0
    assert found["dgxspark_memguard_mem_available_bytes"] == 2 * GIB
    assert found["dgxspark_memguard_floor_bytes"] == 3 * GIB and found["dgxspark_memguard_emergency_floor_bytes"] == GIB
    assert found["dgxspark_memguard_grace_seconds"] == 30
    assert found["dgxspark_memguard_low_seconds"] == 20 and found["dgxspark_memguard_grace_left_seconds"] == 10
    assert found["dgxspark_memguard_tripped"] == 0 and found["dgxspark_memguard_trips_total"] == 0
    assert found["dgxspark_memguard_samples_total"] == 3
    assert found["dgxspark_memguard_last_decision_timestamp_seconds"] == 100
    assert found["dgxspark_memguard_last_sample_timestamp_seconds"] == 130
    assert "dgxspark_memguard_peer_listener_up" not in found  # no listener under the policy local
    assert "dgxspark_memguard_psi_full_avg10" not in found  # no PSI read
    # every family has its HELP and TYPE once, and only known names are written
    names = {key.split("{")[0] for key in found}
    assert names <= set(memguard.METRICS)
    for name in names:
        assert text.count(f"# TYPE {name} ") == 1 and text.count(f"# HELP {name} ") == 1


def test_idle_has_no_floor_and_unreadable_memory_is_nan(memguard: ModuleType, settings: Callable) -> None:
    config = memguard.Config(settings())
    guard = memguard.Guard(config, lambda: None, lambda: None, lambda: {"ok": True}, lambda _d: None)
    guard.sample(5.0)
    found = parse(memguard.prometheus_text({**guard.state(5.0), "peers": {}, "health": {}}, config, 5.0, None))
    assert found['dgxspark_memguard_phase{phase="idle"}'] == 1
    assert "dgxspark_memguard_floor_bytes" not in found and "dgxspark_memguard_grace_left_seconds" not in found
    assert str(found["dgxspark_memguard_mem_available_bytes"]) == "nan"
    assert "dgxspark_memguard_last_decision_timestamp_seconds" not in found


RUNNING = "dgxspark_rank_container_running"


@pytest.mark.parametrize(
    ("phase", "running", "written"),
    [("steady", True, 1), ("startup", False, 0), ("steady", None, None), ("idle", False, None), ("idle", True, None)],
)
def test_the_rank_container_is_written_only_while_one_should_run(
    memguard: ModuleType, settings: Callable, phase: str, running: bool | None, written: int | None
) -> None:
    """In startup and steady: 1 or 0 as the engine says, nothing when it did not say. In idle (nothing booted, or a
    cluster stopped on purpose) never: DgxsparkRankDown must not fire on a stopped cluster."""
    config = memguard.Config(settings())
    guard = memguard.Guard(config, lambda: HIGH, lambda: None, lambda: {"ok": True}, lambda _d: None)
    if phase != "idle":
        guard.set_phase(phase, 1.0)
    guard.sample(2.0)
    state = {**guard.state(2.0), "peers": {}, "health": {}}
    found = parse(memguard.prometheus_text(state, config, 2.0, None, container_running=running))
    assert found.get(RUNNING) == written
    assert not any(key.startswith("dgxspark_rank_container_running") and key != RUNNING for key in found)


def test_the_watch_forgets_an_engine_that_stopped_answering(memguard: ModuleType) -> None:
    answers: list[Any] = [True, OSError("connection refused")]

    def ask() -> bool:
        answer = answers.pop(0) if answers else True
        if isinstance(answer, BaseException):
            raise answer
        return answer

    now = [100.0]
    watch = memguard.ContainerWatch(ask, 5.0, lambda: now[0])
    assert watch.current(100.0) is None  # not asked yet
    watch.start()
    assert wait_for(lambda: watch.latest is not None, SLACK)
    assert watch.current(100.0) is True
    assert watch.current(116.0) is None  # older than three intervals: an engine that hangs is not an answer
    watch.stop()
    watch.thread.join(SLACK)
    assert not watch.thread.is_alive()
    failing = memguard.ContainerWatch(lambda: ask() and False, 5.0, lambda: now[0])
    answers[:] = [OSError("connection refused")]
    failing.start()
    assert wait_for(lambda: failing.latest is not None, SLACK)
    assert failing.current(100.0) is None  # the engine did not answer: no series rather than a false 0
    failing.stop()


def test_the_daemon_follows_the_rank_container(
    memguard: ModuleType,
    node: Callable,
    start: Callable,
    engine: Callable,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real daemon and a fake engine: no series in idle, 1 once startup is armed and the container runs, 0 when
    it exits (and when it is gone), none again once the cluster is stopped on purpose (idle)."""
    monkeypatch.setattr(memguard, "CONTAINER_CHECK_INTERVAL", INTERVAL)
    settings = node("a", textfile_dir=str(tmp_path / "textfile"))
    docker = engine("a")
    guard = start(settings)
    path = textfile(settings)

    def written() -> dict[str, float]:
        return parse(path.read_text(encoding="utf-8"))

    assert wait_for(lambda: sum(method == "GET" for method, _path in docker.calls()) >= 2, SLACK)  # it asks in idle
    guard.ask({"command": "status"})  # the state and the textfile are written before the answer
    assert written()['dgxspark_memguard_phase{phase="idle"}'] == 1 and RUNNING not in written()
    guard.ask({"command": "phase", "phase": "startup"})
    assert wait_for(lambda: written().get(RUNNING) == 1, SLACK), written()
    docker.containers = [container("vllm_dsv41", SERVING_ID, state="exited")]
    assert wait_for(lambda: written().get(RUNNING) == 0, SLACK), written()
    docker.containers = [container("vllm_dsv41", SERVING_ID, labelled=False)]  # someone else's: not the rank
    guard.ask({"command": "phase", "phase": "steady"})
    assert wait_for(lambda: written().get(RUNNING) == 0, SLACK), written()
    docker.containers = [container("vllm_dsv41", SERVING_ID)]
    assert wait_for(lambda: written().get(RUNNING) == 1, SLACK), written()
    guard.ask({"command": "phase", "phase": "idle"})
    assert wait_for(lambda: RUNNING not in written(), SLACK), written()
    assert not docker.stops()  # watching never acts on a container


@pytest.mark.skipif(
    PROMTOOL is None, reason="promtool (Debian's prometheus package) is not installed: make prometheus-check runs it"
)
def test_promtool_reads_it(memguard: ModuleType, node: Callable, start: Callable, tmp_path: pathlib.Path) -> None:
    settings = node("a", textfile_dir=str(tmp_path / "textfile"))
    guard = start(settings)
    assert wait_for(lambda: textfile(settings).exists(), SLACK)
    text = textfile(settings).read_bytes()
    checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    guard.stop()


def test_the_daemon_writes_it_atomically_and_it_follows_a_trip(
    node: Callable, start: Callable, engine: Callable, write_meminfo: Callable, tmp_path: pathlib.Path
) -> None:
    settings = node("a", textfile_dir=str(tmp_path / "node-exporter" / "textfile"))  # made by the guard
    engine("a")
    guard = start(settings)
    path = textfile(settings)
    assert wait_for(path.exists, SLACK)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # node_exporter runs as its own user
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    found = parse(path.read_text(encoding="utf-8"))
    assert found['dgxspark_memguard_phase{phase="idle"}'] == 1
    assert found["dgxspark_memguard_mem_available_bytes"] == HIGH
    assert found["dgxspark_memguard_last_decision_timestamp_seconds"] > 0  # the start

    guard.ask({"command": "phase", "phase": "startup"})  # LOW is under the startup floor
    write_meminfo(pathlib.Path(settings["meminfo_path"]), LOW)
    state = wait_for(lambda: (guard.state() or {}).get("tripped") and guard.state(), GRACE + 2 * INTERVAL + SLACK)
    assert state, "the guard did not trip"
    found = wait_for(lambda: (f := parse(path.read_text(encoding="utf-8")))["dgxspark_memguard_tripped"] and f, SLACK)
    assert found["dgxspark_memguard_tripped"] == 1 and found["dgxspark_memguard_tripped_by_peer"] == 0
    assert found["dgxspark_memguard_trips_total"] == 1
    assert found["dgxspark_memguard_trip_timestamp_seconds"] == pytest.approx(state["tripped"]["time"])
    assert found["dgxspark_memguard_last_decision_timestamp_seconds"] >= state["tripped"]["time"]
    assert found["dgxspark_memguard_samples_total"] >= 2
    assert found["dgxspark_memguard_mem_available_bytes"] == LOW
    assert [p.name for p in path.parent.iterdir()] == ["dgxspark_memguard.prom"]  # no temporary file left

    guard.ask({"command": "clear"})
    found = parse(path.read_text(encoding="utf-8"))  # written before the answer, as the state is
    assert found["dgxspark_memguard_tripped"] == 0 and found["dgxspark_memguard_trips_total"] == 1


def test_a_directory_it_cannot_write_is_reported_and_the_guard_goes_on(
    node: Callable, start: Callable, tmp_path: pathlib.Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="ascii")
    settings = node("a", textfile_dir=str(blocker))
    guard = start(settings)
    state = wait_for(lambda: (guard.state() or {}).get("samples_taken", 0) >= 1 and guard.state(), SLACK)
    assert state, "the guard did not sample"
    problems = state["health"]["problems"]
    assert any(p.startswith("writing the metrics textfile:") for p in problems), problems
    assert state["health"]["write_errors"] >= 1 and not os.path.isdir(blocker)
    answer = guard.ask({"command": "status"})  # the guard goes on: it answers, and writes its state file
    assert answer["ok"] is True and answer["state"]["health"]["write_errors"] > state["health"]["write_errors"]


# ----------------------------------------------------------------------------- the role's variable


def _plan(**changes: Any) -> dict[str, Any]:
    import copy
    import json

    import yaml

    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import (
        OPTIONAL_SETTINGS,
        SETTINGS,
        memguard_config,
    )
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
    from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

    defaults = yaml.safe_load((ROOT / "roles" / "memguard" / "defaults" / "main.yml").read_text(encoding="utf-8"))
    role_vars = (ROOT / "roles" / "memguard" / "vars" / "main.yml").read_text(encoding="utf-8")
    for name in OPTIONAL_SETTINGS:  # a role variable, handed to the plan as the others are
        assert defaults[name] == OPTIONAL_SETTINGS[name] and f'{name}: "{{{{ {name} }}}}"' in role_vars
    data = validate_profile(json.loads(SPARK3.read_text(encoding="utf-8"))).data
    settings = {**{name: copy.deepcopy(defaults[name]) for name in SETTINGS}, **changes}
    peers = {"spark-head": "10.0.0.10", "spark-w1": "10.0.0.11"}
    return memguard_config(data["host"], data["container"]["name"], settings, "spark-w1", peers, "k" * 40)


def test_the_role_hands_the_directory_to_the_guard(memguard: ModuleType) -> None:
    assert "textfile_dir" not in _plan()  # off by default: a guard without metrics keeps the configuration it had
    assert "textfile_dir" not in _plan(memguard_textfile_dir="")
    config = _plan(memguard_textfile_dir="/var/lib/prometheus/node-exporter/")
    assert config["textfile_dir"] == "/var/lib/prometheus/node-exporter"
    assert memguard.Config(config).textfile_dir == "/var/lib/prometheus/node-exporter"  # the daemon takes it


@pytest.mark.parametrize("bad", ["relative/dir", "/var/lib/../etc", "/var/lib/node exporter", "/tmp/%h"])
def test_a_directory_the_plan_refuses(bad: str) -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import MemguardConfigError

    with pytest.raises(MemguardConfigError, match="memguard_textfile_dir: expected empty"):
        _plan(memguard_textfile_dir=bad)
