# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: validate a serving profile and plan every rank, on the controller only."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import SERVING_PROFILE
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._jsonfile import read_text
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError, format_problems
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    hosts_from_inventory,
    other_clusters_hosts,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import (
    fabric_expectation_with,
    fabric_settings_by_host,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import parse_profile, select_shape


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = SERVING_PROFILE  # the one spec, which the module stub documents (module_utils/_specs.py)

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        named = args["cluster_groups"]  # the cluster's groups: head, workers
        started, started_at = time.perf_counter(), time.time()
        if (args["src"] is None) == (args["content"] is None):
            result.update(failed=True, msg="give the profile as src (a file) or as content (its text), one of them")
            return result
        # content: a profile kept elsewhere (a release's, on the head); src then names it in problems
        src = self._resolve(args["src"]) if args["content"] is None else "(profile content given)"
        try:
            text = read_text(src) if args["content"] is None else args["content"]
            profile = parse_profile(text, src)
            shape = select_shape(profile, args["shape"])
            hosts, both = hosts_from_inventory(
                task_vars.get("hostvars", {}), task_vars.get("groups", {}), named["head"], named["workers"]
            )
            if args["discovered"] is not None:  # the fabric's late input, given; else each host's fabric_nccl
                hosts = [dataclasses.replace(h, discovered=args["discovered"].get(h.name)) for h in hosts]
            wanted = args["hosts"]
            if wanted is None:
                play_hosts = set(task_vars.get("ansible_play_hosts_all", []))
                wanted = [h.name for h in hosts if h.name in play_hosts]
            selected = [h for h in hosts if h.name in set(wanted)]
            unknown = sorted(set(wanted) - {h.name for h in hosts})
            if unknown:
                result.update(
                    failed=True,
                    msg=f"hosts not in {named['head']} or {named['workers']}: " + ", ".join(unknown),
                )
                return result
            strays = other_clusters_hosts(
                task_vars.get("ansible_play_hosts_all", []), hosts, task_vars.get("hostvars", {})
            )
            if strays:
                result.update(
                    failed=True,
                    msg=(
                        f"this run's hosts {', '.join(strays)} have a rank but are not in {named['head']} or "
                        f"{named['workers']}: the inventory holds more than one cluster, and a run acts on "
                        "one. Limit it to one cluster's group (--limit, or the AWX job template's limit); nothing "
                        "was touched."
                    ),
                )
                return result
            plan = None
            if selected:  # the one plan: every rank, and every host's share of the fabric, kernel, guard, preflight
                plan = build_plan(profile, shape, selected, (named["head"], named["workers"]), both)
        except ProfileError as exc:
            result.update(
                failed=True,
                msg=format_problems(
                    exc.problems,
                    f"{src}: the profile or its plan has {len(exc.problems)} problem(s); nothing was touched:",
                ),
                problems=[p.as_dict() for p in exc.problems + exc.warnings],
            )
            return result
        warnings = plan["warnings"] if plan else [w.render() for w in profile.warnings]
        waived = (
            plan["waived"] if plan else [{"check": w.waived, "text": w.render()} for w in profile.warnings if w.waived]
        )
        if args["show_warnings"]:
            # a rule the profile waives, with its reason, is the operator's own decision: said on one line by every
            # run (docs/security.md, "What a waiver costs"), on stderr as warnings are, and listed whole by plan.yml
            waived_texts = {w["text"] for w in waived}
            for warning in warnings:
                if warning not in waived_texts:
                    self._display.warning(warning)
            if waived:
                self._display.display(_waived_line(src, waived), stderr=True)
        fabric = plan["fabric"] if plan else None
        if fabric and args["fabric_settings"] is not None:  # what node_facts reads for the fabric role, by host
            settings = fabric_settings_by_host(fabric, args["fabric_settings"], task_vars.get("hostvars", {}))
            result.update(
                fabric_fact_settings=settings,
                fabric_fact_paths={
                    h: fabric_expectation_with(s, settings[h], None)["paths"] for h, s in fabric.items()
                },
            )
        result.update(
            src=src,
            profile_sha256=profile.sha256,
            shape=shape,
            shapes=profile.shape_names,
            profile=profile.data,
            text=text,
            plan=plan,
            started=started_at,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
            msg=(
                f"profile valid ({len(profile.shape_names)} shapes); "
                + (
                    f"{shape}: planned {plan['nodes']} ranks, head {plan['head']}"
                    if plan
                    else f"no hosts of {named['head']}/{named['workers']} in this play, so no plan"
                )
                + ("" if args["show_warnings"] else _counted(warnings, waived))
            ),
            warnings_found=warnings,
            waived=waived,
        )
        return result

    def _resolve(self, src: str) -> str:
        if os.path.isabs(src) or os.path.exists(src):
            return os.path.abspath(src)
        try:
            return self._find_needle("files", src)
        except Exception:  # noqa: BLE001 - not found anywhere: report the path as given
            return src


def _waived_line(src: str, waived: list[dict[str, str]]) -> str:
    """One line for the rules the profile waives: their names, once each, and where to read them whole."""
    checks = sorted({w["check"] for w in waived})
    return (
        f"waived by {src}: {', '.join(checks)} ({len(waived)} finding(s), each with the profile's reason; "
        "playbooks/plan.yml lists them)"
    )


def _counted(warnings: list[str], waived: list[dict[str, str]]) -> str:
    """``; 3 warning(s), 2 rule(s) waived`` for a run that does not show them, or ``; no warning``."""
    waived_texts = {w["text"] for w in waived}
    shown = [w for w in warnings if w not in waived_texts]
    said = f"; {len(shown)} warning(s)" if shown else "; no warning"
    return said + (f", {len(waived)} rule(s) waived by the profile, each with its reason" if waived else "")
