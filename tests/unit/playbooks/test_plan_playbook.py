# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan and demo playbooks, run for real with ansible-playbook, never contact a node.

Every host of the test inventories points SSH at a closed port on loopback: if any task tried to
reach a node, the run would fail with the host UNREACHABLE.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

BIN = pathlib.Path(sys.executable).parent
NO_CONTACT = "UNREACHABLE"


def inventory(tmp_path: pathlib.Path, overrides: dict[str, Any] | None = None, shape: str = "tp3-triangle") -> str:
    hosts = yaml.safe_load((ROOT / "inventories/spark3/hosts.yml").read_text())
    groups = hosts["dgxspark"]["children"]
    for group in groups.values():
        for name, host_vars in group["hosts"].items():
            host_vars.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1)
            if overrides and name in overrides:
                host_vars["dgxspark_overrides"] = overrides[name]
    hosts["dgxspark"]["vars"] = {"dgxspark_profile": str(SPARK3), "dgxspark_shape": shape}
    hosts["controller"] = {"hosts": {"localhost": {"ansible_connection": "local"}}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def playbook(name: str, inventory_path: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "ansible-playbook"), f"playbooks/{name}", "-i", inventory_path, *extra]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


class TestPlaybooks:
    def test_plan_prints_every_rank(self, tmp_path: pathlib.Path) -> None:
        run = playbook("plan.yml", inventory(tmp_path))
        assert run.returncode == 0, run.stdout + run.stderr
        for rank, host in enumerate(["spark-head", "spark-w1", "spark-w2"]):
            assert f"rank {rank} ({'head' if rank == 0 else 'worker'}) on {host}" in run.stdout
        assert NO_CONTACT not in run.stdout + run.stderr

    def test_wrong_shape_fails_before_any_contact(self, tmp_path: pathlib.Path) -> None:
        run = playbook("plan.yml", inventory(tmp_path, shape="tp4-ring"))
        assert run.returncode == 2
        assert "shape tp4-ring runs on 4 nodes but the inventory has 3" in run.stdout
        assert "nothing was touched" in run.stdout
        assert NO_CONTACT not in run.stdout + run.stderr

    def test_override_breaking_agreement_fails_with_hosts_side_by_side(self, tmp_path: pathlib.Path) -> None:
        run = playbook("plan.yml", inventory(tmp_path, {"spark-w2": {"sizing": {"max_num_batched_tokens": 8192}}}))
        assert run.returncode == 2
        assert "--max-num-batched-tokens: ranks disagree" in run.stdout
        assert "spark-w1 (rank 1) = 6144" in run.stdout and "spark-w2 (rank 2) = 8192" in run.stdout
        assert NO_CONTACT not in run.stdout + run.stderr

    def test_demo_validates_without_contacting_a_node(self, tmp_path: pathlib.Path) -> None:
        # The whole demo runs on the simulated cluster (tests/sim/cluster); here only its controller part.
        run = playbook("demo.yml", inventory(tmp_path), "--limit", "localhost")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "spark8: profile valid (2 shapes)" in run.stdout
        assert "sim8: profile valid (2 shapes)" in run.stdout
        assert NO_CONTACT not in run.stdout + run.stderr

    def test_ad_hoc_validation(self) -> None:
        command = [
            str(BIN / "ansible"),
            "localhost",
            "-m",
            "dgxspark.cluster.serving_profile",
            "-a",
            "src=inventories/spark8/serving-profile.json shape=tp8-1m",
            "-o",
        ]
        run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        result = json.loads(run.stdout.split("=>", 1)[1])
        assert result["shape"] == "tp8-1m" and result["plan"] is None
