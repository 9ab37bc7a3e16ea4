# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the stand-in engine's tests: engines run as subprocesses on 127.0.0.1, free ports only.

Importing this module also puts sim/engine on sys.path, so tests can import ``vllm_sim``."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ENGINE_DIR = REPO / "sim" / "engine"
LAUNCHER = ENGINE_DIR / "bin" / "vllm"

sys.path.insert(0, str(ENGINE_DIR))


def engine_python() -> str:
    """The engine's target is Debian bookworm's Python 3.11: use a 3.11 when this machine has one."""
    explicit = os.environ.get("SIM_ENGINE_TEST_PYTHON")
    if explicit:
        return explicit
    # A real binary, not a pyenv shim (a shim may fork instead of exec: SIGTERM would miss the engine).
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python3.11")))
    found = shutil.which("python3.11")
    if found and "/shims/" not in found:
        candidates.insert(0, found)
    return candidates[0] if candidates else sys.executable


PYTHON = engine_python()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """One `vllm serve` subprocess with its output in files."""

    def __init__(self, args: list[str], env: dict | None, logdir: Path, name: str):
        self.args = args
        self.out_path = logdir / f"{name}.out"
        self.err_path = logdir / f"{name}.err"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SIM_ENGINE_")}
        full_env.update({"SIM_ENGINE_LOAD_SECONDS": "0.2", "PYTHONUNBUFFERED": "1"})
        full_env.update(env or {})
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            [PYTHON, str(LAUNCHER), "serve", *args],
            stdout=self._out,
            stderr=self._err,
            env=full_env,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def term(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(5)
        self._out.close()
        self._err.close()


def http_status(port: int, path: str = "/health", timeout: float = 1.0) -> int | None:
    """The HTTP status, or None when nothing answers (connection refused)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def wait_healthy(port: int, engine: Engine, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_status(port) == 200:
            return
        if not engine.alive():
            raise AssertionError(f"engine exited {engine.proc.returncode}:\n{engine.out()}\n{engine.err()}")
        time.sleep(0.05)
    raise AssertionError(f"engine not healthy after {timeout}s:\n{engine.out()}\n{engine.err()}")
