# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a role would change on a node, from the node's facts and what the role expects: one difference record.

The community.docker pattern: compute the difference first, act only on it, and show it as the diff. A role
states what it needs of a node as an *expectation* (the files it writes and their SHA-256, the units that must
be active and enabled, the ports' MTU and addresses); ``node_facts`` gathers the matching facts in the
preflight's one round trip; this module compares the two on the controller. An empty difference means the
role would change nothing there, so a boot skips it and ``--check`` adds no round trip for it.

An expectation::

    {"files": {path: sha256 | None},          # None: the file must not exist
     "units": [unit, ...],                     # active and enabled
     "ports": {name: {"mtu": 9000, "ipv4": ["10.99.3.1/32"]}}}
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any


def sha256(text: str) -> str:
    """The SHA-256 of ``text`` as written to a file (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _short(digest: Any) -> str:
    return str(digest)[:12] if digest else "none"


def difference(node: Mapping[str, Any], expect: Mapping[str, Any]) -> list[str]:
    """Each thing on the node that differs from ``expect``, as ``what: found → expected``; empty when none.

    A fact that was not gathered counts as a difference (the role must run to know), never as a match.
    """
    out: list[str] = []
    files = ((node.get("files") or {}).get("paths")) or {}
    for path, digest in (expect.get("files") or {}).items():
        found = files.get(path)
        if not isinstance(found, Mapping):
            out.append(f"{path}: not looked at → {'absent' if digest is None else 'sha256 ' + _short(digest)}")
        elif digest is None:
            if found.get("exists"):
                out.append(f"{path}: present → absent")
        elif not found.get("exists"):
            out.append(f"{path}: absent → sha256 {_short(digest)}")
        elif found.get("sha256") != digest:
            out.append(f"{path}: sha256 {_short(found.get('sha256'))} → {_short(digest)}")
    units = ((node.get("services") or {}).get("units")) or {}
    for unit in expect.get("units") or []:
        state = units.get(unit)
        if not isinstance(state, Mapping):
            out.append(f"{unit}: not looked at → active, enabled")
            continue
        active, enabled = state.get("active_state"), state.get("unit_file_state")
        if active != "active" or enabled != "enabled":
            out.append(f"{unit}: {active or 'unknown'}, {enabled or 'unknown'} → active, enabled")
    interfaces = ((node.get("fabric") or {}).get("interfaces")) or {}
    for name, want in (expect.get("ports") or {}).items():
        port = interfaces.get(name)
        if not isinstance(port, Mapping):
            out.append(f"{name}: not found → MTU {want.get('mtu')}, {', '.join(want.get('ipv4') or [])}")
            continue
        if want.get("mtu") is not None and port.get("mtu") != want["mtu"]:
            out.append(f"{name} MTU: {port.get('mtu')} → {want['mtu']}")
        have = port.get("ipv4")
        for address in want.get("ipv4") or []:
            if have is None:
                out.append(f"{name} address {address}: not looked at → present")
            elif address not in have:
                out.append(f"{name} address {address}: missing → present")
    return out


NETPLAN_BIN = "/usr/sbin/netplan"


def fabric_expectation(
    plan: Mapping[str, Any],
    backend: str = "auto",
    node: Mapping[str, Any] | None = None,
    networkd_dir: str = "/etc/systemd/network",
    netplan_dir: str = "/etc/netplan",
    sysctl_dir: str = "/etc/sysctl.d",
) -> dict[str, Any]:
    """What the fabric role writes and sets on a node for its ``fabric_plan`` result.

    ``backend`` auto is read from ``node``'s facts (netplan when ``/usr/sbin/netplan`` exists); without facts,
    both backends' files are listed as wanted facts (``paths``) and nothing is expected of either.
    """
    files: dict[str, str | None] = {}
    netplan = _netplan_used(backend, node)
    if netplan is not False:
        files[f"{netplan_dir}/60-dgxspark-fabric.yaml"] = sha256(str(plan["netplan"]))
    if netplan is not True:
        for name, content in (plan.get("networkd") or {}).items():
            files[f"{networkd_dir}/{name}"] = sha256(str(content))
    sysctls = plan.get("sysctls") or {}
    for key, value in sysctls.items():
        files["/proc/sys/" + str(key).replace(".", "/")] = sha256(f"{value}\n")
    if sysctls:  # the drop-in as the plan renders it whole (render_sysctl), which the role copies
        files[f"{sysctl_dir}/60-dgxspark-fabric.conf"] = sha256(str(plan["sysctl"]))
    ports = {
        str(i["name"]): {"mtu": i.get("mtu"), "ipv4": [i["address"]] if i.get("address") else []}
        for i in (plan.get("fabric") or {}).get("interfaces") or []
    }
    expect = {"files": files, "units": ["systemd-networkd.service"], "ports": ports}
    expect["paths"] = sorted([*files, NETPLAN_BIN]) if netplan is None else sorted(files)
    return expect


def _netplan_used(backend: str, node: Mapping[str, Any] | None) -> bool | None:
    if backend in ("netplan", "networkd"):
        return backend == "netplan"
    found = (((node or {}).get("files") or {}).get("paths") or {}).get(NETPLAN_BIN)
    return bool(found.get("exists")) if isinstance(found, Mapping) else None


# The fabric role's settings its converge-from-facts depends on, by the role variable that sets each (its
# vars/main.yml fabric_fact_settings gathers them; a host's own inventory value wins for that host).
FABRIC_SETTINGS = {
    "backend": "fabric_backend",
    "networkd_dir": "fabric_networkd_dir",
    "netplan_dir": "fabric_netplan_dir",
    "sysctl_dir": "fabric_sysctl_dir",
}


def fabric_settings_by_host(
    shares: Mapping[str, Any], settings: Mapping[str, Any], hostvars: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Each host's fabric role settings (:data:`FABRIC_SETTINGS`): ``settings`` (the play's), with a host's own
    inventory values of the role's variables winning for it."""
    by_host = {}
    for host in shares:
        own = hostvars.get(host) or {}
        by_host[host] = {key: own[var] if var in own else settings.get(key) for key, var in FABRIC_SETTINGS.items()}
    return by_host


def fabric_expectation_with(
    share: Mapping[str, Any], settings: Mapping[str, Any], node: Mapping[str, Any] | None
) -> dict[str, Any]:
    """:func:`fabric_expectation` for one host's share with that host's settings (absent: the role's defaults)."""
    dirs = {key: str(settings[key]) for key in FABRIC_SETTINGS if key != "backend" and settings.get(key)}
    return fabric_expectation(share, str(settings.get("backend") or "auto"), node, **dirs)


def fabric_difference(
    node: Mapping[str, Any], plan: Mapping[str, Any], backend: str = "auto", **dirs: str
) -> list[str]:
    """What would change on a node's fabric: its facts against what the fabric role writes and sets there for its
    ``fabric_plan`` result (:func:`fabric_expectation`, the ``backend`` auto read from the facts)."""
    return difference(node, fabric_expectation(plan, backend, node, **dirs))


# What a role says it does on a node that differs, by what it converges (check mode: what it would change).
DOING = {"fabric": "differs from the plan; configuring it:", "memory guard": "differs; installing it:"}


def report(host: str, what: str, differences: Sequence[str], check_mode: bool, notes: Sequence[str] = ()) -> list[str]:
    """The lines that say what a role changes on a node (``what``: fabric, memory guard), or would change in check
    mode: a line naming the node, then each of its ``differences`` (:func:`difference`), then any ``notes``."""
    doing = "would change (check mode):" if check_mode else DOING[what]
    return [f"{host}: the {what} {doing}", *(str(d) for d in differences), *notes]
