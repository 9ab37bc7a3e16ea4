# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the memguard role. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import (
    MemguardConfigError,
    difference_report,
    status_line,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import memguard_config as _memguard_config


def memguard_config(
    host_section: Any, container_name: Any, settings: Any, host: Any, peers: Any, key: Any = None
) -> dict[str, Any]:
    if not isinstance(host_section, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.memguard_config: the input is the profile's host section, found {host_section!r}"
        )
    if not isinstance(settings, Mapping) or not isinstance(peers, Mapping):
        raise AnsibleFilterError("dgxspark.cluster.memguard_config: settings and peers must be mappings")
    try:
        return _memguard_config(
            host_section, str(container_name or ""), settings, str(host), peers, None if key is None else str(key)
        )
    except MemguardConfigError as error:
        raise AnsibleFilterError(f"dgxspark.cluster.memguard_config: {error}") from None


def memguard_difference_report(planned: Any, host: Any, key_file: Any, check_mode: Any = False) -> list[str]:
    if not isinstance(planned, Mapping):
        raise AnsibleFilterError("dgxspark.cluster.memguard_difference_report: needs memguard_plan's answer (a dict)")
    return difference_report(str(host), planned, str(key_file), boolean(check_mode, strict=False))


def memguard_status_line(state: Any, status: Any) -> str:
    if (state is not None and not isinstance(state, Mapping)) or not isinstance(status, Mapping):
        raise AnsibleFilterError(
            "dgxspark.cluster.memguard_status_line: needs the guard's state (or none) and the status command's answer"
        )
    return status_line(state, status)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "memguard_config": memguard_config,
            "memguard_difference_report": memguard_difference_report,
            "memguard_status_line": memguard_status_line,
        }
