# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's daemon with real files and sockets: a fake Docker engine on a Unix socket, the control
socket, peers over TCP on 127.0.0.1, and the command line. Each daemon runs in a thread, stopped in teardown."""

from __future__ import annotations

import json
import os
import pathlib
import time
import urllib.parse
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from daemon_rig import GIB, GRACE, HIGH, INTERVAL, KEY, LOW, SERVING_ID, SLACK, STOP, free_ports, send_raw, wait_for

# ----------------------------------------------------------------------------- 10. a node


def test_low_memory_stops_the_container_once_and_stays_tripped(
    node: Callable, start: Callable, engine: Callable, write_meminfo: Callable
) -> None:
    settings = node("a")
    docker = engine("a")
    meminfo = pathlib.Path(settings["meminfo_path"])
    first = start(settings)

    answer = first.ask({"command": "phase", "phase": "startup"})
    assert answer["ok"] is True and answer["state"]["phase"] == "startup"
    assert answer["state"]["phase_settings"] == {"floor_bytes": 5 * GIB, "interval_s": INTERVAL, "grace_s": GRACE}
    assert first.state()["phase"] == "startup"  # written before the answer: race-free
    assert wait_for(lambda: (first.state()["last_sample"] or {}).get("mem_available") == HIGH, SLACK)
    time.sleep(3 * GRACE)
    assert docker.calls() == []

    written = time.monotonic()  # before the write: a sample of the new value cannot come before it
    write_meminfo(meminfo, LOW)
    assert wait_for(lambda: docker.requests, GRACE + 2 * INTERVAL + SLACK), "the container was not stopped"
    assert GRACE - 0.01 <= docker.requests[0][0] - written <= GRACE + 2 * INTERVAL + SLACK
    time.sleep(3 * GRACE)
    # looked up by name and label, then stopped by its full ID (never by a name Docker could read as an ID)
    assert docker.stops() == [STOP]
    assert docker.calls()[0][1].startswith("/containers/json?all=1&filters=")

    state = wait_for(lambda: first.state()["tripped"] and first.state(), SLACK)
    tripped = state["tripped"]
    assert "MemAvailable under the startup floor 5.00 GiB (last 4.00 GiB)" in tripped["reason"]
    assert "grace 0.2 s, phase startup" in tripped["reason"]
    assert tripped["stop"]["ok"] is True and tripped["stop"]["status"] == 204
    assert tripped["stop"]["outcome"] == "stopped" and tripped["from_peer"] is None
    assert tripped["stop"]["id"] == SERVING_ID
    assert state["trips"] == 1 and state["phase"] == "startup"

    assert json.loads(pathlib.Path(settings["trip_path"]).read_text(encoding="utf-8")) == tripped

    [trip] = first.decisions("trip")
    assert trip["reason"] == tripped["reason"] and trip["stop"] == tripped["stop"]
    assert trip["samples"][-1]["mem_available"] == LOW and trip["samples"][-1]["low"] is True
    assert any(sample["mem_available"] == HIGH and not sample["low"] for sample in trip["samples"])
    assert [d["decision"] for d in first.decisions()][:3] == ["start", "phase", "trip"]
    first.stop()

    # a new daemon on the same paths starts tripped, in the phase it was in, and does not act again
    second = start(settings)
    state = second.ask({"command": "status"})["state"]
    assert state["tripped"] == tripped and state["phase"] == "startup" and state["trips"] == 1
    assert second.decisions("start")[-1]["tripped"] == tripped
    time.sleep(3 * GRACE)
    assert len(docker.stops()) == 1

    write_meminfo(meminfo, HIGH)
    answer = second.ask({"command": "clear"})
    assert answer["ok"] is True and answer["state"]["tripped"] is None
    assert not os.path.exists(settings["trip_path"])
    assert second.decisions("clear")[-1]["reason"] == "cleared"
    time.sleep(3 * GRACE)
    assert len(docker.stops()) == 1 and second.state()["tripped"] is None


def test_an_engine_that_does_not_answer(node: Callable, start: Callable, write_meminfo: Callable) -> None:
    settings = node("a")  # no engine on the docker socket
    daemon = start(settings)
    daemon.ask({"command": "phase", "phase": "startup"})
    write_meminfo(pathlib.Path(settings["meminfo_path"]), LOW)
    state = wait_for(lambda: daemon.state()["tripped"] and daemon.state(), GRACE + 2 * INTERVAL + SLACK)
    assert state, "no trip"
    stop = state["tripped"]["stop"]
    assert stop["ok"] is False and stop["action"] == "stop"
    # the container is looked up (by name and label) before it is stopped by ID: no engine, no lookup
    assert stop["error"].startswith("find: ")
    [trip] = daemon.decisions("trip")
    assert trip["stop"] == stop
    time.sleep(3 * GRACE)
    state = daemon.ask({"command": "status"})["state"]
    assert state["tripped"]["stop"] == stop and state["trips"] == 1  # stays tripped; no second attempt
    assert len(daemon.decisions("trip")) == 1


def test_the_engine_says_no_such_container(
    node: Callable, start: Callable, engine: Callable, write_meminfo: Callable
) -> None:
    settings = node("a", container="vllm_dsv41.x")
    docker = engine("a")
    docker.containers = []
    daemon = start(settings)
    daemon.ask({"command": "phase", "phase": "steady"})
    write_meminfo(pathlib.Path(settings["meminfo_path"]), 2 * GIB)
    assert wait_for(lambda: daemon.state()["tripped"], GRACE + 2 * INTERVAL + SLACK)
    # the serving container looked up by name and label, then the window jobs by theirs: nothing to stop
    [(method, url), (method_windows, url_windows)] = docker.calls()
    assert method == "GET" and "vllm_dsv41.x" in urllib.parse.unquote(url)
    assert method_windows == "GET" and "dgxspark.cluster.window" in urllib.parse.unquote(url_windows)
    assert daemon.state()["tripped"]["stop"] == {"action": "stop", "ok": True, "outcome": "no such container"}


def test_unreadable_meminfo_trips_the_daemon(node: Callable, start: Callable, engine: Callable) -> None:
    settings = node("a")
    docker = engine("a")
    daemon = start(settings)
    daemon.ask({"command": "phase", "phase": "steady"})
    os.unlink(settings["meminfo_path"])
    assert wait_for(lambda: docker.requests, GRACE + 2 * INTERVAL + SLACK)
    # the state file is written after the stop, at the end of the sample: wait for it, not only the stop
    assert wait_for(lambda: (daemon.state() or {}).get("tripped"), 2 * INTERVAL + SLACK)
    assert "MemAvailable unreadable" in daemon.state()["tripped"]["reason"]


def test_control_errors(node: Callable, start: Callable) -> None:
    daemon = start(node("a"))
    assert daemon.ask({"command": "phase", "phase": "loading"}) == {
        "ok": False,
        "error": "unknown phase 'loading': one of idle, startup, steady",
    }
    assert daemon.ask({"command": "reboot"}) == {"ok": False, "error": "unknown command 'reboot'"}
    assert daemon.ask({"command": "status"})["state"]["phase"] == "idle"


# ----------------------------------------------------------------------------- 11. peers


def _pair(node: Callable) -> tuple[dict[str, Any], dict[str, Any]]:
    port_a, port_b = free_ports(2)

    def peered(name: str, port: int, peer: str, peer_port: int) -> dict[str, Any]:
        return node(
            name,
            cluster_policy="stop-all",
            peer_key=KEY,
            peer_listen={"address": "127.0.0.1", "port": port},
            peers=[{"host": f"spark-{peer}", "address": "127.0.0.1", "port": peer_port}],
        )

    return peered("a", port_a, "b", port_b), peered("b", port_b, "a", port_a)


def test_a_trip_stops_the_other_ranks(memguard: ModuleType, node: Callable, start: Callable, engine: Callable) -> None:
    settings_a, settings_b = _pair(node)
    docker_a, docker_b = engine("a"), engine("b")
    guard_a, guard_b = start(settings_a), start(settings_b)
    port_b = settings_b["peer_listen"]["port"]

    # a message signed with another key is refused and recorded
    send_raw(port_b, memguard.peer_message("not-the-shared-key-at-all", "mallory", "stop", time.time()))
    rejected = wait_for(lambda: guard_b.decisions("peer-rejected"), SLACK)
    assert [d["reason"] for d in rejected] == ["from 127.0.0.1: bad signature"]
    assert guard_b.ask({"command": "status"})["state"]["tripped"] is None
    assert docker_b.calls() == []
    assert "samples" not in rejected[0]  # anyone can cause a rejection: it carries no sample history

    answer = guard_a.ask({"command": "trip", "reason": "test"})
    answered = time.monotonic()
    assert answer["ok"] is True and answer["decision"] == "trip"
    assert answer["state"]["tripped"]["reason"] == "by hand: test"
    assert docker_a.stops() == [STOP]
    assert wait_for(docker_b.stops, 2.0), "the peer did not stop its container"
    assert docker_b.requests[0][0] - answered <= 2.0
    assert docker_b.stops() == [STOP]

    state_b = wait_for(lambda: guard_b.state()["tripped"] and guard_b.state(), SLACK)
    assert state_b["tripped"]["reason"] == "peer spark-a tripped: by hand: test"
    assert state_b["tripped"]["from_peer"] == "spark-a"
    [trip_a] = guard_a.decisions("trip")
    assert trip_a["peers"] == [{"host": "spark-b", "acknowledged": None}]  # told from the loop, not waited for
    [told] = wait_for(lambda: guard_a.decisions("stop-all"), SLACK)  # spark-b's signed acknowledgement came
    assert (told["ok"], told["acknowledged"], told["not_acknowledged"]) == (True, ["spark-b"], [])
    assert told["reason"] == "every peer acknowledged: spark-b" and "samples" not in told
    kept = json.loads(pathlib.Path(settings_a["trip_path"]).read_text(encoding="utf-8"))
    assert kept["stop_all"]["ok"] is True and kept["stop_all"]["done"] is True
    [trip_b] = guard_b.decisions("trip")
    assert "peers" not in trip_b  # a peer's trip is not passed on: no storm
    time.sleep(3 * GRACE)
    assert len(docker_a.stops()) == 1 and len(docker_b.stops()) == 1
    assert guard_a.decisions("peer-rejected") == []


def test_policy_local_ignores_a_peer(memguard: ModuleType, node: Callable, start: Callable, engine: Callable) -> None:
    port = free_ports(1)[0]
    settings = node(
        "b",
        cluster_policy="local",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": free_ports(1)[0]}],
    )
    docker = engine("b")
    guard = start(settings)
    send_raw(port, memguard.peer_message(KEY, "spark-a", "emergency", time.time()))
    assert wait_for(lambda: guard.decisions("peer-ignored"), SLACK)
    assert guard.decisions("peer-ignored")[0]["reason"] == "peer spark-a tripped (policy local)"
    assert docker.calls() == [] and guard.ask({"command": "status"})["state"]["tripped"] is None


def test_a_hostile_peer_message_does_not_end_the_guard(node: Callable, start: Callable, engine: Callable) -> None:
    """BUG: one line to the peer port, no key needed, ends the daemon's loop: check_peer_message lets
    hmac.compare_digest's TypeError (a non-ASCII "mac") out, and Daemon.handle_peer catches only
    ValueError and OSError. The node is then unguarded (until systemd restarts the daemon)."""
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],  # a planned peer's address
    )
    engine("b")
    guard = start(settings)
    guard.ask({"command": "phase", "phase": "steady"})
    send_raw(port, b'{"type": "peer-trip", "mac": "\\u00e9"}\n')
    wait_for(lambda: guard.decisions("peer-rejected") or guard.error, SLACK)
    assert guard.error is None, f"the daemon's loop ended: {guard.error!r}"
    assert guard.thread.is_alive()
    assert guard.decisions("peer-rejected")[0]["reason"].startswith("from 127.0.0.1: ")


# ----------------------------------------------------------------------------- 12. the command line


def _config_file(tmp_path: pathlib.Path, settings: dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(settings), encoding="utf-8")
    return str(path)


def test_status_prints_the_state(
    memguard: ModuleType,
    node: Callable,
    start: Callable,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = node("a")
    start(settings)
    config = _config_file(tmp_path, settings)
    assert memguard.main(["--config", config, "status"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["ok"] is True
    assert answer["state"]["host"] == "spark-a" and answer["state"]["phase"] == "idle"
    assert answer["state"]["tripped"] is None and answer["state"]["container"] == "vllm_dsv41"

    assert memguard.main(["--config", config, "phase", "steady"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["phase"] == "steady"


def test_status_without_a_daemon(
    memguard: ModuleType, node: Callable, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = node("a")
    config = _config_file(tmp_path, settings)
    assert memguard.main(["--config", config, "status"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"dgxspark-memguard: the guard does not answer on {settings['control_socket']}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "No such file"),
        ("{", "Expecting"),
        ("{}", "phases.startup: missing"),
        ('{"phases": {"startup": {}, "steady": {}}}', "floor_bytes"),
        ("[]", ""),
        ('{"phases": []}', ""),
    ],
    ids=["no-file", "not-json", "no-phases", "empty-phases", "not-an-object", "phases-a-list"],
)
def test_a_bad_configuration_file(
    memguard: ModuleType, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], text: str | None, message: str
) -> None:
    """BUG for not-an-object and phases-a-list: Config calls .get() on whatever JSON it was given, so
    a config file that is valid JSON but not an object (or whose "phases" is not one) raises
    AttributeError through main() instead of the "bad configuration" exit 2."""
    path = tmp_path / "config.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert memguard.main(["--config", str(path), "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dgxspark-memguard: {path}: ") and message in err


def test_check_says_what_the_configuration_sets(
    memguard: ModuleType, node: Callable, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(tmp_path, node("a"))
    assert memguard.main(["--config", config, "check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{config}: OK: ") and "startup 5.00 GiB / 0.05 s / grace 0.2 s" in out
    assert "emergency 1.00 GiB" in out and "container vllm_dsv41" in out
    (tmp_path / "bad.json").write_text('{"phases": {"startup": {}}}', encoding="utf-8")
    assert memguard.main(["--config", str(tmp_path / "bad.json"), "check"]) == 2
    assert "phases.steady: missing" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the wall clock


class SteppedClock:
    """time.time() as NTP/chrony can make it: stepped by ``offset`` seconds when the test says so."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def test_a_wall_clock_step_back_does_not_stall_the_guard(
    node: Callable, start: Callable, engine: Callable, write_meminfo: Callable
) -> None:
    """BUG: Daemon's clock is time.time (its default, what `run` uses) and Daemon.run schedules the next
    sample on it (next_sample = now + interval; select(..., next_sample - clock())). A step back of the
    wall clock by an hour makes the loop wait an hour for its next sample: memory runs out unguarded."""
    settings = node("a")
    docker = engine("a")
    clock = SteppedClock()
    guard = start(settings, clock=clock)
    guard.ask({"command": "phase", "phase": "startup"})
    time.sleep(3 * INTERVAL)
    clock.offset = -3600.0
    write_meminfo(pathlib.Path(settings["meminfo_path"]), LOW)
    assert wait_for(lambda: docker.requests, GRACE + 2 * INTERVAL + SLACK), "no sample since the clock stepped back"


def test_a_wall_clock_step_forward_does_not_kill_a_healthy_load(
    node: Callable, start: Callable, engine: Callable, write_meminfo: Callable
) -> None:
    """BUG: the grace is measured on the wall clock (now - low_since, with now from time.time): a dip of
    a fraction of a second that a 60 s clock step falls into counts as 60 s, over the 45 s startup
    grace, and the healthy load is stopped."""
    settings = node("a", startup={"grace_s": 45})
    meminfo = pathlib.Path(settings["meminfo_path"])
    docker = engine("a")
    clock = SteppedClock()
    guard = start(settings, clock=clock)
    guard.ask({"command": "phase", "phase": "startup"})
    write_meminfo(meminfo, LOW)
    assert wait_for(lambda: guard.state()["low_since"] is not None, SLACK)
    clock.offset = 60.0
    time.sleep(5 * INTERVAL)
    write_meminfo(meminfo, HIGH)  # the dip lasted well under a second
    assert wait_for(lambda: guard.state()["low_since"] is None, SLACK)
    assert docker.calls() == [], guard.state()["tripped"]


def test_a_phase_switch_says_whether_it_changed_anything(node: Callable, start: Callable) -> None:
    """One round trip for the role's entry point: the answer says whether the phase changed, and asking
    for the phase the guard is in already changes and records nothing."""
    guard = start(node("a"))
    first = guard.ask({"command": "phase", "phase": "steady"})
    assert first["ok"] and first["changed"] is True and first["state"]["phase"] == "steady"
    again = guard.ask({"command": "phase", "phase": "steady"})
    assert again["ok"] and again["changed"] is False
    assert again["state"]["phase_since"] == first["state"]["phase_since"]
    assert [d["reason"] for d in guard.decisions("phase")] == ["idle -> steady"]
