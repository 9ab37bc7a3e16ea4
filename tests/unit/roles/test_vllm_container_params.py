# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan's container parameters reach community.docker.docker_container whole.

The plan refuses a docker_run_args option unless it renders to a docker_container parameter; the
vllm_container role passes the plan's dict through dgxspark.cluster.rank_container, which refuses a key the
plan cannot produce. Every key it accepts must be a docker_container option, and the role's task must pass the
plan's dict as it is (nothing picked out, so nothing dropped).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.cluster.plugins.action import rank_container
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.container import FIXED_PARAMETERS, PARAMETERS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import DOCKER_RUN_OPTIONS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

TASK = pathlib.Path(__file__).resolve().parents[3] / "roles" / "vllm_container" / "tasks" / "container.yml"


def test_every_rendered_parameter_is_accepted() -> None:
    rendered = {row.parameter for row in DOCKER_RUN_OPTIONS.values() if row.renders}
    assert rendered | set(FIXED_PARAMETERS) == PARAMETERS


def test_every_accepted_parameter_is_a_docker_container_option() -> None:
    from ansible_collections.community.docker.plugins.modules import docker_container

    documented = yaml.safe_load(docker_container.DOCUMENTATION)["options"]
    aliases = {alias for spec in documented.values() for alias in spec.get("aliases", [])}
    unknown = sorted(name for name in PARAMETERS if name not in documented and name not in aliases)
    assert not unknown, f"not options of community.docker.docker_container: {unknown}"


def test_the_role_passes_the_plans_dict_as_it_is() -> None:
    (task, *_rest) = yaml.safe_load(TASK.read_text(encoding="utf-8"))
    assert task["dgxspark.cluster.rank_container"]["params"] == "{{ vllm_container_params }}"


class Action(rank_container.ActionModule):
    """The action with Ansible's plumbing replaced: validated arguments given, the module run recorded."""

    def __init__(self, args: dict[str, Any]) -> None:  # pylint: disable=super-init-not-called
        self._args = args
        self.executed: list[tuple[str, dict[str, Any]]] = []
        self._task = SimpleNamespace(async_val=0, check_mode=False)

    def validate_argument_spec(self, argument_spec=None, mutually_exclusive=None, **_kwargs):
        return None, {"state": "started", "recreate": False, **self._args}

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        self.executed.append((module_name, module_args))
        return {"changed": True, "container": {"Name": "/" + module_args["name"]}}


@pytest.fixture(autouse=True)
def _no_action_base_run(monkeypatch):
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})


def test_the_plans_parameters_reach_docker_container_with_state_and_recreate() -> None:
    params = {"name": "vllm_dsv41", "image": "img", "ipc_mode": "host", "state": "started", "pull": "never"}
    action = Action({"params": params, "state": "created", "recreate": True})
    result = action.run(task_vars={})
    assert result["changed"] is True
    [(module, args)] = action.executed
    assert module == "community.docker.docker_container"
    assert args == {**params, "state": "present", "recreate": True}


def test_a_key_the_plan_cannot_produce_is_refused_naming_it() -> None:
    action = Action({"params": {"name": "x", "image": "img", "privileged_mode": True, "volumes_frm": []}})
    result = action.run(task_vars={})
    assert result["failed"] is True and "privileged_mode, volumes_frm" in result["msg"]
    assert action.executed == []


# Renders the task's no_log in a process of its own: the collection's filters need Ansible's collection loader
# (init_plugin_loader), which would change how every later test imports the collection.
RENDER_NO_LOG = """
import json, os, sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([os.path.abspath(".ansible/collections")])
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
expression, envs = json.load(sys.stdin)
print(json.dumps([
    str(Templar(loader=DataLoader(), variables={"vllm_container_params": params}).template(
        trust_as_template(expression))).strip()
    for params in envs
]))
"""


def test_parameters_that_name_a_secret_hide_the_task() -> None:
    """Defence in depth: the plan refuses a secret in env, but parameters given by hand that carry one make the
    task no_log, by the plan's own check (the secret_env_names filter); a path (HF_TOKEN_PATH) does not, nor a
    name that only looks like one (MAX_TOKENS, SIM_ENGINE_KV_BYTES_PER_TOKEN)."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import secret_env_names

    (task, *_rest) = yaml.safe_load(TASK.read_text(encoding="utf-8"))
    assert "dgxspark.cluster.secret_env_names" in task["no_log"] and "search" not in task["no_log"]
    names = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "DB_PASSWORD", "X_SECRET_Y", "HF_TOKEN_PATH",
             "NCCL_IB_HCA", "VLLM_HOST_IP", "MAX_TOKENS", "SIM_ENGINE_KV_BYTES_PER_TOKEN", "AWS_ACCESS_KEY_ID",
             "PRIVATE_KEY", "CREDENTIALS_FILE"]  # fmt: skip
    envs = [{"NCCL_NVLS_ENABLE": "0", name: "/run/secrets/x" if name.endswith(("_PATH", "_FILE")) else "v"}
            for name in names]  # fmt: skip
    envs += [{"INNOCENT": "hf_" + "a" * 34}, {"CREDENTIALS_FILE": "inline"}, {}]
    cases = [{"env": env} for env in envs] + [{}, {"env": None}]
    expected = [str(bool(secret_env_names(case.get("env")))) for case in cases]
    assert expected.count("True") == 9  # 7 names, a token's value, an inline *_FILE
    run = subprocess.run(
        [sys.executable, "-c", RENDER_NO_LOG],
        input=json.dumps([task["no_log"], cases]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected
