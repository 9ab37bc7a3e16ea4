# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/prepare.yml refuses a fabric port that is the management interface before it configures one.

prepare.yml runs the fabric role with no boot preflight before it; the role's ``management.yml`` runs the
preflight's own ``fabric-not-management`` check (``_preflight.fabric_not_management``, through the
``fabric_not_management`` filter) on facts node_facts gathers there. Run for real by ansible-playbook on this
machine (connection local), with the loopback interface ``lo`` as the planned fabric port: it carries
127.0.0.1, so a node managed on 127.0.0.1 is refused, one managed elsewhere passes.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import yaml

from ansible_collections.dgxspark.cluster.plugins.filter.fabric import fabric_not_management
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import checks as _preflight
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

BIN = pathlib.Path(sys.executable).parent
FABRIC = ROOT / "roles/fabric/tasks"


def run(tmp_path: pathlib.Path, host_vars: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    play = [
        {
            "name": "the fabric role's management check",
            "hosts": "node",
            "gather_facts": False,
            "tasks": [{"name": "Check", "ansible.builtin.include_tasks": str(FABRIC / "management.yml")}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **host_vars}
    inventory = {"all": {"hosts": {"node": node}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    command = [str(BIN / "ansible-playbook"), str(tmp_path / "play.yml"), "-i", str(tmp_path / "hosts.yml"), *extra]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)
    done.stdout = " ".join(done.stdout.split())  # the callback wraps long lines
    return done


PLAN = {"interfaces": ["lo"], "management_waiver": None}
REFUSED = "lo carries the management address 127.0.0.1"


def test_a_port_that_carries_the_management_address_is_refused(tmp_path: pathlib.Path) -> None:
    done = run(tmp_path, {"ansible_host": "127.0.0.1", "fabric_plan": PLAN})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "node: fabric-not-management: a planned fabric port is the management interface: " in done.stdout
    assert REFUSED in done.stdout and "nothing was configured" in done.stdout


def test_check_mode_refuses_it_too(tmp_path: pathlib.Path) -> None:
    done = run(tmp_path, {"ansible_host": "127.0.0.1", "fabric_plan": PLAN}, "--check")
    assert done.returncode == 2 and REFUSED in done.stdout, done.stdout + done.stderr


def test_a_port_apart_from_management_passes(tmp_path: pathlib.Path) -> None:
    done = run(tmp_path, {"ansible_host": "192.0.2.10", "fabric_plan": PLAN})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS fabric-not-management node the management address 192.0.2.10 is on none of the planned ports (lo)" in (
        done.stdout
    )


def test_the_profiles_waiver_makes_it_a_warning(tmp_path: pathlib.Path) -> None:
    plan = {**PLAN, "management_waiver": "a one-port lab rig"}
    done = run(tmp_path, {"ansible_host": "127.0.0.1", "fabric_plan": plan})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN fabric-not-management node waived fabric-not-management (a one-port lab rig): " in done.stdout


def test_the_filter_is_the_preflights_check() -> None:
    node = {"fabric": {"interfaces": {"enP7s7": {"ipv4": ["192.0.2.10/24"]}}, "default_routes": []}}
    assert fabric_not_management(node, "spark-head", "192.0.2.10") == _preflight.fabric_not_management(
        "spark-head", node, "192.0.2.10"
    )
    assert fabric_not_management(node, "spark-head", "192.0.2.10")["status"] == "FAIL"
    assert fabric_not_management(node, "192.0.2.10")["status"] == "FAIL"  # managed on its inventory name


def test_the_role_checks_before_it_configures_and_prepare_runs_the_role() -> None:
    """Only when no preflight judged the nodes first (the boot hands its facts over as fabric_node_facts)."""
    tasks = yaml.safe_load((FABRIC / "main.yml").read_text())
    names = [task.get("ansible.builtin.include_tasks") or task.get("ansible.builtin.import_tasks") for task in tasks]
    assert names.index("management.yml") < names.index("configure.yml")
    check = tasks[names.index("management.yml")]
    assert check["when"] == "fabric_node_facts | length == 0"
    plays = yaml.safe_load((ROOT / "playbooks/prepare.yml").read_text())
    roles = [role["role"] for play in plays for role in play.get("roles", [])]
    assert "dgxspark.cluster.fabric" in roles
