#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop the collection's rank containers on a node, found by label (logic in module_utils/_rank_stop.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_stop
short_description: Stop (and remove) the collection's rank containers on a node, found by their label
version_added: 0.1.0
description:
  - Finds every container that carries the C(dgxspark.cluster.rank) label the plan puts on each rank, whatever
    the serving profile says now, so that a changed or broken profile can still stop what runs. A container
    without that label is never touched.
  - Stops each one that runs (SIGTERM, then SIGKILL after O(stop_timeout)), reads its exit code and last log
    lines, and with O(remove) saves them on the node under O(save_dir) and removes the container, so that a
    stop followed by a boot needs no replace.
  - Then asks the Docker engine again and fails when a rank still runs (or, with O(remove), still exists).
    Fails when the engine cannot be asked at all, so that "nothing serves" is never reported unchecked.
  - An absent rank is fine (nothing to do). The boot's undo and C(playbooks/stop.yml) use it.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  remove:
    description: Remove the containers after saving their exit code and log tail.
    type: bool
    default: true
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL.
    type: int
    default: 10
  save_dir:
    description: Where on the node each removed rank's record (exit code, times, last log lines) is saved, one
      JSON file each, mode 0600 in a 0700 directory. Empty saves nothing.
    type: path
    default: /var/log/dgxspark-cluster/ranks
  log_lines:
    description: How many of each rank's last log lines to return (the saved record keeps 200).
    type: int
    default: 20
extends_documentation_fragment:
  - dgxspark.cluster.docker
attributes:
  check_mode:
    support: full
    description: Reports what it would stop and remove; stops, saves and removes nothing.
  diff_mode:
    support: none
    description: The ranks it stops are its report.
"""

EXAMPLES = r"""
- name: Stop every rank on the node and remove it, keeping its log tail
  dgxspark.cluster.rank_stop:
  register: stopped

- name: Stop the ranks but keep the containers (docker logs still works)
  dgxspark.cluster.rank_stop:
    remove: false
"""

RETURN = r"""
ranks:
  description: One record per rank container found, in rank order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The container's name.
      returned: always
      type: str
    rank:
      description: The rank, from its label.
      returned: always
      type: str
    was_running:
      description: It ran before the stop.
      returned: always
      type: bool
    status:
      description: Its status after the stop (exited, created, ...).
      returned: always
      type: str
    exit_code:
      description: Its exit code.
      returned: always
      type: int
    oom_killed:
      description: The kernel's OOM killer ended it, before the stop.
      returned: always
      type: bool
    log_tail:
      description: Its last O(log_lines) log lines (the saved record keeps 200).
      returned: always
      type: list
      elements: str
    saved:
      description: The record's path on the node (null when nothing was saved).
      returned: always
      type: str
    removed:
      description: The container was removed.
      returned: always
      type: bool
stopped:
  description: The names of the containers that ran and were stopped (or would be, in check mode).
  returned: always
  type: list
  elements: str
removed:
  description: The names of the containers removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import stop_wait
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_module import DOCKER_HOST, module_engine
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import STOP_OPTIONS, RankStopError, stop_ranks

ARGUMENT_SPEC = {**STOP_OPTIONS, **DOCKER_HOST}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    with module_engine(module, stop_wait(params["stop_timeout"])) as engine:
        try:
            result = stop_ranks(
                engine,
                remove=params["remove"],
                stop_timeout=params["stop_timeout"],
                save_dir=params["save_dir"] or None,
                log_lines=params["log_lines"],
                check_mode=module.check_mode,
            )
        except RankStopError as error:
            module.fail_json(msg=str(error), ranks=[], stopped=[], removed=[])
    verb = "would stop" if module.check_mode else "stopped"
    result["msg"] = (
        f"{verb} {len(result['stopped'])}, "
        + ("would remove " if module.check_mode else "removed ")
        + f"{len(result['removed'])} of {len(result['ranks'])} rank container(s)"
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
