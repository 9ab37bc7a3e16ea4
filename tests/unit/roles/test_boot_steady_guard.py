# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's last word on the memory guard (roles/boot/tasks/steady.yml): the guard's state after the switch
to steady (``boot_steadied.guard``, node_phase's answer to the switch) fails the boot when it is tripped or not healthy.

The guard's fail tasks are taken from steady.yml as they are and run for real by ansible-playbook on the
controller alone (connection local), given the state the guard would answer.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

BIN = pathlib.Path(sys.executable).parent
STEADY = ROOT / "roles/boot/tasks/steady.yml"
STORED_STATE = ROOT / "tests/unit/fixtures/memguard/node-facts/state.json"


def guard_tasks() -> list[dict[str, Any]]:
    tasks = yaml.safe_load(STEADY.read_text())
    return [task for task in tasks if task["name"].startswith("Fail when a memory guard")]


def run(tmp_path: pathlib.Path, state: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "state.json").write_text(json.dumps(state))
    play = [
        {
            "name": "the boot's guard checks",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {
                "boot_steadied": {
                    "guard": "{{ lookup('ansible.builtin.file', '" + str(tmp_path / "state.json") + "') | from_json }}"
                }
            },
            "tasks": guard_tasks(),
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(
        [str(BIN / "ansible-playbook"), str(tmp_path / "play.yml"), "-i", "localhost,"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


def stored(**changes: Any) -> dict[str, Any]:
    state = json.loads(STORED_STATE.read_text())
    state["tripped"] = None
    state.update(changes)
    return state


def test_the_tasks_are_there() -> None:
    assert [t["name"] for t in guard_tasks()] == [
        "Fail when a memory guard is tripped, or not healthy after the switch (a tripped guard guards nothing)",
    ]


UNHEALTHY = {
    "ok": False,
    "problems": ["peer listener: cannot listen on 10.0.0.2 port 7391: in use", "writing the decision log: ENOSPC"],
    "write_errors": 2,
    "started": 1.0,
    "watchdog_s": 6.0,
    "stale_after_s": 6.0,
    "systemd_notify": True,
}


@pytest.mark.parametrize(
    "state,failed,said",
    [
        (stored(), False, None),  # healthy, not tripped: the boot is steady
        ({k: v for k, v in stored().items() if k != "health"}, False, None),  # a guard that writes no health
        (
            stored(health=UNHEALTHY),
            True,
            "the memory guard is up but not healthy after the switch to steady: peer listener: cannot listen on "
            "10.0.0.2 port 7391: in use; writing the decision log: ENOSPC.",
        ),
        (json.loads(STORED_STATE.read_text()), True, "the memory guard is TRIPPED (MemAvailable under the steady"),
    ],
)
def test_the_boot_fails_on_a_guard_tripped_or_unhealthy(
    tmp_path: pathlib.Path, state: dict[str, Any], failed: bool, said: str | None
) -> None:
    result = run(tmp_path, state)
    assert (result.returncode != 0) is failed, result.stdout + result.stderr
    if said:
        assert said in " ".join(result.stdout.split()), result.stdout
