# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A sparkrun recipe to a serving profile and an inventory (logic in plugin_utils/sparkrun/). Documentation: the .yml
file of the filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_run_import = lazy("plugin_utils.sparkrun.files", "run_import")
_as_list = lazy("plugin_utils.sparkrun.files", "as_list")


def sparkrun_import(
    text: Any,
    source: Any,
    hosts: Any,
    fabric: Any = None,
    variant: Any = None,
    options: Any = None,
) -> dict[str, Any]:
    try:
        return _run_import(
            str(text),
            str(source),
            _as_list(hosts) or [],
            _as_list(fabric),
            None if variant in (None, "") else str(variant),
            options or None,
        )
    except ValueError as error:  # RecipeError, ImportRefused (every reason), a bad list
        reasons = getattr(error, "reasons", None) or getattr(error, "problems", None) or [str(error)]
        lines = [f"{source}: the sparkrun recipe cannot be imported; nothing was written:"]
        lines += [f"  - {reason}" for reason in reasons]
        notes = getattr(error, "notes", [])
        if notes:
            lines.append("  what was read of the recipe:")
            lines += [f"    {note.render()}" for note in notes]
        raise AnsibleFilterError("\n".join(lines)) from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sparkrun_import": sparkrun_import}
