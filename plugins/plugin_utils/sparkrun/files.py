# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files an import writes, as text, relative to its destination: ``serving-profile.json``, ``hosts.yml`` and
``group_vars/dgxspark.yml`` (the layout of ``inventories/spark3``), and the whole import run as one function."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import HEAD_GROUP, WORKERS_GROUP
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.mapping import Imported, import_recipe
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.recipe import load_recipe

PROFILE_FILE = "serving-profile.json"
HOSTS_FILE = "hosts.yml"
GROUP_VARS_FILE = "group_vars/dgxspark.yml"
MISSING = "MISSING"


def _q(value: Any) -> str:
    """A YAML scalar (JSON's spelling is YAML's)."""
    return json.dumps(value)


def hosts_yml(imported: Imported, source: str) -> str:
    lines = [
        "---",
        "# Imported by playbooks/import_sparkrun.yml from the sparkrun recipe",
        f"#   {source}",
        "# One rank per host, in the order the hosts were given (sparkrun_hosts); the head is rank 0. ansible_host is",
        "# where Ansible (SSH) reaches each host; dgxspark_fabric_address is its fabric ports' address (NCCL, the",
        "# head's rendezvous), on another network than ansible_host (seed 000).",
    ]
    if imported.fabric_missing:
        lines += [
            f"# {MISSING}: the fabric addresses (sparkrun finds them on the nodes; this inventory states them).",
            "# plan.yml refuses this inventory until every dgxspark_fabric_address is set: edit them below, or import",
            "# again with -e import_fabric=F0,F1,... -e import_force=true.",
        ]
    lines += ["dgxspark:", "  children:"]
    for group, members in ((HEAD_GROUP, imported.hosts[:1]), (WORKERS_GROUP, imported.hosts[1:])):
        lines += [f"    {group}:", "      hosts:"]
        for host in members:
            rank = imported.hosts.index(host)
            lines += [
                f"        {host['name']}:",
                f"          ansible_host: {_q(host['ansible_host'])}",
                f"          dgxspark_rank: {rank}",
            ]
            if host["fabric_address"] is None:
                lines.append(f"          dgxspark_fabric_address: null  # {MISSING}: this host's fabric address")
            else:
                lines.append(f"          dgxspark_fabric_address: {_q(host['fabric_address'])}")
    return "\n".join(lines) + "\n"


def group_vars_yml(imported: Imported, source: str) -> str:
    return "\n".join(
        [
            "---",
            "# The serving profile imported from a sparkrun recipe (hosts.yml names it), and its shape.",
            'dgxspark_profile: "{{ inventory_dir }}/serving-profile.json"',
            f"dgxspark_shape: {_q(imported.shape)}",
            "# The login on every node (sparkrun's ssh user): set it.",
            "# ansible_user: nvidia",
            "",
        ]
    )


def before_serving(imported: Imported) -> str:
    """The report's line on the seed rules the profile waives: each must be fixed before serving."""
    waivers = list(imported.profile.get("waivers", {}))
    if not waivers:
        return "the profile waives no seed rule"
    return (
        f"before serving: the profile waives {', '.join(waivers)} (its waivers say why and how to fix it; plan.yml "
        "warns of it on every run until then)"
    )


def run_import(
    text: str,
    source: str,
    hosts: Sequence[str],
    fabric: Sequence[str] | None = None,
    variant: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read the recipe, map it, and render the files: ``files`` (relative path to text), ``notes`` (what became of
    every setting), ``warnings`` (the plan's), ``waivers`` (the seed rules the profile waives, by name, with the
    reason: what to fix before serving), ``before_serving`` (one line saying so), ``shape``, ``fabric_missing``.
    RecipeError or ImportRefused as the reading or the mapping raise them; nothing is written here."""
    recipe = load_recipe(text, source, variant, options)
    imported = import_recipe(recipe, hosts, fabric)
    return {
        "files": {
            PROFILE_FILE: json.dumps(imported.profile, indent=2) + "\n",
            HOSTS_FILE: hosts_yml(imported, source),
            GROUP_VARS_FILE: group_vars_yml(imported, source),
        },
        "notes": [note.render() for note in imported.notes],
        "warnings": list(imported.warnings),
        "waivers": dict(imported.profile.get("waivers", {})),
        "before_serving": before_serving(imported),
        "shape": imported.shape,
        "runtime": recipe.runtime,
        "fabric_missing": imported.fabric_missing,
        "hosts": [dict(h) for h in imported.hosts],
    }


def as_list(value: Any) -> list[str] | None:
    """A list of hosts or addresses from ``-e x=a,b,c`` (text) or a list; None for none."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return [item.strip() for item in value.split(",")]
    if isinstance(value, (list, tuple)):
        return [str(item).strip() for item in value]
    raise ValueError(f"expected a comma-separated text or a list, not {value!r}")
