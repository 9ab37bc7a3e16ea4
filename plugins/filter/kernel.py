# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the kernel role. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError, format_problems
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import kernel as _kernel


def kernel_findings(node: Any, expect: Any = None, skip: Any = ()) -> list[dict[str, Any]]:
    try:
        return _kernel.kernel_findings(node, expect, skip)
    except ProfileError as exc:
        raise AnsibleFilterError("dgxspark.cluster.kernel_findings: " + format_problems(exc.problems)) from None


def kernel_grub_dropin(words: Any, waived: Any = ()) -> str:
    try:
        return _kernel.grub_dropin(words, waived)
    except ValueError as exc:
        raise AnsibleFilterError(f"dgxspark.cluster.kernel_grub_dropin: {exc}") from None


def kernel_sysctl_dropin(settings: Any, existing: Any = None) -> str:
    try:
        return _kernel.sysctl_dropin(settings, existing)
    except ValueError as exc:
        raise AnsibleFilterError(f"dgxspark.cluster.kernel_sysctl_dropin: {exc}") from None


def kernel_expectation(
    planned: Any, expect: Any = None, kho_on_7x: Any = True, check_limits: Any = True, host: Any = None
) -> dict[str, Any]:
    if not isinstance(planned, Mapping) or not isinstance(planned.get("profile"), Mapping):
        raise AnsibleFilterError(
            "dgxspark.cluster.kernel_expectation: needs a serving_profile result (with its profile)"
        )
    if expect is not None and not isinstance(expect, Mapping):
        raise AnsibleFilterError(f"dgxspark.cluster.kernel_expectation: expect must be a dict, found {expect!r}")
    try:
        return _kernel.required(
            planned, expect, kho_on_7x, boolean(check_limits, strict=False), None if host is None else str(host)
        )
    except ProfileError as exc:
        raise AnsibleFilterError("dgxspark.cluster.kernel_expectation: " + format_problems(exc.problems)) from None


def _findings(name: str, findings: Any) -> Sequence[Mapping[str, Any]]:
    if (
        not isinstance(findings, Sequence)
        or isinstance(findings, str)
        or not all(isinstance(f, Mapping) for f in findings)
    ):
        raise AnsibleFilterError(f"dgxspark.cluster.{name}: needs kernel_findings' list of findings")
    return findings


def kernel_live_sysctls(findings: Any) -> dict[str, str]:
    return _kernel.live_sysctls(_findings("kernel_live_sysctls", findings))


def kernel_missing_words(findings: Any) -> list[str]:
    return _kernel.missing_words(_findings("kernel_missing_words", findings))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "kernel_findings": kernel_findings,
            "kernel_report": _kernel.report,
            "kernel_grub_dropin": kernel_grub_dropin,
            "kernel_sysctl_dropin": kernel_sysctl_dropin,
            "kernel_expectation": kernel_expectation,
            "kernel_live_sysctls": kernel_live_sysctls,
            "kernel_missing_words": kernel_missing_words,
        }
