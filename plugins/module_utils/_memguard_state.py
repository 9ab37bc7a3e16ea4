# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the memory guard (roles/memguard/files/dgxspark_memguard.py) left on a node, read from its files.

The guard rewrites its state (``/run/dgxspark-memguard/state.json``: phase, trips, last sample, pid,
``updated``, ``health``, ``peers``) at every sample, keeps a trip in
``/var/lib/dgxspark-memguard/tripped.json`` until it is cleared (time, reason, from_peer, what the stop
did), and writes every decision, with the samples that led to it, as one JSON line of
``/var/log/dgxspark-memguard/decisions.jsonl`` (rotated by size: the newest older part is
``decisions.jsonl.1``). The samples of a trip come from the state or the trip when they hold them, else
from the trip's line at the end of the decision log (or of the rotated one).
Reading never asks the guard anything: a guard that does not answer is still read.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles, is_quiet, problem

DEFAULT_STATE_PATH = "/run/dgxspark-memguard/state.json"
DEFAULT_TRIP_PATH = "/var/lib/dgxspark-memguard/tripped.json"
DEFAULT_LOG_PATH = "/var/log/dgxspark-memguard/decisions.jsonl"
# A running guard rewrites its state every sample (0.25 s to 2 s); older than its health's stale_after_s (or
# this, for a guard that writes no health), it is down or hung.
STALE_AFTER_S = 30.0
HEALTH_KEYS = ("ok", "problems", "write_errors", "watchdog_s", "stale_after_s", "started")
# How much of the decision log's end is searched for the trip's line (decisions are rare; a line holds
# at most a thousand samples).
LOG_TAIL_BYTES = 4 * 1024 * 1024


def utc_iso(seconds: Any) -> str | None:
    """Epoch seconds as ``2026-12-01T06:36:43Z``; None for anything that is not a number."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _json_file(files: HostFiles, path: str) -> Any:
    text = files.read(path, "memguard")
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        files.problems.append(problem("memguard", path, f"not JSON: {error}"))
        return None


def trip_samples(files: HostFiles, log_path: str, when: Any) -> list[Any] | None:
    """The samples of the last ``trip`` decision in the log's tail (the one at ``when`` if given), then in
    the rotated log ``<log>.1`` (a rotation may come right after the trip)."""
    for path, quiet in ((log_path, False), (f"{log_path}.1", True)):
        samples = _trip_samples_in(files, path, when, quiet)
        if samples is not None:
            return samples
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def stale_after(state: dict[str, Any]) -> float:
    """How old a state may be from a running guard: its own ``health.stale_after_s``, else STALE_AFTER_S."""
    health = state.get("health")
    value = health.get("stale_after_s") if isinstance(health, dict) else None
    return float(value) if _number(value) and value > 0 else STALE_AFTER_S


def _trip_samples_in(files: HostFiles, log_path: str, when: Any, quiet: bool) -> list[Any] | None:
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            tail = handle.read()
    except OSError as error:
        if not (quiet or is_quiet(error)):
            files.problems.append(problem("memguard", log_path, error.strerror or str(error)))
        return None
    for line in reversed(tail.splitlines()):
        if b'"trip"' not in line:
            continue
        try:
            decision = json.loads(line.decode("utf-8"))
        except ValueError:
            continue  # the first line of the tail may be cut in two
        if not isinstance(decision, dict) or decision.get("decision") != "trip":
            continue
        if when is not None and decision.get("time") != when:
            continue
        samples = decision.get("samples")
        return list(samples) if isinstance(samples, list) else None
    return None


def memguard_facts(
    files: HostFiles,
    state_path: str = DEFAULT_STATE_PATH,
    trip_path: str = DEFAULT_TRIP_PATH,
    log_path: str = DEFAULT_LOG_PATH,
    proc_root: str = "/proc",
    wall: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The ``memguard`` section: installed, running (its pid alive and its state no older than its
    ``health.stale_after_s``), phase, trips, its health (ok, problems, write errors, watchdog), its peer
    listener, rejections and clock skew, and the trip (time, reason, peer, the stop's result and the
    samples around it)."""
    state = _json_file(files, state_path)
    state = state if isinstance(state, dict) else None
    kept = _json_file(files, trip_path)
    tripped = kept if isinstance(kept, dict) and kept else (state or {}).get("tripped") or None
    facts: dict[str, Any] = {
        "installed": os.path.exists(state_path) or os.path.exists(trip_path),
        "running": None,
        "pid": None,
        "phase": None,
        "startup_overdue": None,
        "startup_seconds": None,
        "trips": None,
        "updated_utc": None,
        "state_age_s": None,
        "last_sample": None,
        "mem_available_min": None,
        "last_decision": None,
        "floor_bytes": None,
        "tripped": None,
        "health": None,
        "peers": None,
        "state_path": state_path,
        "trip_path": trip_path,
    }
    if state is not None:
        pid, updated = state.get("pid"), state.get("updated")
        age = round(wall() - updated, 1) if isinstance(updated, (int, float)) else None
        alive = isinstance(pid, int) and os.path.isdir(os.path.join(proc_root, str(pid)))
        facts.update(
            running=alive and age is not None and age <= stale_after(state),
            pid=pid,
            phase=state.get("phase"),
            startup_overdue=state.get("startup_overdue"),
            startup_seconds=state.get("startup_seconds"),
            trips=state.get("trips"),
            updated_utc=utc_iso(updated),
            state_age_s=age,
            last_sample=state.get("last_sample"),
            # status.yml's: the lowest MemAvailable since the boot's load began, the last decision, the floor
            mem_available_min=_mapping(state.get("mem_available_min")),
            last_decision=_mapping(state.get("last_decision")),
            floor_bytes=(_mapping(state.get("phase_settings")) or {}).get("floor_bytes"),
            health=_health(state.get("health")),
            peers=_peers(state.get("peers")),
        )
    if isinstance(tripped, dict):
        when = tripped.get("time")
        samples = tripped.get("samples")
        if not isinstance(samples, list):
            samples = (state or {}).get("samples")
        if not isinstance(samples, list):
            samples = trip_samples(files, log_path, when)
        facts["tripped"] = {
            "time": when,
            "time_utc": utc_iso(when),
            "reason": tripped.get("reason"),
            "from_peer": tripped.get("from_peer"),
            "stop": tripped.get("stop"),
            # a local trip's stop-all: which peers acknowledged it (None for a peer's trip, or an older guard)
            "stop_all": tripped.get("stop_all") if isinstance(tripped.get("stop_all"), dict) else None,
            "samples": samples,
        }
    return facts


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _health(health: Any) -> dict[str, Any] | None:
    """The guard's own word on itself (None from a guard that writes no health)."""
    if not isinstance(health, dict):
        return None
    return {key: health.get(key) for key in HEALTH_KEYS}


def _peers(peers: Any) -> dict[str, Any] | None:
    """What the preflight needs of the peer side: is the listener up, how many were refused, clock skew."""
    if not isinstance(peers, dict):
        return None
    listen = peers.get("listen") if isinstance(peers.get("listen"), dict) else None
    rejections = peers.get("rejections") if isinstance(peers.get("rejections"), dict) else {}
    return {
        "listening": None if listen is None else listen.get("listening"),
        "listen_error": None if listen is None else listen.get("error"),
        "rejections": rejections.get("total"),
        "clock_skew": peers.get("clock_skew"),
    }
