# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: the boot's preflight, on the controller only (plugin_utils/preflight/boot.py)."""

from __future__ import annotations

import time
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases
from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import BOOT_PREFLIGHT
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import memguard as _memguard
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    connects_to,
    hosts_from_inventory,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import bind
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import boot as _boot_preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import CHECKS, preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.by import run_by_vars


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = BOOT_PREFLIGHT  # the one spec, which the module stub documents (module_utils/_specs.py)

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        named = args["cluster_groups"]  # the cluster's groups: head, workers
        planned, facts = args["planned"], args["facts"]
        unknown = sorted(set(args["skip"]) - set(CHECKS))
        if unknown:
            result.update(
                failed=True,
                msg=f"unknown preflight checks to skip: {', '.join(unknown)} (known: {', '.join(CHECKS)})",
            )
            return result
        if not planned.get("plan") or not planned["plan"].get("fabric"):
            result.update(failed=True, msg="planned: expects a serving_profile result with a plan")
            return result
        found = _boot_preflight.discovered(facts, planned["plan"]["fabric"])
        src = str(planned["src"])
        # the plan serving_profile built, with what the nodes offer NCCL and the head's weights bound in (an overlay:
        # not planned again)
        plan = bind(planned["plan"], {host: names for host, names in found.items() if names is not None}, facts)
        profile, profile_sha256 = planned["profile"], str(planned["profile_sha256"])
        hosts, _both = hosts_from_inventory(
            task_vars.get("hostvars", {}), task_vars.get("groups", {}), named["head"], named["workers"]
        )
        wanted = {rank["host"] for rank in plan["ranks"]}
        hosts = [h for h in hosts if h.name in wanted]
        decision, release_lines = _boot_preflight.release(
            plan,
            profile_sha256,
            facts,
            args["candidate"],
            args["release"] or None,
            host_sha256=_releases.host_sha256(profile),
        )
        verdict = preflight(
            facts,
            plan,
            profile,
            args["replace"],
            args["skip"],
            args["clear_trip"],
            more=release_lines,
            management={h.name: connects_to(h) for h in hosts},
        )
        images = _boot_preflight.image_ids(plan, facts)
        by = args["by"] or _controller_user(task_vars)
        record = _boot_preflight.release_record(planned, plan, decision, images, by, time.time())
        fabric = _boot_preflight.fabric_differences(facts, plan["fabric"], args["fabric_settings"])
        kernel = _boot_preflight.kernel_differences(verdict["lines"])
        try:
            guard = _guard_differences(args["memguard"], plan, facts, task_vars)
        except (_memguard.MemguardConfigError, OSError) as error:
            result.update(failed=True, msg=f"dgxspark.cluster.boot_preflight: the memory guard's plan: {error}")
            return result
        differences = {
            host: {
                "kernel": kernel.get(host, []),
                "fabric": fabric.get(host, []),
                "memory guard": guard.get(host, []),
            }
            for host in (rank["host"] for rank in plan["ranks"])
        }
        result.update(
            src=src,
            profile_sha256=profile_sha256,
            shape=plan["shape"],
            profile=profile,
            plan=plan,
            discovered=found,
            lines=verdict["lines"],
            report=verdict["report"],
            failures=verdict["failures"],
            as_planned=verdict["as_planned"],
            # ranks that serve as planned, restarted because another must start (the group starts together)
            restart=verdict["restart"],
            # the hosts whose container the boot creates again without being asked (restart, and containers created
            # as planned that never started)
            recreate=verdict["recreate"],
            # nodes where a boot that did not finish left its journal: undone first (playbooks/boot.yml)
            interrupted=verdict["interrupted"],
            to_replace=_boot_preflight.to_replace(plan, facts, verdict["as_planned"]),
            # host to the helper services running there: what its start phase pauses (and the undo resumes)
            to_pause=_boot_preflight.helpers_to_pause(plan, profile, facts),
            differences=differences,
            # the roles that would change something on some node (each then runs on every node)
            to_converge=[r for r in ("kernel", "fabric", "memory guard") if any(d[r] for d in differences.values())],
            images=images,
            release={**decision, "record": record, "by": by},
            ended=time.time(),
        )
        if self._task.check_mode:
            result["would"] = _boot_preflight.would_do(
                plan, profile, facts, verdict["as_planned"], differences, verdict["restart"], args["replace"]
            )
        if verdict["failed"]:
            result.update(
                failed=True,
                msg=[
                    *verdict["report"],
                    f"preflight: {len(verdict['failures'])} check(s) failed; nothing was changed:",
                    *(f"{f['check']}  {f['host']}  {f['message']}" for f in verdict["failures"]),
                ],
            )
        else:
            result["msg"] = verdict["report"] + result.get("would", [])
        return result


def _controller_user(task_vars: dict[str, Any]) -> str:
    """Who boots: the AWX user, else the AWX schedule, else the controller's login at its host (one way to name who:
    plugin_utils/release/by.py, the dgxspark.cluster.run_by lookup)."""
    return run_by_vars(task_vars)


def _guard_differences(
    memguard: dict[str, Any] | None,
    plan: dict[str, Any],
    facts: dict[str, Any],
    task_vars: dict[str, Any],
) -> dict[str, list[str]]:
    """What the memory guard's role would change on each rank's node, from its facts (none without ``memguard``).
    The key is read, never made: a preflight writes nothing (the converge makes it)."""
    if not memguard:
        return {}
    key = _memguard.key_if_any(memguard["key"], memguard["key_file"])
    return _memguard.differences_by_host(
        [rank["host"] for rank in plan["ranks"]],
        task_vars.get("hostvars") or {},
        memguard["settings"],
        plan["guard"],
        plan["container_name"],
        key,
        facts,
        _memguard.script_sha256(),
    )
