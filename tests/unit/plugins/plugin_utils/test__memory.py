# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory budget must come out as seed 002 section 6's tables show."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memory import memory_budget
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile, validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK8, edited


@pytest.mark.parametrize(
    "shape,held,budget,kv,needed,reserve",
    [
        # seed 002 6.1: total ~85.5 (49.55 + 23.60 + 11 + 1.5 = 85.65) of 96.8; KV ~8.7 GB
        ("tp8-300k", 85.65, 96.8, 8.7, 1.79, 6.91),
        # seed 002 6.2: total ~60.5 of 90.75; KV ~30 GB; ~3.7 GB for 1M; reserve ~26 GB
        ("tp8-1m", 60.5, 90.75, 30.0, 3.7, 26.3),
    ],
)
def test_seed002_budgets(shape: str, held: float, budget: float, kv: float, needed: float, reserve: float) -> None:
    profile = load_profile(str(SPARK8))
    result = memory_budget(profile.data["shapes"][shape]["sizing"], profile.data["shapes"][shape]["memory"])
    assert result["held_gib"] == pytest.approx(held, abs=0.01)
    assert result["budget_gib"] == pytest.approx(budget, abs=0.01)
    assert result["kv_cache_gib"] == pytest.approx(kv, abs=0.01)
    assert result["needed_for_max_model_len_gib"] == pytest.approx(needed, abs=0.01)
    assert result["reserve_gib"] == pytest.approx(reserve, abs=0.01)
    assert result["fits"] is True


def test_seed002_300k_kv_tokens() -> None:
    profile = load_profile(str(SPARK8))
    shape = profile.data["shapes"]["tp8-300k"]
    # seed 002 6.1: 8.7 GB holds 1.46M tokens
    assert memory_budget(shape["sizing"], shape["memory"])["kv_cache_tokens"] == pytest.approx(1.46e6, rel=0.001)


def rendered_problems(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(document)
    return [p.render() for p in caught.value.problems]


def test_budget_that_does_not_fit(spark8: dict[str, Any]) -> None:
    # 64 channels cost ~37 GB per rank instead of ~11 (seed 002 4.1)
    rendered = rendered_problems(edited(spark8, {"shapes/tp8-300k/memory/components_gib/nccl": 37}))
    assert any("does not fit its budget" in p and "111.65 GiB" in p and "96.8 GiB" in p for p in rendered), rendered


def test_kv_cache_that_does_not_fit_after_components(spark8: dict[str, Any]) -> None:
    rendered = rendered_problems(edited(spark8, {"shapes/tp8-1m/memory/kv_cache_gib": 31}))
    assert any("tp8-1m.memory.kv_cache_gib" in p and "does not fit" in p for p in rendered), rendered


def test_kv_cache_too_small_for_one_sequence(spark8: dict[str, Any]) -> None:
    rendered = rendered_problems(edited(spark8, {"shapes/tp8-1m/memory/kv_cache_gib": 3}))
    # vLLM's own wording (vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory), with the numbers
    assert any(
        "To serve at least one request with the model's max seq len (1048576), (3.7 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (3.0 GiB). Based on the available memory, the "
        "estimated maximum model length is 850048." in p
        for p in rendered
    ), rendered


def test_explicit_kv_bytes_too_small(spark8: dict[str, Any]) -> None:
    document = edited(
        spark8,
        {
            "shapes/tp8-300k/sizing/kv_cache_memory_bytes": 1000000000,
            "shapes/tp8-300k/sizing/gpu_memory_utilization": 0.8,
        },
    )
    rendered = rendered_problems(document)
    assert any("max_model_len" in p and "vLLM would refuse to start" in p for p in rendered), rendered


def test_vllm_budget_above_container_limit(spark8: dict[str, Any]) -> None:
    rendered = rendered_problems(edited(spark8, {"shapes/tp8-300k/sizing/gpu_memory_utilization": 0.95}))
    assert any("more than the container's --memory limit of 112 GiB" in p for p in rendered), rendered


def test_engram_in_host_memory_must_be_budgeted(spark8: dict[str, Any]) -> None:
    document = edited(spark8, {"shapes/tp8-300k/memory/components_gib/engram": 0})
    validate_profile(document)  # present (even as 0) is a choice; absent is the mistake
    del document["shapes"]["tp8-300k"]["memory"]["components_gib"]["engram"]
    assert any("Engram tables in host memory" in p for p in rendered_problems(document))
