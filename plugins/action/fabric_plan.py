# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: one host's fabric plan (addresses, routes, files, checks), on the controller only."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import GROUPS_ARGUMENT_SPEC
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError, format_problems
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import (
    DEFAULT_PREFIX,
    plan_shares,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import hosts_from_inventory
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile, select_shape


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = {
        "src": {"type": "path", "required": True},
        "shape": {"type": "str"},
        "host": {"type": "str"},
        "topology": {"type": "str", "choices": ["triangle", "ring", "switch"]},
        "mtu": {"type": "int"},
        "prefix": {"type": "int", "default": DEFAULT_PREFIX},
        "link_speed_mbps": {"type": "int"},
        "cluster_groups": GROUPS_ARGUMENT_SPEC,
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        named = args["cluster_groups"]  # the cluster's groups: head, workers
        host = args["host"] or task_vars.get("inventory_hostname")
        hosts, _both = hosts_from_inventory(
            task_vars.get("hostvars", {}), task_vars.get("groups", {}), named["head"], named["workers"]
        )
        names = [h.name for h in hosts]
        if host not in names:
            result.update(failed=True, msg=f"{host} is in neither {named['head']} nor {named['workers']}")
            return result
        src = args["src"] if os.path.isabs(args["src"]) else os.path.abspath(args["src"])
        try:
            profile = load_profile(src)
            shape = select_shape(profile, args["shape"])
            overrides = {key: args[key] for key in ("topology", "mtu", "link_speed_mbps")}
            shares = plan_shares(profile.data["shapes"][shape], shape, hosts, args["prefix"], **overrides)
        except ProfileError as exc:
            result.update(
                failed=True,
                msg=format_problems(
                    exc.problems, f"the fabric plan has {len(exc.problems)} problem(s); nothing was touched:"
                ),
                problems=[p.as_dict() for p in exc.problems],
            )
            return result
        share = shares[host]
        settings = share["settings"]
        waiver = (profile.data.get("waivers") or {}).get("fabric-not-management")
        result.update(share, src=src, management_waiver=waiver)
        fabric = share["fabric"]
        ports = ", ".join(share["interfaces"])
        result["msg"] = (
            f"{host} rank {fabric['rank']}: {fabric['address']} on {ports}, MTU {fabric['mtu']}, "
            f"{settings['topology']} of {len(names)}; {len(fabric['routes'])} route(s), "
            f"{len(fabric['checks'])} peer check(s)"
        )
        return result
