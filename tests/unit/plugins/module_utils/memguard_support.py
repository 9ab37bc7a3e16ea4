# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's files as the real daemon writes them: its Daemon, fed a MemAvailable trace on fake
clocks, writes its state, trip and decision log into a directory (the stored fixtures come from here)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[4]
DAEMON = ROOT / "roles" / "memguard" / "files" / "dgxspark_memguard.py"
GB10_MEMINFO = ROOT / "tests" / "unit" / "fixtures" / "node_facts" / "gb10" / "proc" / "meminfo"
STORED = ROOT / "tests" / "unit" / "fixtures" / "memguard" / "node-facts"
GIB = 1024**3
WALL_START = 1796106540.0  # 2026-12-01T06:29:00Z
STOPPED = {"action": "stop", "ok": True, "status": 204, "outcome": "stopped", "seconds": 1.104}
# A steady rank whose MemAvailable falls from 40 GiB to 2.5 GiB and stays there: seed 000's steady phase
# (3 GiB floor, 2 s interval, 30 s grace) trips on the 16th low sample.
STEADY_DIP = [40 * GIB] * 3 + [int(2.5 * GIB)] * 18


@dataclass(frozen=True)
class GuardFiles:
    state: pathlib.Path
    trip: pathlib.Path
    log: pathlib.Path
    pid: int


def load_daemon() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dgxspark_memguard_for_node_facts", DAEMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def meminfo_text(available: int) -> str:
    """The GB10's /proc/meminfo with MemAvailable set (in kB, as the kernel writes it)."""
    text = GB10_MEMINFO.read_text(encoding="ascii")
    return re.sub(r"^MemAvailable:.*$", f"MemAvailable:   {available // 1024:>9} kB", text, count=1, flags=re.M)


def run_guard(
    directory: pathlib.Path,
    trace: Sequence[int],
    phase: str = "steady",
    peer: str | None = None,
    clear: bool = False,
    then: str | None = None,
) -> GuardFiles:
    """Run the daemon's guard over ``trace`` (one sample per 2 s), in ``phase``; ``peer`` trips it as that
    peer's message would after the trace, ``clear`` clears it at the end, ``then`` switches it to that phase
    last (the boot's switch to steady). Returns where its files are."""
    memguard = load_daemon()
    directory.mkdir(parents=True, exist_ok=True)
    meminfo = directory / "meminfo"
    settings: dict[str, Any] = {
        "host": "spark-w1",
        "container": "vllm_dsv41",
        "phases": {
            "startup": {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 45},
            "steady": {"floor_bytes": 3 * GIB, "interval_s": 2, "grace_s": 30},
        },
        "startup_wait_s": 120,
        "emergency_floor_bytes": 1 * GIB,
        "cluster_policy": "local",
        "state_path": str(directory / "state.json"),
        "trip_path": str(directory / "tripped.json"),
        "log_path": str(directory / "decisions.jsonl"),
        "control_socket": str(directory / "control.sock"),
        "meminfo_path": str(meminfo),
        "psi_path": str(directory / "no-psi"),
    }
    wall, monotonic = [WALL_START], [1000.0]
    daemon = memguard.Daemon(memguard.Config(settings), clock=lambda: wall[0], monotonic=lambda: monotonic[0])
    daemon.guard.stop = lambda: dict(STOPPED)
    try:
        daemon.guard.set_phase(phase, monotonic[0])
        for available in trace:
            meminfo.write_text(meminfo_text(available), encoding="ascii")
            daemon.guard.sample(monotonic[0])
            daemon.write_state(monotonic[0])
            wall[0] += 2
            monotonic[0] += 2
        if peer:
            daemon.guard.trip(
                f"peer {peer} tripped: emergency: MemAvailable 0.80 GiB under 1.00 GiB", monotonic[0], peer
            )
            daemon.write_state(monotonic[0])
        if clear:
            daemon.guard.clear(monotonic[0])
            daemon.write_state(monotonic[0])
        if then:
            daemon.guard.set_phase(then, monotonic[0])
            daemon.write_state(monotonic[0])
    finally:
        daemon.control.close()
        daemon.log.close()
    pid = json.loads((directory / "state.json").read_text())["pid"]
    return GuardFiles(directory / "state.json", directory / "tripped.json", directory / "decisions.jsonl", pid)
