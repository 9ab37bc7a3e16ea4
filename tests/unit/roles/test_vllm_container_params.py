# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_container role's one docker_container task passes every parameter the plan can render.

The plan refuses a docker_run_args option unless it renders to a docker_container parameter; a parameter
the task then did not pass on would be dropped silently, and what starts would not be what was judged.
"""

from __future__ import annotations

import pathlib

import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._docker_args import DOCKER_RUN_OPTIONS

TASK = pathlib.Path(__file__).resolve().parents[3] / "roles" / "vllm_container" / "tasks" / "container.yml"


def _task_parameters() -> dict[str, str]:
    (task, *_rest) = yaml.safe_load(TASK.read_text(encoding="utf-8"))
    return task["community.docker.docker_container"]


def test_every_rendered_parameter_is_passed_on() -> None:
    passed = _task_parameters()
    rendered = {row.parameter for row in DOCKER_RUN_OPTIONS.values() if row.renders}
    missing = sorted(name for name in rendered if name not in passed)
    assert not missing, f"{TASK.name} drops these rendered parameters: {missing}"
    for name in rendered - {"restart_policy"}:
        assert passed[name] == f"{{{{ p.{name} | default(omit) }}}}", name


def test_every_passed_parameter_is_a_docker_container_option() -> None:
    from ansible_collections.community.docker.plugins.modules import docker_container

    documented = yaml.safe_load(docker_container.DOCUMENTATION)["options"]
    aliases = {alias for spec in documented.values() for alias in spec.get("aliases", [])}
    unknown = sorted(name for name in _task_parameters() if name not in documented and name not in aliases)
    assert not unknown, f"not options of community.docker.docker_container: {unknown}"


def test_parameters_that_name_a_secret_hide_the_task() -> None:
    """Defence in depth: the plan refuses a secret in env, but parameters given by hand that carry one (a
    secret-looking name) make the task no_log; a path (HF_TOKEN_PATH) does not."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from ansible_collections.dgxspark.cluster.plugins.plugin_utils._secrets import secret_env_name

    (task, *_rest) = yaml.safe_load(TASK.read_text(encoding="utf-8"))
    names = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "DB_PASSWORD", "X_SECRET_Y", "HF_TOKEN_PATH",
             "NCCL_IB_HCA", "VLLM_HOST_IP", "MAX_TOKENS"]  # fmt: skip
    for name in names:
        env = {"NCCL_NVLS_ENABLE": "0", name: "/run/secrets/x" if name.endswith("_PATH") else "v"}
        templar = Templar(loader=DataLoader(), variables={"vllm_container_params": {"env": env}})
        hidden = templar.template(trust_as_template(task["no_log"]))
        assert str(hidden).strip() == str(secret_env_name(name, env[name])), name
