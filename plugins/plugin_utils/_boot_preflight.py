# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight on the controller, in one pass over the facts every node gave in one round trip.

1. Bind the plan's one late input: what each node offers NCCL on its planned fabric ports (``nccl_names``,
   the fabric role's own rule, read from the same facts), so the plan that is judged is the one that starts.
2. Judge every node against that plan (``_preflight.preflight``: a line per check and node).
3. Say what each converging role would change there (the fabric's files, sysctls, ports and unit; the memory
   guard's difference, worked out by its role) and what pausing, arming and starting would do: the check
   mode's answer, and the real boot's plan of work, with nothing more asked of a node.

Plain data in and out; the ``boot_preflight`` action plugin reads the profile and rebuilds the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._fabric_verify import nccl_names
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._converge import difference, fabric_expectation

# The fabric role's settings the difference depends on (its variables without the fabric_ prefix).
FABRIC_SETTINGS = ("backend", "networkd_dir", "netplan_dir", "sysctl_dir")


def discovered(facts: Mapping[str, Any], fabric: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Host to what its node offers NCCL on its planned ports (hca, socket_ifname, gid_index), from its facts;
    None for a node without usable fabric facts (the plan then keeps what the inventory says)."""
    found: dict[str, Any] = {}
    for host, share in fabric.items():
        node = facts.get(host)
        try:
            found[host] = nccl_names(host, list(share["fabric"]["interfaces"]), dict(node))[0]  # type: ignore[arg-type]
        except (KeyError, TypeError, AttributeError):
            found[host] = None
    return found


def fabric_differences(
    facts: Mapping[str, Any], fabric: Mapping[str, Mapping[str, Any]], settings: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Host to what the fabric role would change on it (``_converge.difference``); empty: nothing.
    ``settings`` maps a host to the fabric role's :data:`FABRIC_SETTINGS` there (absent: the role's defaults)."""
    out: dict[str, list[str]] = {}
    for host, share in fabric.items():
        node = facts.get(host)
        if not isinstance(node, Mapping):
            out[host] = ["no node facts: the role must run to know"]
            continue
        given = settings.get(host) or {}
        dirs = {key: str(given[key]) for key in FABRIC_SETTINGS[1:] if given.get(key)}
        expect = fabric_expectation(share, str(given.get("backend") or "auto"), node, **dirs)
        out[host] = difference(node, expect)
    return out


def to_replace(plan: Mapping[str, Any], facts: Mapping[str, Any], as_planned: Mapping[str, bool]) -> dict[str, bool]:
    """Host to whether a container of its rank's name is there but does not serve as planned (the preflight
    FAILs it unless the operator asked to replace it; then the boot recreates it)."""
    out: dict[str, bool] = {}
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host) if isinstance(facts.get(host), Mapping) else {}
        names = [c.get("name") for c in ((node.get("docker") or {}).get("containers") or [])]
        out[host] = rank["container_name"] in names and not as_planned.get(host)
    return out


def kernel_differences(lines: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """Host to what the kernel role would look at again: its preflight lines of the kernel and limits families
    that did not pass (a WARN the role may fix live; a FAIL stops the boot before that)."""
    out: dict[str, list[str]] = {}
    for line in lines:
        if line["check"] in ("kernel", "limits"):
            out.setdefault(line["host"], [])
            if line["status"] in ("WARN", "FAIL"):
                out[line["host"]].append(f"{line['check']}: {line['message']}")
    return out


def would_do(
    plan: Mapping[str, Any],
    profile: Mapping[str, Any],
    facts: Mapping[str, Any],
    as_planned: Mapping[str, bool],
    differences: Mapping[str, Mapping[str, Sequence[str]]],
) -> list[str]:
    """What a boot would do on every node, a line or more per node: the roles' differences, the helpers it would
    pause, the guard's phase, and the rank it would start or leave alone."""
    helpers = list((profile.get("host") or {}).get("helper_services") or [])
    lines: list[str] = []
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host) if isinstance(facts.get(host), Mapping) else {}
        for role, changes in (differences.get(host) or {}).items():
            if changes:
                lines.append(f"{host}: the {role} would change: " + "; ".join(changes))
            else:
                lines.append(f"{host}: the {role} is as planned: left alone")
        units = ((node.get("services") or {}).get("units")) or {}
        running = [h for h in helpers if (units.get(h) or {}).get("active_state") == "active"]
        guard = node.get("memguard") or {}
        lines.append(
            f"{host}: "
            + (f"would pause {', '.join(running)}" if running else "no helper to pause")
            + "; would switch the memory guard to startup "
            + (f"from {guard.get('phase') or '?'}" if guard.get("installed") else "(it is installed by a real run)")
        )
        lines.append(
            f"rank {rank['rank']} ({host}): "
            + (
                "already serves as planned: left alone"
                if as_planned.get(host)
                else f"would start {rank['container_name']} ({rank['image']}, spec {rank['spec_sha256'][:12]})"
            )
        )
    every = bool(as_planned) and all(as_planned.values())
    lines.append(
        "check mode: the plan and the preflight passed. "
        + ("Every rank already serves as planned, so a boot would change nothing. " if every else "")
        + "Nothing was changed on any node or on this controller, and nothing more was asked of the nodes."
    )
    return lines
