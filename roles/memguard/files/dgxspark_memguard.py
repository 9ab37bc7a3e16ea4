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
recorded as overdue and continues as steady (a slow load is not killed for being slow: seed 000's grace story,
ten false kills on a cold load without one); the state keeps ``startup_overdue`` and ``startup_seconds`` (how
long the last load's startup ran: up to the next phase switch, the boot's own switch to steady for an overdue
one) until the next load, for the boot and its preflight to report.

The serving container is found by its name AND the collection's label (``dgxspark.cluster.rank``) and
stopped by its full ID, so a name Docker could read as another container's ID prefix stops nothing. A window
job's container (``playbooks/window.yml``: the ``dgxspark.cluster.window`` label) that runs is stopped too.

One thread does everything, with the sampling clock in charge: it waits on a selector for the control
socket, the peer listener and their open connections, never longer than the next sample, and each
connection only ever gets what is already there (non-blocking), a size cap and one overall deadline.
No client, however slow, holds up a sample. Phase switches, clears and status requests come over the
Unix socket and are applied between two samples, so the answer a client gets is the state after the
change: race-free.

With peers configured, a trip is sent to the other ranks' guards over TCP (HMAC-signed with a shared
key, dated, with a nonce) and each of them stops its own rank too, since survivors would hang in NCCL.
Each peer acknowledges a trip it takes (a signed ``peer-ack`` bound to the message's nonce) before it acts;
the guard that tripped tries each peer again, with a fresh message, until it acknowledges or a deadline
passes, from its own selector (its samples go on), and the trip keeps which peers did not (``stop_all``).
The listener binds only the address the configuration names (never a wildcard, in any spelling) and talks
only to the planned peers' addresses, with a few connection slots per peer's address, so that one peer
cannot take another's. Every field of a message is checked and bounded before use: a malformed message
is refused, never raised. A replayed message is refused; a signed message dated outside the allowed
clock skew is refused and reported (a record, and in the state file). Rejections and clock-skew records
are rate-limited and carry no samples.

Every decision is one JSON line in the decision log (rotated by size), with the samples that led to it;
the state (phase, last sample, trips, health) is rewritten atomically in the state file on every sample.
A failed write (disk full, EIO) is counted and reported, never fatal. With ``textfile_dir`` set, the same
state is also written, atomically at every sample, in Prometheus' text format for node_exporter's textfile
collector (``dgxspark_memguard.prom``: phase, MemAvailable, floor, grace left, trips, the last decision's and
the last sample's times, peers, samples taken; in startup and steady, whether the rank's container runs, asked
of the engine every few seconds in a thread of its own). Under systemd (``Type=notify``)
the loop sends ``READY=1`` and then ``WATCHDOG=1`` at every sample. Standard library only: it runs on
the nodes, with their system Python.
"""

from __future__ import annotations

import argparse
import collections
import errno
import hashlib
import hmac
import http.client
import ipaddress
import json
import math
import os
import re
import secrets
import selectors
import signal
import socket
import sys
import threading
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
# The label the collection's plan puts on every rank: a container without it is never stopped.
RANK_LABEL = "dgxspark.cluster.rank"
# The label of a window job's container (playbooks/window.yml): the guard stops it too when it trips.
WINDOW_LABEL = "dgxspark.cluster.window"
# Docker's own rule for container names; anything else is refused by the configuration check.
CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,127}")
CONTAINER_ID = re.compile(r"[0-9a-f]{64}")
# Connections: what one may send, for how long, and how many may be open at once. A peer's message is
# one short JSON line; a control request is one shorter still.
PEER_MESSAGE_MAX = 4096
CONTROL_MESSAGE_MAX = 4096
PEER_DEADLINE_S = 2.0
CONTROL_DEADLINE_S = 5.0
MAX_CONNECTIONS = 16  # control connections open at once (local clients: root only)
# Peer connections open at once, per planned peer's address: one peer (or a rank container on its node, which
# runs with --network=host) cannot take another's. A new connection past it closes that address's oldest one.
PEER_SLOTS = 8
PEER_ACCEPTS_PER_WAKE = 64  # connections taken from the listener's queue per wake of the loop
PEER_BACKLOG = 128
PEER_REASON_MAX = 1000  # characters of a trip's reason sent to the peers
PEER_HOST_MAX = 255  # characters of a sender's name
# A message's date, in seconds since the epoch: anything outside is malformed, not a clock skew (10**400
# ended the guard with an OverflowError before it was bounded).
PEER_TIME_MAX = 10.0**10
PEER_FIELDS = {
    "peer-trip": {"type", "from", "reason", "time", "nonce"},
    "peer-ack": {"type", "from", "to", "ack", "time", "outcome"},
}
NONCE = re.compile(r"[0-9a-f]{16,64}")
# A stop-all: each peer is tried (connect, send, its signed acknowledgement) within PEER_DEADLINE_S, again
# STOP_ALL_RETRY_S after a failed try, until it acknowledges or STOP_ALL_DEADLINE_S have passed.
STOP_ALL_RETRY_S = 0.25
STOP_ALL_DEADLINE_S = 30.0
PEER_MAX_SKEW_S = 120.0  # a peer's message dated further than this from our clock is refused (and reported)
NONCES_KEPT = 4096  # the nonces of the signed messages seen in the last PEER_MAX_SKEW_S, at most
PEER_BIND_RETRY_S = 10.0  # a listener that could not bind (the address not up yet) tries again this often
# Rejected connections: at most REJECTIONS_BURST records per REJECTIONS_WINDOW_S; the rest are counted.
REJECTIONS_BURST = 5
REJECTIONS_WINDOW_S = 60.0
# The decision log is rotated past this size, keeping this many older files (.1 the newest).
LOG_MAX_BYTES = 16 * 1024 * 1024
LOG_BACKUPS = 3
WILDCARDS = ("", "*", "0.0.0.0", "::", "[::]")
# The Prometheus textfile (node_exporter's textfile collector reads the *.prom files of its directory; the
# temporary file it is written through does not end in .prom, so a half-written file is never read).
TEXTFILE_NAME = "dgxspark_memguard.prom"
# How often the textfile's dgxspark_rank_container_running asks the engine whether the rank's container runs.
CONTAINER_CHECK_INTERVAL = 5.0
# The guard's own decisions: what "the last decision" of its metrics is. The records anyone on the network can
# cause (peer-rejected, peer-clock-skew) and the listener's are left out, so they cannot make a hung guard look alive.
OWN_DECISIONS = frozenset(
    ("start", "phase", "trip", "stop-all", "startup-overdue", "clear", "stop-retry", "peer-ignored", "exit")
)


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
        if not CONTAINER_NAME.fullmatch(self.container):
            problems.append(
                f"container: expected a Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]+), found {self.container!r}"
            )
        self.docker_socket = str(data.get("docker_socket", "/var/run/docker.sock"))
        self.stop_timeout_s = number("stop_timeout_s", data, default=5)
        self.host = str(data.get("host") or socket.gethostname())
        self.state_path = str(data.get("state_path", "/run/dgxspark-memguard/state.json"))
        self.trip_path = str(data.get("trip_path", "/var/lib/dgxspark-memguard/tripped.json"))
        self.log_path = str(data.get("log_path", "/var/log/dgxspark-memguard/decisions.jsonl"))
        self.log_max_bytes = int(number("log_max_bytes", data, default=LOG_MAX_BYTES))
        self.log_backups = int(number("log_backups", data, default=LOG_BACKUPS))
        self.control_socket = str(data.get("control_socket", "/run/dgxspark-memguard/control.sock"))
        self.meminfo_path = str(data.get("meminfo_path", "/proc/meminfo"))
        self.psi_path = str(data.get("psi_path", "/proc/pressure/memory"))
        # node_exporter's textfile directory; empty: no metrics file
        self.textfile_dir = data.get("textfile_dir") or ""
        if not isinstance(self.textfile_dir, str) or (self.textfile_dir and not os.path.isabs(self.textfile_dir)):
            problems.append(f"textfile_dir: expected an absolute directory or nothing, found {self.textfile_dir!r}")
            self.textfile_dir = ""
        watchdog = data.get("watchdog_s")
        self.watchdog_s: float | None = None if watchdog is None else number("watchdog_s", data)
        self.peer_max_skew_s = number("peer_max_skew_s", data, default=PEER_MAX_SKEW_S)
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
        if self.peer_listen is not None:
            if not (isinstance(self.peer_listen, dict) and _is_port(self.peer_listen.get("port"))):
                problems.append(f"peer_listen: expected {{address, port 1-65535}}, found {self.peer_listen!r}")
            elif not isinstance(self.peer_listen.get("address"), str) or _is_wildcard(self.peer_listen["address"]):
                problems.append(
                    "peer_listen.address: expected this node's own address (fabric or management), "
                    f"never a wildcard, found {self.peer_listen.get('address')!r}"
                )
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


def _is_wildcard(address: str) -> bool:
    """Whether ``address`` would listen on every address of the node, in any spelling: empty, ``*``,
    ``0.0.0.0``, ``::``, ``0:0:0:0:0:0:0:0``, IPv4-mapped ``::ffff:0.0.0.0`` or ``::ffff:0:0``, and the short
    forms the C library reads as 0.0.0.0 (``0``, ``0.0``, ``0x0``, ``000``)."""
    text = address.strip()
    if text in WILDCARDS:
        return True
    bare = text.strip("[]").split("%", 1)[0]
    if not bare or bare == "*":
        return True
    try:
        parsed = ipaddress.ip_address(bare)
    except ValueError:
        try:  # what getaddrinfo would make of it: inet_aton takes 0, 0.0, 0x0, 000...
            return socket.inet_aton(bare) == b"\0\0\0\0"
        except (OSError, ValueError):
            return False  # a name: resolved when the listener binds, and refused there if it is a wildcard
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped.is_unspecified
    return parsed.is_unspecified


def _ip(address: str) -> str:
    """An IP address as one spelling (an IPv4-mapped IPv6 address as its IPv4 address)."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return str(parsed)


def resolve(address: str, port: int = 0) -> list[tuple[int, str]]:
    """(family, IP) for ``address`` (an IP, or a name resolved here), IPv4 first; [] when it does not resolve."""
    try:
        infos = socket.getaddrinfo(address.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found: list[tuple[int, str]] = []
    for family, _type, _proto, _name, sockaddr in sorted(infos, key=lambda info: info[0] != socket.AF_INET):
        if family in (socket.AF_INET, socket.AF_INET6) and (family, sockaddr[0]) not in found:
            found.append((family, str(sockaddr[0])))
    return found


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
    """Stops the serving container through the Docker Engine API.

    The container is looked up first, by its exact name AND the collection's rank label, and then stopped
    by its full ID: ``stop`` (SIGTERM, then SIGKILL after the timeout, done by the engine), and ``kill``
    when the engine does not answer the stop in time. Never by name: a name that is all hex and matches no
    container makes Docker fall back to an ID-prefix match, which could stop another container."""

    def __init__(self, socket_path: str, container: str, timeout_s: float, label: str = RANK_LABEL) -> None:
        self.socket_path = socket_path
        self.container = container
        self.timeout_s = timeout_s
        self.label = label

    def _request(self, method: str, url: str, timeout: float) -> tuple[int, bytes]:
        connection = _UnixHTTP(self.socket_path, timeout)
        try:
            connection.request(method, url)
            response = connection.getresponse()
            return response.status, response.read(4 * 1024 * 1024)
        finally:
            connection.close()

    def _ours(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(the containers named exactly ``container``, those of them with the label)."""
        listed = self._listed({"name": [self.container], "label": [self.label]})
        # the engine's name filter matches parts of names: only the exact name counts, and only with the label
        named = [c for c in listed if f"/{self.container}" in (c.get("Names") or [])]
        return named, [c for c in named if self.label in (c.get("Labels") or {})]

    def find(self) -> tuple[str | None, str]:
        """(the full ID of the container named ``container`` with the label, or None; what was found)."""
        named, ours = self._ours()
        if not ours:
            if named:
                return None, f"container {self.container} has no {self.label} label: left alone"
            return None, "no such container"
        ident = str(ours[0].get("Id", ""))
        if not CONTAINER_ID.fullmatch(ident):
            raise ValueError(f"the engine gave container {self.container} an ID that is not 64 hex digits")
        return ident, "found"

    def running(self) -> bool:
        """Whether the serving container (its exact name, with the label) runs: False when it is missing or in
        any other state. Raises OSError, HTTPException or ValueError when the engine does not answer."""
        _named, ours = self._ours()
        return any(c.get("State") == "running" for c in ours)

    def _listed(self, filters: dict[str, list[str]]) -> list[dict[str, Any]]:
        query = quote(json.dumps(filters), safe="")
        status, body = self._request("GET", f"/containers/json?all=1&filters={query}", 10)
        if status != 200:
            raise ValueError(f"the engine answered HTTP {status} to the list of containers")
        try:
            listed = json.loads(body.decode())
        except (UnicodeDecodeError, ValueError):
            raise ValueError("the engine's list of containers is not JSON") from None
        if not isinstance(listed, list):
            raise ValueError("the engine's list of containers is not a list")
        return [c for c in listed if isinstance(c, dict)]

    def windows(self) -> list[str]:
        """The full IDs of the running window jobs' containers (the ``dgxspark.cluster.window`` label)."""
        listed = self._listed({"label": [WINDOW_LABEL], "status": ["running"]})
        ours = [c for c in listed if WINDOW_LABEL in (c.get("Labels") or {}) and c.get("State") == "running"]
        return [str(c.get("Id", "")) for c in ours if CONTAINER_ID.fullmatch(str(c.get("Id", "")))]

    def _stop_id(self, ident: str, started: float) -> dict[str, Any]:
        """Stop the container ``ident`` (a full ID): ``stop``, and ``kill`` when the stop is not answered."""
        try:
            status, _body = self._request(
                "POST", f"/containers/{ident}/stop?t={int(self.timeout_s)}", self.timeout_s + 10
            )
        except (OSError, http.client.HTTPException) as error:
            try:
                status, _body = self._request("POST", f"/containers/{ident}/kill", 10)
            except (OSError, http.client.HTTPException) as kill_error:
                return {"action": "stop", "ok": False, "id": ident, "error": f"stop: {error}; kill: {kill_error}"}
            return {
                "action": "kill",
                "ok": status in (204, 304, 409),
                "id": ident,
                "status": status,
                "error": f"stop did not answer: {error}",
                "seconds": round(time.monotonic() - started, 3),
            }
        outcome = {204: "stopped", 304: "already stopped", 404: "no such container"}.get(status, f"HTTP {status}")
        return {
            "action": "stop",
            "ok": status in (204, 304, 404),
            "id": ident,
            "status": status,
            "outcome": outcome,
            "seconds": round(time.monotonic() - started, 3),
        }

    def stop(self) -> dict[str, Any]:
        """Stop the serving container, and every window job that runs (``windows``, when there was one)."""
        started = time.monotonic()
        try:
            ident, found = self.find()
        except (OSError, http.client.HTTPException, ValueError) as error:
            result: dict[str, Any] = {"action": "stop", "ok": False, "error": f"find: {error}"}
        else:
            if ident is None:
                # nothing of ours to stop; a container of that name without the label is someone else's
                result = {"action": "stop", "ok": found == "no such container", "outcome": found}
            else:
                result = self._stop_id(ident, started)
        try:
            windows = [self._stop_id(ident, started) for ident in self.windows()]
        except (OSError, http.client.HTTPException, ValueError) as error:
            windows = [{"action": "stop", "ok": False, "error": f"find window jobs: {error}"}]
        if windows:
            result["windows"] = windows
            result["ok"] = bool(result["ok"]) and all(w["ok"] for w in windows)
        return result


class ContainerWatch:
    """Whether the serving container runs, asked of the engine every ``interval_s`` in a thread of its own, so that
    a slow or hung engine never delays a sample (for the textfile's dgxspark_rank_container_running only: the
    guard's decisions never depend on it). ``current`` is None before the first answer, when the engine did not
    answer, or when the last answer is older than three intervals (the engine hangs)."""

    def __init__(self, running: Callable[[], bool], interval_s: float, monotonic: Callable[[], float]) -> None:
        self.running = running
        self.interval_s = interval_s
        self.monotonic = monotonic
        self.latest: tuple[float, bool | None] | None = None  # (when, the answer): replaced whole, never mutated
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="container-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()

    def _loop(self) -> None:
        while not self.done.is_set():
            try:
                answer: bool | None = bool(self.running())
            except (OSError, http.client.HTTPException, ValueError):
                answer = None
            self.latest = (self.monotonic(), answer)
            self.done.wait(self.interval_s)

    def current(self, now: float) -> bool | None:
        latest = self.latest
        if latest is None or now - latest[0] > 3 * self.interval_s:
            return None
        return latest[1]


# ----------------------------------------------------------------------------- peers


class ClockSkew(ValueError):
    """A message signed with the right key, dated outside the allowed skew: a peer's clock is off (or a
    replay of an old message). Refused like any other, and reported: a real trip may be behind it."""

    def __init__(self, message: dict[str, Any], skew_s: float, allowed_s: float) -> None:
        self.message = message
        self.skew_s = skew_s
        where = "behind" if skew_s > 0 else "ahead of"
        super().__init__(
            f"stale or undated: dated {abs(skew_s):.0f} s {where} our clock (allowed {allowed_s:g} s): "
            "clock skew between the nodes, or a replay"
        )


def sign(key: str, body: dict[str, Any]) -> str:
    payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key.encode(), payload, hashlib.sha256).hexdigest()


def peer_message(key: str, host: str, reason: str, now: float, nonce: str | None = None) -> bytes:
    """A signed ``peer-trip`` line, dated ``now`` (wall clock) and carrying a fresh random nonce."""
    body = {
        "type": "peer-trip",
        "from": host,
        "reason": reason[:PEER_REASON_MAX],
        "time": now,
        "nonce": nonce or secrets.token_hex(16),
    }
    return (json.dumps({**body, "mac": sign(key, body)}) + "\n").encode()


def peer_ack(key: str, host: str, to: str, nonce: str, now: float, outcome: str) -> bytes:
    """A signed ``peer-ack`` line: ``host`` took ``to``'s trip with ``nonce`` (``outcome``: what it does)."""
    body = {"type": "peer-ack", "from": host, "to": to, "ack": nonce, "time": now, "outcome": outcome}
    return (json.dumps({**body, "mac": sign(key, body)}) + "\n").encode()


def _signed(key: str, raw: bytes, kind: str) -> dict[str, Any]:
    """The body of a message of type ``kind`` signed with ``key``, every field present, of its type and
    bounded; ValueError otherwise, whatever the bytes are (never another exception)."""
    try:
        message = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    mac = message.pop("mac", "")
    try:
        expected = sign(key, message)
    except (TypeError, ValueError, RecursionError, OverflowError):
        raise ValueError("not a message that can be signed") from None
    if not isinstance(mac, str) or not hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode()):
        raise ValueError("bad signature")
    if message.get("type") != kind:
        raise ValueError(f"unknown type {str(message.get('type'))[:40]!r}")
    if "nonce" in PEER_FIELDS[kind] and "nonce" not in message:
        raise ValueError("no nonce (a guard of an older version?)")
    if set(message) != PEER_FIELDS[kind]:
        raise ValueError(f"malformed {kind}: fields {sorted(message)[:10]}, expected {sorted(PEER_FIELDS[kind])}")
    for name, value in message.items():
        if name == "time":
            continue
        if not isinstance(value, str) or not value:
            raise ValueError(f"malformed {kind}: {name} is not a string")
        if len(value) > (PEER_REASON_MAX if name in ("reason", "outcome") else PEER_HOST_MAX):
            raise ValueError(f"malformed {kind}: {name} is too long")
    sent = message["time"]
    # bounded before any arithmetic: an int of 400 digits overflows a float
    if isinstance(sent, bool) or not isinstance(sent, (int, float)) or not 0 <= sent <= PEER_TIME_MAX:
        raise ValueError(f"malformed {kind}: its date is not a number of seconds since the epoch")
    message["time"] = float(sent)  # nan fails the comparison above, inf is over the bound
    return message


def check_peer_message(
    key: str,
    raw: bytes,
    now: float,
    max_age_s: float = PEER_MAX_SKEW_S,
    seen: dict[str, float] | None = None,
    senders: set[str] | None = None,
) -> dict[str, Any]:
    """The message's body when it is a fresh peer-trip signed with ``key`` (by one of ``senders``, the hosts
    of the address it came from, when given); raises ValueError otherwise (:class:`ClockSkew` for a signed
    message dated more than ``max_age_s`` from ``now``), whatever ``raw`` holds.

    ``seen`` maps the nonces already taken to when they can be forgotten; a nonce in it is a replay. A
    message taken adds its nonce, and so does one refused for its date (until ``max_age_s`` from ``now``),
    so that the same stale message replayed is a replay, not a new clock skew. The checks go from the
    cheapest and least trusting on: signature and shape, sender, replay, date."""
    message = _signed(key, raw, "peer-trip")
    if not NONCE.fullmatch(message["nonce"]):
        raise ValueError("no nonce (a guard of an older version?)")
    if senders is not None and message["from"] not in senders:
        raise ValueError(f"signed as {message['from'][:40]!r}, but sent from the address of {sorted(senders)}")
    nonce, sent = message["nonce"], message["time"]
    if seen is not None:
        for old in [n for n, until in seen.items() if until < now]:
            del seen[old]
        if nonce in seen:
            raise ValueError(f"replayed (nonce {nonce[:8]}… already taken)")
        while len(seen) >= NONCES_KEPT:
            del seen[min(seen, key=seen.__getitem__)]
    if abs(now - sent) > max_age_s:
        if seen is not None:
            seen[nonce] = now + max_age_s
        raise ClockSkew(message, now - sent, max_age_s)
    if seen is not None:
        seen[nonce] = sent + max_age_s
    return message


def check_peer_ack(key: str, raw: bytes, host: str, to: str, nonce: str) -> dict[str, Any]:
    """The acknowledgement's body when ``host`` signed it for ``to``'s message with ``nonce``; ValueError
    otherwise. Bound to the nonce of that one try: it cannot be replayed for another."""
    ack = _signed(key, raw, "peer-ack")
    if (ack["from"], ack["to"], ack["ack"]) != (host, to, nonce):
        raise ValueError("an acknowledgement of another message or from another host")
    return ack


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
        self.record = self._remembering(record)
        self.notify_peers = notify_peers
        self.phase = "idle"
        self.phase_since = 0.0
        self.startup_overdue = False
        # the last load: when its startup phase began, and when the phase switch that ended it came
        self.startup_started: float | None = None
        self.startup_ended: float | None = None
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
        # what status.yml shows: the last decision taken, and the lowest MemAvailable since the last load began
        # (a boot's startup phase) or, before any, since the guard started
        self.last_decision: dict[str, Any] | None = None
        self.mem_available_min: dict[str, Any] | None = None
        self.min_since: float | None = None

    def _remembering(self, record: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        def remember(decision: dict[str, Any]) -> None:
            self.last_decision = {key: decision.get(key) for key in ("decision", "time", "phase", "reason")}
            record(decision)

        return remember

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
        # An overdue load went on as steady by itself: the switch that comes next (the boot's own, to steady,
        # once the rank serves) is when the load ended.
        overdue_loading = self.startup_overdue and self.startup_ended is None
        if name == self.phase and (name == "startup" or not overdue_loading):
            return self.state(now)  # already there: nothing changes, nothing to record
        before = self.phase
        ending = before == "startup" or overdue_loading
        self.phase, self.phase_since = name, now
        extra: dict[str, Any] = {}
        if ending:
            self.startup_ended = now
            extra["startup_seconds"] = self._startup_seconds(now)
        if name == "startup":
            self.startup_overdue = False  # a new load; an overdue one stays on record until then
            self.startup_started, self.startup_ended = now, None
            self.mem_available_min, self.min_since = None, round(self._when(now), 3)  # since this boot
        if name == "idle":
            self.low_since = None
        self.record(self._decision("phase", now, f"{before} -> {name}", **extra))
        return self.state(now)

    def _startup_seconds(self, now: float) -> float | None:
        """How long the last load's startup phase ran (to now while it runs); None before any load."""
        if self.startup_started is None:
            return None
        end = self.startup_ended if self.startup_ended is not None else now
        return round(end - self.startup_started, 2)

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
        if self.min_since is None:
            self.min_since = sample["t"]
        if available is not None and (self.mem_available_min is None or available < self.mem_available_min["bytes"]):
            self.mem_available_min = {"bytes": available, "t": sample["t"], "since": self.min_since}
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

    def _decision(self, kind: str, now: float, reason: str, samples: bool = True, **extra: Any) -> dict[str, Any]:
        """A record; ``samples=False`` leaves the sample history out (records anyone on the network can
        cause, such as a rejected connection, stay small)."""
        decision = {
            "decision": kind,
            "time": self._when(now),
            "host": self.config.host,
            "phase": self.phase,
            "reason": reason,
            "samples": list(self.samples),
            **extra,
        }
        if not samples:
            del decision["samples"]
        return decision

    def state(self, now: float) -> dict[str, Any]:
        phase = self.config.phases.get(self.phase)
        return {
            "host": self.config.host,
            "phase": self.phase,
            "phase_since": self.phase_since,
            "phase_settings": phase.as_dict() if phase else None,
            "startup_overdue": self.startup_overdue,
            "startup_seconds": self._startup_seconds(now),
            "tripped": self.tripped,
            "trips": self.trips,
            "low_since": self.low_since,
            "last_sample": self.samples[-1] if self.samples else None,
            "samples_taken": self.samples_taken,
            "mem_available_min": self.mem_available_min,
            "last_decision": self.last_decision,
            "container": self.config.container,
            "updated": self._when(now),
        }


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


# ----------------------------------------------------------------------------- systemd


def sd_notify(message: str, path: str | None = None) -> bool:
    """Tell systemd ``message`` (``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``...): one datagram to the
    ``$NOTIFY_SOCKET`` of a ``Type=notify`` unit (``@name`` is an abstract socket). Standard library only.
    False, never an exception, when there is no such socket (not run by systemd) or it does not answer."""
    path = os.environ.get("NOTIFY_SOCKET") if path is None else path
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(path)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


def _watchdog_from_environment() -> float | None:
    """The unit's WatchdogSec, as systemd hands it to the service (``WATCHDOG_USEC``)."""
    try:
        return int(os.environ["WATCHDOG_USEC"]) / 1e6
    except (KeyError, ValueError):
        return None


# ----------------------------------------------------------------------------- the daemon


def _write_atomic(path: str, data: dict[str, Any]) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


def _label(value: Any) -> str:
    """A label value as the text format writes it: backslash, double quote and new line escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if isinstance(value, float) else str(int(value))


# Every metric of the textfile: name -> (type, help). docs/monitoring.md lists them; the rules and the dashboard
# (extras/) query them, and a unit test checks that every name they query is here.
METRICS: dict[str, tuple[str, str]] = {
    "dgxspark_memguard_info": ("gauge", "The guard's host and the container it stops (always 1)."),
    "dgxspark_memguard_phase": ("gauge", "1 for the phase the guard is in (idle, startup, steady), 0 for the others."),
    "dgxspark_memguard_tripped": ("gauge", "1 while the guard is tripped (until cleared), else 0."),
    "dgxspark_memguard_tripped_by_peer": ("gauge", "1 while the guard is tripped by a peer's stop-all, else 0."),
    "dgxspark_memguard_trip_timestamp_seconds": ("gauge", "When the trip in force happened (only while tripped)."),
    "dgxspark_memguard_trips_total": ("counter", "Trips since the guard started (1 when it started tripped)."),
    "dgxspark_memguard_startup_overdue": ("gauge", "1 when the last load outlasted the startup phase's wait."),
    "dgxspark_memguard_mem_available_bytes": ("gauge", "MemAvailable at the last sample (NaN: unreadable)."),
    "dgxspark_memguard_psi_full_avg10": ("gauge", "PSI memory full avg10 at the last sample, percent."),
    "dgxspark_memguard_floor_bytes": ("gauge", "The phase's floor (startup and steady only; idle never acts)."),
    "dgxspark_memguard_emergency_floor_bytes": ("gauge", "Below this the guard trips at once, without grace."),
    "dgxspark_memguard_grace_seconds": ("gauge", "The phase's grace (startup and steady only)."),
    "dgxspark_memguard_low_seconds": ("gauge", "How long the samples have been low (under the floor, PSI), 0 if not."),
    "dgxspark_memguard_grace_left_seconds": ("gauge", "Grace left before a trip (startup and steady only)."),
    "dgxspark_memguard_last_decision_timestamp_seconds": ("gauge", "When the guard last decided (start, phase, trip)."),
    "dgxspark_memguard_last_sample_timestamp_seconds": ("gauge", "When the guard last sampled (it is alive)."),
    "dgxspark_memguard_stale_after_seconds": ("gauge", "A last sample older than this is a guard down or hung."),
    "dgxspark_memguard_samples_total": ("counter", "Samples taken since the guard started."),
    "dgxspark_memguard_peers_configured": ("gauge", "The other ranks' guards it tells of a trip (stop-all)."),
    "dgxspark_memguard_peers_resolved": ("gauge", "Of those, the ones whose address resolved (a trip can reach)."),
    "dgxspark_memguard_peer_listener_up": ("gauge", "1 when it listens for its peers' trips (stop-all only)."),
    "dgxspark_memguard_stop_all_unacknowledged": ("gauge", "Peers that did not acknowledge the trip in force."),
    "dgxspark_memguard_peer_rejections_total": ("counter", "Peer connections and messages refused."),
    "dgxspark_memguard_peer_clock_skew_total": ("counter", "Signed peer messages refused for their date."),
    "dgxspark_memguard_health_ok": ("gauge", "1 when the guard has no problem to report (its state's health)."),
    "dgxspark_memguard_write_errors_total": ("counter", "Writes that failed (state, trip file, log, textfile)."),
    "dgxspark_rank_container_running": (
        "gauge",
        "1 when the rank's container runs, 0 when not; only while the guard expects one (startup, steady).",
    ),
}


def prometheus_text(
    state: dict[str, Any],
    config: Config,
    now: float,
    last_decision: float | None,
    resolved: int | None = None,
    container_running: bool | None = None,
) -> str:
    """The guard's ``state`` (Daemon.state at ``now``, monotonic) in Prometheus' text format (version 0.0.4);
    ``last_decision`` is when it last decided, ``resolved`` how many of its peers' addresses resolved (all, if None),
    ``container_running`` whether the rank's container runs (ContainerWatch; None: not known).

    dgxspark_rank_container_running is written only in startup and steady, the phases in which a rank container
    should run (the boot arms startup before it starts the rank; stop.yml and a boot's undo switch to idle after
    they removed it): a cluster stopped on purpose has no such series, so nothing alerts on it. A tripped guard
    stopped its container itself: 0 then, beside dgxspark_memguard_tripped 1.

    Series that do not apply are left out rather than written as 0: no floor, grace or grace left in idle (the
    guard never acts there), no PSI without PSI, no listener under the policy local. Times are Unix timestamps
    (wall clock) so that a stopped guard's metrics age (``time() - ...``) rather than freeze."""
    samples: dict[str, list[tuple[str, Any]]] = {name: [] for name in METRICS}

    def add(name: str, value: Any, **labels: Any) -> None:
        text = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
        samples[name].append((f"{{{text}}}" if text else "", value))

    add("dgxspark_memguard_info", 1, host=config.host, container=config.container)
    for phase in PHASES:
        add("dgxspark_memguard_phase", int(state["phase"] == phase), phase=phase)
    tripped = state.get("tripped") or None
    add("dgxspark_memguard_tripped", int(bool(tripped)))
    add("dgxspark_memguard_tripped_by_peer", int(bool(tripped and tripped.get("from_peer"))))
    if tripped and isinstance(tripped.get("time"), (int, float)):
        add("dgxspark_memguard_trip_timestamp_seconds", float(tripped["time"]))
    add("dgxspark_memguard_trips_total", state["trips"])
    add("dgxspark_memguard_startup_overdue", int(bool(state.get("startup_overdue"))))
    last = state.get("last_sample") or {}
    if last:
        available = last.get("mem_available")
        add("dgxspark_memguard_mem_available_bytes", None if available is None else int(available))
        if last.get("psi_full_avg10") is not None:
            add("dgxspark_memguard_psi_full_avg10", float(last["psi_full_avg10"]))
        add("dgxspark_memguard_last_sample_timestamp_seconds", float(last["t"]))
    add("dgxspark_memguard_emergency_floor_bytes", config.emergency_floor_bytes)
    low = 0.0 if state.get("low_since") is None else max(0.0, now - float(state["low_since"]))
    add("dgxspark_memguard_low_seconds", round(low, 3))
    settings = state.get("phase_settings")
    if settings:
        add("dgxspark_memguard_floor_bytes", int(settings["floor_bytes"]))
        add("dgxspark_memguard_grace_seconds", float(settings["grace_s"]))
        add("dgxspark_memguard_grace_left_seconds", round(max(0.0, float(settings["grace_s"]) - low), 3))
    if last_decision is not None:
        add("dgxspark_memguard_last_decision_timestamp_seconds", float(last_decision))
    health = state.get("health") or {}
    add("dgxspark_memguard_stale_after_seconds", float(health.get("stale_after_s") or 30.0))
    add("dgxspark_memguard_samples_total", state.get("samples_taken", 0))
    peers = state.get("peers") or {}
    add("dgxspark_memguard_peers_configured", len(config.peers))
    add("dgxspark_memguard_peers_resolved", len(config.peers) if resolved is None else resolved)
    if peers.get("listen") is not None:
        add("dgxspark_memguard_peer_listener_up", int(bool(peers["listen"].get("listening"))))
    stop_all = (tripped or {}).get("stop_all") or {}
    add("dgxspark_memguard_stop_all_unacknowledged", len(stop_all.get("not_acknowledged") or []))
    add("dgxspark_memguard_peer_rejections_total", (peers.get("rejections") or {}).get("total", 0))
    add("dgxspark_memguard_peer_clock_skew_total", peers.get("clock_skew_total", 0))
    add("dgxspark_memguard_health_ok", int(bool(health.get("ok", True))))
    add("dgxspark_memguard_write_errors_total", health.get("write_errors", 0))
    if state["phase"] != "idle" and container_running is not None:
        add("dgxspark_rank_container_running", int(container_running))
    lines = []
    for name, (kind, help_text) in METRICS.items():
        if not samples[name]:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{labels} {_value(value)}" for labels, value in samples[name]]
    return "\n".join(lines) + "\n"


def _write_text_atomic(path: str, text: str) -> None:
    """``text`` into ``path`` through a temporary file in the same directory, renamed over it (0644: the textfile
    collector runs as its own user)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(text)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


class RateLimit:
    """At most ``burst`` events per ``window_s`` seconds; the ones refused are counted in ``suppressed``."""

    def __init__(self, burst: int, window_s: float) -> None:
        self.burst = burst
        self.window_s = window_s
        self.times: collections.deque[float] = collections.deque()
        self.suppressed = 0

    def allow(self, now: float) -> bool:
        while self.times and now - self.times[0] >= self.window_s:
            self.times.popleft()
        if len(self.times) < self.burst:
            self.times.append(now)
            return True
        self.suppressed += 1
        return False


class _Connection:
    """An open client connection: what it sent so far, its size cap and its one overall deadline."""

    def __init__(self, sock: socket.socket, kind: str, address: str, deadline: float, limit: int) -> None:
        self.sock = sock
        self.kind = kind  # "control" or "peer"
        self.address = address
        self.deadline = deadline
        self.limit = limit
        self.data = bytearray()


class _Try:
    """One try of a stop-all at one peer: a non-blocking connection, what is left to send, what came back."""

    def __init__(self, host: str, sock: socket.socket, nonce: str, data: bytes, deadline: float) -> None:
        self.host = host
        self.sock = sock
        self.nonce = nonce
        self.data = data
        self.deadline = deadline
        self.received = bytearray()


class StopAll:
    """A trip told to every peer: each is tried until it acknowledges (a signed ``peer-ack`` bound to the try's
    nonce) or the deadline passes. It never blocks the loop: the tries are sockets in the daemon's selector,
    so the guard samples, and takes its peers' own trips, while it waits for their answers."""

    def __init__(self, reason: str, targets: dict[str, tuple[int, str, int] | None], now: float) -> None:
        self.reason = reason
        self.started = now
        self.deadline = now + STOP_ALL_DEADLINE_S
        self.targets = targets  # host -> (family, IP, port); None: it did not resolve
        self.pending = set(targets)
        self.acknowledged: dict[str, float] = {}  # host -> seconds after the trip
        self.errors: dict[str, str] = dict.fromkeys(targets, "not tried yet")
        self.tries: dict[str, int] = dict.fromkeys(targets, 0)
        self.next_try: dict[str, float] = dict.fromkeys(targets, now)
        self.open: dict[str, _Try] = {}
        self.trip: dict[str, Any] | None = None  # the trip it tells (its record gets the outcome)

    def wake(self) -> float:
        return min(
            [
                self.deadline,
                *(t.deadline for t in self.open.values()),
                *(self.next_try[h] for h in self.pending if h not in self.open),
            ]
        )

    def outcome(self, done: bool) -> dict[str, Any]:
        missing = sorted(self.pending)
        return {
            "done": done,
            "ok": done and not missing,
            "acknowledged": sorted(self.acknowledged),
            "not_acknowledged": [{"host": h, "error": self.errors.get(h), "tries": self.tries[h]} for h in missing],
            "seconds": {h: self.acknowledged[h] for h in sorted(self.acknowledged)},
            "deadline_s": STOP_ALL_DEADLINE_S,
        }


class Daemon:
    def __init__(
        self, config: Config, clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        """``clock`` (wall time) dates the records and the peers' messages; ``monotonic`` times the grace,
        the samples and the connections' deadlines, so a clock step (NTP, chrony) neither stalls the guard
        nor stretches a dip."""
        self.config = config
        self.wall = clock
        self.clock = monotonic
        self.started = clock()
        self.notify_socket = os.environ.get("NOTIFY_SOCKET")
        self.watchdog_s = config.watchdog_s or _watchdog_from_environment()
        self.write_errors = 0
        self.write_problems: dict[str, str] = {}  # what could not be written -> why, until a write succeeds
        for path in (config.state_path, config.trip_path, config.log_path, config.control_socket):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.last_decision: float | None = None  # when the guard last decided (OWN_DECISIONS), wall clock
        self.textfile = os.path.join(config.textfile_dir, TEXTFILE_NAME) if config.textfile_dir else None
        if config.textfile_dir:
            try:  # node_exporter's package makes it; a guard installed first makes it, readable by all
                os.makedirs(config.textfile_dir, mode=0o755, exist_ok=True)
            except OSError as error:
                self._write_failed("metrics textfile", error)
        tripped = None
        try:
            with open(config.trip_path, encoding="utf-8") as handle:
                tripped = json.load(handle)
        except (OSError, ValueError):
            tripped = None
        if not isinstance(tripped, dict):
            tripped = None
        self.log: Any = None
        self.log_size = 0
        try:
            self._open_log()
        except OSError as error:
            self._write_failed("decision log", error)
        stopper = DockerStopper(config.docker_socket, config.container, config.stop_timeout_s)
        # whether the rank's container runs, for the textfile only (started by run())
        self.container_watch = (
            ContainerWatch(stopper.running, CONTAINER_CHECK_INTERVAL, monotonic) if self.textfile else None
        )
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
        self.nonces: dict[str, float] = {}  # the peers' nonces taken, until they would be refused as stale
        self.rejections: dict[str, Any] = {"total": 0, "last": None}
        self.rejection_limit = RateLimit(REJECTIONS_BURST, REJECTIONS_WINDOW_S)
        self.clock_skew: dict[str, Any] | None = None
        self.clock_skew_total = 0  # signed messages refused for their date, from planned peers' addresses
        self.skew_limit = RateLimit(REJECTIONS_BURST, REJECTIONS_WINDOW_S)
        self.errors_handling = 0  # messages that raised in their handling: refused, counted (never seen in tests)
        self.stop_all: StopAll | None = None
        self.targets: dict[str, tuple[int, str, int] | None] = {}  # a peer's host -> where its guard listens
        self._restore()
        self.running = True
        self.selector = selectors.DefaultSelector()
        self.connections: dict[socket.socket, _Connection] = {}
        self.control = self._listen_unix(config.control_socket)
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        self.peer_server: socket.socket | None = None
        self.listen_ip: str | None = None
        self.listen_state: dict[str, Any] | None = None
        self.allowed: dict[str, set[str]] = {}  # a planned peer's IP -> its host names
        self.unresolved: list[str] = []
        self.listen_address: tuple[int, str] | None = None  # (family, IP) the listener binds
        self.next_peer_retry = 0.0
        self.bind_reported = False
        self._resolve_peers()
        if config.peer_listen:
            self._bind_peer(self.clock())

    # ---------------------------------------------------------------- set-up
    def _restore(self) -> None:
        """A guard restarted while the node serves (a new configuration, a crash) keeps guarding in the
        phase it was in, and still refuses the peers' messages it took: the state file lives in /run, so
        after a reboot it starts idle."""
        try:
            with open(self.config.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            return
        if not isinstance(state, dict):
            return
        nonces = (state.get("peers") or {}).get("nonces") if isinstance(state.get("peers"), dict) else None
        if isinstance(nonces, dict):
            self.nonces = {
                str(n): float(t)
                for n, t in nonces.items()
                if isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= PEER_TIME_MAX
            }
        phase = state.get("phase")
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
        server.setblocking(False)
        return server

    def _resolve_peers(self) -> None:
        """The planned peers' addresses (the only ones a connection is taken from) and the listener's, resolved
        once, at start (names may wait on DNS: never in the loop). What does not resolve is reported in the
        state; a restart of the guard resolves again."""
        for peer in self.config.peers:
            found = resolve(str(peer["address"]))
            if not found:
                self.unresolved.append(f"{peer.get('host')} ({peer['address']})")
            host = str(peer.get("host") or peer["address"])
            self.targets[host] = (found[0][0], found[0][1], int(peer["port"])) if found else None
            for _family, ip in found:
                self.allowed.setdefault(_ip(ip), set()).add(host)
        if self.config.peer_listen:
            address = str(self.config.peer_listen["address"])
            found = resolve(address)
            self.listen_address = found[0] if found else None
            self.listen_state = {
                "address": address,
                "ip": found[0][1] if found else None,
                "port": int(self.config.peer_listen["port"]),
                "listening": False,
                "error": None if found else f"{address} does not resolve",
            }

    def _bind_peer(self, now: float) -> None:
        """Bind the listener to the configured address (that one only, never a wildcard). A failure (the
        address not up yet, the port taken) is reported, in the state and once in the log, and tried again
        every PEER_BIND_RETRY_S; the guard keeps guarding its own node meanwhile."""
        self.next_peer_retry = now + PEER_BIND_RETRY_S
        assert self.listen_state is not None
        before = self.listen_state["error"]
        port = self.listen_state["port"]
        if self.listen_address is None:
            error = self.listen_state["error"]
        elif _is_wildcard(self.listen_address[1]):
            error = f"{self.listen_state['address']} is a wildcard: refused, the guard listens on one address only"
        else:
            family, ip = self.listen_address
            server = socket.socket(family, socket.SOCK_STREAM)
            try:
                server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                server.bind((ip, port))
                server.listen(PEER_BACKLOG)
                server.setblocking(False)
            except OSError as bind_error:
                server.close()
                error = f"cannot listen on {ip} port {port}: {bind_error}"
            else:
                error = None
                self.peer_server, self.listen_ip = server, ip
                self.selector.register(server, selectors.EVENT_READ, "peer")
        self.listen_state.update(listening=error is None, error=error)
        if error is not None and (error != before or not self.bind_reported):
            self.bind_reported = True
            self.record(self.guard._decision("peer-listen-failed", now, error, samples=False))
        elif error is None and self.bind_reported:
            self.record(self.guard._decision("peer-listen", now, f"listening on {ip} port {port}", samples=False))

    # ---------------------------------------------------------------- writing
    def _open_log(self) -> None:
        self.log = open(self.config.log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - held open
        self.log_size = os.fstat(self.log.fileno()).st_size

    def _close_log(self) -> None:
        if self.log is not None:
            try:
                self.log.close()
            except OSError:
                pass
        self.log = None

    def _rotate_log(self) -> None:
        """decisions.jsonl -> .1 -> .2 ... (the oldest beyond log_backups is overwritten), then a new one."""
        self._close_log()
        path = self.config.log_path
        for index in range(self.config.log_backups - 1, 0, -1):
            if os.path.exists(f"{path}.{index}"):
                os.replace(f"{path}.{index}", f"{path}.{index + 1}")
        os.replace(path, f"{path}.1")
        self._open_log()

    def _write_failed(self, what: str, error: OSError) -> None:
        """A write that failed (disk full, EIO) is counted and reported in the state, never fatal."""
        self.write_errors += 1
        self.write_problems[what] = f"{error.strerror or error}" + (f" ({error.filename})" if error.filename else "")

    def record(self, decision: dict[str, Any]) -> None:
        if decision.get("decision") in OWN_DECISIONS:
            self.last_decision = decision.get("time")
        line = json.dumps(decision) + "\n"
        try:
            if self.log is None:
                self._open_log()
            if self.log_size > 0 and self.log_size + len(line) > self.config.log_max_bytes:
                self._rotate_log()
            self.log.write(line)
            self.log_size += len(line.encode())
            self.write_problems.pop("decision log", None)
        except OSError as error:
            self._write_failed("decision log", error)
            self._close_log()  # opened again at the next record
        try:
            if decision["decision"] == "trip":
                _write_atomic(self.config.trip_path, self.guard.tripped or {})
                self.write_problems.pop("trip file", None)
            elif decision["decision"] == "clear":
                try:
                    os.unlink(self.config.trip_path)
                except FileNotFoundError:
                    pass
        except OSError as error:
            self._write_failed("trip file", error)

    def notify_peers(self, reason: str, now: float) -> list[dict[str, Any]]:
        """Start the stop-all of the trip that is being recorded (``now`` is its wall-clock date): every peer
        is tried from the next turn of the loop until it acknowledges; the trip keeps the outcome
        (``stop_all``), recorded again when every peer acknowledged or the deadline passed."""
        if self.stop_all is not None:
            self._finish_stop_all(self.clock(), "a new trip")
        self.stop_all = StopAll(reason, dict(self.targets), self.clock())
        self.stop_all.trip = self.guard.tripped
        if self.guard.tripped is not None:
            self.guard.tripped["stop_all"] = self.stop_all.outcome(done=False)
        return [{"host": host, "acknowledged": None} for host in sorted(self.targets)]

    # ---------------------------------------------------------------- the stop-all's tries
    def _stop_all_step(self, now: float) -> None:
        """Close the tries past their deadline, start the ones due, and finish at the deadline or once every
        peer acknowledged."""
        sa = self.stop_all
        if sa is None:
            return
        for attempt in [t for t in sa.open.values() if t.deadline <= now]:
            self._try_failed(attempt, now, f"no acknowledgement within {PEER_DEADLINE_S:g} s")
        if not sa.pending or now >= sa.deadline:
            self._finish_stop_all(now, "deadline" if sa.pending else "acknowledged")
            return
        for host in sorted(sa.pending - set(sa.open)):
            if sa.next_try[host] <= now:
                self._start_try(sa, host, now)

    def _start_try(self, sa: StopAll, host: str, now: float) -> None:
        target = sa.targets[host]
        sa.tries[host] += 1
        if target is None:
            sa.errors[host] = "its address does not resolve"
            sa.next_try[host] = sa.deadline
            return
        family, ip, port = target
        nonce = secrets.token_hex(16)  # a fresh message each try: a peer that took the last one refuses a replay
        data = peer_message(self.config.peer_key, self.config.host, sa.reason, self.wall(), nonce)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if self.peer_server is not None and self.listen_ip and self.listen_address[0] == family:
                sock.bind((self.listen_ip, 0))  # the address the peers accept us from
            code = sock.connect_ex((ip, port))
            if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
                raise OSError(code, os.strerror(code))
        except OSError as error:
            sock.close()
            sa.errors[host] = f"connect: {error.strerror or error}"
            sa.next_try[host] = now + STOP_ALL_RETRY_S
            return
        attempt = _Try(host, sock, nonce, data, now + PEER_DEADLINE_S)
        sa.open[host] = attempt
        self.selector.register(sock, selectors.EVENT_WRITE, attempt)

    def _try_ready(self, attempt: _Try, now: float) -> None:
        """A try's socket is ready: send what is left of the message, then read the acknowledgement."""
        sa = self.stop_all
        if sa is None or sa.open.get(attempt.host) is not attempt:
            return
        try:
            if attempt.data:
                code = attempt.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code))
                sent = attempt.sock.send(attempt.data)
                attempt.data = attempt.data[sent:]
                if not attempt.data:
                    self.selector.modify(attempt.sock, selectors.EVENT_READ, attempt)
                return
            chunk = attempt.sock.recv(PEER_MESSAGE_MAX + 1 - len(attempt.received))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._try_failed(attempt, now, f"{error.strerror or error}")
            return
        attempt.received += chunk
        if b"\n" not in attempt.received and chunk and len(attempt.received) <= PEER_MESSAGE_MAX:
            return
        line = bytes(attempt.received.split(b"\n", 1)[0])
        try:
            check_peer_ack(self.config.peer_key, line, attempt.host, self.config.host, attempt.nonce)
        except ValueError as error:
            self._try_failed(attempt, now, f"no acknowledgement: {'closed' if not line else error}")
            return
        self._close_try(attempt)
        sa.pending.discard(attempt.host)
        sa.errors.pop(attempt.host, None)
        sa.acknowledged[attempt.host] = round(now - sa.started, 3)
        if not sa.pending:
            self._finish_stop_all(now, "acknowledged")

    def _close_try(self, attempt: _Try) -> None:
        if self.stop_all is not None and self.stop_all.open.get(attempt.host) is attempt:
            del self.stop_all.open[attempt.host]
        try:
            self.selector.unregister(attempt.sock)
        except (KeyError, ValueError):
            pass
        attempt.sock.close()

    def _try_failed(self, attempt: _Try, now: float, error: str) -> None:
        self._close_try(attempt)
        if self.stop_all is not None:
            self.stop_all.errors[attempt.host] = error
            self.stop_all.next_try[attempt.host] = now + STOP_ALL_RETRY_S

    def _finish_stop_all(self, now: float, why: str) -> None:
        """Every peer acknowledged, or the deadline passed (or a new trip came): the outcome goes into the
        trip it belongs to (kept in the trip file) and into a ``stop-all`` record."""
        sa = self.stop_all
        if sa is None:
            return
        for attempt in list(sa.open.values()):
            self._close_try(attempt)
        self.stop_all = None
        outcome = sa.outcome(done=True)
        if self.guard.tripped is not None and self.guard.tripped is sa.trip:
            self.guard.tripped["stop_all"] = outcome
            try:
                _write_atomic(self.config.trip_path, self.guard.tripped)
                self.write_problems.pop("trip file", None)
            except OSError as error:
                self._write_failed("trip file", error)
        if outcome["ok"]:
            reason = f"every peer acknowledged: {', '.join(outcome['acknowledged'])}"
        else:
            missing = ", ".join(f"{m['host']} ({m['error']})" for m in outcome["not_acknowledged"])
            reason = f"not acknowledged ({why}): {missing}"
        self.record(self.guard._decision("stop-all", now, reason, samples=False, trip=sa.reason, **outcome))
        self.write_state(now)

    def health(self) -> dict[str, Any]:
        """What a preflight needs to tell a guard that works from one that does not: the problems it has
        now (listener, peers, writes, a peer's clock), its watchdog and when its state is stale."""
        problems = []
        if self.listen_state and not self.listen_state["listening"]:
            problems.append(f"peer listener: {self.listen_state['error']}")
        if self.unresolved:
            problems.append(f"peers that do not resolve (their trips are refused): {', '.join(self.unresolved)}")
        problems += [f"writing the {what}: {why}" for what, why in sorted(self.write_problems.items())]
        if self.clock_skew:
            problems.append(
                f"clock skew with {self.clock_skew['from']}: {self.clock_skew['skew_s']:+.0f} s "
                f"(allowed {self.clock_skew['allowed_s']:g} s): its trip was refused"
            )
        intervals = [IDLE_INTERVAL] + [p.interval_s for p in self.config.phases.values()]
        return {
            "ok": not problems,
            "problems": problems,
            "write_errors": self.write_errors,
            "started": self.started,
            "watchdog_s": self.watchdog_s,
            "stale_after_s": max(self.watchdog_s or 30.0, 3 * max(intervals)),
            "systemd_notify": bool(self.notify_socket),
        }

    def state(self, now: float) -> dict[str, Any]:
        return {
            **self.guard.state(now),
            "peers": {
                "listen": self.listen_state,
                "allowed": sorted(self.allowed),
                "rejections": {**self.rejections, "suppressed": self.rejection_limit.suppressed},
                "clock_skew": self.clock_skew,
                "clock_skew_total": self.clock_skew_total,
                "errors_handling": self.errors_handling,
                "stop_all": None if self.stop_all is None else self.stop_all.outcome(done=False),
                "nonces": dict(self.nonces),
            },
            "health": self.health(),
            "pid": os.getpid(),
        }

    def write_state(self, now: float) -> None:
        # a state that is written says no more that it could not be written
        self.write_problems.pop("state file", None)
        state = self.state(now)
        try:
            _write_atomic(self.config.state_path, state)
        except OSError as error:
            self._write_failed("state file", error)
        if self.textfile is not None:
            self.write_textfile(state, now)

    def write_textfile(self, state: dict[str, Any], now: float) -> None:
        """The state in Prometheus' text format, for node_exporter's textfile collector (atomically)."""
        try:
            assert self.textfile is not None
            resolved = sum(1 for target in self.targets.values() if target is not None)
            running = None if self.container_watch is None else self.container_watch.current(now)
            text = prometheus_text(state, self.config, now, self.last_decision, resolved, running)
            _write_text_atomic(self.textfile, text)
            self.write_problems.pop("metrics textfile", None)
        except OSError as error:
            self._write_failed("metrics textfile", error)

    def notify(self, message: str) -> None:
        if self.notify_socket:
            sd_notify(message, self.notify_socket)

    # ---------------------------------------------------------------- connections
    def _accept(self, server: socket.socket, kind: str, now: float) -> None:
        """Take the connections waiting (up to PEER_ACCEPTS_PER_WAKE), each read at once for what it sent."""
        for _index in range(PEER_ACCEPTS_PER_WAKE if kind == "peer" else 1):
            try:
                sock, address = server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of file descriptors, ...: reported, the guard goes on
                self._write_failed("connections (accept)", error)
                return
            connection = self._take(sock, kind, "local" if kind == "control" else _ip(str(address[0])), now)
            if connection is not None:
                self._read(connection, now)  # a peer's message is there already: read before a flood can evict it

    def _take(self, sock: socket.socket, kind: str, where: str, now: float) -> _Connection | None:
        """Open connections are counted per planned peer's address (PEER_SLOTS each: a new one past it closes
        that address's oldest), so a flood from one node never takes another's; control ones all together."""
        if kind == "peer" and where not in self.allowed:
            sock.close()
            self._reject(now, where, "not a planned peer's address")
            return None
        if kind == "peer":
            mine = [c for c in self.connections.values() if c.kind == "peer" and c.address == where]
            if len(mine) >= PEER_SLOTS:
                self._close(min(mine, key=lambda c: c.deadline))
                self._reject(now, where, f"{PEER_SLOTS} connections open from this peer's address: its oldest closed")
        elif sum(1 for c in self.connections.values() if c.kind == kind) >= MAX_CONNECTIONS:
            sock.close()
            return None
        sock.setblocking(False)
        deadline, limit = (
            (now + CONTROL_DEADLINE_S, CONTROL_MESSAGE_MAX)
            if kind == "control"
            else (now + PEER_DEADLINE_S, PEER_MESSAGE_MAX)
        )
        connection = _Connection(sock, kind, where, deadline, limit)
        self.connections[sock] = connection
        self.selector.register(sock, selectors.EVENT_READ, "connection")
        return connection

    def _close(self, connection: _Connection) -> None:
        self.connections.pop(connection.sock, None)
        try:
            self.selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        connection.sock.close()

    def _read(self, connection: _Connection, now: float) -> None:
        """Take what the connection has sent (never waiting for more); act once a line is complete."""
        try:
            chunk = connection.sock.recv(connection.limit + 1 - len(connection.data))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(connection)
            return
        connection.data += chunk
        end = connection.data.find(b"\n")
        if end < 0 and chunk and len(connection.data) <= connection.limit:
            return  # more to come, within its deadline
        line = bytes(connection.data[:end] if end >= 0 else connection.data)
        if len(line) > connection.limit:
            self._close(connection)
            if connection.kind == "peer":
                self._reject(now, connection.address, f"over {connection.limit} bytes")
            return
        if connection.kind == "control":
            answer = self._control(line)
            try:  # a short answer to a local client; one that does not read it loses it
                connection.sock.sendall((json.dumps(answer) + "\n").encode())
            except OSError:
                pass
            self._close(connection)
        else:
            try:
                message = self._peer(connection.address, line, now)
            except Exception as error:  # noqa: BLE001 - nothing a peer sends may end the guard
                self.errors_handling += 1
                message = None
                self._reject(now, connection.address, f"could not be handled ({type(error).__name__}): refused")
            if message is not None:
                try:  # one short line on a connection that has just been read: it fits the socket's buffer
                    connection.sock.send(self._ack(message))
                except OSError:
                    pass  # the sender tries again
            self._close(connection)
            if message is not None:
                self._act_on_peer(message, now)

    def _expire(self, now: float) -> None:
        for connection in [c for c in self.connections.values() if c.deadline <= now]:
            self._close(connection)
            if connection.kind == "peer":
                self._reject(now, connection.address, f"no complete message within {PEER_DEADLINE_S:g} s")

    def _reject(self, now: float, address: str, why: str) -> None:
        """A refused connection or message: counted, and recorded without samples, at most REJECTIONS_BURST
        times per REJECTIONS_WINDOW_S (the record says how many were left out before it)."""
        self.rejections["total"] += 1
        self.rejections["last"] = {"time": self.wall(), "from": address, "reason": why}
        if self.rejection_limit.allow(now):
            suppressed, self.rejection_limit.suppressed = self.rejection_limit.suppressed, 0
            self.record(
                self.guard._decision(
                    "peer-rejected", now, f"from {address}: {why}", samples=False, suppressed=suppressed
                )
            )

    def _control(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line.decode())
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
            command = request.get("command")
            now = self.clock()
            # every answer carries the whole state, health included (the boot reads it from the phase switch)
            if command == "phase":
                before = self.guard.phase
                self.guard.set_phase(str(request.get("phase")), now)
                answer: dict[str, Any] = {"ok": True, "changed": self.guard.phase != before, "state": self.state(now)}
            elif command == "clear":
                self.clock_skew = None  # reported until an operator looked
                self.guard.clear(now)
                answer = {"ok": True, "state": self.state(now)}
            elif command == "trip":
                decision = self.guard.trip(f"by hand: {request.get('reason') or 'no reason given'}", now)
                answer = {"ok": True, "decision": decision["decision"], "state": self.state(now)}
            elif command == "status":
                answer = {"ok": True, "state": self.state(now)}
            else:
                answer = {"ok": False, "error": f"unknown command {command!r}"}
            self.write_state(now)
        except (ValueError, OSError, TypeError, RecursionError) as error:
            answer = {"ok": False, "error": str(error)}
        return answer

    def _peer(self, address: str, line: bytes, now: float) -> dict[str, Any] | None:
        """A peer's message, from a planned peer's address (checked when the connection was taken): refused
        (counted, recorded at most REJECTIONS_BURST a minute) unless signed as that address's host, new and
        dated within the allowed skew; a correctly signed one refused for its date is a clock skew (counted,
        in the state, recorded at the same rate). The message taken is returned: acknowledged, then acted on."""
        try:
            message = check_peer_message(
                self.config.peer_key,
                line,
                self.wall(),
                self.config.peer_max_skew_s,
                self.nonces,
                senders=self.allowed.get(address, set()),
            )
        except ClockSkew as skew:
            self.clock_skew_total += 1
            self.clock_skew = {
                "time": self.wall(),
                "from": skew.message["from"],
                "address": address,
                "skew_s": round(skew.skew_s, 1),
                "allowed_s": self.config.peer_max_skew_s,
                "refused": skew.message["reason"],
                "total": self.clock_skew_total,
                "suppressed": self.skew_limit.suppressed,
            }
            if self.skew_limit.allow(now):
                suppressed, self.skew_limit.suppressed = self.skew_limit.suppressed, 0
                self.record(
                    self.guard._decision(
                        "peer-clock-skew",
                        now,
                        f"from {address} ({skew.message['from']}): {skew}; refused: {skew.message['reason']}",
                        samples=False,
                        suppressed=suppressed,
                    )
                )
            self.write_state(now)
            return None
        except ValueError as error:
            self._reject(now, address, str(error))
            return None
        return message

    def _ack(self, message: dict[str, Any]) -> bytes:
        """The signed acknowledgement of a peer's trip, sent before this guard acts on it."""
        local = self.config.cluster_policy != "stop-all"
        outcome = "ignored (policy local)" if local else ("already tripped" if self.guard.tripped else "stopping")
        return peer_ack(self.config.peer_key, self.config.host, message["from"], message["nonce"], self.wall(), outcome)

    def _act_on_peer(self, message: dict[str, Any], now: float) -> None:
        """A peer's trip, acknowledged: stop this rank too (or record it, under the policy local)."""
        sender, reason = message["from"], message["reason"]
        if self.config.cluster_policy == "stop-all":
            self.guard.trip(f"peer {sender} tripped: {reason}", now, from_peer=sender)
        else:
            self.record(self.guard._decision("peer-ignored", now, f"peer {sender} tripped (policy local)"))
        self.write_state(now)

    def _ready(self, key: selectors.SelectorKey, now: float) -> None:
        if isinstance(key.data, _Try):
            self._try_ready(key.data, now)
        elif key.data == "connection":
            connection = self.connections.get(key.fileobj)  # type: ignore[call-overload]
            if connection is not None:
                self._read(connection, now)
        else:
            self._accept(key.fileobj, key.data, now)  # type: ignore[arg-type]

    # ---------------------------------------------------------------- the loop
    def _peers_to_retry(self) -> bool:
        """Whether the listener is to be bound (again)."""
        return bool(self.config.peer_listen) and self.peer_server is None and self.listen_address is not None

    def run(self) -> int:
        try:
            signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
            signal.signal(signal.SIGINT, lambda *_: setattr(self, "running", False))
        except ValueError:
            pass  # not the main thread (tests): stopped by setting running to False
        now = self.clock()
        self.record(
            self.guard._decision(
                "start", now, f"pid {os.getpid()}", tripped=self.guard.tripped, peer_listen=self.listen_state
            )
        )
        next_sample = now
        ready = False
        if self.container_watch is not None:
            self.container_watch.start()
        while self.running:
            # the sampling clock is in charge: wait for the sockets no longer than the next sample (or the
            # first connection deadline), and each socket only gets what is there already
            now = self.clock()
            wake = min([next_sample, *(c.deadline for c in self.connections.values())])
            if self._peers_to_retry():
                wake = min(wake, self.next_peer_retry)
            if self.stop_all is not None:
                wake = min(wake, self.stop_all.wake())
            events = self.selector.select(max(0.0, wake - now))
            phase_before = self.guard.phase
            for key, _mask in events:
                self._ready(key, self.clock())
            now = self.clock()
            self._expire(now)
            self._stop_all_step(now)
            if self._peers_to_retry() and now >= self.next_peer_retry:
                self._bind_peer(now)
            if self.guard.phase != phase_before:
                next_sample = now  # a new phase samples at once, at its own interval
            if now >= next_sample:
                self.guard.sample(now)
                self.write_state(now)
                next_sample = self.guard.next_sample_at(now)
                if not ready:
                    self.notify("READY=1")
                    ready = True
                self.notify(f"WATCHDOG=1\nSTATUS=phase {self.guard.phase}{', TRIPPED' if self.guard.tripped else ''}")
        self.notify("STOPPING=1")
        if self.container_watch is not None:
            self.container_watch.stop()
        if self.stop_all is not None:
            self._finish_stop_all(self.clock(), "the guard stopped")
        self.record(self.guard._decision("exit", self.clock(), "stopped by a signal"))
        for connection in list(self.connections.values()):
            self._close(connection)
        self.selector.close()
        self.control.close()
        if self.peer_server is not None:
            self.peer_server.close()
        self._close_log()
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
