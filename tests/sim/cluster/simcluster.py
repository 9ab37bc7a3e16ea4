# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the simulated-cluster tests (sim/cluster/simctl.py, docker exec into the nodes).

The clusters are containers on this machine's Docker engine (sim/README.md); these tests contact
only them and loopback. They need root and build the images on first use (a couple of minutes
cold, seconds warm).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"


def simctl(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run sim/cluster/simctl.py, echoing its output (visible with pytest -s or on failure)."""
    proc = subprocess.run(
        [sys.executable, str(SIMCTL), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc


def describe(cluster: str) -> dict:
    return json.loads(simctl("describe", cluster).stdout)


def ansible_bin(name: str) -> str:
    venv = REPO / ".venv" / "bin" / name
    if venv.exists():
        return str(venv)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: run make venv first")
    return found


def node_sh(host: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", "exec", host, "sh", "-c", script], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{host}: {script!r} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc


def node_links(host: str) -> dict[str, dict]:
    """The node's network interfaces (ip -d -j link), by name."""
    return {link["ifname"]: link for link in json.loads(node_sh(host, "ip -d -j link show").stdout)}


def node_addresses(host: str) -> dict[str, list[dict]]:
    return {i["ifname"]: i.get("addr_info", []) for i in json.loads(node_sh(host, "ip -j addr show").stdout)}


def start_cluster(cluster: str, *extra: str):
    if os.geteuid() != 0:
        pytest.fail("the simulated cluster needs root (it starts containers and moves links between namespaces)")
    proc = simctl("up", cluster, *extra)
    if proc.returncode != 0:
        simctl("down", cluster)
        pytest.fail(f"make sim-up CLUSTER={cluster} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return describe(cluster)
