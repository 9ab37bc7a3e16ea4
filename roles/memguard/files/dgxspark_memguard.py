#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-memguard: stop the serving container before unified memory runs out and freezes the node.

A DGX Spark whose unified memory runs out often freezes with no OOM kill; only a power cycle brings it
back. This guard samples MemAvailable (and memory pressure, PSI, where the kernel has it) and stops the
serving container, and only that container, when memory stays low for a whole grace period, or at once
below an emergency floor. It never starts or restarts anything. A tripped guard stays tripped (across
its own restarts) until it is cleared.

    dgxspark-memguard run [--config FILE]          the daemon (systemd runs it)
    dgxspark-memguard check                        check the configuration file
    dgxspark-memguard phase idle|startup|steady    switch phase; answers with the state once applied
    dgxspark-memguard clear                        clear a trip
    dgxspark-memguard status                       the state, as JSON
    dgxspark-memguard trip REASON                  trip by hand (tests, an operator's emergency stop)

Phases: ``idle`` (no serving container: samples, never acts), ``startup`` (a cold load: seed 000's
5 GiB floor, 0.25 s interval, 45 s grace, at most 120 s) and ``steady`` (3 GiB, 2 s, 30 s). A sample is
low when MemAvailable is under the phase's floor, when PSI ``full avg10`` is at or over its limit, or
when /proc/meminfo cannot be read (fail-closed). The guard trips when samples stay low for the phase's
grace; below the emergency floor it trips at once. A dip is a dip: switching phase during one keeps its
start and judges it by the new phase's floor and grace. A startup phase that outlasts its wait is
recorded as overdue and continues as steady (a slow load is not killed for being slow).

Phase switches, clears and status requests come over a Unix socket and are applied between two
samples by the one thread that samples, so the answer a client gets is the state after the change:
race-free. With peers configured, a trip is sent to the other ranks' guards over TCP (HMAC-signed with
a shared key) and each of them stops its own rank too, since survivors would hang in NCCL.

Every decision is one JSON line in the decision log, with the samples that led to it; the state
(phase, last sample, trips) is rewritten atomically in the state file on every sample. Standard library
only: it runs on the nodes, with their system Python.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import hmac
import http.client
import json
import math
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

GIB = 1024**3
DEFAULT_CONFIG = "/etc/dgxspark-memguard/config.json"
PHASES = ("idle", "startup", "steady")
HISTORY_MIN = 40  # samples kept for the record of a decision: at least this, and a whole grace period
HISTORY_MAX = 1000
STOP_RETRY_S = 5.0  # a stop that failed (engine not answering) is tried again this often
IDLE_INTERVAL = 2.0


# ----------------------------------------------------------------------------- configuration


class Phase:
    def __init__(self, floor_bytes: int, interval_s: float, grace_s: float) -> None:
        self.floor_bytes = int(floor_bytes)
        self.interval_s = float(interval_s)
        self.grace_s = float(grace_s)

    def as_dict(self) -> dict[str, Any]:
        return {"floor_bytes": self.floor_bytes, "interval_s": self.interval_s, "grace_s": self.grace_s}


class Config:
    """The guard's settings (the memguard role writes them from the profile's host section)."""

    def __init__(self, data: dict[str, Any]) -> None:
        problems: list[str] = []
        if not isinstance(data, dict):
            raise ValueError(f"the configuration must be a JSON object, found {type(data).__name__}")

        def number(key: str, where: dict[str, Any], positive: bool = True, default: Any = None) -> float:
            value = where.get(key, default)
            bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            if bad or (positive and value <= 0) or value < 0:
                problems.append(
                    f"{key}: expected a {'positive' if positive else 'non-negative'} number, found {value!r}"
                )
                return 1.0
            return float(value)

        phases = data.get("phases", {})
        if not isinstance(phases, dict):
            raise ValueError(f"phases: expected an object with startup and steady, found {phases!r}")
        self.phases: dict[str, Phase] = {}
        for name in ("startup", "steady"):
            spec = phases.get(name)
            if not isinstance(spec, dict):
                problems.append(f"phases.{name}: missing")
                continue
            self.phases[name] = Phase(
                int(number("floor_bytes", spec)), number("interval_s", spec), number("grace_s", spec, positive=False)
            )
        self.startup_wait_s = number("startup_wait_s", data, default=120)
        self.emergency_floor_bytes = int(number("emergency_floor_bytes", data, positive=False, default=0))
        psi = data.get("psi_full_avg10_max")
        self.psi_full_avg10_max: float | None = None if psi is None else number("psi_full_avg10_max", data)
        self.container = str(data.get("container", "vllm_dsv41"))
        self.docker_socket = str(data.get("docker_socket", "/var/run/docker.sock"))
        self.stop_timeout_s = number("stop_timeout_s", data, default=5)
        self.host = str(data.get("host") or socket.gethostname())
        self.state_path = str(data.get("state_path", "/run/dgxspark-memguard/state.json"))
        self.trip_path = str(data.get("trip_path", "/var/lib/dgxspark-memguard/tripped.json"))
        self.log_path = str(data.get("log_path", "/var/log/dgxspark-memguard/decisions.jsonl"))
        self.control_socket = str(data.get("control_socket", "/run/dgxspark-memguard/control.sock"))
        self.meminfo_path = str(data.get("meminfo_path", "/proc/meminfo"))
        self.psi_path = str(data.get("psi_path", "/proc/pressure/memory"))
        self.peers = data.get("peers", [])
        if not isinstance(self.peers, list):
            problems.append(f"peers: expected a list, found {self.peers!r}")
            self.peers = []
        for index, peer in enumerate(self.peers):
            if not (
                isinstance(peer, dict)
                and isinstance(peer.get("address"), str)
                and peer["address"]
                and _is_port(peer.get("port"))
            ):
                problems.append(f"peers[{index}]: expected {{host, address, port 1-65535}}, found {peer!r}")
        self.peer_listen = data.get("peer_listen")  # {"address": ..., "port": ...} or None
        if self.peer_listen is not None and not (
            isinstance(self.peer_listen, dict) and _is_port(self.peer_listen.get("port"))
        ):
            problems.append(f"peer_listen: expected {{address, port 1-65535}}, found {self.peer_listen!r}")
        self.peer_key = str(data.get("peer_key", ""))
        self.cluster_policy = str(data.get("cluster_policy", "stop-all"))
        if self.cluster_policy not in ("stop-all", "local"):
            problems.append(f"cluster_policy: expected stop-all or local, found {self.cluster_policy!r}")
        if (self.peers or self.peer_listen) and len(self.peer_key) < 16:
            problems.append("peer_key: peers need a shared key of at least 16 characters")
        for phase in self.phases.values():
            if self.emergency_floor_bytes >= phase.floor_bytes > 0:
                problems.append("emergency_floor_bytes: must be below every phase's floor")
                break
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def load(cls, path: str) -> Config:
        with open(path, encoding="utf-8") as handle:
            return cls(json.load(handle))


def _is_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


# ----------------------------------------------------------------------------- reading the node


def read_mem_available(path: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes; None when the file cannot be read or has no such line."""
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if line.startswith(b"MemAvailable:"):
                    parts = line.split()
                    return int(parts[1]) * (1024 if len(parts) > 2 and parts[2] == b"kB" else 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def read_psi_full_avg10(path: str = "/proc/pressure/memory") -> float | None:
    """PSI ``full avg10`` (percent of the last 10 s all tasks stalled on memory); None without PSI."""
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if line.startswith(b"full "):
                    for field in line.split():
                        if field.startswith(b"avg10="):
                            return float(field[6:])
    except (OSError, ValueError):
        return None
    return None


# ----------------------------------------------------------------------------- acting


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerStopper:
    """Stops one container through the Docker Engine API: ``stop`` (SIGTERM, then SIGKILL after the
    timeout, done by the engine), and ``kill`` when the engine does not answer the stop in time."""

    def __init__(self, socket_path: str, container: str, timeout_s: float) -> None:
        self.socket_path = socket_path
        self.container = container
        self.timeout_s = timeout_s

    def _post(self, url: str, timeout: float) -> int:
        connection = _UnixHTTP(self.socket_path, timeout)
        try:
            connection.request("POST", url)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def stop(self) -> dict[str, Any]:
        name = quote(self.container, safe="")
        started = time.monotonic()
        try:
            status = self._post(f"/containers/{name}/stop?t={int(self.timeout_s)}", self.timeout_s + 10)
        except (OSError, http.client.HTTPException) as error:
            try:
                status = self._post(f"/containers/{name}/kill", 10)
            except (OSError, http.client.HTTPException) as kill_error:
                return {"action": "stop", "ok": False, "error": f"stop: {error}; kill: {kill_error}"}
            return {
                "action": "kill",
                "ok": status in (204, 304, 409),
                "status": status,
                "error": f"stop did not answer: {error}",
                "seconds": round(time.monotonic() - started, 3),
            }
        outcome = {204: "stopped", 304: "already stopped", 404: "no such container"}.get(status, f"HTTP {status}")
        return {
            "action": "stop",
            "ok": status in (204, 304, 404),
            "status": status,
            "outcome": outcome,
            "seconds": round(time.monotonic() - started, 3),
        }


# ----------------------------------------------------------------------------- peers


def sign(key: str, body: dict[str, Any]) -> str:
    payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key.encode(), payload, hashlib.sha256).hexdigest()


def peer_message(key: str, host: str, reason: str, now: float) -> bytes:
    body = {"type": "peer-trip", "from": host, "reason": reason, "time": now}
    return (json.dumps({**body, "mac": sign(key, body)}) + "\n").encode()


def check_peer_message(key: str, raw: bytes, now: float, max_age_s: float = 120) -> dict[str, Any]:
    """The message's body when it is a fresh peer-trip signed with ``key``; raises ValueError otherwise."""
    try:
        message = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    mac = message.pop("mac", "")
    try:
        expected = sign(key, message)
    except (TypeError, ValueError, RecursionError):
        raise ValueError("not a message that can be signed") from None
    if not isinstance(mac, str) or not hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode()):
        raise ValueError("bad signature")
    if message.get("type") != "peer-trip":
        raise ValueError(f"unknown type {message.get('type')!r}")
    sent = message.get("time")
    if isinstance(sent, bool) or not isinstance(sent, (int, float)) or not math.isfinite(sent):
        raise ValueError("stale or undated")
    if abs(now - sent) > max_age_s:
        raise ValueError("stale or undated")
    return message


def send_to_peers(peers: list[dict[str, Any]], data: bytes, timeout: float = 1.0) -> list[dict[str, Any]]:
    results = []
    for peer in peers:
        outcome: dict[str, Any] = {"host": peer.get("host"), "ok": False}
        for _attempt in range(2):
            try:
                with socket.create_connection((peer["address"], int(peer["port"])), timeout=timeout) as sock:
                    sock.sendall(data)
                outcome["ok"] = True
                break
            except OSError as error:
                outcome["error"] = str(error)
        results.append(outcome)
    return results


# ----------------------------------------------------------------------------- the guard


class Guard:
    """The decisions, with no I/O of their own: the daemon feeds samples and commands, tests feed traces."""

    def __init__(
        self,
        config: Config,
        read_memory: Callable[[], int | None],
        read_psi: Callable[[], float | None],
        stop: Callable[[], dict[str, Any]],
        record: Callable[[dict[str, Any]], None],
        notify_peers: Callable[[str, float], list[dict[str, Any]]] = lambda reason, now: [],
        tripped: dict[str, Any] | None = None,
        wall: Callable[[], float] | None = None,
    ) -> None:
        """``now`` given to the methods is a monotonic clock (grace, schedule); ``wall`` (time.time) dates
        the records. Without ``wall``, records carry ``now`` (tests with one fake clock)."""
        self.config = config
        self.read_memory = read_memory
        self.read_psi = read_psi
        self.stop = stop
        self.record = record
        self.notify_peers = notify_peers
        self.phase = "idle"
        self.phase_since = 0.0
        self.startup_overdue = False
        self.low_since: float | None = None
        self.wall = wall
        per_grace = max((p.grace_s / p.interval_s for p in config.phases.values()), default=0)
        self.samples: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=int(min(HISTORY_MAX, max(HISTORY_MIN, per_grace + 8)))
        )
        self.last_stop_attempt = 0.0
        self.tripped = tripped
        self.trips = 1 if tripped else 0
        self.samples_taken = 0

    # ---------------------------------------------------------------- commands
    def interval(self) -> float:
        return IDLE_INTERVAL if self.phase == "idle" else self.config.phases[self.phase].interval_s

    def next_sample_at(self, now: float) -> float:
        """The next sample: one interval on, or sooner when a dip's grace runs out before that, so a trip
        comes within grace + one interval of the dip's start whatever the two are."""
        due = now + self.interval()
        if self.low_since is not None and not self.tripped and self.phase != "idle":
            due = min(due, max(now, self.low_since + self.config.phases[self.phase].grace_s))
        return due

    def set_phase(self, name: str, now: float) -> dict[str, Any]:
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}: one of {', '.join(PHASES)}")
        if name == self.phase:
            return self.state(now)  # already there: nothing changes, nothing to record
        before = self.phase
        self.phase, self.phase_since = name, now
        if name == "startup":
            self.startup_overdue = False  # a new load; an overdue one stays on record until then
        if name == "idle":
            self.low_since = None
        self.record(self._decision("phase", now, f"{before} -> {name}"))
        return self.state(now)

    def clear(self, now: float) -> dict[str, Any]:
        was = self.tripped
        self.tripped = None
        self.low_since = None
        self.record(self._decision("clear", now, "cleared" if was else "was not tripped", tripped=was))
        return self.state(now)

    # ---------------------------------------------------------------- samples
    def sample(self, now: float) -> dict[str, Any] | None:
        """Read once and decide; returns the decision taken, if any."""
        available = self.read_memory()
        psi = self.read_psi() if self.config.psi_full_avg10_max is not None else None
        sample: dict[str, Any] = {"t": round(self._when(now), 3), "mem_available": available, "psi_full_avg10": psi}
        self.samples_taken += 1
        decision = None
        if self.phase == "startup" and now - self.phase_since > self.config.startup_wait_s:
            self.startup_overdue = True
            self.phase, self.phase_since = "steady", now
            decision = self._decision(
                "startup-overdue",
                now,
                f"the startup phase outlasted {self.config.startup_wait_s:g} s: judged as steady from now on",
            )
            self.record(decision)
        low, why = self._is_low(available, psi)
        sample["low"] = low
        self.samples.append(sample)
        if self.tripped:
            self.low_since = None
            stop = self.tripped.get("stop") or {}
            if not stop.get("ok") and now - self.last_stop_attempt >= STOP_RETRY_S:
                return self._retry_stop(now)
            return decision
        if self.phase == "idle":
            self.low_since = None  # nothing to guard: no serving container
            return decision
        if available is not None and available < self.config.emergency_floor_bytes:
            return self.trip(
                f"emergency: MemAvailable {_gib(available)} under {_gib(self.config.emergency_floor_bytes)}", now
            )
        if not low:
            self.low_since = None
            return decision
        if self.low_since is None:
            self.low_since = now
        grace = self.config.phases[self.phase].grace_s
        if now - self.low_since >= grace:
            return self.trip(f"{why} for {now - self.low_since:.2f} s (grace {grace:g} s, phase {self.phase})", now)
        return decision

    def _is_low(self, available: int | None, psi: float | None) -> tuple[bool, str]:
        if available is None:
            return True, f"MemAvailable unreadable ({self.config.meminfo_path}; counted as low)"
        if self.phase == "idle":
            return False, ""
        floor = self.config.phases[self.phase].floor_bytes
        if available < floor:
            return True, f"MemAvailable under the {self.phase} floor {_gib(floor)} (last {_gib(available)})"
        limit = self.config.psi_full_avg10_max
        if limit is not None and psi is not None and psi >= limit:
            return True, f"memory pressure full avg10 {psi:g} % at or over {limit:g} %"
        return False, ""

    def _retry_stop(self, now: float) -> dict[str, Any]:
        """The stop failed (the engine did not answer): try again, never anything but a stop or kill."""
        self.last_stop_attempt = now
        result = self.stop()
        assert self.tripped is not None
        self.tripped["stop"] = result
        decision = self._decision("stop-retry", now, self.tripped["reason"], stop=result)
        self.record(decision)
        return decision

    def trip(self, reason: str, now: float, from_peer: str | None = None) -> dict[str, Any]:
        if self.tripped:
            return self._decision("already-tripped", now, reason)
        self.last_stop_attempt = now
        result = self.stop()
        self.trips += 1
        self.tripped = {"time": self._when(now), "reason": reason, "from_peer": from_peer, "stop": result}
        self.low_since = None
        decision = self._decision("trip", now, reason, stop=result, from_peer=from_peer)
        if from_peer is None and self.config.cluster_policy == "stop-all" and self.config.peers:
            try:  # nothing the peers do may keep the trip from being recorded
                decision["peers"] = self.notify_peers(reason, self._when(now))
            except (OSError, ValueError, KeyError, TypeError) as error:
                decision["peers"] = [{"ok": False, "error": str(error)}]
        self.record(decision)
        return decision

    # ---------------------------------------------------------------- state
    def _when(self, now: float) -> float:
        return self.wall() if self.wall is not None else now

    def _decision(self, kind: str, now: float, reason: str, **extra: Any) -> dict[str, Any]:
        return {
            "decision": kind,
            "time": self._when(now),
            "host": self.config.host,
            "phase": self.phase,
            "reason": reason,
            "samples": list(self.samples),
            **extra,
        }

    def state(self, now: float) -> dict[str, Any]:
        phase = self.config.phases.get(self.phase)
        return {
            "host": self.config.host,
            "phase": self.phase,
            "phase_since": self.phase_since,
            "phase_settings": phase.as_dict() if phase else None,
            "startup_overdue": self.startup_overdue,
            "tripped": self.tripped,
            "trips": self.trips,
            "low_since": self.low_since,
            "last_sample": self.samples[-1] if self.samples else None,
            "samples_taken": self.samples_taken,
            "container": self.config.container,
            "updated": self._when(now),
        }


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


# ----------------------------------------------------------------------------- the daemon


def _write_atomic(path: str, data: dict[str, Any]) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


class Daemon:
    def __init__(
        self, config: Config, clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        """``clock`` (wall time) dates the records and the peers' messages; ``monotonic`` times the grace
        and the samples, so a clock step (NTP, chrony) neither stalls the guard nor stretches a dip."""
        self.config = config
        self.wall = clock
        self.clock = monotonic
        for path in (config.state_path, config.trip_path, config.log_path, config.control_socket):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tripped = None
        try:
            with open(config.trip_path, encoding="utf-8") as handle:
                tripped = json.load(handle)
        except (OSError, ValueError):
            tripped = None
        self.log = open(config.log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - held open
        stopper = DockerStopper(config.docker_socket, config.container, config.stop_timeout_s)
        self.guard = Guard(
            config,
            lambda: read_mem_available(config.meminfo_path),
            lambda: read_psi_full_avg10(config.psi_path),
            stopper.stop,
            self.record,
            self.notify_peers,
            tripped,
            wall=clock,
        )
        self._restore_phase()
        self.running = True
        self.control = self._listen_unix(config.control_socket)
        self.peer_server = self._listen_tcp(config.peer_listen) if config.peer_listen else None

    def _restore_phase(self) -> None:
        """A guard restarted while the node serves (a new configuration, a crash) keeps guarding in the
        phase it was in: the state file lives in /run, so after a reboot it starts idle."""
        try:
            with open(self.config.state_path, encoding="utf-8") as handle:
                phase = json.load(handle).get("phase")
        except (OSError, ValueError, AttributeError):
            return
        if phase in PHASES and phase != "idle":
            self.guard.set_phase(phase, self.clock())

    @staticmethod
    def _listen_unix(path: str) -> socket.socket:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o600)
        server.listen(8)
        return server

    @staticmethod
    def _listen_tcp(listen: dict[str, Any]) -> socket.socket:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((str(listen.get("address", "0.0.0.0")), int(listen["port"])))
        server.listen(16)
        return server

    def record(self, decision: dict[str, Any]) -> None:
        self.log.write(json.dumps(decision) + "\n")
        if decision["decision"] == "trip":
            _write_atomic(self.config.trip_path, self.guard.tripped or {})
        elif decision["decision"] == "clear":
            try:
                os.unlink(self.config.trip_path)
            except FileNotFoundError:
                pass

    def notify_peers(self, reason: str, now: float) -> list[dict[str, Any]]:
        return send_to_peers(self.config.peers, peer_message(self.config.peer_key, self.config.host, reason, now))

    def write_state(self, now: float) -> None:
        _write_atomic(self.config.state_path, {**self.guard.state(now), "pid": os.getpid()})

    def handle_control(self) -> None:
        connection, _address = self.control.accept()
        with connection:
            connection.settimeout(2)
            try:
                request = json.loads(_read_line(connection))
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                command = request.get("command")
                now = self.clock()
                if command == "phase":
                    before = self.guard.phase
                    state = self.guard.set_phase(str(request.get("phase")), now)
                    answer: dict[str, Any] = {"ok": True, "changed": state["phase"] != before, "state": state}
                elif command == "clear":
                    answer = {"ok": True, "state": self.guard.clear(now)}
                elif command == "trip":
                    decision = self.guard.trip(f"by hand: {request.get('reason') or 'no reason given'}", now)
                    answer = {"ok": True, "decision": decision["decision"], "state": self.guard.state(now)}
                elif command == "status":
                    answer = {"ok": True, "state": self.guard.state(now)}
                else:
                    answer = {"ok": False, "error": f"unknown command {command!r}"}
                self.write_state(now)
            except (ValueError, OSError, TypeError, RecursionError) as error:
                answer = {"ok": False, "error": str(error)}
            try:
                connection.sendall((json.dumps(answer) + "\n").encode())
            except OSError:
                pass

    def handle_peer(self) -> None:
        connection, address = self.peer_server.accept()  # type: ignore[union-attr]
        with connection:
            connection.settimeout(2)
            now = self.clock()
            try:
                message = check_peer_message(self.config.peer_key, _read_line(connection).encode(), self.wall())
            except (ValueError, OSError) as error:
                self.record(self.guard._decision("peer-rejected", now, f"from {address[0]}: {error}"))
                return
            if self.config.cluster_policy == "stop-all":
                self.guard.trip(f"peer {message['from']} tripped: {message['reason']}", now, from_peer=message["from"])
            else:
                self.record(self.guard._decision("peer-ignored", now, f"peer {message['from']} tripped (policy local)"))
            self.write_state(now)

    def run(self) -> int:
        try:
            signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
            signal.signal(signal.SIGINT, lambda *_: setattr(self, "running", False))
        except ValueError:
            pass  # not the main thread (tests): stopped by setting running to False
        now = self.clock()
        self.record(self.guard._decision("start", now, f"pid {os.getpid()}", tripped=self.guard.tripped))
        sockets = [s for s in (self.control, self.peer_server) if s is not None]
        next_sample = now
        while self.running:
            timeout = max(0.0, next_sample - self.clock())
            try:
                readable, _w, _x = select.select(sockets, [], [], timeout)
            except InterruptedError:
                continue
            phase_before = self.guard.phase
            for ready in readable:
                if ready is self.control:
                    self.handle_control()
                else:
                    self.handle_peer()
            now = self.clock()
            if self.guard.phase != phase_before:
                next_sample = now  # a new phase samples at once, at its own interval
            if now >= next_sample:
                self.guard.sample(now)
                self.write_state(now)
                next_sample = self.guard.next_sample_at(now)
        self.record(self.guard._decision("exit", self.clock(), "stopped by a signal"))
        self.control.close()
        if self.peer_server is not None:
            self.peer_server.close()
        self.log.close()
        return 0


def _read_line(connection: socket.socket, limit: int = 65536) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode()


# ----------------------------------------------------------------------------- the command line


def ask(socket_path: str, request: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(socket_path)
        client.sendall((json.dumps(request) + "\n").encode())
        return json.loads(_read_line(client))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dgxspark-memguard", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the daemon")
    sub.add_parser("check", help="check the configuration file and say what it sets")
    phase = sub.add_parser("phase", help="switch phase")
    phase.add_argument("phase", choices=PHASES)
    sub.add_parser("clear", help="clear a trip")
    sub.add_parser("status", help="print the state")
    trip = sub.add_parser("trip", help="trip by hand")
    trip.add_argument("reason")
    args = parser.parse_args(argv)
    try:
        config = Config.load(args.config)
    except (OSError, ValueError) as error:
        print(f"dgxspark-memguard: {args.config}: {error}", file=sys.stderr)
        return 2
    if args.command == "run":
        return Daemon(config).run()
    if args.command == "check":
        phases = ", ".join(
            f"{name} {_gib(p.floor_bytes)} / {p.interval_s:g} s / grace {p.grace_s:g} s"
            for name, p in config.phases.items()
        )
        print(
            f"{args.config}: OK: {phases}; emergency {_gib(config.emergency_floor_bytes)}; container {config.container}"
        )
        return 0
    request: dict[str, Any] = {"command": args.command}
    if args.command == "phase":
        request["phase"] = args.phase
    elif args.command == "trip":
        request["reason"] = args.reason
    try:
        answer = ask(config.control_socket, request)
    except OSError as error:
        print(f"dgxspark-memguard: the guard does not answer on {config.control_socket}: {error}", file=sys.stderr)
        return 3
    print(json.dumps(answer, indent=2))
    return 0 if answer.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
