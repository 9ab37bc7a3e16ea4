# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve` arguments: only flags vLLM has, or flags a profile declares for its fork.

The option table is generated from the vLLM release's own argument parser
(``tools/vllm_args/generate.py`` writes ``_vllm_serve_args.py``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, did_you_mean
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm_serve_args import (
    SERVE_OPTIONS,
    VLLM_VERSION,
)

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
    "--model": "model, or container.model_path (vllm serve moves --model to its positional, which the plan renders)",
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
    """One option (with its values) or one positional of a ``vllm serve`` argv, as vLLM's parser reads it."""

    flag: str
    """The option string vLLM takes it for: underscores before the first '.' made dashes, a unique prefix
    completed (``--kv_cache_mem`` is ``--kv-cache-memory-bytes``), ``-O3`` made ``--optimization-level``; a fork's
    flag, an unknown one or an ambiguous prefix as written (underscores made dashes); '' for a positional."""
    value: str | None
    index: int
    values: tuple[str, ...] = ()
    """All values, for options that take several (nargs '+' or '*')."""
    key: str = ""
    """For the dotted JSON form ``--speculative-config.method mtp``: the nested key ("method")."""
    written: str = ""
    """The option as written, before any '=' (``--kv_cache_mem``); '' for a positional."""
    matches: tuple[str, ...] = ()
    """For an ambiguous prefix: every option string it could be (vLLM exits 2)."""
    abbreviates: str = ""
    """The full upstream flag, when the option was written as a unique prefix of it (``flag`` then)."""

    @property
    def spec(self) -> Mapping[str, Any] | None:
        """The option's row of the table; None for a positional, a fork's flag, an unknown or ambiguous one."""
        return SERVE_OPTIONS.get(self.flag)

    @property
    def dest(self) -> str:
        """The argparse destination it sets ('' without a row): ``-tp`` and ``--tensor-parallel-size`` share one."""
        spec = self.spec
        return str(spec["dest"]) if spec and "dest" in spec else ""


def _spec(flag: str) -> Mapping[str, Any] | None:
    return SERVE_OPTIONS.get(flag)


def canonical(flag: str) -> str:
    """vLLM turns underscores into dashes in a ``--`` option, up to its first '.' (``--max_model_len``)."""
    if not flag.startswith("--"):
        return flag
    head, dot, rest = flag[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


# argparse's test for a negative number, which is a value, not an option (vLLM has no option that looks like one).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# FlexibleArgumentParser's -O<level>, -O=<level> (and -O <0-3>): --optimization-level before argparse sees them.
OPTIMIZATION_LEVEL = "--optimization-level"


def _is_option(token: str) -> bool:
    """Whether argparse reads ``token`` as an option (not a value): it starts with '-', is not '-' alone, not a
    negative number, and has no space before any '='."""
    if not token.startswith("-") or token == "-":
        return False
    return not _NEGATIVE_NUMBER.match(token) and " " not in token.partition("=")[0]


def resolve(flag: str, fork_flags: Iterable[str] = ()) -> tuple[str, tuple[str, ...]]:
    """The option string vLLM 0.33.0's parser takes ``flag`` (an option without its '=value') for and, when it
    cannot tell, the option strings it could be.

    In argparse's order: an option string of the table or a fork's flag is itself (underscores made dashes); else
    a prefix of exactly one option string is that one (argparse's ``allow_abbrev``, which FlexibleArgumentParser
    leaves on); for a single-dash ``-n3``, a one-letter option with its value attached. A prefix of several is
    ambiguous, ``(flag, matches)``: vLLM exits 2 ("ambiguous option"). Anything else is unknown, ``(flag, ())``.
    """
    return _resolve(canonical(flag), frozenset(canonical(f) for f in fork_flags))


def _resolve(flag: str, forks: frozenset[str] | set[str]) -> tuple[str, tuple[str, ...]]:
    flag = canonical(flag)
    if flag in SERVE_OPTIONS or flag in forks:
        return flag, ()
    matches = _abbreviation_of(flag)
    if not flag.startswith("--") and flag[:2] in SERVE_OPTIONS:
        matches = sorted({flag[:2], *matches})
    return (matches[0], ()) if len(matches) == 1 else (flag, tuple(matches))


def parse_serve_args(args: Sequence[str], extra_flags: Iterable[str] = ()) -> list[ServeArg]:
    """Split serve arguments into options and values the way vLLM's parser reads them.

    ``--flag value`` and ``--flag=value`` are the same; ``--flag_name`` is ``--flag-name``; a unique prefix is
    the flag it begins (:func:`resolve`); switches take no value; a one-value option takes the next token unless
    argparse reads it as an option (:func:`_is_option`: then it has none, and vLLM exits 2); ``nargs`` '+'/'*' take
    values up to the next option; '?' takes the next token only when it is not an option; ``--json-option.key
    value`` sets one key of a JSON option; ``-O3``/``-O=3``/``-O 3`` are ``--optimization-level 3``; after ``--``
    every token is a positional. A flag the table does not have (a fork's, in ``extra_flags``, or an unknown or
    ambiguous one) takes the next token as its value unless it is an option.
    """
    extra = frozenset(canonical(f) for f in extra_flags)
    result: list[ServeArg] = []
    i = 0
    positional_only = False
    while i < len(args):
        start, item = i, str(args[i])
        i += 1
        if positional_only or not _is_option(item):
            result.append(ServeArg("", item, start))
            continue
        if item == "--":
            positional_only = True
            continue
        if item.startswith("-O") and item != "-O":
            level = item[3:] if item[2] == "=" else item[2:]
            result.append(ServeArg(OPTIMIZATION_LEVEL, level, start, (level,), written=item))
            continue
        if item == "-O" and i < len(args) and str(args[i]) in ("0", "1", "2", "3"):
            result.append(ServeArg(OPTIMIZATION_LEVEL, str(args[i]), start, (str(args[i]),), written=item))
            i += 1
            continue
        written, sep, inline = item.partition("=")
        base, dot, key = canonical(written).partition(".")
        if sep and not written.startswith("--") and base not in SERVE_OPTIONS:
            flag, matches = base, ()  # argparse completes no -x=value: only an exact single-dash option takes '='
        else:
            flag, matches = _resolve(base, extra)
        if not sep and not dot and not base.startswith("--") and flag != base and base.startswith(flag):
            sep, inline = "=", base[len(flag) :]  # -n3: a one-letter option with its value attached
        abbreviates = flag if flag != base and flag.startswith(base) else ""
        spec = _spec(flag)
        if dot and not (spec is not None and str(spec.get("type", "")).startswith("json")):
            # not a JSON option: the whole token is the (unknown) flag
            flag, key, matches, abbreviates, spec = canonical(written), "", (), "", None
        nargs = spec.get("nargs") if spec else None
        takes_value = (
            bool(spec and spec.get("takes_value"))
            or bool(key)
            or (spec is None and i < len(args) and not _is_option(str(args[i])))
        )
        arg = functools.partial(
            ServeArg, flag, index=start, key=key, written=written, matches=matches, abbreviates=abbreviates
        )
        if sep:
            result.append(arg(inline, values=(inline,)))
            continue
        if not takes_value:
            result.append(arg(None))
            continue
        if nargs in ("+", "*"):
            values = []
            while i < len(args) and not _is_option(str(args[i])):
                values.append(str(args[i]))
                i += 1
            result.append(arg(" ".join(values) if values else None, values=tuple(values)))
            continue
        if i >= len(args) or _is_option(str(args[i])):
            result.append(arg(None))  # '?' given bare; any other: vLLM exits 2 (expected one argument)
            continue
        value = str(args[i])
        i += 1
        result.append(arg(value, values=(value,)))
    return result


def _abbreviation_of(flag: str) -> list[str]:
    """The option strings ``flag`` is a proper prefix of (argparse's candidates for an abbreviation)."""
    if not flag.startswith("-") or flag.startswith("---"):
        return []
    long = flag.startswith("--")
    return sorted(f for f in SERVE_OPTIONS if f.startswith(flag) and f != flag and f.startswith("--") == long)


@dataclass(frozen=True)
class ServeArgv:
    """A ``vllm serve`` argv read once, the way vLLM's parser reads it: what every reader of serve arguments asks.

    Build it with :func:`serve_argv`. A flag asked for may be written any way vLLM accepts it (``--kv_cache_dtype``,
    a unique prefix, a short alias such as ``-tp``): it names the argparse destination it sets, and every option
    string of that destination counts (``-tp 2`` sets ``--tensor-parallel-size``; ``--no-trust-remote-code``
    and ``--disable-x`` set their switch's destination too). As with argparse, the last occurrence wins.
    Dotted JSON keys (``--speculative-config.method mtp``) are occurrences, but give no value of the whole option.
    """

    args: tuple[ServeArg, ...]
    fork_flags: frozenset[str] = frozenset()

    @property
    def positionals(self) -> tuple[str, ...]:
        """The values without a flag, in order (the model, for a plan's command)."""
        return tuple(str(a.value) for a in self.args if not a.flag)

    def _slot(self, flag: str) -> str:
        resolved, matches = _resolve(flag, self.fork_flags)
        if matches:
            raise ValueError(f"{flag} is ambiguous: it could be {', '.join(matches)}")
        spec = _spec(resolved)
        return str(spec["dest"]) if spec and "dest" in spec else resolved

    def occurrences(self, flag: str) -> tuple[ServeArg, ...]:
        """Every option that sets what ``flag`` sets, in the order written."""
        slot = self._slot(flag)
        return tuple(a for a in self.args if a.flag and (a.dest or a.flag) == slot)

    def has(self, flag: str) -> bool:
        """Whether the argv sets what ``flag`` sets, in any of its spellings."""
        return bool(self.occurrences(flag))

    def last(self, flag: str) -> ServeArg | None:
        """The occurrence vLLM keeps (the last one; dotted JSON keys left out), or None."""
        return next((a for a in reversed(self.occurrences(flag)) if not a.key), None)

    def value(self, flag: str) -> str | None:
        """The value vLLM keeps for ``flag`` as written (several values of nargs '+' joined by a space); None when
        it is not set or set without a value."""
        arg = self.last(flag)
        return None if arg is None else arg.value

    def values(self, flag: str) -> tuple[str, ...]:
        """Every value vLLM keeps: the last occurrence's (nargs '+' takes several); every occurrence's for an
        option that appends (``--middleware``)."""
        spec = _spec(_resolve(flag, self.fork_flags)[0])
        if spec and spec.get("action") == "append":
            return tuple(v for a in self.occurrences(flag) if not a.key for v in a.values)
        arg = self.last(flag)
        return () if arg is None else arg.values

    def switch(self, flag: str) -> bool | None:
        """What a switch's destination holds after the argv: True for ``--x``/``--enable-x``, False for ``--no-x``
        or ``--disable-x`` (whichever came last); None when none is given or ``flag`` takes a value. A fork's flag
        given without a value is True."""
        arg = self.last(flag)
        if arg is None:
            return None
        spec = arg.spec
        if spec is None:
            return True if arg.flag in self.fork_flags and arg.value is None else None
        return bool(spec.get("const")) if not spec.get("takes_value") else None

    def integer(self, flag: str) -> int | None:
        """The value as vLLM converts it to an integer (``int``; ``128k`` = 128000 and ``1K`` = 1024 where the option
        takes a human-readable size; ``auto`` = -1 where it takes that); None when unset or not an integer."""
        text = self.value(flag)
        if text is None:
            return None
        kind = str((_spec(_resolve(flag, self.fork_flags)[0]) or {}).get("type"))
        try:
            return human_int(text, auto=kind == "human_int_or_auto") if kind.startswith("human_int") else int(text)
        except ValueError:
            return None


def serve_argv(args: Sequence[Any], fork_flags: Iterable[str] = ()) -> ServeArgv:
    """Read ``vllm serve`` arguments (what follows ``serve``; positionals such as the model included) into the
    one model every reader asks (:class:`ServeArgv`). ``fork_flags`` are the image's fork's own flags."""
    forks = frozenset(canonical(f) for f in fork_flags)
    return ServeArgv(tuple(parse_serve_args([str(a) for a in args], forks)), forks)


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def human_int(text: str, auto: bool = False) -> int:
    """vLLM's ``human_readable_int`` (``auto``: ``human_readable_int_or_auto``): ``25.6k`` = 25600, ``1K`` = 1024
    (no decimals with a binary suffix), else a plain ``int``; ``auto`` or ``-1`` = -1 where allowed. Raises
    ``ValueError`` as argparse would refuse it."""
    value = text.strip()
    if auto and (value == "-1" or value.lower() == "auto"):
        return -1
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        if "." in number:
            raise ValueError(f"decimals are not allowed with a binary suffix ({suffix}): {number}{suffix.lower()}?")
        return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
    return int(value)


def check_serve_args(args: Sequence[str], fork_flags: Sequence[str], where: str, out: Collector) -> None:
    """Unknown flags, flags the collection renders itself, missing or invalid values."""
    forks = {canonical(f) for f in fork_flags}
    for arg in parse_serve_args(args, forks):
        place = f"{where}[{arg.index}]"
        if not arg.flag:
            out.error(place, "a value without a flag", found=arg.value, expected="--flag, --flag=value or --flag value")
            continue
        if arg.matches:
            out.error(
                place,
                f"an ambiguous abbreviation: vLLM {VLLM_VERSION} would exit 2 (ambiguous option: {arg.written} could "
                f"match {', '.join(arg.matches)})",
                found=arg.written,
                hint="write the full flag",
            )
            continue
        if arg.abbreviates:
            out.error(
                place,
                "an abbreviation: vLLM would accept it, but one more upstream flag could change its meaning",
                found=arg.written,
                hint=f"write the full flag {arg.abbreviates}",
            )
        flag = arg.flag
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
            human_int(value, auto=kind.endswith("auto"))
    except ValueError:
        return {
            "int": "an integer",
            "float": "a number",
            "json": "a JSON object",
            "human_int": "a size such as 8192, 128k or 128K",
            "human_int_or_auto": "a size such as 8192, 128k or 128K (or auto)",
        }.get(kind, "a valid value")
    return ""


def has_flag(flag: str) -> bool:
    return flag in SERVE_OPTIONS
