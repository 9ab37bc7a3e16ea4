# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge from facts (logic in plugin_utils/preflight/converge.py). Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import converge as _converge


def converge_difference(node: Any, expect: Any) -> list[str]:
    try:
        return _converge.difference(node or {}, expect or {})
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.converge_difference: {error}") from None


def fabric_expectation(plan: Any, backend: str = "auto", node: Any = None, **dirs: str) -> dict[str, Any]:
    try:
        return _converge.fabric_expectation(plan, backend, node, **dirs)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.fabric_expectation: {error}") from None


def fabric_difference(node: Any, plan: Any, backend: str = "auto", **dirs: str) -> list[str]:
    try:
        return _converge.fabric_difference(node or {}, plan, backend, **dirs)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.fabric_difference: {error}") from None


def fabric_difference_report(differences: Any, host: Any, check_mode: Any = False) -> list[str]:
    if isinstance(differences, str) or not isinstance(differences, Sequence):
        raise AnsibleFilterError("dgxspark.cluster.fabric_difference_report: needs fabric_difference's list")
    return _converge.report(str(host), "fabric", differences, boolean(check_mode, strict=False))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "converge_difference": converge_difference,
            "fabric_expectation": fabric_expectation,
            "fabric_difference": fabric_difference,
            "fabric_difference_report": fabric_difference_report,
        }
