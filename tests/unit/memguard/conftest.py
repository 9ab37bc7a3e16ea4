# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the memory guard's tests: the daemon loaded from its file, seed 000's settings, meminfo files,
and for the daemon's own tests a node's settings, a running daemon and a fake Docker engine (daemon_rig.py)."""

from __future__ import annotations

import copy
import importlib.util
import os
import pathlib
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from daemon_rig import GRACE, HIGH, INTERVAL, PHASES, FakeEngine, Running

ROOT = pathlib.Path(__file__).resolve().parents[3]
DAEMON = ROOT / "roles" / "memguard" / "files" / "dgxspark_memguard.py"
FIXTURES = ROOT / "tests" / "unit" / "fixtures"
# A real GB10 /proc/meminfo (dgx1 on the 64 KiB kernel, see ../fixtures/node_facts/README.md).
GB10_MEMINFO = FIXTURES / "node_facts" / "gb10" / "proc" / "meminfo"
GIB = 1024**3

# Seed 000's guard (its profile's host section, the role's defaults): startup 5 GiB / 0.25 s / 45 s grace /
# at most 120 s; steady 3 GiB / 2 s / 30 s grace; emergency floor 1 GiB.
SEED000_SETTINGS: dict[str, Any] = {
    "host": "spark-a",
    "container": "vllm_dsv41",
    "phases": {
        "startup": {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 45},
        "steady": {"floor_bytes": 3 * GIB, "interval_s": 2, "grace_s": 30},
    },
    "startup_wait_s": 120,
    "emergency_floor_bytes": 1 * GIB,
    "cluster_policy": "local",
}


@pytest.fixture(scope="module")
def memguard() -> ModuleType:
    """The daemon, loaded from its file (a standalone script, not a module of the collection)."""
    spec = importlib.util.spec_from_file_location("dgxspark_memguard_under_test", DAEMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def settings() -> Callable[..., dict[str, Any]]:
    """``settings(**changes)``: seed 000's guard settings with top-level changes; ``startup={...}`` and
    ``steady={...}`` update that phase's settings."""

    def make(**changes: Any) -> dict[str, Any]:
        data = copy.deepcopy(SEED000_SETTINGS)
        for phase in ("startup", "steady"):
            data["phases"][phase].update(changes.pop(phase, {}))
        data.update(changes)
        return data

    return make


def meminfo_text(available_bytes: int) -> str:
    """The GB10's /proc/meminfo with its MemAvailable line set to ``available_bytes`` (in kB, as the kernel says)."""
    text = GB10_MEMINFO.read_text(encoding="ascii")
    line = f"MemAvailable:   {available_bytes // 1024:>9} kB"
    result, count = re.subn(r"^MemAvailable:.*$", line, text, count=1, flags=re.MULTILINE)
    assert count == 1
    return result


@pytest.fixture
def write_meminfo() -> Callable[[pathlib.Path, int], None]:
    """``write_meminfo(path, bytes)``: (re)write a meminfo file atomically, so a reader never sees half of it."""

    def write(path: pathlib.Path, available_bytes: int) -> None:
        temporary = path.with_name(path.name + ".new")
        temporary.write_text(meminfo_text(available_bytes), encoding="ascii")
        os.replace(temporary, path)

    return write


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def no_signal_handlers(memguard: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Daemon.run() sets SIGTERM/SIGINT handlers, which Python allows in the main thread only."""
    monkeypatch.setattr(
        memguard, "signal", SimpleNamespace(signal=lambda *_args: None, SIGTERM=signal.SIGTERM, SIGINT=signal.SIGINT)
    )


@pytest.fixture
def sockdir() -> Iterator[pathlib.Path]:
    """A short directory for Unix sockets (tmp_path can outgrow their 107-byte limit)."""
    path = tempfile.mkdtemp(prefix="mg-")
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def node(
    settings: Callable[..., dict[str, Any]], tmp_path: pathlib.Path, sockdir: pathlib.Path, write_meminfo: Callable
) -> Callable[..., dict[str, Any]]:
    """``node(name, **changes)``: a node's guard settings (fast phases, every path in tmp_path or sockdir),
    its meminfo file written with plenty free."""

    def make(name: str = "a", **changes: Any) -> dict[str, Any]:
        files = tmp_path / name
        files.mkdir(exist_ok=True)
        write_meminfo(files / "meminfo", HIGH)
        phases = {phase: {"interval_s": INTERVAL, "grace_s": GRACE, **changes.pop(phase, {})} for phase in PHASES}
        return settings(
            host=f"spark-{name}",
            docker_socket=str(sockdir / f"{name}-docker.sock"),
            state_path=str(files / "run" / "state.json"),
            trip_path=str(files / "lib" / "tripped.json"),
            log_path=str(files / "log" / "decisions.jsonl"),
            control_socket=str(sockdir / f"{name}.sock"),
            meminfo_path=str(files / "meminfo"),
            psi_path=str(files / "no-psi"),
            **phases,
            **changes,
        )

    return make


@pytest.fixture
def start(memguard: ModuleType) -> Iterator[Callable[..., Running]]:
    """``start(settings, clock=time.time)``: a running daemon, stopped at teardown (as are any still running)."""
    running: list[Running] = []

    def make(settings: dict[str, Any], clock: Callable[[], float] = time.time) -> Running:
        daemon = Running(memguard, settings, clock)
        running.append(daemon)
        return daemon

    yield make
    for daemon in reversed(running):
        daemon.stop()


@pytest.fixture
def engine(sockdir: pathlib.Path) -> Iterator[Callable[[str], FakeEngine]]:
    """``engine(name)``: a fake Docker engine on node ``name``'s docker socket."""
    engines: list[FakeEngine] = []

    def make(name: str = "a") -> FakeEngine:
        server = FakeEngine(sockdir / f"{name}-docker.sock")
        engines.append(server)
        return server

    yield make
    for server in engines:
        server.close()
