# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV bytes per token from config.json, checked against vLLM's own KV lines and seed 002's figures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kv import (
    GIB,
    MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN,
    KVCost,
    format_gib,
    kv_bytes_for_sequence,
    kv_bytes_per_token,
    language_config,
    read_vllm_kv_lines,
    tokens_that_fit,
    unmodelled_attention,
    vllm_kv_refusal,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import FIXTURES

KV = FIXTURES / "vllm_kv"

# MiniMax-M2's config.json (architectures MiniMaxM2ForCausalLM): 62 layers, 8 KV heads of 128, bf16,
# max_position_embeddings 196608.
MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}
# DeepSeek-V3's config.json: 61 layers of MLA, kv_lora_rank 512, qk_rope_head_dim 64, bf16.
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "torch_dtype": "bfloat16",
}


def sample(name: str) -> str:
    text = (KV / name).read_text(encoding="utf-8")
    return text.split("\n#\n", 1)[1]


def test_gqa_split_across_ranks_matches_vllm_refusal_on_two_sparks() -> None:
    # eugr/spark-vllm-docker issue 396: MiniMax-M2.7 AWQ (the M2 architecture), TP=2 over two Sparks:
    # "To serve at least one request with the model's max seq len (196608), 23.25 GiB KV cache is needed,
    # which is larger than the available KV cache memory (22.5 GiB). ... estimated maximum model length is 190272."
    log = sample("vllm-kv-capacity-error.2x-spark.eugr-issue-396.txt")
    assert "max seq len (196608)" in log and "23.25 GiB KV cache is needed" in log
    cost = kv_bytes_per_token(MINIMAX_M2, tensor_parallel_size=2)
    assert cost.bytes_per_token == 2 * 62 * 4 * 128 * 2 == 126976
    needed = kv_bytes_for_sequence(cost, 196608)
    assert format_gib(needed) == "23.25"
    available = 22.5 * GIB
    estimated = tokens_that_fit(cost, available)
    assert estimated == pytest.approx(190272, rel=1e-4)  # vLLM's estimate: whole blocks, from unrounded memory
    assert vllm_kv_refusal(196608, needed, available, estimated).startswith(
        "To serve at least one request with the model's max seq len (196608), (23.25 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (22.5 GiB). Based on the available memory, "
        "the estimated maximum model length is 19026"
    )


@pytest.mark.parametrize(
    "config,dtype,tp,expected",
    [
        (MINIMAX_M2, "auto", 1, 2 * 62 * 8 * 128 * 2),
        (MINIMAX_M2, "fp8", 8, 2 * 62 * 1 * 128 * 1),
        (MINIMAX_M2, "auto", 16, 2 * 62 * 1 * 128 * 2),  # fewer KV heads than ranks: replicated
        (DEEPSEEK_V3, "auto", 1, 61 * 576 * 2),  # the MLA latent: 70,272 bytes
        (DEEPSEEK_V3, "auto", 8, 61 * 576 * 2),  # ... the same on every rank
        (DEEPSEEK_V3, "fp8", 3, 61 * 576),
        (DEEPSEEK_V3, "fp8_ds_mla", 3, 61 * 656),
        ({"text_config": MINIMAX_M2}, "auto", 2, 126976),  # a multimodal config's language model
        ({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}, "auto", 1, 2 * 32 * 32 * 128 * 2),
    ],
)
def test_bytes_per_token(config: dict[str, Any], dtype: str, tp: int, expected: int) -> None:
    assert kv_bytes_per_token(config, dtype, tp).bytes_per_token == expected


def test_sliding_window_layers_hold_only_their_window() -> None:
    config = {
        "num_hidden_layers": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        "sliding_window": 1024,
    }
    cost = kv_bytes_per_token(config)
    per_layer = 2 * 128 * 2
    assert (cost.bytes_per_token, cost.window_bytes_per_token) == (per_layer, 3 * per_layer)
    assert kv_bytes_for_sequence(cost, 1_000_000) == per_layer * 1_000_000 + 3 * per_layer * 1024


@pytest.mark.parametrize(
    "config,dtype,words",
    [
        ({"num_hidden_layers": 43, "compress_ratios": [0, 0, 4], "head_dim": 512}, "auto", "compress_ratios"),
        ({"num_attention_heads": 8, "head_dim": 64}, "auto", "num_hidden_layers"),
        ({"num_hidden_layers": 2, "kv_lora_rank": 512}, "auto", "qk_rope_head_dim"),
        (MINIMAX_M2, "nvfp4_ds_mla", "not modelled"),
        ({**MINIMAX_M2, "layer_types": ["linear_attention"] * 62}, "auto", "linear_attention"),
    ],
)
def test_what_cannot_be_worked_out_is_named(config: dict[str, Any], dtype: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        kv_bytes_per_token(config, dtype)


@pytest.mark.parametrize(
    "name,available,tokens,concurrency,per_token",
    [
        # DeepSeek-V4-Flash, TP=3 on three Sparks, nvfp4_ds_mla: 36.89 GiB -> 5,382,503 tokens, 5.13x at 1M
        ("vllm-serve-log.3x-spark-tp3.colonel-otto-kv-lines.txt", 36.89, 5382503, 5.13, 7359),
        # DeepSeek-V4-Flash DSpark, TP=2 on two Sparks: 18.08 GiB -> 2,493,464 tokens, 2.38x at 1M
        ("vllm-kv-lines.2x-spark-tp2.miaai-dspark.txt", 18.08, 2493464, 2.38, 7786),
    ],
)
def test_vllm_kv_lines_give_the_measured_cost(
    name: str, available: float, tokens: int, concurrency: float, per_token: int
) -> None:
    lines = read_vllm_kv_lines(sample(name))
    assert (lines.available_gib, lines.tokens, lines.request_tokens, lines.concurrency) == (
        available,
        tokens,
        1048576,
        concurrency,
    )
    assert lines.bytes_per_token == pytest.approx(per_token, abs=1)
    # vLLM's concurrency is the pool over one max_model_len request: the same cost gives it back
    cost = KVCost(lines.bytes_per_token)
    assert available * GIB / kv_bytes_for_sequence(cost, 1048576) == pytest.approx(concurrency, abs=0.005)


def test_a_log_without_the_available_line_has_no_cost() -> None:
    lines = read_vllm_kv_lines(sample("vllm-kv-lines.2x-spark-tp2.colonel-otto-matched-2v3-tp2.txt"))
    assert (lines.tokens, lines.concurrency, lines.bytes_per_token) == (2217166, 2.11, None)


@pytest.mark.parametrize(
    "kv_gib,tokens,per_token,reserve",
    [
        # seed 002 6.1 (TP8-300K): KV cache ~8.7 GB holds 1.46M tokens: 6,398 bytes per token per rank
        (8.7, 1_460_000, 6398, None),
        # seed 002 6.2 (TP8-1M): KV cache ~30 GB; ~3.7 GB for a 1M context: 3,789; reserve ~26 GB
        (30, None, 3789, 26.3),
    ],
)
def test_seed002_kv_figures(kv_gib: float, tokens: int | None, per_token: int, reserve: float | None) -> None:
    cost = KVCost(per_token)
    if tokens:
        assert kv_gib * GIB / per_token == pytest.approx(tokens, rel=0.001)
    needed = kv_bytes_for_sequence(cost, 1048576) / GIB
    if reserve:
        assert (round(needed, 2), round(kv_gib - needed, 1)) == (3.7, reserve)


def test_the_plausibility_floor_sits_far_below_every_measured_cost() -> None:
    # seed 000's tp3 KV cache holds one 1,048,576-token sequence: its engine needs at most 2,252 B/token
    seed000_bound = 2362232012 // 1048576
    measured = [seed000_bound, 3789, 6398, 7359, 7786, 126976]
    assert seed000_bound == 2252
    assert all(m >= 8 * MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN for m in measured)
    # ... and a size written in MiB instead of bytes falls below it
    assert 2362232012 / 1024**2 < 1048576 * MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN


def fixture_config(name: str) -> dict[str, Any]:
    """A real config.json (tests/unit/fixtures/model_configs, sources in its README)."""
    return json.loads((FIXTURES / "model_configs" / name / "config.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name,tp,expected",
    [
        ("deepseek-v3", 1, 61 * (512 + 64) * 2),  # 70,272: MLA's latent
        ("deepseek-v3", 8, 70272),  # the same on every rank
        ("minimax-m2.7", 1, 2 * 62 * 8 * 128 * 2),  # 253,952
        ("minimax-m2.7", 2, 126976),
        ("qwen3-8b", 1, 2 * 36 * 8 * 128 * 2),  # 147,456; sliding_window null and no layer_types: full attention
        ("qwen3-8b", 16, 2 * 36 * 1 * 128 * 2),  # fewer KV heads than ranks: replicated
    ],
)
def test_the_real_configs_cost_what_their_numbers_say(name: str, tp: int, expected: int) -> None:
    assert kv_bytes_per_token(fixture_config(name), "auto", tp).bytes_per_token == expected


def test_the_gqa_fixture_is_the_model_vllm_refused_on_two_sparks() -> None:
    # MiniMax-M2.7's own config.json, TP=2, max_model_len 196,608: vLLM said 23.25 GiB was needed (issue 396)
    needed = kv_bytes_for_sequence(kv_bytes_per_token(fixture_config("minimax-m2.7"), "auto", 2), 196608)
    assert format_gib(needed) == "23.25"
    assert "23.25 GiB KV cache is needed" in sample("vllm-kv-capacity-error.2x-spark.eugr-issue-396.txt")


@pytest.mark.parametrize(
    "config,found",
    [
        (
            fixture_config("deepseek-v4-flash-base"),
            ["compressed attention (compress_ratios: 41 of 44 layers compressed, 1/4, 1/128; DeepSeek-V4)"],
        ),
        (fixture_config("minimax-m2.7"), []),  # attn_type_list all 1: full attention
        (fixture_config("deepseek-v3"), []),
        (
            {**fixture_config("minimax-m2.7"), "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1] * 8},
            ["56 of 64 layers of linear attention (attn_type_list 0: MiniMax's lightning attention)"],
        ),
        (
            # transformers' own DeepseekV4Config (hf-internal-testing/tiny-DeepseekV4ForCausalLM-for-CI)
            {
                "num_hidden_layers": 4,
                "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
                "layer_types": [
                    "sliding_attention",
                    "sliding_attention",
                    "compressed_sparse_attention",
                    "heavily_compressed_attention",
                ],
            },
            [
                "compressed attention (compress_rates: compressed_sparse_attention 4, heavily_compressed_attention "
                "128; DeepSeek-V4)",
                "layer types compressed_sparse_attention x1, heavily_compressed_attention x1",
            ],
        ),
        ({"layer_types": ["linear_attention"] * 3 + ["full_attention"]}, ["layer types linear_attention x3"]),
        (
            {"layers_block_type": ["mamba", "attention", "mamba", "moe"]},
            ["2 of 4 state-space or linear layers (layers_block_type)"],
        ),
        ({"hybrid_override_pattern": "M-M*-M-"}, ["3 Mamba layers (hybrid_override_pattern M-M*-M-)"]),
        ({"linear_attn_config": {"kda_layers": [1, 2]}}, ["linear attention layers (linear_attn_config)"]),
        (
            {"text_config": {"num_hidden_layers": 2, "compress_ratios": [0, 4]}},
            ["compressed attention (compress_ratios: 1 of 2 layers compressed, 1/4; DeepSeek-V4)"],
        ),
    ],
)
def test_attention_the_formula_does_not_model_is_named(config: dict[str, Any], found: list[str]) -> None:
    assert unmodelled_attention(config) == found
    if found and "num_hidden_layers" in language_config(config):
        with pytest.raises(ValueError, match="not modelled; give kv_cache_bytes_per_token"):
            kv_bytes_per_token(config)
