# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the weights sync (issue 30). Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_sync_plan = lazy("plugin_utils.weights.sync_plan", "plan")
_DEFAULT_RESERVE_BYTES = 1024**3  # plugin_utils/weights/sync_plan.py's DEFAULT_RESERVE_BYTES, not imported here


def weights_sync_plan(
    facts: Any,
    hosts: Any,
    head: Any,
    weights_path: Any,
    source: Any = "",
    fabric: Any = None,
    management: Any = None,
    delete: Any = False,
    network: Any = "fabric",
    reserve_bytes: Any = _DEFAULT_RESERVE_BYTES,
) -> dict[str, Any]:
    name = "dgxspark.cluster.weights_sync_plan"
    for what, value in (("node_facts' answers by host", facts), ("fabric", fabric), ("management", management)):
        if value is not None and not isinstance(value, Mapping):
            raise AnsibleFilterError(f"{name}: needs {what} as a dict, found {type(value).__name__}")
    try:
        reserve = int(reserve_bytes)
        wanted = boolean(delete, strict=True)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError(f"{name}: {error}") from None
    if reserve < 0:
        raise AnsibleFilterError(f"{name}: reserve_bytes must not be negative, found {reserve}")
    return _sync_plan(
        facts,
        [str(h) for h in hosts or []],
        str(head),
        weights_path if weights_path else None,
        str(source or ""),
        fabric,
        management,
        wanted,
        str(network or "fabric"),
        reserve,
    )


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"weights_sync_plan": weights_sync_plan}
