# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every seed rule as a named check, with the seeds' own numbers (docs/seed-rules.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, check_hosts
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import WAIVABLE_CHECKS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.seed_rules import (
    GB10_MEMTOTAL_GIB,
    USABLE_GIB,
    cpuset_cpus,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import (
    DELETE,
    FIXTURES,
    SEED000,
    SPARK3,
    SPARK8,
    edited,
    read,
)

SEED000_ARGS = read(SEED000)["container"]["docker_run_args"]
SPARK8_ARGS = read(SPARK8)["container"]["docker_run_args"]


def without(args: list[str], *dropped: str) -> list[str]:
    return [a for a in args if not a.startswith(dropped)]


# the sources of a spark8 shape's memory section, deleted with it
NO_SOURCES = {
    shape: {f"sources/{k}": DELETE for k in read(SPARK8)["sources"] if k.startswith(f"$.shapes.{shape}.memory")}
    for shape in ("tp8-300k", "tp8-1m")
}


def outcome(document: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings), rendered."""
    try:
        profile = validate_profile(document, "profile.json")
    except ProfileError as exc:
        return [p.render() for p in exc.problems], [w.render() for w in exc.warnings]
    return [], [w.render() for w in profile.warnings]


# name: (base profile, edits, error or warning, fragments of its message, the check that waives it or "")
RULES: dict[str, tuple[str, dict[str, Any], str, list[str], str]] = {
    "stack missing": (
        "seed000",
        {"container/docker_run_args": without(SEED000_ARGS, "--ulimit=stack")},
        "error",
        ["stack ulimit must be 64 MiB", "seed 002 section 4.2", '"--ulimit=stack=67108864:67108864"'],
        "stack-64m",
    ),
    "stack 8 MiB": (
        "seed000",
        {"container/docker_run_args/6": "--ulimit=stack=8388608:8388608"},
        "error",
        ['found "stack=8388608:8388608"', "seed 002 section 4.2"],
        "stack-64m",
    ),
    "no memory limit": (
        "seed000",
        {"container/docker_run_args": without(SEED000_ARGS, "--memory")},
        "error",
        ["no --memory limit", "seed 002 section 4.2", "9 GB of the 121", '"--memory=112g"'],
        "container-memory-limit",
    ),
    "memory 120g leaves 1 GiB for the OS": (
        "seed000",
        {"container/docker_run_args/10": "--memory=120g", "container/docker_run_args/11": "--memory-swap=120g"},
        "error",
        ["--memory leaves 1 GiB of the 121 GiB for the OS, less than the 9 GiB", "<= 112 GiB"],
        "container-memory-limit",
    ),
    "swap headroom": (
        "seed000",
        {"container/docker_run_args/11": "--memory-swap=128g"},
        "error",
        ["swap headroom", "seed 000", "swapping a model load is worse than failing it", 'found "128 GiB"'],
        "no-swap-headroom",
    ),
    "memory without memory-swap": (
        "seed000",
        {"container/docker_run_args": without(SEED000_ARGS, "--memory-swap")},
        "error",
        ["Docker adds as much swap again"],
        "no-swap-headroom",
    ),
    "no --ipc=host": (
        "seed000",
        {"container/docker_run_args": without(SEED000_ARGS, "--ipc")},
        "error",
        ["--ipc=host is missing", "seed 000"],
        "ipc-host",
    ),
    "private IPC with a small /dev/shm": (
        "seed000",
        {"container/docker_run_args/1": "--ipc=private", "container/docker_run_args/9": "--shm-size=1g"},
        "error",
        ["below seed 000's 16g"],
        "ipc-host",
    ),
    "no --shm-size alongside --ipc=host": (
        "seed000",
        {"container/docker_run_args": without(SEED000_ARGS, "--shm-size")},
        "warning",
        ["no --shm-size: seed 000 sets --shm-size=16g alongside --ipc=host"],
        "",
    ),
    "no --cpuset-cpus": (
        "seed000",
        {},
        "warning",
        ["no --cpuset-cpus: seed 000 pins each rank to a CPU set"],
        "",
    ),
    "CPUs a GB10 lacks": (
        "seed000",
        {"container/docker_run_args": [*SEED000_ARGS, "--cpuset-cpus=0-23"]},
        "error",
        ["CPUs 20..23 do not exist on a GB10", "seed 002 section 2: 20 Arm cores"],
        "cpuset-pinned",
    ),
    "8 sequences at 1M on 3 nodes": (
        "seed000",
        {"shapes/tp3-triangle/sizing/max_num_seqs": 8},
        "error",
        ["8 concurrent sequences at 1048576 tokens of context on 3 nodes", "6 and 8 both crashed during load"],
        "concurrency-at-1m",
    ),
    "6 sequences at 1M on 3 nodes": (
        "seed000",
        {"shapes/tp3-triangle/sizing/max_num_seqs": 6},
        "error",
        ["6 concurrent sequences", "expected <= 4"],
        "concurrency-at-1m",
    ),
    "5 sequences at 1M on 3 nodes": (
        "seed000",
        {"shapes/tp3-triangle/sizing/max_num_seqs": 5},
        "warning",
        ["5 concurrent sequences at 1M context is untested on 3 nodes, between the stable 4 and the 6"],
        "",
    ),
    "16 sequences at 1M on 4 nodes (tp4-ring, defined, untested)": (
        "seed000",
        {},
        "warning",
        ["16 concurrent sequences at 1M context on 4 nodes is not measured", "'defined, untested'"],
        "",
    ),
    "KV cache left to gpu_memory_utilization": (
        "seed000",
        {
            "shapes/tp3-triangle/sizing/kv_cache_memory_bytes": DELETE,
            "shapes/tp3-triangle/sizing/gpu_memory_utilization": 0.8,
        },
        "error",
        [
            "the KV cache is left to gpu_memory_utilization",
            "$.shapes.tp3-triangle.sizing:",
            "one request away from OOM",
        ],
        "kv-cache-explicit",
    ),
    "KV cache left to gpu_memory_utilization on 8 nodes without seed 002's measured KV cache": (
        "spark8",
        {"shapes/tp8-300k/memory/kv_cache_gib": DELETE, "sources/$.shapes.tp8-300k.memory.kv_cache_gib": DELETE},
        "error",
        ["the KV cache is left to gpu_memory_utilization", "$.shapes.tp8-300k.sizing:", "seed 002 section 6"],
        "kv-cache-explicit",
    ),
    "gpu_memory_utilization 0.99 without a memory section": (
        "seed000",
        {"shapes/tp3-triangle/sizing/gpu_memory_utilization": 0.99},
        "error",
        ["vLLM may use 119.79 GiB (gpu_memory_utilization 0.99 x the 121 GiB", "--memory limit of 112 GiB"],
        "gmu-within-memory-limit",
    ),
    "8 sequences at 1,000,000 tokens on 3 nodes": (
        "seed000",
        {"shapes/tp3-triangle/sizing/max_num_seqs": 8, "shapes/tp3-triangle/sizing/max_model_len": 1000000},
        "error",
        ["8 concurrent sequences at 1000000 tokens of context on 3 nodes", "6 and 8 both crashed during load"],
        "concurrency-at-1m",
    ),
    "6 sequences at 512K tokens that cost twice seed 000's": (
        "seed000",
        {
            "model_config": {"kv_cache_bytes_per_token": 4505},
            "sources": {"$.model_config.kv_cache_bytes_per_token": "a test's measured cost"},
            "shapes/tp3-triangle/sizing/max_num_seqs": 6,
            "shapes/tp3-triangle/sizing/max_model_len": 524288,
        },
        "error",
        [
            "6 concurrent sequences at 524288 tokens of context on 3 nodes",
            "as much KV as 1,048,809 tokens at seed 000's 2,252",
            "6 and 8 both",
        ],
        "concurrency-at-1m",
    ),
    "startup grace 0.25 s": (
        "seed000",
        {"host/startup_memguard_grace_seconds": 0.25},
        "warning",
        ["a startup grace of 0.25 s is shorter than the 45 s that rode out seed 000's load dips", "false kills"],
        "memguard-grace",
    ),
    "startup grace under one sampling interval": (
        "seed000",
        {"host/startup_memguard_grace_seconds": 0.2},
        "error",
        ["a startup grace period shorter than one sampling interval", "seed 000", "ten consecutive false kills"],
        "memguard-grace",
    ),
    "steady grace 2 s": (
        "seed000",
        {"host/memguard_grace_seconds": 2},
        "warning",
        ["a steady grace of 2 s is shorter than the 30 s", "seed 000"],
        "memguard-grace",
    ),
    "steady grace under one sampling interval": (
        "seed000",
        {"host/memguard_grace_seconds": 1},
        "error",
        ["a steady grace period shorter than one sampling interval", "seed 000"],
        "memguard-grace",
    ),
    "floors 0.5/1 GiB": (
        "seed000",
        {"host/memguard_gib": 0.5, "host/startup_memguard_gib": 1},
        "error",
        ["a steady floor of 0.5 GiB leaves the guard unable to fire before the kernel's own OOM", "seed 000"],
        "memguard-floors",
    ),
    "floors 30/40 GiB": (
        "seed000",
        {"host/memguard_gib": 30, "host/startup_memguard_gib": 40},
        "warning",
        ["a steady floor of 30 GiB would have stopped seed 000's own long-context test", "6.8 GiB"],
        "memguard-floors",
    ),
    "pre-boot floor 6 GiB": (
        "seed000",
        {"host/min_mem_available_gib": 6},
        "warning",
        ["a pre-boot floor of 6 GiB is under seed 000's", "at least 100 GiB MemAvailable on every node"],
        "min-mem-available",
    ),
    "engram on disk switched off in the environment": (
        "spark8",
        {"shapes/tp8-1m/environment/DSV41_ENGRAM_DISK": "0"},
        "error",
        ["engram.placement is disk but the environment turns Engram-on-disk off", "seed 002 section 5.2"],
        "",
    ),
    "engram on disk asked for with placement host-memory": (
        "spark8",
        {"shapes/tp8-300k/environment/DSV41_ENGRAM_DISK": "1"},
        "error",
        ["DSV41_ENGRAM_DISK=1 puts the Engram tables on disk, but engram.placement is host-memory"],
        "",
    ),
    "engram on disk with the engram-mem image": (
        "spark8",
        {"shapes/tp8-1m/container/image": "vllm-dsv41:engram-mem"},
        "error",
        ["has the Engram-on-disk patch reverted", "seed 002 section 3.2"],
        "engram-image",
    ),
    "RoCE v1": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_IB_ROCE_VERSION_NUM": "1"},
        "error",
        ["the fabric runs RoCE v2", "NCCL_IB_ROCE_VERSION_NUM", "seed 002 section 4.3", 'expected "2"'],
        "roce-v2",
    ),
    "NCCL cuMem on": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_CUMEM_ENABLE": "1"},
        "error",
        ["turns NCCL's cuMem allocations off", "NCCL_CUMEM_ENABLE", "seed 002 section 4.3", 'expected "0"'],
        "nccl-cumem-off",
    ),
    "merged NICs": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_IB_MERGE_NICS": "1"},
        "error",
        ["No NIC merge", "NCCL_IB_MERGE_NICS", 'expected "0"'],
        "nccl-no-nic-merge",
    ),
    "FlashInfer autotune on against autotuner false": (
        "spark8",
        {"shapes/tp8-300k/environment/VLLM_FLASHINFER_AUTOTUNE": "1"},
        "error",
        ["VLLM_FLASHINFER_AUTOTUNE=1 silently overrides autotuner: false", "seed 002 section 5.1"],
        "",
    ),
    "autotune serve flag against autotuner false": (
        "spark8",
        {"shapes/tp8-300k/container/serve_args": ["--enable-flashinfer-autotune"]},
        "error",
        ["--enable-flashinfer-autotune contradicts autotuner: false"],
        "",
    ),
    "DeepGEMM autotune peak not in a 300K budget whose KV cache is planned, not measured": (
        "spark8",
        {"shapes/tp8-300k/memory/kv_cache_gib": DELETE, "sources/$.shapes.tp8-300k.memory.kv_cache_gib": DELETE},
        "warning",
        [
            "runs even with the FlashInfer AutoTuner off",
            "seed 002 lesson 5",
            "95.65 of its 96.8 GiB",
            # seed 002 6.1: 49.55 + 23.60 + 11 + 1.5 = 85.65 of 96.8 leaves 11.15 for the KV cache; the peak takes 10
            "would get 1.15 GiB, not the planned 11.15 GiB",
            # 300,000 tokens x 6,398 bytes (8.7 GiB for 1.46M tokens) = 1.79 GiB
            "under the 1.79 GiB one max_model_len sequence (300,000 tokens) needs",
        ],
        "",
    ),
    "DeepGEMM autotune peak over the budget": (
        "spark8",
        {
            "shapes/tp8-300k/memory/components_gib/nccl": 12.5,
            "shapes/tp8-300k/memory/kv_cache_gib": DELETE,
            "sources/$.shapes.tp8-300k.memory.kv_cache_gib": DELETE,
        },
        "warning",
        ["holds 97.15 of its 96.8 GiB budget during profiling, more than the budget"],
        "",
    ),
    "autotuner true on tp8-300k": (
        "spark8",
        {"shapes/tp8-300k/autotuner": True},
        "error",
        [
            "autotuner: true leaves 1.15 GiB of the 96.8 GiB budget after the rank's 85.65 GiB and the ~10 GiB peak",
            "less than the planned 8.7 GiB KV cache and the 1.79 GiB one max_model_len sequence needs",
            "seed 002 section 5.1",
            "Voorkomt een OOM-piek",
        ],
        "autotuner-off-at-300k",
    ),
    "autotuner true at 300K without a memory budget": (
        "spark8",
        {"shapes/tp8-300k/autotuner": True, "shapes/tp8-300k/memory": DELETE, **NO_SOURCES["tp8-300k"]},
        "error",
        ["autotuner: true on a shape of 300,000 tokens with no memory budget", "seed 002 section 5.1"],
        "autotuner-off-at-300k",
    ),
    "no NCCL component at 8 ranks": (
        "spark8",
        {
            "shapes/tp8-300k/memory/components_gib/nccl": DELETE,
            "sources/$.shapes.tp8-300k.memory.components_gib.nccl": DELETE,
        },
        "warning",
        ["the memory budget at 8 ranks has no NCCL component", "seed 002 lesson 1", "~11 GB"],
        "nccl-in-budget",
    ),
    "no memory section at 8 ranks": (
        "spark8",
        {"shapes/tp8-1m/memory": DELETE, **NO_SOURCES["tp8-1m"]},
        "warning",
        ["no memory budget at 8 ranks", "tp8-1m.memory:", "seed 002 lesson 1"],
        "nccl-in-budget",
    ),
    "NCCL over IPv6": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_IB_ADDR_FAMILY": "AF_INET6"},
        "error",
        ["NCCL_IB_ADDR_FAMILY", "the fabric is IPv4", "seed 002 section 4.3", 'expected "AF_INET"'],
        "nccl-ipv4",
    ),
    "NCCL rings kept on one NIC": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_CROSS_NIC": "0"},
        "warning",
        ["NCCL_CROSS_NIC", "seed 002 section 4.3", 'expected "1"'],
        "nccl-cross-nic",
    ),
    "CPU affinity honoured at 8 ranks": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_IGNORE_CPU_AFFINITY": "0"},
        "warning",
        ["NCCL_IGNORE_CPU_AFFINITY", "seed 002 section 4.3", "seed 000's --cpuset-cpus rule is for its 3 and 4"],
        "nccl-cpu-affinity",
    ),
    "NCCL async error handling off": (
        "spark8",
        {"shapes/tp8-300k/environment/TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"},
        "warning",
        ["TORCH_NCCL_ASYNC_ERROR_HANDLING", "seed 002 section 4.3", "can wait for ever"],
        "nccl-async-errors",
    ),
    "NCCL debug level INFO": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_DEBUG": "INFO"},
        "warning",
        ["NCCL_DEBUG", "seed 002 section 4.3", 'expected "WARN"'],
        "nccl-debug",
    ),
    "the seeds' CPU rules both on tp3": (
        "seed000",
        {
            "container/docker_run_args": [*SEED000_ARGS, "--cpuset-cpus=0-19"],
            "shapes/tp3-triangle/environment/NCCL_IGNORE_CPU_AFFINITY": "1",
        },
        "warning",
        [
            "the seeds' CPU rules conflict: seed 000 pins",
            "seed 002 section 4.3",
            "seed 000's rule holds on this 3-rank",
        ],
        "nccl-cpu-affinity",
    ),
    "the seeds' CPU rules both on tp8": (
        "spark8",
        {"container/docker_run_args": [*SPARK8_ARGS, "--cpuset-cpus=0-19"]},
        "warning",
        ["the seeds' CPU rules conflict", "seed 002's rule holds on this 8-rank shape"],
        "nccl-cpu-affinity",
    ),
    "usable memory in GB": (
        "spark8",
        {"shapes/tp8-1m/memory/usable_gib": 130},
        "error",
        ["more than a GB10's kernel reports: MemTotal is 123.8 GiB", "docs/units.md"],
        "usable-memory-gib",
    ),
}


@pytest.mark.parametrize("base,edits,severity,fragments,check", RULES.values(), ids=RULES.keys())
def test_seed_rule(base: str, edits: dict[str, Any], severity: str, fragments: list[str], check: str) -> None:
    document = edited(read(SEED000 if base == "seed000" else SPARK8), edits)
    errors, warnings = outcome(document)
    found = errors if severity == "error" else warnings
    assert any(all(f in p for f in fragments) for p in found), (fragments, errors, warnings)
    assert all(re.search(r"seed 00[02]|docs/units\.md", p) for p in found if any(f in p for f in fragments))
    if check:
        assert check in WAIVABLE_CHECKS
        waived = edited(document, {"waivers": {**document.get("waivers", {}), check: "a reason for this test"}})
        errors, warnings = outcome(waived)
        assert not any(fragments[0] in p for p in errors), errors
        assert any(f"waived {check} (a reason for this test)" in w and fragments[0] in w for w in warnings)


# What a simulated node is not: a GB10 (its memory is a few GiB: the guard's floors, the pre-boot floor, and
# gpu_memory_utilization against its --memory), a vLLM with a KV cache and NCCL (the stand-in engine's), or a host
# that grants nofile 1048576.
SIMULATED_WAIVERS = {
    "nofile-at-8-ranks",
    "memguard-floors",
    "min-mem-available",
    "kv-cache-explicit",
    "gmu-within-memory-limit",
    "nccl-in-budget",
}


def test_the_simulated_clusters_need_no_new_waiver() -> None:
    for name in ("sim3", "sim4", "sim8"):
        profile = read(SEED000.parents[2].parent / "inventories" / name / "serving-profile.json")
        assert set(profile.get("waivers", {})) <= SIMULATED_WAIVERS
        assert all(reason.startswith("simulated cluster: ") for reason in profile.get("waivers", {}).values())
        validate_profile(profile)


@pytest.mark.parametrize(
    "text,cpus",
    [("0-19", set(range(20))), ("0,2,4", {0, 2, 4}), ("0-3,10-11", {0, 1, 2, 3, 10, 11}), ("7", {7})],
)
def test_cpuset_syntax(text: str, cpus: set[int]) -> None:
    assert cpuset_cpus(text) == cpus


@pytest.mark.parametrize("text", ["", "a-b", "3-1", "0-"])
def test_bad_cpuset(text: str) -> None:
    with pytest.raises(ValueError):
        cpuset_cpus(text)


def test_a_cpuset_within_a_gb10_is_accepted(seed000: dict[str, Any]) -> None:
    errors, warnings = outcome(edited(seed000, {"container/docker_run_args": [*SEED000_ARGS, "--cpuset-cpus=0-9"]}))
    assert errors == [] and not any("cpuset" in w for w in warnings)


def memtotal_gib(name: str) -> float:
    text = (FIXTURES / "meminfo" / name).read_text(encoding="utf-8").split("\n#\n", 1)[1]
    kib = int(re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
    return kib / 1024**2


def test_the_seeds_gb_are_gib() -> None:
    # docs/units.md: a real Spark's MemTotal, against seed 002's own sums
    four_k = memtotal_gib("host-state.spark-dgx1-fresh-4k-idle.meminfo.txt")
    sixty_four_k = memtotal_gib("host-state.spark-dgx1-after-64k.meminfo-cmdline.txt")
    assert round(four_k, 2) == 121.69 and round(sixty_four_k, 2) == 123.79 == round(GB10_MEMTOTAL_GIB, 2)
    assert int(four_k) == USABLE_GIB == 112 + 9  # seed 002 4.2: 112g for the container, 9 for the OS, 121 in all
    assert four_k * 1024**3 / 1e9 == pytest.approx(130.66, abs=0.01)  # as decimal GB it would read 130.7, not 121
    assert (round(0.80 * USABLE_GIB, 2), round(0.75 * USABLE_GIB, 2)) == (96.8, 90.75)  # seed 002 6.1 and 6.2
    assert 2362232012 / 1024**3 == pytest.approx(2.2)  # seed 000's KV sizes
    assert 11274289152 / 1024**3 == pytest.approx(10.5)


# ---------------------------------------------------------------------------------------------- the KV fit

MINIMAX_SOURCES = {
    f"$.model_config.{k}": "MiniMax-M2 config.json"
    for k in ("num_hidden_layers", "num_key_value_heads", "head_dim", "torch_dtype")
}
MINIMAX = {"num_hidden_layers": 62, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}


def test_a_kv_cache_that_cannot_hold_one_sequence_is_refused_in_vllm_words(seed000: dict[str, Any]) -> None:
    # seed 000's tp3 KV cache (2,362,232,012 bytes) with a model that needs 126,976 bytes per token per rank
    document = edited(seed000, {"model_config": MINIMAX, "sources": MINIMAX_SOURCES})
    errors, _rest = outcome(document)
    assert any(
        "$.shapes.tp3-triangle.sizing.max_model_len: vLLM would refuse to start, after loading the weights: "
        "To serve at least one request with the model's max seq len (1048576), ("
        in p
        and "GiB KV cache is needed, which is larger than the available KV cache memory (2.2 GiB)" in p
        and "2 x 62 layers x 2 KV heads on the rank (of 8) x 128 x 2 bytes" in p
        for p in errors
    ), errors


def test_a_kv_cache_that_holds_one_sequence_passes_silently(seed000: dict[str, Any]) -> None:
    small = {"num_hidden_layers": 4, "num_key_value_heads": 1, "head_dim": 64, "torch_dtype": "bfloat16"}
    sources = {"$.model_config": "a test model's config.json"}
    errors, warnings = outcome(edited(seed000, {"model_config": small, "sources": sources}))
    assert errors == [] and not any("checked only against a floor" in w for w in warnings)


def test_model_numbers_must_cite_their_source(seed000: dict[str, Any]) -> None:
    sources = {k: v for k, v in MINIMAX_SOURCES.items() if not k.endswith("head_dim")}
    errors, _rest = outcome(edited(seed000, {"model_config": MINIMAX, "sources": sources}))
    assert any("$.model_config.head_dim: a model number without its source" in p for p in errors), errors


def test_a_model_the_formula_does_not_cover_says_so(seed000: dict[str, Any]) -> None:
    v4 = {"num_hidden_layers": 43, "num_key_value_heads": 1, "head_dim": 512}
    document = edited(seed000, {"model_config": v4, "sources": {"$.model_config": "DeepSeek-V4 config.json"}})
    document["model_config"]["kv_lora_rank"] = 448
    errors, _rest = outcome(document)
    assert any("$.model_config: cannot size the KV cache" in p and "qk_rope_head_dim" in p for p in errors)
    measured = {"kv_cache_bytes_per_token": 7359}
    src = {"$.model_config.kv_cache_bytes_per_token": "vLLM log, 36.89 GiB / 5,382,503 tokens"}
    errors, _rest = outcome(edited(seed000, {"model_config": measured, "sources": src}))
    assert any("(7.19 GiB KV cache is needed" in p and "(2.2 GiB)" in p for p in errors), errors


@pytest.mark.parametrize(
    "size,said",
    [
        # seed 000's tp3 size written in MiB instead of bytes: 2,252 "bytes" for a 1M context
        (2252, "a KV cache of 2,252 bytes per rank holds 8 tokens"),
        # ... and in KiB: 2,306,867
        (2362232012 // 1024, "a KV cache of 2,306,867 bytes per rank holds 9,011 tokens"),
    ],
)
def test_without_model_information_an_absurd_kv_cache_is_refused(seed000: dict[str, Any], size: int, said: str) -> None:
    errors, _rest = outcome(edited(seed000, {"shapes/tp3-triangle/sizing/kv_cache_memory_bytes": size}))
    refused = [p for p in errors if "$.shapes.tp3-triangle.sizing.kv_cache_memory_bytes" in p]
    assert len(refused) == 1, errors
    # the profile's own number, not the budget's rounded GiB (which read 2,252 bytes as 0)
    assert said in refused[0] and f"(found {size};" in refused[0], refused
    assert "less than one max_model_len sequence (1,048,576)" in refused[0] and "add model_config" in refused[0]
    assert "seed 000's tp3-triangle holds a 1,048,576-token sequence in 2,362,232,012 bytes" in refused[0]
    assert "seed 002 section 6: 3,789 and 6,398" in refused[0]


def test_the_autotune_peak_against_a_kv_cache_fixed_in_bytes_leaves_it_as_given(seed000: dict[str, Any]) -> None:
    """kv_cache_memory_bytes is allocated as given: the peak is weighed against the budget, never the KV cache."""
    memory = {"usable_gib": 121, "components_gib": {"model": 60, "nccl": 11, "cuda_graphs": 1.5}}
    document = edited(
        seed000,
        {"shapes/tp3-triangle/memory": memory, "shapes/tp3-triangle/sizing/gpu_memory_utilization": 0.8},
    )
    _errors, warnings = outcome(document)
    (peak,) = [w for w in warnings if "tp3-triangle.memory.components_gib" in w and "seed 002 lesson 5" in w]
    assert "holds 82.5 of its 96.8 GiB budget during profiling, 14.30 GiB to spare" in peak
    assert "would get" not in peak


def test_a_container_rule_broken_once_is_reported_once(seed000: dict[str, Any]) -> None:
    """seed 000 has two shapes sharing one container: its missing stack ulimit is one problem, not two."""
    errors, _rest = outcome(edited(seed000, {"container/docker_run_args": without(SEED000_ARGS, "--ulimit=stack")}))
    assert len([p for p in errors if "the stack ulimit must be 64 MiB" in p]) == 1, errors
    with pytest.raises(ProfileError) as caught:
        validate_profile(edited(seed000, {"container/docker_run_args": without(SEED000_ARGS, "--ulimit=stack")}))
    assert str(caught.value).startswith("1 problem:"), str(caught.value)


def test_without_model_information_a_plausible_kv_cache_warns_what_is_missing(seed000: dict[str, Any]) -> None:
    errors, warnings = outcome(seed000)
    assert errors == []
    assert any("checked only against a floor of 256 bytes per token" in w and "model_config" in w for w in warnings)


# ------------------------------------------------------------------------------------ fabric and management


def hosts(*pairs: tuple[str, str]) -> list[Host]:
    return [
        Host(f"spark-{i}", rank=i, fabric_address=fabric, head=i == 0, management_address=mgmt)
        for i, (mgmt, fabric) in enumerate(pairs)
    ]


@pytest.mark.parametrize(
    "pairs,bad",
    [
        ((("192.0.2.10", "198.51.100.10"), ("192.0.2.11", "198.51.100.11")), []),
        ((("192.0.2.10", "192.0.2.10"), ("192.0.2.11", "198.51.100.11")), ["spark-0"]),
        ((("192.0.2.10", "198.51.100.10"), ("192.0.2.11", "192.0.2.10")), ["spark-1"]),  # another host's
        ((("spark-0.lan", "198.51.100.10"), ("spark-1.lan", "198.51.100.11")), []),  # names: not compared
    ],
)
def test_fabric_and_management_addresses_differ(pairs: tuple[tuple[str, str], ...], bad: list[str]) -> None:
    out = Collector("inventory")
    check_hosts(hosts(*pairs), out)
    found = [p.render() for p in out.errors if "management" in p.message]
    assert len(found) == len(bad), found
    for name in bad:
        assert any(f"host {name}: dgxspark_fabric_address" in p and "seed 000" in p for p in found), found


def test_a_host_without_ansible_host_is_managed_on_its_inventory_name() -> None:
    """Ansible connects to the inventory name when ansible_host is unset: an address there is compared too."""
    managed_by_name = [
        Host("192.0.2.10", rank=0, fabric_address="192.0.2.10", head=True),
        Host("192.0.2.11", rank=1, fabric_address="198.51.100.11", management_address=""),
        Host("spark-2.lan", rank=2, fabric_address="198.51.100.12"),  # a name: not resolved, not compared
    ]
    out = Collector("inventory")
    check_hosts(managed_by_name, out)
    assert [p.render() for p in out.errors] == [
        "inventory: host 192.0.2.10: dgxspark_fabric_address: the fabric address is also the management address "
        "(its inventory name, without ansible_host) of host 192.0.2.10; seed 000 runs NCCL on 'a private /24 "
        'fabric that is separate from management traffic\' (found "192.0.2.10"; expected an address on the fabric '
        "ports, on another network than the management one)"
    ]


def test_fabric_on_management_is_refused_by_the_serving_plan_with_the_problem_format() -> None:
    """The serving plan (and so the boot) stops on it before any host is contacted, all problems listed."""
    profile = validate_profile(json.loads(SPARK3.read_text()))
    cluster = [
        Host(name, rank=i, fabric_address=fabric, head=i == 0, management_address=mgmt)
        for i, (name, mgmt, fabric) in enumerate(
            [
                ("spark-head", "192.0.2.10", "198.51.100.10"),
                ("spark-w1", "192.0.2.11", "192.0.2.11"),
                ("spark-w2", "192.0.2.12", "198.51.100.12"),
            ]
        )
    ]
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, "tp3-triangle", cluster)
    (problem,) = caught.value.problems
    assert (problem.source, problem.where, problem.found) == (
        "inventory",
        "host spark-w1: dgxspark_fabric_address",
        "192.0.2.11",
    )
    assert problem.message.startswith(
        "the fabric address is also the management address (ansible_host) of host spark-w1"
    )
    assert problem.expected == "an address on the fabric ports, on another network than the management one"


def test_fabric_on_management_can_be_waived() -> None:
    out = Collector("inventory", waivers={"fabric-not-management": "one-port lab rig"})
    check_hosts(hosts(("192.0.2.10", "192.0.2.10"), ("192.0.2.11", "198.51.100.11")), out)
    assert out.errors == [] and "waived fabric-not-management (one-port lab rig)" in out.warnings[0].render()


# ------------------------------------------------------------------ each rule's silence and its boundaries (issue 27)
SIM8 = SEED000.parents[2].parent / "inventories" / "sim8" / "serving-profile.json"
BASES = {"seed000": SEED000, "spark3": SPARK3, "spark8": SPARK8, "sim8": SIM8}
TP3 = "shapes/tp3-triangle"

# name: (base profile, edits, a fragment of the rule's message, what it must be: "error", "warning" or "" for silence).
# The seed's own value is silent; one step past the rule's boundary is not, one step inside is.
BOUNDARIES: dict[str, tuple[str, dict[str, Any], str, str]] = {
    # concurrency at 1M (seed 000: 4 stable on 3 nodes, 6 and 8 crashed; seed 002 section 5.2: 8 on 8)
    "4 sequences at 1M on 3 nodes (seed 000's own)": ("spark3", {}, "tp3-triangle.sizing.max_num_seqs", ""),
    "8 sequences at 1M on 8 nodes (seed 002's own)": ("spark8", {}, "concurrent sequences", ""),
    "9 sequences at 1M on 8 nodes": ("spark8", {"shapes/tp8-1m/sizing/max_num_seqs": 9}, "9 concurrent", "warning"),
    "5 sequences at 1M on 3 nodes": ("spark3", {f"{TP3}/sizing/max_num_seqs": 5}, "5 concurrent", "warning"),
    "8 sequences at 999,999 tokens on 3 nodes": (
        "spark3",
        {f"{TP3}/sizing/max_num_seqs": 8, f"{TP3}/sizing/max_model_len": 999999},
        "8 concurrent",
        "",
    ),
    "8 sequences at 1,000,000 tokens on 3 nodes": (
        "spark3",
        {f"{TP3}/sizing/max_num_seqs": 8, f"{TP3}/sizing/max_model_len": 1000000},
        "8 concurrent",
        "error",
    ),
    "6 sequences at 512K tokens at seed 000's cost": (
        "spark3",
        {f"{TP3}/sizing/max_num_seqs": 6, f"{TP3}/sizing/max_model_len": 524288},
        "tp3-triangle.sizing.max_num_seqs",
        "",
    ),
    "6 sequences at 512K tokens at twice seed 000's cost": (
        "spark3",
        {
            "model_config/kv_cache_bytes_per_token": 4505,
            f"{TP3}/sizing/max_num_seqs": 6,
            f"{TP3}/sizing/max_model_len": 524288,
        },
        "tp3-triangle.sizing.max_num_seqs",
        "error",
    ),
    "6 sequences at 1M tokens that cost half seed 000's": (
        "spark3",
        {"model_config/kv_cache_bytes_per_token": 1126, f"{TP3}/sizing/max_num_seqs": 6},
        "tp3-triangle.sizing.max_num_seqs",
        "",
    ),
    # the memory guard (seed 000: 5 GiB / 45 s starting, 3 GiB / 30 s serving; 100 GiB before a boot; 6.8 GiB headroom)
    "seed 000's guard": ("spark3", {}, "$.host", ""),
    "startup grace 45 s": ("spark3", {"host/startup_memguard_grace_seconds": 45}, "startup grace", ""),
    "startup grace 44.9 s": ("spark3", {"host/startup_memguard_grace_seconds": 44.9}, "startup grace", "warning"),
    "startup grace of one interval": (
        "spark3",
        {"host/startup_memguard_grace_seconds": 0.25},
        "startup grace",
        "warning",
    ),
    "startup grace under one interval": (
        "spark3",
        {"host/startup_memguard_grace_seconds": 0.24},
        "startup grace",
        "error",
    ),
    "steady grace 30 s": ("spark3", {"host/memguard_grace_seconds": 30}, "steady grace", ""),
    "steady grace 29.9 s": ("spark3", {"host/memguard_grace_seconds": 29.9}, "steady grace", "warning"),
    "steady grace of one interval": ("spark3", {"host/memguard_grace_seconds": 2}, "steady grace", "warning"),
    "steady grace under one interval": ("spark3", {"host/memguard_grace_seconds": 1.99}, "steady grace", "error"),
    "steady floor 1.01 GiB": ("spark3", {"host/memguard_gib": 1.01}, "steady floor", ""),
    "steady floor 1 GiB": ("spark3", {"host/memguard_gib": 1}, "steady floor", "error"),
    "steady floor 6.79 GiB": ("spark3", {"host/memguard_gib": 4.5, "host/startup_memguard_gib": 6.79}, "floor of", ""),
    "startup floor 6.8 GiB": ("spark3", {"host/startup_memguard_gib": 6.8}, "startup floor", "warning"),
    "pre-boot floor 100 GiB": ("spark3", {"host/min_mem_available_gib": 100}, "pre-boot floor", ""),
    "pre-boot floor 99.9 GiB": ("spark3", {"host/min_mem_available_gib": 99.9}, "pre-boot floor", "warning"),
    # the KV cache: sized in bytes (seed 000) or as vLLM reported it at its gpu_memory_utilization (seed 002 section 6)
    "seed 000's KV cache in bytes": ("spark3", {}, "left to gpu_memory_utilization", ""),
    "seed 002's KV caches at their gpu_memory_utilization": ("spark8", {}, "left to gpu_memory_utilization", ""),
    "gpu_memory_utilization 0.925 under 112g": (
        "spark3",
        {f"{TP3}/sizing/gpu_memory_utilization": 0.925},
        "vLLM may use",
        "",
    ),
    "gpu_memory_utilization 0.926 over 112g": (
        "spark3",
        {f"{TP3}/sizing/gpu_memory_utilization": 0.926},
        "vLLM may use",
        "error",
    ),
    "a KV cache that holds one 1M sequence at seed 000's measured cost": ("spark3", {}, "vLLM would refuse", ""),
    # (the budget compares GiB to 3 decimals: two bytes a token short is the first step it sees)
    "a KV cache two bytes per token short at seed 000's measured cost": (
        "spark3",
        {f"{TP3}/sizing/kv_cache_memory_bytes": 2250 * 1048576},
        "vLLM would refuse",
        "error",
    ),
    "a halved KV cache at seed 000's measured cost": (
        "spark3",
        {f"{TP3}/sizing/kv_cache_memory_bytes": 2362232012 // 2},
        "vLLM would refuse",
        "error",
    ),
    # the AutoTuner (seed 002 section 5.1 off at 300K, 5.2 on at 1M)
    "the AutoTuner as seed 002 runs it": ("spark8", {}, "autotuner: true", ""),
    "the AutoTuner on at 300K with room for its peak": (
        "spark8",
        {"shapes/tp8-300k/autotuner": True, "shapes/tp8-300k/memory/components_gib/model": 42.0},
        "autotuner: true",
        "",
    ),
    "the AutoTuner on at 300K, 0.01 GiB short": (
        "spark8",
        {"shapes/tp8-300k/autotuner": True, "shapes/tp8-300k/memory/components_gib/model": 42.01},
        "autotuner: true",
        "error",
    ),
    "the AutoTuner on at 300K without a budget": (
        "sim8",
        {"shapes/tp8-300k/autotuner": True},
        "autotuner: true",
        "error",
    ),
    "the AutoTuner on at 300,001 tokens without a budget": (
        "sim8",
        {"shapes/tp8-300k/autotuner": True, "shapes/tp8-300k/sizing/max_model_len": 300001},
        "autotuner: true",
        "",
    ),
    # NCCL's share of the budget at 8 ranks (seed 002 lesson 1)
    "seed 002's NCCL component": ("spark8", {}, "NCCL component", ""),
    "an NCCL component under another name": (
        "spark8",
        {
            "shapes/tp8-300k/memory/components_gib/nccl": DELETE,
            "shapes/tp8-300k/memory/components_gib/nccl_8_channels": 11,
        },
        "NCCL component",
        "",
    ),
    # the DeepGEMM/CUTLASS peak: seed 002's tp8-300k ran with its measured KV cache
    "the DeepGEMM warning on seed 002's tp8-300k": ("spark8", {}, "DeepGEMM/CUTLASS", ""),
    # NCCL values: seed 002 section 4.3's, each silent at the seed's value
    "seed 002's NCCL environment": ("spark8", {}, "NCCL_", ""),
    "NCCL_IB_ADDR_FAMILY as the seed": (
        "spark8",
        {"shapes/tp8-300k/environment/NCCL_IB_ADDR_FAMILY": "AF_INET"},
        "NCCL_IB_ADDR_FAMILY",
        "",
    ),
    "NCCL_IB_ADDR_FAMILY on a fabric without RoCE": (
        "sim8",
        {"shapes/tp8-300k/environment/NCCL_IB_ADDR_FAMILY": "AF_INET6"},
        "NCCL_IB_ADDR_FAMILY",
        "",
    ),
    # the seeds' CPU rules: each shape its own seed's
    "seed 000's CPU set on tp3": (
        "spark3",
        {"container/docker_run_args": [*read(SPARK3)["container"]["docker_run_args"], "--cpuset-cpus=0-19"]},
        "CPU",
        "",
    ),
    "seed 002's 8 ranks without a CPU set": ("spark8", {}, "cpuset", ""),
}


@pytest.mark.parametrize("base,edits,fragment,expected", BOUNDARIES.values(), ids=BOUNDARIES.keys())
def test_seed_rule_boundary(base: str, edits: dict[str, Any], fragment: str, expected: str) -> None:
    document = edited(read(BASES[base]), edits)
    if "model_config/kv_cache_bytes_per_token" in edits:
        document["sources"]["$.model_config.kv_cache_bytes_per_token"] = "a test's measured cost"
    errors, warnings = outcome(document)
    said = {"error": [p for p in errors if fragment in p], "warning": [p for p in warnings if fragment in p]}
    if expected:
        assert said[expected], (fragment, errors, warnings)
        assert not said["error" if expected == "warning" else "warning"], said
    else:
        assert said == {"error": [], "warning": []}, said


def test_the_plan_renders_each_shape_its_own_seeds_cpu_rule() -> None:
    """seed 000 pins its 3 and 4 ranks (--cpuset-cpus); seed 002 runs its 8 with NCCL_IGNORE_CPU_AFFINITY=1."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import nccl_environment

    for nodes, transport in ((3, "oneshot-direct"), (4, "oneshot-ring4")):
        assert "NCCL_IGNORE_CPU_AFFINITY" not in nccl_environment(nodes, {"transport": transport})
    assert nccl_environment(8, {"transport": "switch"})["NCCL_IGNORE_CPU_AFFINITY"] == "1"


def _with_memory(limit: str) -> list[str]:
    """Seed 000's docker run options with --memory and --memory-swap at ``limit``."""
    return [
        f"{arg.split('=')[0]}={limit}" if arg.startswith(("--memory=", "--memory-swap=")) else arg
        for arg in SEED000_ARGS
    ]


@pytest.mark.parametrize(
    "limit,sized,fails",
    [("100g", False, True), ("112g", False, False), ("16g", True, False)],
    ids=["default share over 100g", "default share within 112g", "KV in bytes under 16g"],
)
def test_an_unstated_gpu_memory_utilization_is_vllms_default_held_to_the_memory_limit(
    limit: str, sized: bool, fails: bool
) -> None:
    """No gpu_memory_utilization and no KV cache in bytes: vLLM takes its default 0.9 of a GB10's 121 GiB (108.9
    GiB), held to --memory like a stated share; with the KV cache in bytes, vLLM sizes by the bytes and the share
    is not judged."""
    edits: dict[str, Any] = {"container/docker_run_args": _with_memory(limit)}
    if not sized:
        edits[f"{TP3}/sizing/kv_cache_memory_bytes"] = DELETE
    errors, _warnings = outcome(edited(read(SEED000), edits))
    said = [e for e in errors if "vLLM's default gpu_memory_utilization 0.9" in e]
    assert bool(said) is fails, errors
    if fails:
        assert "108.90 GiB" in said[0] and "--memory limit of 100 GiB" in said[0], said
