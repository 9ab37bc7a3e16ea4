# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the boot. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._preflight import preflight


def boot_preflight(
    facts: Any, plan: Any, profile: Any, replace: bool = False, skip: Any = (), clear_trip: bool = False
) -> dict[str, Any]:
    try:
        return preflight(facts, plan, profile, bool(replace), list(skip or ()), bool(clear_trip))
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_preflight: {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"boot_preflight": boot_preflight}
