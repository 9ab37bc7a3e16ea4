# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV-cache bytes per token from a model's own ``config.json``, and whether one sequence fits.

:func:`kv_bytes_per_token` takes a parsed ``config.json`` (a dict) and returns what one token costs in
the KV cache of one tensor-parallel rank, the way vLLM lays it out:

- standard attention (MHA, GQA, MQA): ``2 (K and V) x layers x KV heads on the rank x head_dim x
  dtype bytes``; KV heads are split across the ranks, and replicated when there are fewer than ranks
  (``max(1, num_key_value_heads // tp)``);
- DeepSeek-style multi-head latent attention (``kv_lora_rank`` in the config): one latent vector of
  ``kv_lora_rank + qk_rope_head_dim`` per layer, the same on every rank (it is not split by heads);
  vLLM's ``fp8_ds_mla`` format stores it in 656 bytes (512 fp8 + four float32 scales + 64 bf16 rope);
- sliding-window layers (``layer_types``) hold at most ``sliding_window`` tokens, so a sequence
  costs :func:`kv_bytes_for_sequence`, not ``tokens x per-token``.

Compressed attention (DeepSeek-V4's ``compress_ratios``) and linear/state-space layers are not
modelled (:func:`unmodelled_attention` names them): for those, give ``kv_cache_bytes_per_token`` measured
from vLLM's own log (see :func:`read_vllm_kv_lines`). Nothing here reads files or imports Ansible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024**3

# Bytes per element of the KV cache, by vLLM's --kv-cache-dtype (auto: the model's own dtype).
KV_DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}
# vLLM's fp8_ds_mla layout (FlashMLA sparse): 512 fp8 latent values, 4 float32 scales, 64 bf16 rope values.
FP8_DS_MLA_BYTES = 512 + 4 * 4 + 64 * 2
MODEL_DTYPES = ("bfloat16", "float16", "float32")
MODELLED_LAYER_TYPES = ("full_attention", "sliding_attention")
# layers_block_type entries that hold a recurrent state, not a KV cache (Jamba's "mamba", hybrids' "linear_attention")
STATE_SPACE_MARKS = ("mamba", "ssm", "linear")

# The smallest KV cost per token per rank the collection accepts when it knows nothing of the model.
# Every figure in the seeds and field logs is far above it: seed 000's tp3 KV cache holds a 1,048,576
# token sequence in 2,362,232,012 bytes, so its engine stores at most 2,252 bytes per token per rank;
# seed 002 section 6: ~8.7 GiB for 1.46M tokens (6,398) and ~3.7 GiB for 1M (3,789); vLLM logs of
# DeepSeek-V4-Flash on 2 and 3 Sparks: 7,786 and 7,359. A floor of 256 (a ninth of the smallest) still
# catches a size written in the wrong unit (KiB or MiB for bytes: 1,024 times too small).
MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN = 256


@dataclass(frozen=True)
class KVCost:
    """What one token costs in one rank's KV cache, and how it was worked out."""

    bytes_per_token: float
    """Per token of a full-attention (or MLA) layer set, per rank."""
    window_bytes_per_token: float = 0
    """Per token of the sliding-window layers, paid for at most ``sliding_window`` tokens."""
    sliding_window: int = 0
    formula: str = ""
    """The sum, written out (e.g. ``2 x 62 layers x 4 KV heads x 128 x 2 bytes``)."""


def language_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal configs keep the language model's numbers under ``text_config``."""
    inner = config.get("text_config")
    if "num_hidden_layers" not in config and isinstance(inner, Mapping):
        return inner
    return config


def _positive_int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"config.json: {key} must be a positive integer (found {value!r})")
    return value


def unmodelled_attention(config: Mapping[str, Any]) -> list[str]:
    """What in a config.json (its language model's part) describes layers :func:`kv_bytes_per_token` does not
    model, each named with the key that says so; empty when it models them all. Such a model needs a measured
    ``kv_cache_bytes_per_token`` instead (vLLM's own KV lines, :func:`read_vllm_kv_lines`)."""
    config = language_config(config)
    found: list[str] = []
    ratios = config.get("compress_ratios")
    if isinstance(ratios, list) and ratios:
        compressed = [r for r in ratios if isinstance(r, (int, float)) and not isinstance(r, bool) and r]
        kinds = ", ".join(f"1/{r:g}" for r in sorted(set(compressed)))
        found.append(
            f"compressed attention (compress_ratios: {len(compressed)} of {len(ratios)} layers compressed"
            + (f", {kinds}" if kinds else "")
            + "; DeepSeek-V4)"
        )
    rates = config.get("compress_rates")
    if isinstance(rates, Mapping) and rates:
        found.append(
            "compressed attention (compress_rates: "
            + ", ".join(f"{k} {v}" for k, v in rates.items())
            + "; DeepSeek-V4)"
        )
    types = config.get("layer_types")
    if isinstance(types, list):
        other: dict[str, int] = {}
        for kind in types:
            if kind not in MODELLED_LAYER_TYPES:
                other[str(kind)] = other.get(str(kind), 0) + 1
        if other:
            found.append("layer types " + ", ".join(f"{kind} x{count}" for kind, count in sorted(other.items())))
    attention = config.get("attn_type_list")
    if isinstance(attention, list) and 0 in attention:
        found.append(
            f"{attention.count(0)} of {len(attention)} layers of linear attention (attn_type_list 0: MiniMax's "
            "lightning attention)"
        )
    blocks = config.get("layers_block_type")
    if isinstance(blocks, list):
        states = [b for b in blocks if isinstance(b, str) and any(mark in b for mark in STATE_SPACE_MARKS)]
        if states:
            found.append(f"{len(states)} of {len(blocks)} state-space or linear layers (layers_block_type)")
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and "M" in pattern:
        found.append(f"{pattern.count('M')} Mamba layers (hybrid_override_pattern {pattern})")
    if config.get("linear_attn_config"):
        found.append("linear attention layers (linear_attn_config)")
    return found


def element_bytes(config: Mapping[str, Any], kv_cache_dtype: str = "auto") -> int:
    """Bytes per KV element: the --kv-cache-dtype, or with ``auto`` the model's own dtype."""
    if kv_cache_dtype != "auto":
        if kv_cache_dtype not in KV_DTYPE_BYTES:
            raise ValueError(
                f"KV cache dtype {kv_cache_dtype!r} is not modelled (known: auto, fp8_ds_mla, "
                + ", ".join(KV_DTYPE_BYTES)
                + "); give kv_cache_bytes_per_token measured from vLLM's log instead"
            )
        return KV_DTYPE_BYTES[kv_cache_dtype]
    dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    if dtype not in MODEL_DTYPES:
        raise ValueError(f"config.json: torch_dtype {dtype!r} is not one of {', '.join(MODEL_DTYPES)}")
    return KV_DTYPE_BYTES[dtype]


def kv_bytes_per_token(
    config: Mapping[str, Any], kv_cache_dtype: str = "auto", tensor_parallel_size: int = 1
) -> KVCost:
    """KV-cache bytes one token costs on one rank, from a parsed ``config.json``.

    Raises ValueError, naming the key, when the config lacks a number the formula needs or describes
    attention this module does not model.
    """
    config = language_config(config)
    if tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1 (found {tensor_parallel_size})")
    unmodelled = unmodelled_attention(config)
    if unmodelled:
        raise ValueError(
            f"config.json: {'; '.join(unmodelled)}: not modelled; "
            "give kv_cache_bytes_per_token measured from vLLM's log instead"
        )
    layers = _positive_int(config, "num_hidden_layers")
    layer_types = config.get("layer_types")
    window_layers = 0
    window = 0
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != layers:
            raise ValueError(f"config.json: layer_types must list one type per layer ({layers})")
        window_layers = layer_types.count("sliding_attention")
        if window_layers:
            window = _positive_int(config, "sliding_window")
    full_layers = layers - window_layers
    if config.get("kv_lora_rank"):
        latent = _positive_int(config, "kv_lora_rank")
        rope = _positive_int(config, "qk_rope_head_dim")
        if kv_cache_dtype == "fp8_ds_mla":
            if (latent, rope) != (512, 64):
                raise ValueError("fp8_ds_mla is laid out for kv_lora_rank 512 and qk_rope_head_dim 64")
            per_layer, how = FP8_DS_MLA_BYTES, f"{FP8_DS_MLA_BYTES} bytes (fp8_ds_mla)"
        else:
            size = element_bytes(config, kv_cache_dtype)
            per_layer, how = (latent + rope) * size, f"({latent} + {rope}) x {size} bytes"
        formula = f"{layers} layers x {how}, MLA latent (the same on every rank)"
        return KVCost(full_layers * per_layer, window_layers * per_layer, window, formula)
    heads = config.get("num_key_value_heads", config.get("num_attention_heads"))
    if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0:
        raise ValueError(f"config.json: num_key_value_heads must be a positive integer (found {heads!r})")
    if "head_dim" in config and config["head_dim"] is not None:
        head_dim = _positive_int(config, "head_dim")
    else:
        hidden = _positive_int(config, "hidden_size")
        head_dim = hidden // _positive_int(config, "num_attention_heads")
    size = element_bytes(config, kv_cache_dtype)
    on_rank = max(1, heads // tensor_parallel_size)
    per_layer = 2 * on_rank * head_dim * size
    formula = f"2 x {layers} layers x {on_rank} KV heads on the rank (of {heads}) x {head_dim} x {size} bytes"
    return KVCost(full_layers * per_layer, window_layers * per_layer, window, formula)


def kv_bytes_for_sequence(cost: KVCost, tokens: int, block_size: int | None = None) -> float:
    """Bytes of KV cache one sequence of ``tokens`` needs on one rank (whole blocks, as vLLM allocates)."""
    if block_size:
        tokens = -(-tokens // block_size) * block_size
    return cost.bytes_per_token * tokens + cost.window_bytes_per_token * min(tokens, cost.sliding_window)


def tokens_that_fit(cost: KVCost, kv_bytes: float, block_size: int | None = None) -> int:
    """The longest sequence a KV cache of ``kv_bytes`` holds (vLLM's "estimated maximum model length")."""
    low, high = 0, max(1, int(kv_bytes // max(1, cost.bytes_per_token or cost.window_bytes_per_token)) + 1)
    while low < high:
        middle = (low + high + 1) // 2
        if kv_bytes_for_sequence(cost, middle, block_size) <= kv_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def format_gib(size: float) -> str:
    """A size as vLLM writes it in its KV messages: GiB rounded to two places (``22.5``, ``23.25``)."""
    return f"{round(size / GIB, 2)}"


def vllm_kv_refusal(max_model_len: int, needed: float, available: float, estimated: int) -> str:
    """vLLM's own refusal when the KV cache cannot hold one ``max_model_len`` sequence.

    vLLM 0.33.0 raises it at engine start (``_check_enough_kv_cache_memory`` in
    ``vllm/v1/core/kv_cache_utils.py``, called from ``vllm/v1/core/kv_cache_planning.py``); releases
    before 0.10 said instead "The model's max seq len (N) is larger than the maximum number of tokens
    that can be stored in KV cache (M)".
    """
    text = (
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({format_gib(available)} GiB). "
    )
    if estimated > 0:
        text += f"Based on the available memory, the estimated maximum model length is {estimated}. "
    return text + "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"


@dataclass(frozen=True)
class VllmKvLines:
    """The KV-cache lines of a vLLM startup log."""

    available_gib: float | None = None
    """``Available KV cache memory: 36.89 GiB`` (per rank)."""
    tokens: int | None = None
    """``GPU KV cache size: 5,382,503 tokens``."""
    request_tokens: int | None = None
    concurrency: float | None = None
    """``Maximum concurrency for 1,048,576 tokens per request: 5.13x``."""

    @property
    def bytes_per_token(self) -> float | None:
        """What one token costs per rank, as this engine measured it: for kv_cache_bytes_per_token."""
        if self.available_gib is None or not self.tokens:
            return None
        return self.available_gib * GIB / self.tokens


_AVAILABLE = re.compile(r"Available KV cache memory: ([0-9.]+) GiB")
_SIZE = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x")


def read_vllm_kv_lines(log: str) -> VllmKvLines:
    """Read the last KV-cache size, token count and concurrency lines of a vLLM log."""

    def last(pattern: re.Pattern[str]) -> re.Match[str] | None:
        found = list(pattern.finditer(log))
        return found[-1] if found else None

    available, size, concurrency = last(_AVAILABLE), last(_SIZE), last(_CONCURRENCY)
    return VllmKvLines(
        float(available.group(1)) if available else None,
        int(size.group(1).replace(",", "")) if size else None,
        int(concurrency.group(1).replace(",", "")) if concurrency else None,
        float(concurrency.group(2)) if concurrency else None,
    )
