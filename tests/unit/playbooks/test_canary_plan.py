# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary, on the controller: a secret's value written into a profile and into hosts' dgxspark_overrides in
every way the plan refuses, and plan.yml at -vvv refuses each and never prints it (issue 26). The same canary
through boot.yml --check and a real boot at -vvv on the simulated cluster: tests/sim/cluster/test_sim3.py
(test_a_canary_secret_shows_nowhere_even_at_vvv)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3
from ansible_collections.dgxspark.cluster.tests.unit.playbooks.test_plan_playbook import NO_CONTACT, inventory, playbook

CANARY = "CanaryPlan0a9e44d2"
# Each a way a secret could be given; each refused, at the place it is written.
PROFILE_EDITS: dict[str, Any] = {
    "environment": {
        "HF_AUTH": CANARY,
        "HTTPS_PROXY": f"http://proxyuser:{CANARY}@proxy.example:3128",
        "DATABASE_URL": f"postgres://app:{CANARY}@db.example/app",
    },
    "docker_run_args": [
        f"-eVLLM_API_KEY=sk-{CANARY}",
        "--log-driver=splunk",
        f"--log-opt=splunk-token={CANARY}",
        f"--health-cmd=curl -H 'Authorization: Bearer {CANARY}' localhost",
    ],
    "entrypoint": ["env", f"VLLM_API_KEY={CANARY}", "vllm"],  # a word that is no option (those are refused first)
}
OVERRIDES = {
    "spark-w1": {"environment": {"KEY_ID": CANARY, "NO_PROXY_AUTH": f"https://u:{CANARY}@h.example"}},
    "spark-w2": {"container": {"docker_run_args": ["--env", f"MY_TOKEN_VALUE={CANARY}"]}},
}


def canary_profile(tmp_path: pathlib.Path) -> pathlib.Path:
    data = json.loads(SPARK3.read_text())
    data["shapes"]["tp3-triangle"]["environment"].update(PROFILE_EDITS["environment"])
    data["container"]["docker_run_args"] += PROFILE_EDITS["docker_run_args"]
    data["container"]["entrypoint"] = PROFILE_EDITS["entrypoint"]
    path = tmp_path / "canary.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def test_plan_at_vvv_refuses_a_canary_in_the_profile_and_never_prints_it(tmp_path: pathlib.Path) -> None:
    run = playbook("plan.yml", inventory(tmp_path), "-vvv", "-e", f"dgxspark_profile={canary_profile(tmp_path)}")
    said = run.stdout + run.stderr
    assert run.returncode == 2, said[-3000:]
    for where in ("environment.HF_AUTH", "environment.HTTPS_PROXY", "environment.DATABASE_URL", "entrypoint[1]"):
        assert where in said, where
    assert "a secret in a docker run option" in said and "<redacted, " in said
    assert CANARY not in said
    assert NO_CONTACT not in said


def test_plan_at_vvv_refuses_a_canary_in_overrides_and_never_prints_it(tmp_path: pathlib.Path) -> None:
    run = playbook("plan.yml", inventory(tmp_path, OVERRIDES), "-vvv")
    said = run.stdout + run.stderr
    assert run.returncode == 2, said[-3000:]
    assert "host spark-w1: dgxspark_overrides.environment.KEY_ID" in said
    assert "host spark-w1: dgxspark_overrides.environment.NO_PROXY_AUTH" in said
    assert "host spark-w2: dgxspark_overrides.container.docker_run_args[0]" in said
    assert CANARY not in said
    assert NO_CONTACT not in said
