# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's kv-fit: the planned KV cache against the weights' own config.json on the head.

Real config.json files (tests/unit/fixtures/model_configs), read the way node_facts reads them, against the seeds'
KV caches (seed 000: 2,362,232,012 bytes for 1,048,576 tokens; seed 002 section 6: ~30 GB and ~8.7 GB) and
against vLLM's own KV lines and refusal on Sparks (tests/unit/fixtures/vllm_kv).
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._model_config import model_configs
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kv import GIB, read_vllm_kv_lines
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    engine_argv,
    kv_fit,
    planned_kv_cache,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile, validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.seed_rules import ONE_M
from ansible_collections.dgxspark.cluster.tests.unit.conftest import (
    DELETE,
    FIXTURES,
    SPARK3,
    SPARK8,
    edited,
    spark3_without_weights,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan import cluster

CONFIGS = FIXTURES / "model_configs"
SEED000_KV = 2362232012


def sample(name: str) -> str:
    return (FIXTURES / "vllm_kv" / name).read_text(encoding="utf-8").split("\n#\n", 1)[1]


def weights(tmp_path: pathlib.Path, layout: dict[str, str]) -> dict[str, Any]:
    """Node facts whose weights directory holds ``layout`` (relative dir -> fixture model; '' for the top),
    read by node_facts' own reader."""
    for relative, model in layout.items():
        directory = tmp_path / relative
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copy(CONFIGS / model / "config.json", directory / "config.json")
    found, problems = model_configs(str(tmp_path))
    assert problems == []
    return {"weights": {"path": str(tmp_path), "model_configs": found}}


def spark3(edits: dict[str, Any] | None = None, shape: str = "tp3-triangle") -> tuple[dict[str, Any], dict[str, Any]]:
    """Seed 000's profile (inventories/spark3, whose weights are under /models, bound read-only), judged by the weights'
    config.json alone: without its measured cost per token unless ``edits`` give one."""
    raw = edited(
        json.loads(SPARK3.read_text()),
        {"model_config": DELETE, "sources/$.model_config.kv_cache_bytes_per_token": DELETE, **(edits or {})},
    )
    profile = validate_profile(raw)
    nodes = profile.data["shapes"][shape]["nodes"]
    return build_plan(profile, shape, cluster(nodes)), profile.data


def test_flag_values_are_read_as_vllm_reads_them() -> None:
    head = {"entrypoint": "vllm", "command": ["serve", "/m", "--max-model-len", "4096", "--kv_cache_dtype=fp8"]}
    head["command"] += ["--max-model-len=8192"]
    argv = engine_argv(head)
    assert (argv.integer("--max-model-len"), argv.value("--kv-cache-dtype")) == (8192, "fp8")
    assert argv.value("--block-size") is None and argv.positionals == ("serve", "/m")


def test_without_a_weights_path_the_check_is_skipped() -> None:
    plan = build_plan(validate_profile(spark3_without_weights()), "tp3-triangle", cluster(3))
    line = kv_fit("spark-head", {}, plan)
    assert line["status"] == SKIP and line["message"].startswith("the profile names no host.weights_path")


def test_the_shipped_spark3_runs_the_kv_fit_at_seed000s_cost(tmp_path: pathlib.Path) -> None:
    """inventories/spark3 names its weights (issue 27): the preflight reads their config.json, and judges the
    compressed attention of DeepSeek-V4 at the profile's measured 2,252 bytes per token (seed 000's)."""
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    line = kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v4-flash-base"}), plan)
    assert line["status"] == PASS, line
    assert "2,252" in line["message"], line


def test_seed000s_kv_cache_cannot_hold_a_gqa_models_1m_sequence(tmp_path: pathlib.Path) -> None:
    # Qwen3-8B at TP=3: max(1, 8 // 3) = 2 KV heads on a rank: 2 x 36 x 2 x 128 x 2 = 36,864 bytes per token
    plan, _profile = spark3()
    line = kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "qwen3-8b"}), plan)
    assert line["status"] == FAIL
    fits = SEED000_KV // 36864
    assert line["message"] == (
        "vLLM would refuse to start, after loading the weights: To serve at least one request with the model's max "
        "seq len (1048576), (36.0 GiB KV cache is needed, which is larger than the available KV cache memory (2.2 "
        f"GiB). Based on the available memory, the estimated maximum model length is {fits}. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` [/models/DeepSeek-V4.1-Flash-1017/config.json on "
        "spark-head (Qwen3ForCausalLM): 36,864 bytes per token per rank (2 x 36 layers x 2 KV heads on the rank (of "
        "8) x 128 x 2 bytes); KV cache 2,362,232,012 bytes per rank from --kv-cache-memory-bytes 2,362,232,012 "
        "(sizing.kv_cache_memory_bytes)]"
    )
    assert fits == 64079


def test_an_mla_model_fits_seed000s_kv_cache_at_a_shorter_context(tmp_path: pathlib.Path) -> None:
    # DeepSeek-V3's latent: 61 x (512 + 64) x 2 = 70,272 bytes per token, the same on every rank
    node = weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v3"})
    plan, _profile = spark3()
    assert kv_fit("spark-head", node, plan)["status"] == FAIL  # 1M needs 68.63 GiB
    plan, _profile = spark3({"shapes/tp3-triangle/sizing/max_model_len": 16384})
    line = kv_fit("spark-head", node, plan)
    assert line["status"] == PASS
    assert line["message"].startswith(
        "/models/DeepSeek-V4.1-Flash-1017/config.json on spark-head (DeepseekV3ForCausalLM): 70,272 bytes per token "
        "per rank (61 layers x (512 + 64) x 2 bytes, MLA latent (the same on every rank)); one max_model_len "
        "sequence (16,384 tokens) needs 1.07 GiB of the 2.20 GiB KV cache per rank (--kv-cache-memory-bytes "
        "2,362,232,012 (sizing.kv_cache_memory_bytes)): 33,615 tokens fit, maximum concurrency 2.05x"
    )


def minimax_tp2(kv_bytes: int, tmp_path: pathlib.Path) -> tuple[dict[str, str], dict[str, Any]]:
    """eugr/spark-vllm-docker issue 396: MiniMax-M2.7 (AWQ) at TP=2 over two Sparks, max_model_len 196,608."""
    plan, _profile = spark3(
        {
            "shapes/tp2": {
                "nodes": 2,
                "sizing": {
                    "max_model_len": 196608,
                    "max_num_seqs": 4,
                    "max_num_batched_tokens": 8192,
                    "kv_cache_memory_bytes": kv_bytes,
                },
                "fabric": {"transport": "switch"},
            },
            "default_shape": "tp2",
            "container/model_path": "/models/MiniMax-M2.7-AWQ",
        },
        shape="tp2",
    )
    return kv_fit("spark-head", weights(tmp_path, {"MiniMax-M2.7-AWQ": "minimax-m2.7"}), plan), plan


def test_the_gqa_fixture_is_refused_in_the_words_vllm_used_on_two_sparks(tmp_path: pathlib.Path) -> None:
    log = " ".join(
        line.strip("▎ ") for line in sample("vllm-kv-capacity-error.2x-spark.eugr-issue-396.txt").splitlines()
    )
    said = (
        "To serve at least one request with the model's max seq len (196608), 23.25 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (22.5 GiB)."
    )
    assert said in log and "estimated maximum model length is 190272" in log
    line, _plan = minimax_tp2(int(22.5 * GIB), tmp_path)
    assert line["status"] == FAIL
    # the same sentence (vLLM 0.33.0's own text has the parenthesis before the size the poster's copy dropped)
    assert said.replace("), 23.25", "), (23.25") in line["message"]
    assert "estimated maximum model length is 190265. " in line["message"]  # vLLM: 190272 (whole blocks)
    assert (
        "126,976 bytes per token per rank (2 x 62 layers x 4 KV heads on the rank (of 8) x 128 x 2 bytes)"
        in (line["message"])
    )


def test_the_gqa_fixture_fits_where_vllm_started_it(tmp_path: pathlib.Path) -> None:
    # the same issue: "--gpu-memory-utilization 0.85 fixes it: 28.74 GiB KV -> 240,816 tokens, 1.22x concurrency"
    line, _plan = minimax_tp2(int(28.74 * GIB), tmp_path)
    assert line["status"] == PASS
    assert "needs 23.25 GiB of the 28.74 GiB KV cache per rank" in line["message"]
    fits = int(line["message"].split(": ")[-1].split(" tokens fit")[0].replace(",", ""))
    assert fits == pytest.approx(240816, rel=0.01)  # 243,030: vLLM counts 0.9 % fewer
    assert "maximum concurrency 1.24x" in line["message"]  # vLLM: 240,816 / 196,608 = 1.22x


def test_compressed_attention_without_a_measured_cost_warns_what_is_missing(tmp_path: pathlib.Path) -> None:
    plan, _profile = spark3()
    line = kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v4-flash-base"}), plan)
    assert line == {
        "check": "kv-fit",
        "host": "spark-head",
        "status": WARN,
        "message": "/models/DeepSeek-V4.1-Flash-1017/config.json on spark-head (DeepseekV4ForCausalLM): the KV formula "
        "does not model compressed attention (compress_ratios: 41 of 44 layers compressed, 1/4, 1/128; "
        "DeepSeek-V4), and the profile gives no measured KV cost to take its place: add kv_cache_bytes_per_token, "
        "vLLM's 'Available KV cache memory' over its 'GPU KV cache size' (_kv.read_vllm_kv_lines), as the shape's "
        "memory.kv_cache_bytes_per_token or model_config.kv_cache_bytes_per_token",
    }


@pytest.mark.parametrize(
    "log,nodes,kv_gib,figure",
    [
        # vLLM's own KV lines of DeepSeek-V4-Flash on three Sparks: 36.89 GiB, 5,382,503 tokens, 5.13x at 1M
        ("vllm-serve-log.3x-spark-tp3.colonel-otto-kv-lines.txt", 3, 36.89, "maximum concurrency 5.13x"),
        # two Sparks: 18.08 GiB, 2,493,464 tokens, 2.38x at 1M
        ("vllm-kv-lines.2x-spark-tp2.miaai-dspark.txt", 2, 18.08, "maximum concurrency 2.38x"),
    ],
)
def test_a_measured_cost_takes_the_place_of_compressed_attention(
    tmp_path: pathlib.Path, log: str, nodes: int, kv_gib: float, figure: str
) -> None:
    lines = read_vllm_kv_lines(sample(log))
    per_token = round(lines.bytes_per_token or 0)
    shape = {
        "nodes": nodes,
        "sizing": {
            "max_model_len": ONE_M,
            "max_num_seqs": 4,
            "max_num_batched_tokens": 8192,
            "kv_cache_memory_bytes": int(kv_gib * GIB),
        },
        "fabric": {"transport": "switch"},
        # the shape's calibrated cost (seed 000's other shapes keep their own engine's figures)
        "memory": {"usable_gib": 121, "components_gib": {}, "kv_cache_bytes_per_token": per_token},
    }
    plan, _profile = spark3({"shapes/measured": shape}, shape="measured")
    line = kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v4-flash-base"}), plan)
    assert line["status"] == PASS, line["message"]
    assert figure in line["message"]
    assert (
        "the KV formula does not model compressed attention (compress_ratios: 41 of 44 layers compressed, 1/4, "
        f"1/128; DeepSeek-V4): judged at the profile's measured {per_token:,} bytes per token "
        "(shapes.measured.memory.kv_cache_bytes_per_token)"
    ) in line["message"]


def test_the_same_measured_cost_would_not_fit_seed000s_kv_cache() -> None:
    # 7,359 bytes per token (vLLM on three Sparks) x 1,048,576 = 7.19 GiB, over seed 000's 2.2 GiB: the profile's
    # validation refuses it before a preflight (seed 000's engine stores the cache more compactly, docs/seed-rules.md)
    with pytest.raises(
        ProfileError, match=r"\(7.19 GiB KV cache is needed, which is larger than the available KV cache"
    ):
        spark3(
            {
                "model_config": {"architecture": "DeepseekV4ForCausalLM", "kv_cache_bytes_per_token": 7359},
                "sources/$.model_config": "vLLM's KV lines of DeepSeek-V4-Flash on three Sparks",
            }
        )


@pytest.mark.parametrize(
    "shape,per_token,needed,kv,concurrency",
    [
        # seed 002 6.2 (TP8-1M): KV cache ~30 GB; "Benodigd voor een context van 1M ~3.7 GB"; reserve ~26
        ("tp8-1m", "3,789", "3.70", "30.00", "8.11x"),
        # seed 002 6.1 (TP8-300K): KV cache ~8.7 GB (1.46M tokens) against 300,000 tokens in blocks of 128
        ("tp8-300k", "6,398", "1.79", "8.70", "4.87x"),
    ],
)
def test_seed002s_shapes_fit_at_their_own_figures(
    tmp_path: pathlib.Path, shape: str, per_token: str, needed: str, kv: str, concurrency: str
) -> None:
    # spark8's /models holds the model's directory (container.model_path /models/DeepSeek-V4.1-Flash) and another
    node = weights(tmp_path, {"DeepSeek-V4.1-Flash": "deepseek-v4-flash-base", "Qwen3-8B": "qwen3-8b"})
    profile = load_profile(str(SPARK8))
    line = kv_fit("spark-head", node, build_plan(profile, shape, cluster(8)))
    assert line["status"] == PASS, line["message"]
    assert line["message"].startswith("/models/DeepSeek-V4.1-Flash/config.json on spark-head (DeepseekV4ForCausalLM)")
    assert f"measured {per_token} bytes per token (shapes.{shape}.memory.kv_cache_bytes_per_token)" in line["message"]
    assert f"needs {needed} GiB of the {kv} GiB KV cache per rank (memory.kv_cache_gib" in line["message"]
    assert f"maximum concurrency {concurrency}" in line["message"]


def test_the_profiles_model_config_is_compared_with_the_weights(tmp_path: pathlib.Path) -> None:
    node = weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v3"})
    agreeing = {"architecture": "DeepseekV3ForCausalLM", "num_hidden_layers": 61, "kv_lora_rank": 512}
    agreeing |= {"qk_rope_head_dim": 64, "torch_dtype": "bfloat16"}
    sources = {"$.model_config": "deepseek-ai/DeepSeek-V3 config.json"}
    short = {
        "shapes/tp3-triangle/sizing/max_model_len": 16384,
        "shapes/tp4-ring/sizing/max_model_len": 16384,
        "sources/$.model_config": sources["$.model_config"],
    }
    plan, _profile = spark3({**short, "model_config": agreeing})
    line = kv_fit("spark-head", node, plan)
    assert line["status"] == PASS and line["message"].endswith("; the profile's model_config agrees with it")
    plan, _profile = spark3({**short, "model_config": {**agreeing, "num_hidden_layers": 27, "kv_lora_rank": 256}})
    line = kv_fit("spark-head", node, plan)
    assert line["status"] == WARN
    assert line["message"].endswith(
        "; the profile's model_config disagrees with the weights' config.json (num_hidden_layers: profile 27, "
        "config.json 61; kv_lora_rank: profile 256, config.json 512; KV bytes per token per rank: profile 17,280, "
        "config.json 70,272): vLLM loads the weights, so correct model_config and its sources"
    )


def test_which_config_is_judged_and_what_is_said_when_none_is(tmp_path: pathlib.Path) -> None:
    plan, _profile = spark3()
    two = weights(tmp_path / "two", {"Qwen3-8B": "qwen3-8b", "MiniMax": "minimax-m2.7"})
    assert kv_fit("spark-head", two, plan)["message"] == (
        "could not check the KV cache against the weights: no /models/DeepSeek-V4.1-Flash-1017/config.json "
        "(container.model_path /models/DeepSeek-V4.1-Flash-1017, bound by --volume=/models:/models:ro); found: "
        "MiniMax/config.json, Qwen3-8B/config.json"
    )
    # seed 000's own profile names the model by its hub id: not bound, so the only config.json there is judged
    hub = edited(spark3_without_weights(), {"host/weights_path": "/models/DeepSeek-V4.1-Flash-1017"})
    plan = build_plan(validate_profile(hub), "tp3-triangle", cluster(3))
    line = kv_fit("spark-head", weights(tmp_path / "one", {"": "qwen3-8b"}), plan)
    assert line["status"] == FAIL
    assert "[/models/DeepSeek-V4.1-Flash-1017/config.json on spark-head (Qwen3ForCausalLM)" in line["message"]
    line = kv_fit("spark-head", two, plan)
    assert line["message"] == (
        "could not check the KV cache against the weights: 2 config.json under /models/DeepSeek-V4.1-Flash-1017 "
        "(MiniMax/config.json, Qwen3-8B/config.json) and container.model_path deepseek-ai/DeepSeek-V4.1-Flash-1017 "
        "is not bound from the node: which one is served?"
    )
    assert kv_fit("spark-head", {"weights": {"path": "/x"}}, plan)["status"] == WARN


def test_a_config_that_did_not_parse_is_named(tmp_path: pathlib.Path) -> None:
    (tmp_path / "DeepSeek-V4.1-Flash-1017").mkdir()
    (tmp_path / "DeepSeek-V4.1-Flash-1017" / "config.json").write_text('{"num_hidden_layers": ')
    found, _problems = model_configs(str(tmp_path))
    plan, _profile = spark3()
    line = kv_fit("spark-head", {"weights": {"model_configs": found}}, plan)
    assert line["status"] == WARN
    assert line["message"].startswith(
        "could not read /models/DeepSeek-V4.1-Flash-1017/config.json on spark-head: not JSON: Expecting value"
    )


def test_a_kv_cache_the_plan_does_not_size_gets_the_figure_it_needs(tmp_path: pathlib.Path) -> None:
    plan, _profile = spark3(
        {
            "shapes/tp3-triangle/sizing/kv_cache_memory_bytes": DELETE,
            "sources/$.shapes.tp3-triangle.sizing.kv_cache_memory_bytes": DELETE,
            "shapes/tp3-triangle/sizing/gpu_memory_utilization": 0.8,
            "shapes/tp3-triangle/sizing/max_model_len": 16384,
            "waivers": {"kv-cache-explicit": "this test's KV cache is sized by vLLM at start"},
        }
    )
    assert planned_kv_cache(plan["ranks"][0], plan) == (
        None,
        "neither sizing.kv_cache_memory_bytes nor a memory budget sizes it",
    )
    line = kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "deepseek-v3"}), plan)
    assert line["status"] == WARN
    assert line["message"].endswith(
        "one max_model_len sequence (16,384 tokens) needs 1.07 GiB per rank, but the plan does not size the KV "
        "cache (neither sizing.kv_cache_memory_bytes nor a memory budget sizes it): vLLM sizes it at start"
    )


def test_seed000s_one_m_is_what_the_seed_says() -> None:
    assert ONE_M == 1048576 and SEED000_KV // ONE_M == 2252
