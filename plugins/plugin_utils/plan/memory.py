# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-rank memory budget (seed 002 section 6) and whether one max_model_len sequence fits.

Budget = gpu_memory_utilization x usable unified memory. What a rank holds before its KV cache
(model, Engram tables, NCCL, CUDA graphs, an AutoTuner peak) must fit in it; the KV cache gets the
rest, unless kv_cache_memory_bytes fixes it. NCCL's share is a calibrated input per shape (seed 002
measured ~11 GB at 8 channels), not a formula: see REFERENCE.md on why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kv import (
    GIB,
    KVCost,
    kv_bytes_for_sequence,
    tokens_that_fit,
    vllm_kv_refusal,
)

ROUND = 3


def memory_budget(
    sizing: Mapping[str, Any], memory: Mapping[str, Any] | None, model_cost: KVCost | None = None
) -> dict[str, Any]:
    """Per-rank budget figures in GiB; keys are None where the profile does not give enough to say.

    The KV cost per token is the shape's calibrated ``memory.kv_cache_bytes_per_token`` when it has one,
    else ``model_cost`` (worked out from the model's config, ``_kv.kv_bytes_per_token``).
    """
    memory = memory or {}
    components = {k: float(v) for k, v in (memory.get("components_gib") or {}).items()}
    held = sum(components.values())
    usable = memory.get("usable_gib")
    gmu = sizing.get("gpu_memory_utilization")
    budget = gmu * usable if gmu is not None and usable is not None else None
    explicit_kv = sizing.get("kv_cache_memory_bytes")
    kv_available = budget - held if budget is not None and components else None
    if explicit_kv is not None:
        kv, kv_from = explicit_kv / GIB, "sizing.kv_cache_memory_bytes"
    elif memory.get("kv_cache_gib") is not None:
        kv, kv_from = float(memory["kv_cache_gib"]), "memory.kv_cache_gib"
    elif kv_available is not None:
        kv, kv_from = kv_available, "budget minus components"
    else:
        kv, kv_from = None, None
    per_token = memory.get("kv_cache_bytes_per_token")
    cost = KVCost(per_token, formula="memory.kv_cache_bytes_per_token") if per_token is not None else model_cost
    if cost is not None and per_token is None:
        per_token = cost.bytes_per_token
    max_len = sizing["max_model_len"]
    block = sizing.get("block_size")
    needed = kv_bytes_for_sequence(cost, max_len, block) / GIB if cost is not None else None
    return {
        "usable_gib": usable,
        "gpu_memory_utilization": gmu,
        "budget_gib": _r(budget),
        "components_gib": components,
        "held_gib": _r(held) if components else None,
        "kv_cache_available_gib": _r(kv_available),
        "kv_cache_gib": _r(kv),
        "kv_cache_from": kv_from,
        "kv_cache_tokens": int(kv * GIB / per_token) if kv is not None and per_token else None,
        "kv_cache_bytes_per_token": per_token,
        "kv_cache_cost": cost.formula if cost is not None else None,
        "max_model_len_that_fits": tokens_that_fit(cost, kv * GIB, block) if kv is not None and cost else None,
        "max_model_len": max_len,
        "needed_for_max_model_len_gib": _r(needed),
        "reserve_gib": _r(kv - needed) if kv is not None and needed is not None else None,
        "headroom_gib": _r(kv_available - kv) if kv_available is not None and kv is not None else None,
        "fits": None if budget is None or not components else held <= budget and (kv_available or 0) >= (kv or 0),
    }


def budget_figures(budget: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of a :func:`memory_budget` that the plan could work out (not None), without its components
    (the profile's own list): what ``playbooks/plan.yml`` shows of a rank's budget."""
    return {key: value for key, value in budget.items() if value is not None and key != "components_gib"}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, ROUND)


def check_memory(budget: Mapping[str, Any], memory_limit_gib: float | None, where: str, out: Collector) -> None:
    """Report a budget that does not fit, and a KV cache too small for one max_model_len sequence."""
    held, total = budget["held_gib"], budget["budget_gib"]
    if held is not None and total is not None and held > total:
        parts = ", ".join(f"{k} {v:g}" for k, v in budget["components_gib"].items())
        out.error(
            f"{where}.memory.components_gib",
            f"the rank's memory does not fit its budget: {parts} add up to "
            f"{held:g} GiB, more than gpu_memory_utilization {budget['gpu_memory_utilization']:g} x "
            f"{budget['usable_gib']:g} GiB = {total:g} GiB",
            found=held,
            expected=f"<= {total:g} GiB",
            hint="lower a component (NCCL channels, AutoTuner), or raise gpu_memory_utilization",
        )
    kv, available = budget["kv_cache_gib"], budget["kv_cache_available_gib"]
    if (
        held is not None
        and total is not None
        and held <= total
        and kv is not None
        and available is not None
        and kv > available + 0.0005
    ):
        out.error(
            f"{where}.{_kv_key(budget)}",
            f"the KV cache ({kv:g} GiB) does not fit in what the budget leaves "
            f"after the components ({total:g} - {held:g} = {available:g} GiB)",
            found=kv,
            expected=f"<= {available:g} GiB",
        )
    needed = budget["needed_for_max_model_len_gib"]
    if kv is not None and needed is not None and needed > kv:
        fits = budget["max_model_len_that_fits"]
        out.error(
            f"{where}.sizing.max_model_len",
            "vLLM would refuse to start, after loading the weights: "
            + vllm_kv_refusal(budget["max_model_len"], needed * GIB, kv * GIB, fits)
            + f" [KV per token per rank: {budget['kv_cache_cost']}; KV cache from {budget['kv_cache_from']}]",
            found=budget["max_model_len"],
            expected=f"<= {fits} tokens",
            hint="lower max_model_len or give the KV cache more memory",
        )
    if memory_limit_gib is not None and total is not None and total > memory_limit_gib:
        out.error(
            f"{where}.sizing.gpu_memory_utilization",
            f"vLLM may use {total:g} GiB, more than the container's --memory limit of {memory_limit_gib:g} GiB",
            found=total,
            expected=f"<= {memory_limit_gib:g} GiB",
        )


def _kv_key(budget: Mapping[str, Any]) -> str:
    source = budget["kv_cache_from"] or "memory.kv_cache_gib"
    return source if "." in source else "memory.kv_cache_gib"
