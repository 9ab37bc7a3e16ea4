# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: a plan rank's container through community.docker.docker_container, its parameters as one dict.

The plan (plugin_utils/plan/container.py) builds every rank's docker_container parameters; a task that spelled
them out one by one templated some 70 ``{{ p.x | default(omit) }}`` expressions for every host and task. This
passes the plan's dict as it is, refusing any key the plan cannot produce (``_container.PARAMETERS``): what
starts is what was judged, and nothing is dropped on the way.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import RANK_CONTAINER
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.container import PARAMETERS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import redact

MODULE = "community.docker.docker_container"


class ActionModule(ValidatedAction):
    _requires_connection = True
    ARGUMENT_SPEC = RANK_CONTAINER

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        params = args["params"]
        unknown = sorted(str(key) for key in params if key not in PARAMETERS)
        if unknown:
            result.update(
                failed=True,
                changed=False,
                msg=f"dgxspark.cluster.rank_container: not parameters a plan's container holds: {', '.join(unknown)} "
                "(give a rank's container from the plan: dgxspark.cluster.serving_profile's plan.ranks[].container)",
            )
            return result
        if "name" not in params or "image" not in params:
            result.update(failed=True, changed=False, msg="dgxspark.cluster.rank_container: params lacks name or image")
            return result
        module_args = {
            **params,
            "state": "present" if args["state"] == "created" else "started",
            "recreate": args["recreate"],
        }
        # the container's inspect, the diff and the module's invocation as shown (-v, -vvv) go through the one
        # redaction: the plan refuses a secret in a rank, and if one is there all the same it is not printed
        result.update(redact(self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)))
        return result
