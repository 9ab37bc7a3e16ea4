# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_container role's decisions on the rank's container found on its node (plugin_utils/plan/rank_container.py),
through its filters: is it the planned one, what differs, and why it is left alone."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.vllm_container import FilterModule

FILTERS = FilterModule().filters()
SPEC = "3f2a" * 16


def found(status: str = "running", spec: str | None = SPEC, exit_code: int = 0) -> dict[str, Any]:
    """docker_container_info's answer for a container that exists."""
    labels = {"dgxspark.cluster.rank": "0"} | ({"dgxspark.cluster.spec_sha256": spec} if spec is not None else {})
    return {
        "exists": True,
        "container": {
            "Config": {"Labels": labels},
            "State": {"Status": status, "Running": status == "running", "ExitCode": exit_code},
        },
    }


def test_the_same_spec_is_the_plan_s_hash_on_the_container_s_label() -> None:
    same = FILTERS["rank_container_same_spec"]
    assert same(found(), SPEC) is True
    assert same(found(spec="0" * 64), SPEC) is False
    assert same(found(spec=None), SPEC) is False  # a container without the label is not the planned one
    no_labels = found()
    no_labels["container"]["Config"]["Labels"] = None
    assert same(no_labels, SPEC) is False
    assert same({"exists": False, "container": {}}, SPEC) is False
    with pytest.raises(AnsibleFilterError, match="rank_container_same_spec: needs docker_container_info's answer"):
        same(None, SPEC)


def test_what_differs_is_each_field_of_the_comparison_s_diff_when_it_found_a_change() -> None:
    differences = FILTERS["rank_container_differences"]
    compared = {"changed": True, "diff": {"before": {"image": "a", "env": {}}, "after": {"image": "b", "env": {}}}}
    assert differences(compared) == ["image differs", "env differs"]
    assert differences({**compared, "changed": False}) == []
    assert differences({"changed": True}) == []  # no diff given
    assert differences({"skipped": True, "changed": False}) == []


def test_a_container_that_differs_is_left_alone_saying_what_it_is_doing_and_what_differs() -> None:
    refusal = FILTERS["rank_container_refusal"]
    assert refusal(found(), 1, "spark-w1", "vllm_dsv41", ["image differs"]) == [
        "rank 1 (spark-w1): container vllm_dsv41 runs with another spec than the plan; it was left alone. "
        "Set vllm_container_replace=true to replace it.",
        "image differs",
    ]
    exited = refusal(found("exited", exit_code=137), 0, "spark-head", "vllm_dsv41")
    assert exited == [
        "rank 0 (spark-head): container vllm_dsv41 exists but is exited (exit code 137) with another spec than the "
        "plan; it was left alone. Set vllm_container_replace=true to replace it."
    ]
    with pytest.raises(AnsibleFilterError, match="rank_container_refusal: the differences are a list"):
        refusal(found(), 0, "h", "c", "image differs")
