# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the vllm_container role (logic in plugin_utils/plan/rank_container.py). Documentation: the .yml file of
each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_same_spec = lazy("plugin_utils.plan.rank_container", "same_spec")
_differences = lazy("plugin_utils.plan.rank_container", "differences")
_refusal = lazy("plugin_utils.plan.rank_container", "refusal")


def _answer(name: str, value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"dgxspark.cluster.{name}: needs {what} (a dict), found {type(value).__name__}")
    return value


def rank_container_same_spec(found: Any, spec_sha256: Any) -> bool:
    return _same_spec(_answer("rank_container_same_spec", found, "docker_container_info's answer"), str(spec_sha256))


def rank_container_differences(compared: Any) -> list[str]:
    return _differences(_answer("rank_container_differences", compared, "rank_container's answer"))


def rank_container_refusal(found: Any, rank: Any, host: Any, name: Any, differing: Any = None) -> list[str]:
    if differing is not None and (isinstance(differing, str) or not isinstance(differing, Sequence)):
        raise AnsibleFilterError("dgxspark.cluster.rank_container_refusal: the differences are a list")
    found = _answer("rank_container_refusal", found, "docker_container_info's answer")
    return _refusal(found, rank, str(host), str(name), list(differing or []))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "rank_container_same_spec": rank_container_same_spec,
            "rank_container_differences": rank_container_differences,
            "rank_container_refusal": rank_container_refusal,
        }
