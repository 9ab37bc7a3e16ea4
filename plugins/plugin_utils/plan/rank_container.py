# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm_container role makes of a rank's container on its node, before it runs the rank.

The role looks at the container (``community.docker.docker_container_info``: ``found``), compares it with the
plan when it is not the planned one (``dgxspark.cluster.rank_container`` in check mode, with its diff), and
refuses to replace one that differs unless asked. Plain functions over those answers, so that each decision and
its words are tested without a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import SPEC_LABEL


def _state(found: Mapping[str, Any]) -> Mapping[str, Any]:
    return (found.get("container") or {}).get("State") or {}


def same_spec(found: Mapping[str, Any], spec_sha256: str) -> bool:
    """Whether the container found carries the plan's spec hash (its ``dgxspark.cluster.spec_sha256`` label): the
    container the plan would start. False when there is none."""
    if not found.get("exists"):
        return False
    labels = ((found.get("container") or {}).get("Config") or {}).get("Labels") or {}
    return labels.get(SPEC_LABEL, "") == spec_sha256


def differences(compared: Mapping[str, Any]) -> list[str]:
    """What differs between the container and the plan, field by field (``<field> differs``): the fields of the
    diff the check-mode comparison (``rank_container``) gave, when it found a change; none when it found none."""
    if not compared.get("changed"):
        return []
    before = (compared.get("diff") or {}).get("before") or {}
    return [f"{field} differs" for field in before]


def refusal(found: Mapping[str, Any], rank: Any, host: str, name: str, differing: Sequence[str] = ()) -> list[str]:
    """Why the role leaves a container that differs from the plan alone (``vllm_container_replace`` not set): the
    rank, its node, the container and what it is doing (running, or its status and exit code), then each field
    that differs (:func:`differences`)."""
    state = _state(found)
    doing = (
        "runs"
        if found.get("exists") and state.get("Running")
        else f"exists but is {state.get('Status')} (exit code {state.get('ExitCode')})"
    )
    return [
        f"rank {rank} ({host}): container {name} {doing} with another spec than the plan; it was left alone. "
        "Set vllm_container_replace=true to replace it.",
        *(str(line) for line in differing),
    ]
