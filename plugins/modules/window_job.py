#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one job of the multimodal window on a node, to its end (logic in module_utils/_window_job.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: window_job
short_description: Run one job of the multimodal window on a node, to its end, and keep its record
version_added: 0.1.0
description:
  - Runs a container from O(image) with O(command), labelled C(dgxspark.cluster.window) (its value O(name)) and
    named C(dgxspark-window-NAME), and waits until it exits or O(timeout_s) passes; then it is stopped (SIGTERM,
    then SIGKILL after O(stop_timeout)).
  - The memory guard stops a running container with that label when it trips, and the boot's preflight refuses to
    start ranks while one runs. C(playbooks/window.yml) stops serving before it and boots the promoted release
    again after it.
  - Returns the job's outcome (V(succeeded), V(failed), V(killed), V(oom-killed), V(timed-out)), exit code and last
    log lines, saves them on the node under O(save_dir) (0600), and removes the container. A job that fails is not
    a failure of this module; a job that could not be started is (another window job runs on the node, the image is
    missing, the engine refused).
  - An exited container of an earlier window job is removed first.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  name:
    description: The job's name (1-48 of a-z, 0-9, C(_), C(.), C(-)); the container is C(dgxspark-window-NAME).
    type: str
    required: true
  image:
    description: The job's image, a tag or an image ID already on the node (C(playbooks/images.yml) puts one there).
    type: str
    required: true
  command:
    description: The job's command, a list of words (the image's entrypoint runs it).
    type: list
    elements: str
    required: true
  env:
    description: Environment variables for the job. A name that looks like a secret is refused (give a secret as a
      file in a mounted volume).
    type: dict
    default: {}
  volumes:
    description: Bind mounts, each C(HOST_PATH:CONTAINER_PATH) with an optional C(:ro) or C(:rw).
    type: list
    elements: str
    default: []
  gpus:
    description: Give the job every GPU of the node (the NVIDIA container runtime's device request).
    type: bool
    default: true
  network_mode:
    description: The job's network (the ranks use the host's).
    type: str
    choices: [host, bridge, none]
    default: host
  timeout_s:
    description: How long the job may run, in seconds, before it is stopped.
    type: int
    default: 3600
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL when the job is stopped.
    type: int
    default: 10
  save_dir:
    description: Where on the node the job's record (outcome, exit code, times, last 200 log lines) is saved, one
      JSON file, mode 0600 in a 0700 directory. Empty saves nothing.
    type: path
    default: /var/log/dgxspark-cluster/windows
  log_lines:
    description: How many of the job's last log lines to return.
    type: int
    default: 20
extends_documentation_fragment:
  - dgxspark.cluster.docker
attributes:
  check_mode:
    support: full
    description: Checks that the job could start (no other window job runs, the image is there); runs nothing.
  diff_mode:
    support: none
    description: The job's record is its report.
"""

EXAMPLES = r"""
- name: Run a captioning job on the head, at most an hour, the guard watching
  dgxspark.cluster.window_job:
    name: captions
    image: captioner:2026.11
    command: [python, -m, captioner, /data/in, /data/out]
    volumes: [/srv/data:/data]
    timeout_s: 3600
  register: job
"""

RETURN = r"""
outcome:
  description: What the job did - V(succeeded), V(failed), V(killed), V(oom-killed) or V(timed-out); null in check
    mode.
  returned: always
  type: str
exit_code:
  description: The job container's exit code.
  returned: when it ran
  type: int
oom_killed:
  description: The kernel's OOM killer ended it.
  returned: when it ran
  type: bool
seconds:
  description: How long it ran.
  returned: when it ran
  type: float
log_tail:
  description: Its last O(log_lines) log lines.
  returned: when it ran
  type: list
  elements: str
saved:
  description: The record's path on the node (null when nothing was saved).
  returned: when it ran
  type: str
container:
  description: The job container's name.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import stop_wait
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_module import DOCKER_HOST, module_engine
from ansible_collections.dgxspark.cluster.plugins.module_utils._window_job import Job, WindowJobError, run_job

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "image": {"type": "str", "required": True},
    "command": {"type": "list", "elements": "str", "required": True},
    "env": {"type": "dict", "default": {}},
    "volumes": {"type": "list", "elements": "str", "default": []},
    "gpus": {"type": "bool", "default": True},
    "network_mode": {"type": "str", "choices": ["host", "bridge", "none"], "default": "host"},
    "timeout_s": {"type": "int", "default": 3600},
    "stop_timeout": {"type": "int", "default": 10},
    "save_dir": {"type": "path", "default": "/var/log/dgxspark-cluster/windows"},
    "log_lines": {"type": "int", "default": 20},
    **DOCKER_HOST,
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["timeout_s"] < 1:
        module.fail_json(msg=f"timeout_s: at least 1 second, found {params['timeout_s']}")
    with module_engine(module, stop_wait(params["stop_timeout"])) as engine:
        try:
            job = Job(
                name=params["name"],
                image=params["image"],
                command=params["command"],
                env={str(key): str(value) for key, value in params["env"].items()},
                volumes=params["volumes"],
                gpus=params["gpus"],
                network_mode=params["network_mode"],
            )
            result = run_job(
                engine,
                job,
                timeout_s=float(params["timeout_s"]),
                stop_timeout=params["stop_timeout"],
                save_dir=params["save_dir"] or None,
                log_lines=params["log_lines"],
                check_mode=module.check_mode,
            )
        except WindowJobError as error:
            module.fail_json(msg=str(error), outcome=None, container=f"dgxspark-window-{params['name']}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
