# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/trip.yml refuses, changing nothing, without the node (--limit) or without memguard_trip_reason (issue
29); the trip itself, through a real guard's control socket, is tests/sim/cluster/test_operator_sim3.py's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

BIN = pathlib.Path(sys.executable).parent


def _run(tmp_path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    hosts = yaml.safe_load((ROOT / "inventories" / "sim3" / "hosts.yml").read_text())
    for group in hosts["dgxspark"]["children"].values():
        for host_vars in group["hosts"].values():
            host_vars.update(ansible_connection="local", ansible_python_interpreter=sys.executable)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    command = [str(BIN / "ansible-playbook"), "playbooks/trip.yml", "-i", str(tmp_path / "hosts.yml"), *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_a_trip_names_its_node_and_its_reason_or_is_refused(tmp_path: pathlib.Path) -> None:
    unlimited = _run(tmp_path, "-e", "memguard_trip_reason=drill")
    out = " ".join(unlimited.stdout.split())
    assert unlimited.returncode != 0 and "name the node whose guard trips with --limit NODE" in out, out[-2000:]
    reasonless = _run(tmp_path, "--limit", "sim3-worker1")
    out = " ".join(reasonless.stdout.split())
    assert reasonless.returncode != 0, out[-2000:]
    assert "sim3-worker1: say why the guard is tripped, -e memguard_trip_reason='...'" in out, out[-2000:]
    assert "Trip the guard by hand (it stops the serving container)" not in out
