# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve` arguments: only flags vLLM has, or flags a profile declares for its fork.

The option table is generated from the vLLM release's own argument parser
(``tools/vllm_args/generate.py`` writes ``_vllm_serve_args.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils import _secrets
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
    "--host": "container.api.bind",
    "--ssl-certfile": "container.api.tls.certfile",
    "--ssl-keyfile": "container.api.tls.keyfile",
}

API_KEY_HINT = (
    "vLLM's key, given as --api-key, or in VLLM_API_KEY, ends up in docker inspect: give it as a file in "
    "container.api.api_key_file instead (bound read-only like container.secrets; the head reads it into VLLM_API_KEY "
    "at start, docs/profile.md)"
)

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


# Destinations of the rendered flags: catches their short forms (-tp, -n, -r, -sc) and aliases too.
RENDERED_DESTS: dict[str, str] = {
    SERVE_OPTIONS[flag]["dest"]: flag
    for flag in RENDERED_FLAGS
    if flag in SERVE_OPTIONS and "dest" in SERVE_OPTIONS[flag]
}


@dataclass(frozen=True)
class ServeArg:
    flag: str
    """The option as vLLM resolves it (underscores before the first '.' made dashes); '' for a value alone."""
    value: str | None
    index: int
    values: tuple[str, ...] = ()
    """All values, for options that take several (nargs '+' or '*')."""
    key: str = ""
    """For the dotted JSON form ``--speculative-config.method mtp``: the nested key ("method")."""
    abbreviates: str = ""
    """The full upstream flag, when ``flag`` is an unambiguous abbreviation vLLM would accept."""


def _spec(flag: str) -> Mapping[str, Any] | None:
    return SERVE_OPTIONS.get(flag)


def canonical(flag: str) -> str:
    """vLLM turns underscores into dashes in a ``--`` option, up to its first '.' (``--max_model_len``)."""
    if not flag.startswith("--"):
        return flag
    head, dot, rest = flag[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


def _is_option(token: str) -> bool:
    return token.startswith("-") and token not in ("-", "--") and not _is_number(token)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def parse_serve_args(args: Sequence[str], extra_flags: Iterable[str] = ()) -> list[ServeArg]:
    """Split serve arguments into options and values the way vLLM's parser reads them.

    ``--flag value`` and ``--flag=value`` are the same; switches take no value; ``nargs`` '+'/'*'
    take values up to the next option; '?' takes the next token only when it is not an option;
    ``--json-option.key value`` sets one key of a JSON option. Flags in ``extra_flags`` (a fork's)
    take a value when one follows.
    """
    extra = {canonical(f) for f in extra_flags}
    result: list[ServeArg] = []
    i = 0
    while i < len(args):
        start, item = i, args[i]
        i += 1
        if not _is_option(item):
            result.append(ServeArg("", item, start))
            continue
        written, sep, inline = item.partition("=")
        flag = canonical(written)
        base, dot, key = flag.partition(".")
        spec = _spec(base)
        abbreviates = ""
        if spec is None and base not in extra and len(_abbreviation_of(base)) == 1:
            abbreviates = _abbreviation_of(base)[0]
            spec = _spec(abbreviates)
        if dot and spec is not None and str(spec.get("type", "")).startswith("json"):
            flag = base
        elif dot:
            key = ""  # not a JSON option: keep the whole token as the (unknown) flag
        nargs = spec.get("nargs") if spec else None
        takes_value = (
            bool(spec and spec.get("takes_value"))
            or bool(key)
            or (spec is None and flag in extra and i < len(args) and not _is_option(args[i]))
        )
        if sep:
            result.append(ServeArg(flag, inline, start, (inline,), key, abbreviates))
            continue
        if not takes_value:
            result.append(ServeArg(flag, None, start, (), key, abbreviates))
            continue
        if nargs in ("+", "*"):
            values = []
            while i < len(args) and not _is_option(args[i]):
                values.append(args[i])
                i += 1
            result.append(ServeArg(flag, " ".join(values) if values else None, start, tuple(values), key, abbreviates))
            continue
        if nargs == "?" and (i >= len(args) or _is_option(args[i])):
            result.append(ServeArg(flag, None, start, (), key, abbreviates))
            continue
        value = args[i] if i < len(args) else None
        i += 1 if value is not None else 0
        result.append(ServeArg(flag, value, start, () if value is None else (value,), key, abbreviates))
    return result


def _abbreviation_of(flag: str) -> list[str]:
    return sorted(f for f in SERVE_OPTIONS if f.startswith("--") and f.startswith(flag) and f != flag)


def check_serve_args(args: Sequence[str], fork_flags: Sequence[str], where: str, out: Collector) -> None:
    """Unknown flags, flags the collection renders itself, missing or invalid values."""
    forks = {canonical(f) for f in fork_flags}
    for arg in parse_serve_args(args, forks):
        place = f"{where}[{arg.index}]"
        if not arg.flag:
            out.error(place, "a value without a flag", found=arg.value, expected="--flag, --flag=value or --flag value")
            continue
        if arg.abbreviates:
            out.error(
                place,
                "an abbreviation: vLLM would accept it, but one more upstream flag could change its meaning",
                found=arg.flag,
                hint=f"write the full flag {arg.abbreviates}",
            )
        flag = arg.abbreviates or arg.flag
        values = list(arg.values) or ([arg.value] if arg.value is not None else [])
        secret = _secrets.serve_arg_secret(flag, values)
        if secret or any(_secrets.HF_TOKEN_VALUE.search(v) for v in values):
            out.error(
                place,
                f"{_secrets.SECRET_FLAGS.get(flag, 'a secret')} in vllm serve's arguments: it would be rendered into "
                "the plan's argv, docker inspect and vLLM's log of its own arguments",
                found=secret or f"{flag}=" + " ".join(_secrets.redacted(v) for v in values),
                expected=f"no secret in serve_args ({flag} without a value)" if flag == "--hf-token" else "no secret",
                hint=API_KEY_HINT if flag == "--api-key" else _secrets.hint(),
            )
            continue
        spec = _spec(flag)
        rendered = RENDERED_FLAGS.get(flag) or (
            RENDERED_FLAGS[RENDERED_DESTS[spec["dest"]]] if spec and spec.get("dest") in RENDERED_DESTS else None
        )
        if rendered:
            out.error(
                place, f"{flag} is rendered by the collection", found=args[arg.index], hint=f"set {rendered} instead"
            )
            continue
        if spec is None:
            if arg.flag in forks:
                clash = _abbreviation_of(arg.flag)
                if clash:
                    out.warn(
                        place,
                        f"{arg.flag} (a fork flag) is a prefix of upstream {clash[0]}: on an image "
                        "without the fork, vLLM would silently take it as that flag",
                        found=arg.flag,
                    )
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
        _check_value(arg, spec, args, place, out)
        if flag == "--trust-remote-code":
            out.warn(
                place,
                "--trust-remote-code runs the Python code the model's repository ships, as the rank, on every node",
                found=args[arg.index],
                hint="keep it only for a model whose code you have read and pinned (a revision, an image by digest)",
            )
    for flag in sorted(forks & set(SERVE_OPTIONS)):
        out.warn(
            f"{where}",
            f"{flag} is declared in container.fork_flags but upstream vLLM {VLLM_VERSION} has it",
            found=flag,
            hint="remove it from fork_flags",
        )


def _check_value(arg: ServeArg, spec: Mapping[str, Any], args: Sequence[str], place: str, out: Collector) -> None:
    if not spec.get("takes_value"):
        if arg.value is not None:
            out.error(
                place,
                f"{arg.flag} is a switch and takes no value; vLLM would exit 2",
                found=args[arg.index],
                expected=arg.flag,
            )
        return
    if arg.value is None:
        if spec.get("nargs") not in ("?", "*"):
            out.error(place, f"{arg.flag} needs a value", found=args[arg.index], expected=f"{arg.flag}=VALUE")
        return
    if arg.key:
        return  # one key of a JSON option: vLLM checks the assembled object later
    choices = spec.get("choices")
    for value in arg.values or (arg.value,):
        if choices and value not in [str(c) for c in choices if c is not None]:
            out.error(
                place,
                f"invalid choice for {arg.flag}",
                found=value,
                expected="one of " + ", ".join(str(c) for c in choices if c is not None),
                hint=did_you_mean(value, [str(c) for c in choices if c is not None]),
            )
        problem = _type_problem(str(spec.get("type")), value)
        if problem:
            out.error(place, f"{arg.flag} takes {problem}; vLLM would exit 2", found=value)


_HUMAN = re.compile(r"[0-9]+(\.[0-9]+)?[kKmMgGtT]?")


def _type_problem(kind: str, value: str) -> str:
    """What ``value`` should be for a converter of this ``kind``, or '' when it converts."""
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "json":
            if not value.lstrip().startswith("{") or not isinstance(json.loads(value), dict):
                return "a JSON object"
        elif kind in ("human_int", "human_int_or_auto"):
            if not (_HUMAN.fullmatch(value) or value == "-1" or (kind == "human_int_or_auto" and value == "auto")):
                return "a size such as 8192, 128k or 128K" + (" (or auto)" if kind.endswith("auto") else "")
    except ValueError:
        return {"int": "an integer", "float": "a number", "json": "a JSON object"}.get(kind, "a valid value")
    return ""


def has_flag(flag: str) -> bool:
    return flag in SERVE_OPTIONS
