# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's ``dgxspark_overrides``, judged as the profile is judged.

A host may change its shape's sizing, environment, fabric names, speculative config and container (image, extra
``docker run`` and serve arguments). What that host runs is the profile with its overrides merged into the shape
(:func:`effective_data`): the rank is rendered from that, and every rule of the profile (schema, seed rules, memory
budget, KV floor, ``docker run`` policy, secrets, serve arguments) judges that, by the same code that judged the
profile (:func:`judge`). So a value refused or warned in the profile is refused or warned in an override, and the
problem names the host, the variable's path and, where the inventory shows it, the file that sets it.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Problem, ProfileError

OVERRIDES_VAR = "dgxspark_overrides"  # the host variable that holds them
# Lists an override appends to (a host adds options); any other value replaces, mappings merge key by key.
APPENDED = ("docker_run_args", "serve_args")
REPLACED = ("speculative_config",)
# Where group_vars and host_vars files may be, by the names Ansible reads.
_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; the lists of :data:`APPENDED` are appended to; anything else is replaced."""
    result = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping) and key not in REPLACED:
            result[key] = merge(result[key], value)
        elif isinstance(value, list) and isinstance(result.get(key), list) and key in APPENDED:
            result[key] = list(result[key]) + list(value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def effective_data(data: Mapping[str, Any], shape_name: str, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The profile as one host runs it: its overrides merged into the shape (a container override into the shape's
    ``container``, whose lists come after the profile's). ``data`` itself is left as it is."""
    if not overrides:
        return dict(data)
    result = dict(data)
    shapes = dict(data["shapes"])
    shapes[shape_name] = merge(shapes[shape_name], overrides)
    result["shapes"] = shapes
    return result


def judge(
    data: Mapping[str, Any],
    source: str,
    shape_name: str,
    overrides: Mapping[str, Any],
    known: Sequence[Problem] = (),
    origin: str | None = None,
) -> tuple[list[Problem], list[Problem]]:
    """Every rule of the profile on the profile with these overrides: the errors and the warnings that they bring
    (a warning the profile has already, ``known``, is not repeated), each pointed at the override's path
    (``dgxspark_overrides.sizing.max_num_seqs``); the caller names the host. Hosts with the same overrides from the
    same file get the same verdict, so it is worked out once for them."""
    # imported at first use: plan/inventory.py imports this module (origin_of), and a plugin that only reads the
    # inventory need not load the whole validator
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile

    merged = effective_data(data, shape_name, overrides)
    try:
        warnings = validate_profile(merged, source).warnings
        errors: list[Problem] = []
    except ProfileError as exc:
        errors, warnings = exc.problems, exc.warnings
    seen = {_key(p) for p in known}
    located = _Locator(data, shape_name, overrides, origin)
    return (
        [located(p) for p in errors],
        [located(p) for p in warnings if _key(p) not in seen],
    )


def _key(problem: Problem) -> tuple[str, str, str]:
    return problem.where, problem.message, json.dumps(problem.found, sort_keys=True, default=str)


class _Locator:
    """Points a problem found on the merged profile at what the host's overrides set."""

    def __init__(
        self, data: Mapping[str, Any], shape_name: str, overrides: Mapping[str, Any], origin: str | None
    ) -> None:
        self.prefix = f"$.shapes.{shape_name}"
        self.variable = OVERRIDES_VAR
        self.overrides = overrides
        self.origin = origin or "inventory"
        own = data["shapes"][shape_name].get("container", {})
        top = data.get("container", {})
        # where the override's list items start in each list the checks index
        self.first = {
            "docker_run_args": len(own.get("docker_run_args", [])),
            "serve_args": len(top.get("serve_args", [])) + len(own.get("serve_args", [])),
        }

    def __call__(self, problem: Problem) -> Problem:
        return Problem(
            self.where(problem.where),
            problem.message,
            problem.found,
            problem.expected,
            problem.hint,
            problem.severity,
            self.origin,
            None,
        )

    def where(self, where: str) -> str:
        rest = where[len(self.prefix) :] if where.startswith(self.prefix) else None
        if rest is None or (rest and rest[0] not in ".[ "):
            return f"{self.variable} (with {where})"
        listed = re.match(r"\.container\.(docker_run_args|serve_args)\b[^\[]*\[(\d+)\]$", rest)
        if listed:
            key, index = listed.group(1), int(listed.group(2)) - self.first[listed.group(1)]
            if 0 <= index < len(self.overrides.get("container", {}).get(key, [])):
                return f"{self.variable}.container.{key}[{index}]"
            return f"{self.variable} (with {where})"
        keys = re.findall(r"\.([A-Za-z0-9_-]+)", rest.split(" ")[0])
        if keys and keys[0] in self.overrides and (keys[0] != "container" or _sets(self.overrides, keys)):
            return self.variable + rest
        return f"{self.variable} (with {where})"


def _sets(overrides: Mapping[str, Any], keys: Sequence[str]) -> bool:
    node: Any = overrides
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def origin_of(name: str, variables: Mapping[str, Any], group_names: Sequence[str] | None = None) -> str | None:
    """The inventory file that sets ``dgxspark_overrides`` for host ``name``, as far as the files show it: its
    host_vars, then its groups' group_vars (the groups nearest the host first, as Ansible ranks them; ``all``
    last), then the inventory file itself. None when none of them names the variable (an extra var, say)."""
    directory = variables.get("inventory_dir")
    if not isinstance(directory, str) or not directory:
        return None
    groups = list(group_names if group_names is not None else variables.get("group_names") or [])
    candidates = _vars_files(os.path.join(directory, "host_vars", name))
    for group in [*reversed(groups), "all"]:
        candidates += _vars_files(os.path.join(directory, "group_vars", group))
    inventory = variables.get("inventory_file")
    if isinstance(inventory, str):
        candidates.append(inventory)
    for path in candidates:
        try:
            with open(path, encoding="utf-8") as handle:
                if OVERRIDES_VAR in handle.read():
                    return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _vars_files(stem: str) -> list[str]:
    found = [stem + suffix for suffix in _VARS_SUFFIXES if os.path.isfile(stem + suffix)]
    if os.path.isdir(stem):
        found += sorted(os.path.join(stem, f) for f in os.listdir(stem) if f.endswith(_VARS_SUFFIXES[1:]))
    return found
