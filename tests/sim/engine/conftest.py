# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the stand-in engine's tests; the helpers are in engine_helpers.py (a unique module name,
so these tests can run in one session with tests/unit, which has its own conftest)."""

from __future__ import annotations

import pytest
from engine_helpers import Engine


@pytest.fixture
def engines(tmp_path):
    """Start engines with ``engines(args, env, name)``; every one is killed at the end of the test."""
    started: list[Engine] = []

    def start(args: list[str], env: dict | None = None, name: str | None = None) -> Engine:
        e = Engine(args, env, tmp_path, name or f"engine{len(started)}")
        started.append(e)
        return e

    yield start
    for e in started:
        e.close()
