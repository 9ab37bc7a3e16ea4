# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the kernel role. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils import _kernel
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError, format_problems


def kernel_findings(node: Any, expect: Any = None, skip: Any = ()) -> list[dict[str, Any]]:
    try:
        return _kernel.kernel_findings(node, expect, skip)
    except ProfileError as exc:
        raise AnsibleFilterError("dgxspark.cluster.kernel_findings: " + format_problems(exc.problems)) from None


def kernel_grub_dropin(words: Any) -> str:
    try:
        return _kernel.grub_dropin(words)
    except ValueError as exc:
        raise AnsibleFilterError(f"dgxspark.cluster.kernel_grub_dropin: {exc}") from None


def kernel_sysctl_dropin(settings: Any, existing: Any = None) -> str:
    try:
        return _kernel.sysctl_dropin(settings, existing)
    except ValueError as exc:
        raise AnsibleFilterError(f"dgxspark.cluster.kernel_sysctl_dropin: {exc}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "kernel_findings": kernel_findings,
            "kernel_report": _kernel.report,
            "kernel_grub_dropin": kernel_grub_dropin,
            "kernel_sysctl_dropin": kernel_sysctl_dropin,
        }
