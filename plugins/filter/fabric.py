# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fabric role. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.nccl_tests import (
    DEFAULT_FLOOR_GBPS,
    bandwidth_verdict,
    parse_nccl_tests,
)


def nccl_tests_verdict(
    text: str, floor_gbps: float = DEFAULT_FLOOR_GBPS, min_bytes: int | None = None
) -> dict[str, Any]:
    """nccl-tests output -> its peak and average bus bandwidth against a floor (with the parsed run)."""
    try:
        parsed = parse_nccl_tests(str(text))
        return {**bandwidth_verdict(parsed, floor_gbps, min_bytes), "run": parsed}
    except ValueError as error:
        raise AnsibleFilterError(f"dgxspark.cluster.nccl_tests_verdict: {error}") from None


def fabric_nccl_names(node: Any, fabric: Any) -> dict[str, Any]:
    """What a node offers NCCL on its planned ports, from its node_facts (the fabric role's own rule)."""
    try:
        return nccl_names(str(fabric["host"]), list(fabric["interfaces"]), node)[0]
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError(
            f"dgxspark.cluster.fabric_nccl_names: needs node_facts with fabric and rdma, and a fabric plan: {error}"
        ) from None


def fabric_not_management(node: Any, host: Any, management: Any = None, waived: Any = None) -> dict[str, str]:
    """The boot preflight's ``fabric-not-management`` line for one node, from its node_facts (``fabric`` section,
    gathered for its planned ports): no planned port carries ``management`` (where Ansible connects to it), nor
    its IPv4 default route. The same function as the preflight's, so the fabric role refuses what it refuses."""
    if not isinstance(node, dict):
        raise AnsibleFilterError("dgxspark.cluster.fabric_not_management: needs a node_facts node (a dict)")
    name = str(host)
    return _not_management(name, node, str(management) if management else name, str(waived) if waived else None)


# imported when first called (plugin_utils/_lazy.py says why)
_not_management = lazy("plugin_utils.preflight.checks", "fabric_not_management")
nccl_names = lazy("module_utils._roce", "nccl_names")
verify_report = lazy("plugin_utils.plan.fabric", "verify_report")
_stale_networkd_files = lazy("plugin_utils.plan.fabric", "stale_networkd_files")
_removed_ports = lazy("plugin_utils.plan.fabric", "removed_ports")
_port_states = lazy("plugin_utils.plan.fabric", "port_states")


def fabric_port_states(interfaces: Any) -> str:
    """Each of a node's fabric ports with its state, as node_facts found them."""
    if not isinstance(interfaces, Mapping) or not all(isinstance(port, Mapping) for port in interfaces.values()):
        raise AnsibleFilterError("dgxspark.cluster.fabric_port_states: needs node_facts' fabric.interfaces (a dict)")
    return _port_states(interfaces)


def fabric_stale_files(found: Any, plan: Any, directory: str) -> list[str]:
    """The fabric networkd files a node has that its plan no longer has (the role removes them)."""
    if (found is not None and not isinstance(found, Mapping)) or not isinstance(plan, Mapping):
        raise AnsibleFilterError("dgxspark.cluster.fabric_stale_files: needs find's answer and a fabric plan")
    try:
        return _stale_networkd_files(found, list(plan.get("networkd") or {}), str(directory))
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.fabric_stale_files: needs find's answer: {error}") from None


def fabric_removed_ports(removed: Any) -> list[str]:
    """The ports whose fabric networkd file the role removed this run."""
    if removed is not None and not isinstance(removed, Mapping):
        raise AnsibleFilterError("dgxspark.cluster.fabric_removed_ports: needs the removal's registered answer")
    try:
        return _removed_ports(removed)
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.fabric_removed_ports: {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "fabric_report": verify_report,
            "nccl_tests_verdict": nccl_tests_verdict,
            "fabric_nccl_names": fabric_nccl_names,
            "fabric_not_management": fabric_not_management,
            "fabric_stale_files": fabric_stale_files,
            "fabric_removed_ports": fabric_removed_ports,
            "fabric_port_states": fabric_port_states,
        }
