# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve` arguments: only flags vLLM has, or flags a profile declares for its fork.

The option table is generated from the vLLM release's own argument parser
(``tools/vllm_args/generate.py`` writes ``_vllm_serve_args.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, did_you_mean
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._vllm_serve_args import SERVE_OPTIONS, VLLM_VERSION

# Flags the collection renders from the profile; setting them in serve_args would let ranks disagree.
RENDERED_FLAGS: dict[str, str] = {
    "--tensor-parallel-size": "shapes.<shape>.nodes",
    "--nnodes": "shapes.<shape>.nodes",
    "--node-rank": "the inventory's dgxspark_rank",
    "--master-addr": "the head's dgxspark_fabric_address",
    "--master-port": "container.master_port",
    "--headless": "the inventory (workers run headless)",
    "--distributed-executor-backend": "nothing: multi-node ranks always use mp",
    "--served-model-name": "model",
    "--port": "container.api_port",
    "--max-model-len": "shapes.<shape>.sizing.max_model_len",
    "--max-num-seqs": "shapes.<shape>.sizing.max_num_seqs",
    "--max-num-batched-tokens": "shapes.<shape>.sizing.max_num_batched_tokens",
    "--kv-cache-memory-bytes": "shapes.<shape>.sizing.kv_cache_memory_bytes",
    "--gpu-memory-utilization": "shapes.<shape>.sizing.gpu_memory_utilization",
    "--block-size": "shapes.<shape>.sizing.block_size",
    "--prefix-cache-retention-interval": "shapes.<shape>.sizing.prefix_cache_retention_interval",
    "--long-prefill-token-threshold": "shapes.<shape>.sizing.long_prefill_token_threshold",
    "--speculative-config": "shapes.<shape>.speculative_config",
    "--revision": "model_revision",
    "--override-generation-config": "generation_defaults",
}

# Sizing keys and the flags they become, in the order they are rendered.
SIZING_FLAGS: tuple[tuple[str, str], ...] = (
    ("max_model_len", "--max-model-len"),
    ("max_num_seqs", "--max-num-seqs"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("block_size", "--block-size"),
    ("prefix_cache_retention_interval", "--prefix-cache-retention-interval"),
    ("long_prefill_token_threshold", "--long-prefill-token-threshold"),
)


@dataclass(frozen=True)
class ServeArg:
    flag: str
    value: str | None
    index: int


def _spec(flag: str) -> Mapping[str, Any] | None:
    return SERVE_OPTIONS.get(flag)


def canonical(flag: str) -> str:
    """vLLM's parser accepts ``--max_model_len`` for ``--max-model-len``; compare in dashed form."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def parse_serve_args(args: Sequence[str], extra_flags: Iterable[str] = ()) -> list[ServeArg]:
    """Split serve arguments into flags and values, the way vLLM's parser reads them."""
    extra = {canonical(f) for f in extra_flags}
    result: list[ServeArg] = []
    i = 0
    while i < len(args):
        start, item = i, args[i]
        if not item.startswith("-") or item in ("-", "--"):
            result.append(ServeArg("", item, start))
            i += 1
            continue
        flag, sep, inline = item.partition("=")
        flag = canonical(flag)
        spec = _spec(flag)
        takes_value = bool(spec and spec.get("takes_value")) or (flag in extra and not sep and _next_is_value(args, i))
        value: str | None = inline if sep else None
        if not sep and takes_value and i + 1 < len(args):
            i += 1
            value = args[i]
        result.append(ServeArg(flag, value, start))
        i += 1
    return result


def _next_is_value(args: Sequence[str], i: int) -> bool:
    return i + 1 < len(args) and not args[i + 1].startswith("--")


def check_serve_args(args: Sequence[str], fork_flags: Sequence[str], where: str, out: Collector) -> None:
    """Unknown flags, flags the collection renders itself, missing or invalid values."""
    forks = {canonical(f) for f in fork_flags}
    for arg in parse_serve_args(args, forks):
        place = f"{where}[{arg.index}]"
        if not arg.flag:
            out.error(place, "a value without a flag", found=arg.value, expected="--flag, --flag=value or --flag value")
            continue
        if arg.flag in RENDERED_FLAGS:
            out.error(
                place,
                f"{arg.flag} is rendered by the collection",
                found=arg.flag,
                hint=f"set {RENDERED_FLAGS[arg.flag]} instead",
            )
            continue
        spec = _spec(arg.flag)
        if spec is None:
            if arg.flag in forks:
                continue
            hint = did_you_mean(arg.flag, SERVE_OPTIONS) or ""
            hint = (hint + " " if hint else "") + "a flag of the image's vLLM fork goes in container.fork_flags"
            out.error(
                place,
                f"vLLM {VLLM_VERSION} has no such flag; vLLM would exit 2 (unrecognized arguments)",
                found=arg.flag,
                hint=hint,
            )
            continue
        if spec.get("takes_value") and arg.value is None and spec.get("nargs") not in ("?", "*"):
            out.error(place, f"{arg.flag} needs a value", found=arg.flag, expected=f"{arg.flag}=VALUE")
            continue
        choices = spec.get("choices")
        if choices and arg.value is not None and arg.value not in [str(c) for c in choices]:
            out.error(
                place,
                f"invalid choice for {arg.flag}",
                found=arg.value,
                expected="one of " + ", ".join(str(c) for c in choices),
                hint=did_you_mean(arg.value, [str(c) for c in choices]),
            )
        kind = spec.get("type")
        if arg.value is not None and kind in ("int", "float"):
            try:
                int(arg.value) if kind == "int" else float(arg.value)
            except ValueError:
                out.error(place, f"{arg.flag} takes {'an integer' if kind == 'int' else 'a number'}", found=arg.value)
    for flag in sorted(forks & set(SERVE_OPTIONS)):
        out.warn(
            f"{where}",
            f"{flag} is declared in container.fork_flags but upstream vLLM {VLLM_VERSION} has it",
            found=flag,
            hint="remove it from fork_flags",
        )


def has_flag(flag: str) -> bool:
    return flag in SERVE_OPTIONS
