# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts reads only the KV-relevant keys of the weights' config.json: real files, bounded, errors named."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._model_config import (
    KV_KEYS,
    MAX_CONFIG_BYTES,
    kv_keys,
    model_configs,
    read_config,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import FIXTURES

CONFIGS = FIXTURES / "model_configs"


def real(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text(encoding="utf-8"))


def test_a_deepseek_config_gives_only_its_kv_keys() -> None:
    keys, skipped = kv_keys(real("deepseek-v3"))
    assert keys == {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 163840,
    }
    assert skipped == []
    # what the KV cost does not depend on stays on the node: experts, quantization, rope scaling, vocabulary
    assert not {"n_routed_experts", "quantization_config", "rope_scaling", "vocab_size"} & set(keys)


def test_a_compressed_attention_config_keeps_its_markers() -> None:
    keys, _skipped = kv_keys(real("deepseek-v4-flash-base"))
    assert keys["compress_ratios"][:4] == [0, 0, 4, 128] and len(keys["compress_ratios"]) == 44
    assert (keys["num_hidden_layers"], keys["num_key_value_heads"], keys["head_dim"], keys["sliding_window"]) == (
        43,
        1,
        512,
        128,
    )


def test_a_gqa_config_keeps_null_sliding_window_and_dtype() -> None:
    qwen = kv_keys(real("qwen3-8b"))[0]
    assert qwen["sliding_window"] is None and qwen["num_key_value_heads"] == 8 and qwen["head_dim"] == 128
    minimax = kv_keys(real("minimax-m2.7"))[0]
    assert minimax["dtype"] == "bfloat16" and minimax["attn_type_list"] == [1] * 62


def test_a_multimodal_configs_text_config_is_filtered_the_same_way() -> None:
    config = {
        "architectures": ["SomeVLForConditionalGeneration"],
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
        "text_config": {"num_hidden_layers": 62, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 262144},
    }
    keys, skipped = kv_keys(config)
    assert keys == {
        "architectures": ["SomeVLForConditionalGeneration"],
        "text_config": {"num_hidden_layers": 62, "num_key_value_heads": 8, "head_dim": 128},
    }
    assert skipped == []


@pytest.mark.parametrize(
    "value",
    [
        {"nested": {"too": "deep"}},
        ["a list", ["of lists"]],
        "x" * 257,
        [0] * 4097,
        float("nan"),
    ],
)
def test_a_value_too_large_or_too_deep_is_named_not_sent(value: object) -> None:
    keys, skipped = kv_keys({"num_hidden_layers": 2, "layer_types": value})
    assert keys == {"num_hidden_layers": 2}
    assert skipped == ["layer_types"]


def test_every_kv_key_the_kv_formula_reads_is_sent() -> None:
    # plugin_utils/plan/kv.py reads these; the preflight can only work with what the node sends
    read = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size"}
    read |= {"kv_lora_rank", "qk_rope_head_dim", "torch_dtype", "dtype", "sliding_window", "layer_types"}
    read |= {"compress_ratios", "compress_rates", "attn_type_list", "layers_block_type", "hybrid_override_pattern"}
    assert read <= set(KV_KEYS)


def test_the_weights_path_may_be_the_model_or_a_directory_of_models(tmp_path: pathlib.Path) -> None:
    shutil.copy(CONFIGS / "qwen3-8b" / "config.json", tmp_path / "config.json")
    for name in ("DeepSeek-V3", "MiniMax-M2.7", ".cache"):
        (tmp_path / name).mkdir()
    shutil.copy(CONFIGS / "deepseek-v3" / "config.json", tmp_path / "DeepSeek-V3" / "config.json")
    shutil.copy(CONFIGS / "minimax-m2.7" / "config.json", tmp_path / "MiniMax-M2.7" / "config.json")
    (tmp_path / ".cache" / "config.json").write_text("{}")  # a download tool's state: not looked at
    (tmp_path / "DeepSeek-V3" / "sub").mkdir()
    (tmp_path / "DeepSeek-V3" / "sub" / "config.json").write_text("{}")  # two levels down: not looked at
    found, problems = model_configs(str(tmp_path))
    assert sorted(found) == ["DeepSeek-V3/config.json", "MiniMax-M2.7/config.json", "config.json"]
    assert found["DeepSeek-V3/config.json"]["keys"]["kv_lora_rank"] == 512
    assert found["config.json"]["size"] == (CONFIGS / "qwen3-8b" / "config.json").stat().st_size
    assert problems == []


def test_a_missing_config_is_no_problem_and_a_file_is_not_a_directory(tmp_path: pathlib.Path) -> None:
    assert model_configs(str(tmp_path)) == ({}, [])
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    assert model_configs(str(tmp_path / "model.gguf")) == ({}, [])
    assert model_configs(str(tmp_path / "absent")) == ({}, [])


@pytest.mark.parametrize(
    "content,words",
    [
        (b'{"num_hidden_layers": 61,', "not JSON: Expecting"),
        (b"[1, 2]", "not a JSON object (a list)"),
        (b'{"a": "\xff"}', "not UTF-8 text"),
    ],
)
def test_a_config_that_does_not_parse_is_a_problem(tmp_path: pathlib.Path, content: bytes, words: str) -> None:
    (tmp_path / "config.json").write_bytes(content)
    found, problems = model_configs(str(tmp_path))
    entry = found["config.json"]
    assert entry["keys"] is None and words in entry["error"]
    assert problems == [(str(tmp_path / "config.json"), entry["error"])]


def test_a_config_over_one_mib_is_not_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_hidden_layers": 2, "padding": "x" * MAX_CONFIG_BYTES}))
    entry, problems = read_config(str(path))
    assert entry["keys"] is None and entry["error"].startswith(f"{path.stat().st_size} bytes, more than 1048576")
    assert problems == [(str(path), entry["error"])]


def test_only_the_first_directories_are_looked_into(tmp_path: pathlib.Path) -> None:
    for index in range(3):
        (tmp_path / f"m{index}").mkdir()
        (tmp_path / f"m{index}" / "config.json").write_text('{"num_hidden_layers": 1}')
    found, problems = model_configs(str(tmp_path), max_dirs=2)
    assert sorted(found) == ["m0/config.json", "m1/config.json"]
    assert problems == [
        (
            str(tmp_path),
            "3 directories: config.json looked for in the first 2 only (sorted by name); point host.weights_path at "
            "the model's own directory",
        )
    ]
