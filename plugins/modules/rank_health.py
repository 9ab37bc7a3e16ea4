#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One look at a serving rank (logic in module_utils/_rank_health.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_health
short_description: Look once at a serving rank - its container, its last log lines and, on the head, its API
version_added: 0.1.0
description:
  - Asks the node's Docker engine (over its socket) for the rank's container state (running, status, exit code,
    OOM kill) and its last log lines, and, when O(api) is given (the head), the engine's C(/health) and
    C(/v1/models) on the node itself.
  - Read-only; C(dgxspark.cluster.wait_serving) calls it while a boot waits, and a failed boot uses it for the
    failing rank's log tail.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  container:
    description: The rank's container name.
    type: str
    required: true
  api:
    description: The rank's API base URL on the node, such as V(http://127.0.0.1:8000) (the head only).
    type: str
  api_key_file:
    description:
      - A file on the node holding the API's key (the profile's C(container.api.api_key_file)), sent in an
        C(Authorization) header (Bearer) to C(/v1/models). The module reads it on the node; the key is never an
        argument or a result.
    type: str
  ca_file:
    description: With an C(https) O(api), the PEM file on the node the server's certificate is checked against.
    type: str
  log_lines:
    description: How many of the container's last log lines to return.
    type: int
    default: 1
  timeout:
    description: Seconds each request may take.
    type: float
    default: 5
  wait:
    description:
      - With O(api), look again on the node every 0.25 s until the head serves (C(/health) and C(/v1/models)), its
        container stops, its API refuses the look for good (RV(refused)), or this many seconds passed. 0 looks once.
    type: float
    default: 0
extends_documentation_fragment:
  - dgxspark.cluster.docker
  - dgxspark.cluster.attributes.read_only
"""

EXAMPLES = r"""
- name: Look at the head
  dgxspark.cluster.rank_health:
    container: vllm_dsv41
    api: http://127.0.0.1:8000
    log_lines: 20
"""

RETURN = r"""
exists:
  description: The container exists.
  returned: always
  type: bool
running:
  description: The container runs; null when the Docker engine could not be asked (RV(error) says why).
  returned: always
  type: bool
status:
  description: The container's status (running, exited, ...), C(absent) when there is none.
  returned: always
  type: str
exit_code:
  description: Its exit code (after it exited).
  returned: always
  type: int
oom_killed:
  description: The kernel's OOM killer ended it.
  returned: always
  type: bool
log_tail:
  description: Its last O(log_lines) log lines.
  returned: always
  type: list
  elements: str
healthy:
  description: C(/health) answered 200 (null without O(api) or when the container does not run).
  returned: always
  type: bool
models:
  description: The model IDs C(/v1/models) lists (null until healthy).
  returned: always
  type: list
  elements: str
refused:
  description:
    - Why the API refuses this look for good - its certificate does not verify against O(ca_file), or it answers 401
      to the key sent (or to none) - waiting does not change it, so O(wait) stops there; null otherwise.
  returned: always
  type: str
started_at:
  description: Docker's own start time of the container (RFC 3339, UTC).
  returned: when the container exists
  type: str
port_open_at:
  description: When the API port first accepted a connection during this call (epoch seconds, the node's clock).
  returned: always
  type: float
ready_at:
  description: When the head first served (health and models) during this call (epoch seconds, the node's clock).
  returned: always
  type: float
error:
  description: Why the engine could not be asked.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import read_api_key, tls_context
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_module import DOCKER_HOST, module_engine
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_health import rank_health

ARGUMENT_SPEC = {
    "container": {"type": "str", "required": True},
    "api": {"type": "str"},
    "api_key_file": {"type": "str", "no_log": False},
    "ca_file": {"type": "str"},
    "log_lines": {"type": "int", "default": 1},
    "timeout": {"type": "float", "default": 5},
    "wait": {"type": "float", "default": 0},
    **DOCKER_HOST,
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        api_key = read_api_key(params["api_key_file"]) if params["api"] and params["api_key_file"] else None
        tls = tls_context(params["ca_file"]) if params["api"] and params["api"].startswith("https:") else None
    except ValueError as error:
        module.fail_json(msg=str(error))
    if api_key:
        module.no_log_values.add(api_key)
    with module_engine(module, params["timeout"]) as engine:
        result = rank_health(
            engine,
            params["container"],
            params["api"],
            params["log_lines"],
            params["timeout"],
            params["wait"],
            api_key=api_key,
            tls=tls,
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
