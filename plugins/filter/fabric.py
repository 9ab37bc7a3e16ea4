# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fabric role. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._fabric import verify_report


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"fabric_report": verify_report}
