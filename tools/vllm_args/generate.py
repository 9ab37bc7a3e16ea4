#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate ``plugins/plugin_utils/profile/vllm_serve_args.py`` from vLLM's real ``vllm serve`` parser.

Run this with the Python of a throwaway virtual environment in which the vLLM release is
installed (``pip install vllm==X.Y.Z``); no GPU is needed. It builds the ``serve`` sub-parser
exactly as the ``vllm`` console script does (``ServeSubcommand().subparser_init``, which calls
``make_arg_parser`` -> ``FrontendArgs.add_cli_args`` + ``AsyncEngineArgs.add_cli_args``), walks
every registered argparse action, and writes a dependency-free Python module holding one entry per
option string (hidden aliases such as ``--no-enable-prefix-caching`` included).

    python tools/vllm_args/generate.py                 # (re)write the module
    python tools/vllm_args/generate.py --check         # exit 1 if the module on disk is stale
    python tools/vllm_args/generate.py --verify        # also assert the parsing facts in README.md
    python tools/vllm_args/generate.py --dump-json -   # the raw table as JSON, for inspection

Determinism: entries are sorted by option string, and the platform is pinned to vLLM's CPU
platform (``VLLM_TARGET_DEVICE=cpu``) with every other ``VLLM_*`` variable removed from the
environment before vLLM is imported, so the table does not depend on the machine that generates it.
The only run-dependent text is the generation date (``--date`` overrides it; ``--check`` ignores it).
See README.md beside this file for what is platform-dependent and how the parser treats input.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import enum
import inspect
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = REPO_ROOT / "plugins" / "plugin_utils" / "profile" / "vllm_serve_args.py"

# Keys of every SERVE_OPTIONS entry, in the order they are documented in the generated module.
ENTRY_KEYS = (
    "dest",
    "takes_value",
    "nargs",
    "const",
    "choices",
    "type",
    "optional",
    "json_class",
    "default",
    "action",
    "aliases",
    "hidden",
    "deprecated",
    "group",
    "help",
)

# vLLM's CLI type callables, by ``__qualname__`` (closures are unwrapped first, see _classify_type).
_TYPE_NAMES: dict[str, str] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "loads": "json",  # json.loads
    "human_readable_int": "human_int",  # "1k" = 1000, "1K" = 1024, "25.6k", plain ints
    "human_readable_int_or_auto": "human_int_or_auto",  # as human_int, plus "auto" / -1
    "union_dict_and_str": "json_or_str",  # "{...}" is parsed as JSON, anything else stays a str
    "parse_reasoning_parser": "str",  # "none" (any case) -> "" (unset)
}

# Lambdas have no useful name: identify them by a fragment of their source.
_LAMBDA_TYPES: tuple[tuple[str, str], ...] = (
    ('split(",")', "csv"),  # --device-ids "2,3,5,7" -> [2, 3, 5, 7]
    ('.lower().replace("-", "_")', "str"),  # --moe-backend etc.: case and dash-insensitive str
)

_GENERATED_HEADER = '''\
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every option string ``vllm serve`` accepts in vLLM {version}: GENERATED, do not edit by hand.

Source: the real argument parser of the vLLM {version} wheel from PyPI, built without a GPU on
vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu, no other VLLM_* variables set) by
``tools/vllm_args/generate.py`` under Python {python}, on {date}.
The option strings do not depend on the platform; the one platform-dependent choice list
(``--mm-processor-device``) has "cuda" added, as vLLM does on CUDA.
Regenerate: see ``tools/vllm_args/README.md``.

``SERVE_OPTIONS`` maps each option string (long, short such as ``-tp``, and the hidden
``--no-enable-*`` / ``--no-disable-*`` aliases) to a dict:

- ``dest``: the argparse destination (the EngineArgs / FrontendArgs field name).
- ``takes_value``: False for switches (store_true, --x/--no-x pairs, -h); True otherwise.
- ``nargs``: argparse nargs: None = exactly one value, "?" = value optional (bare flag gives
  ``const``), "+" = one or more space-separated values, 0 = switch.
- ``const``: for switches, the value this option string stores (True for --enable-x, False for
  --disable-x / --no-x); for nargs "?" the value stored when the flag is given bare.
- ``choices``: allowed values (None may appear: it is what "" or "None" parse to), or None.
- ``type``: how the value is converted: "int", "float", "str", "bool" (switches), "json" (a JSON
  object string, or dotted keys ``--x.key value``), "json_or_str", "human_int" ("1k" = 1000,
  "1K" = 1024), "human_int_or_auto" (also "auto" / -1), "csv" (comma-separated list).
- ``optional``: True when "" or "None" is accepted and parses to None.
- ``json_class``: for "json" options validated against a vLLM config dataclass, its name.
- ``default``: the default, JSON-safe (sets become sorted lists, enums their value, config
  dataclass instances the string "<ClassName defaults>").
- ``action``: "store", "store_true", "store_false", "boolean_optional", "append", "help", or a
  vLLM action class name.
- ``aliases``: the other option strings of the same argument, sorted.
- ``hidden``: True when the option string is accepted but not shown in ``vllm serve --help``.
- ``deprecated``: True when argparse marks it deprecated, or vLLM's help text or one of its
  ``*_DEPRECATION_MESSAGE`` strings says "--x is deprecated" for one of its option strings.
- ``group``: the ``--help=<group>`` section it is listed under.
- ``help``: the first line of its help text as ``--help`` prints it (before wrapping to the terminal).

``SERVE_POSITIONALS`` lists the positional arguments (``model_tag``) with the same keys.
``SERVE_PREPROCESSED`` lists spellings FlexibleArgumentParser.parse_args rewrites before argparse
sees them (they are not option strings of the parser).
"""

from __future__ import annotations

import json
from typing import Any

VLLM_VERSION = "{version}"

'''


def _prepare_environment() -> None:
    """Pin vLLM's platform to CPU and drop VLLM_* variables that would change defaults."""
    for name in sorted(os.environ):
        if name.startswith("VLLM_"):
            del os.environ[name]
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # vllm/platforms/__init__.py: "authoritative"
    os.environ["VLLM_LOGGING_LEVEL"] = "ERROR"


def build_serve_parser() -> tuple[argparse.ArgumentParser, str]:
    """Build the ``vllm serve`` parser the way ``vllm.entrypoints.cli.main`` does.

    Returns the serve sub-parser and the installed vLLM version.
    """
    _prepare_environment()
    import vllm
    from vllm.engine import arg_utils

    # Config-field help texts are only read when "--help" is on the command line (arg_utils.NEEDS_HELP).
    arg_utils.NEEDS_HELP = True  # type: ignore[attr-defined]

    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    return serve, str(vllm.__version__)


def json_safe(value: Any) -> Any:
    """Convert a default or choice to plain JSON-compatible Python data, deterministically."""
    if isinstance(value, enum.Enum):  # before int/str: IntEnum and StrEnum members are both
        return json_safe(value.value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"<{type(value).__name__} defaults>"
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, type):
        return value.__qualname__
    return repr(value)


def _closure_value(func: Callable[..., Any], name: str) -> Any:
    return inspect.getclosurevars(func).nonlocals.get(name)


def _classify_type(action: argparse.Action) -> tuple[str, bool, str | None]:
    """Return (type name, accepts ""/"None" as None, JSON config class name) for an action."""
    if action.nargs == 0:
        return ("bool" if action.dest != "help" else "none"), False, None
    func: Any = action.type
    optional = False
    json_class: str | None = None
    # vllm.engine.arg_utils.optional_type(...) / parse_type(...) wrap the real converter.
    for _depth in range(4):
        qualname = getattr(func, "__qualname__", "")
        if qualname.endswith("optional_type.<locals>._optional_type"):
            optional = True
            func = _closure_value(func, "return_type")
        elif qualname.endswith("parse_type.<locals>._parse_type"):
            func = _closure_value(func, "return_type")
        else:
            break
    if func is None:
        return "str", optional, None  # argparse passes the raw string
    qualname = getattr(func, "__qualname__", "")
    if qualname.endswith("<locals>.parse_dataclass"):
        defaults = getattr(func, "__defaults__", None) or ()
        json_class = defaults[0].__name__ if defaults and isinstance(defaults[0], type) else None
        return "json", optional, json_class
    if qualname.endswith("<lambda>"):
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            source = ""
        for fragment, name in _LAMBDA_TYPES:
            if fragment in source:
                return name, optional, None
    name = _TYPE_NAMES.get(qualname.rsplit(".", 1)[-1]) if "<locals>" not in qualname else None
    if name is None:
        print(
            f"warning: unknown type converter {qualname!r} for {action.option_strings or action.dest}", file=sys.stderr
        )
        name = f"unknown:{qualname}"
    return name, optional, json_class


def _action_kind(action: argparse.Action) -> str:
    """A short, stable name for the argparse action class."""
    for cls, name in (
        (argparse.BooleanOptionalAction, "boolean_optional"),  # incl. vLLM's EnableDisableAction
        (argparse._StoreTrueAction, "store_true"),
        (argparse._StoreFalseAction, "store_false"),
        (argparse._StoreConstAction, "store_const"),
        (argparse._AppendAction, "append"),
        (argparse._HelpAction, "help"),
        (argparse._VersionAction, "version"),
    ):
        if isinstance(action, cls):
            return name
    if action.__class__ is argparse._StoreAction:  # exactly store, not a subclass
        return "store"
    return type(action).__name__


def _negative_strings(action: argparse.Action) -> set[str]:
    """Option strings of a --x/--no-x (or --enable-x/--disable-x) pair that store False."""
    negated = getattr(action, "negative_option_strings", None)  # vLLM's EnableDisableAction
    if negated is not None:
        return set(negated)
    return {s for s in action.option_strings if s.startswith("--no-")}


# vllm.utils.argparse_utils.SortedHelpFormatter._split_lines: single newlines inside a sentence are
# joined, paragraph breaks and list items are kept. The "first line" is the first line after that.
_HELP_JOIN = re.compile(r"(?<!\n)\n(?!\n)(?!\s*(-|\*|\+|\d+\.))\s*")
# "--x is deprecated", "x (--x) is deprecated": the way vLLM's help texts and messages say it.
_DEPRECATED_FLAG = re.compile(r"(--[a-z0-9][a-z0-9-]*)\)? (?:is|are) deprecated")


def _first_help_line(text: str | None) -> str | None:
    """The first line of an option's help, as ``vllm serve --help`` prints it before wrapping."""
    if text is None or text == argparse.SUPPRESS:
        return None
    for line in _HELP_JOIN.sub(" ", text.replace("%%", "%")).splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def _deprecated_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Flags vLLM itself calls deprecated: in help texts and arg_utils' *_DEPRECATION_MESSAGE strings."""
    texts = [a.help or "" for a in parser._actions]
    from vllm.engine import arg_utils

    texts += [v for k, v in vars(arg_utils).items() if k.endswith("_DEPRECATION_MESSAGE") and isinstance(v, str)]
    return {m.group(1) for text in texts for m in _DEPRECATED_FLAG.finditer(text)}


def _is_deprecated(
    action: argparse.Action,
    deprecated_actions: Iterable[argparse.Action],
    deprecated_flags: set[str],
    strings: Iterable[str],
) -> bool:
    if getattr(action, "deprecated", False) or any(action is a for a in deprecated_actions):
        return True
    return any(s in deprecated_flags for s in strings)


# Choices vLLM extends with the current platform's device type (EngineArgs.add_cli_args:
# ``choices=["auto", "cpu"] + [current_platform.device_type] ...``). The table is built on the CPU
# platform, so the CUDA value the DGX Spark targets is added here, guarded by a source check.
_CUDA_EXTRA_CHOICES: dict[str, str] = {"--mm-processor-device": "cuda"}


def _add_cuda_choices(options: dict[str, dict[str, Any]]) -> None:
    from vllm.engine.arg_utils import EngineArgs

    source = inspect.getsource(EngineArgs.add_cli_args)
    for flag, value in _CUDA_EXTRA_CHOICES.items():
        at = source.find(f'"{flag}"')
        if at < 0 or "current_platform.device_type" not in source[at : at + 400] or flag not in options:
            print(
                f"warning: {flag} no longer takes its choices from the platform; not adding {value!r}", file=sys.stderr
            )
            continue
        for string in [flag, *options[flag]["aliases"]]:
            choices = options[string]["choices"]
            if choices is not None and value not in choices:
                choices.append(value)


def _groups_by_action(parser: argparse.ArgumentParser) -> dict[int, str]:
    groups: dict[int, str] = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            groups[id(action)] = group.title or ""
    return groups


def describe_parser(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Turn a built parser into plain data: options, positionals and counts."""
    registered: dict[str, argparse.Action] = dict(parser._option_string_actions)
    shown = {s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
    groups = _groups_by_action(parser)
    deprecated_actions = list(getattr(parser, "_deprecated", ()))
    deprecated_flags = _deprecated_flags(parser)
    strings_by_action: dict[int, set[str]] = {}
    for string, action in registered.items():
        strings_by_action.setdefault(id(action), set()).add(string)

    def common(action: argparse.Action) -> dict[str, Any]:
        type_name, optional, json_class = _classify_type(action)
        choices = action.choices
        return {
            "dest": action.dest,
            "takes_value": action.nargs != 0,
            "nargs": action.nargs,
            "choices": None if choices is None else [json_safe(c) for c in choices],
            "type": type_name,
            "optional": optional,
            "json_class": json_class,
            "default": json_safe(action.default),
            "action": _action_kind(action),
            "deprecated": _is_deprecated(
                action, deprecated_actions, deprecated_flags, strings_by_action.get(id(action), ())
            ),
            "group": groups.get(id(action), ""),
            "help": _first_help_line(action.help),
        }

    options: dict[str, dict[str, Any]] = {}
    for string in sorted(registered):
        action = registered[string]
        entry = common(action)
        if action.nargs == 0:
            if entry["action"] == "boolean_optional":
                const: Any = string not in _negative_strings(action)
            else:
                const = json_safe(action.const)
        else:
            const = json_safe(action.const)
        entry["const"] = const
        entry["aliases"] = sorted(strings_by_action[id(action)] - {string})
        entry["hidden"] = string not in shown
        options[string] = {key: entry[key] for key in ENTRY_KEYS}
    _add_cuda_choices(options)

    positionals: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        if not action.option_strings:
            entry = common(action)
            entry.update(const=json_safe(action.const), aliases=[], hidden=action.help == argparse.SUPPRESS)
            positionals[action.dest] = {key: entry[key] for key in ENTRY_KEYS}

    return {
        "options": options,
        "positionals": positionals,
        "counts": {
            "option_strings": len(options),
            "shown_in_help": len(shown),
            "hidden": len(options) - len(shown),
            "arguments": sum(1 for a in parser._actions if a.option_strings),
        },
    }


# Rewrites done by FlexibleArgumentParser.parse_args (vllm/utils/argparse_utils.py) before argparse.
SERVE_PREPROCESSED: dict[str, str] = {
    "--opt_name": "underscores between '--' and the first '.' become dashes (--max_model_len = --max-model-len)",
    "--json-opt.key VALUE": "dotted keys build a JSON object for a JSON option (--speculative-config.method mtp)",
    "--json-opt.key+ V1,V2": "'+' appends comma-separated items to a JSON list",
    "-O<n> / -O=<n> / -O <n>": "rewritten to --optimization-level <n> (-O <n> only for n in 0-3)",
    "--model NAME": "moved to the model_tag positional with a warning (serve only)",
    "--config FILE.yaml": "YAML keys are expanded into --key value arguments (CLI wins over the file)",
    "--help=<group|all|keyword>": "filtered help",
}


LINE_LENGTH = 120  # pyproject.toml [tool.ruff] line-length


def py_str(text: str) -> str:
    """A Python string literal the way ``ruff format`` writes it (ASCII-only, fewest escapes)."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    out = []
    for char in text:
        if char == "\\" or char == quote:
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char < " " or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) > 0x7E:
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    return quote + "".join(out) + quote


def py_literal(value: Any, indent: int = 0, prefix: str = "", suffix: str = "") -> list[str]:
    """Lines of a Python literal for JSON-like data, in ``ruff format``'s layout.

    ``prefix`` and ``suffix`` are the text around the value on its first and last line (a dict
    key, a trailing comma). Dicts are always exploded with trailing commas (so their layout is
    stable); lists and small dicts stay on one line when that line fits in LINE_LENGTH.
    """
    pad = " " * indent
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return [_fit(f"{pad}{prefix}{value!r}{suffix}")]
    if isinstance(value, str):
        line = f"{pad}{prefix}{py_str(value)}{suffix}"
        if len(line) <= LINE_LENGTH:
            return [line]
        # Too long: implicit concatenation in parentheses, split after spaces (ruff keeps this).
        inner = " " * (indent + 4)
        parts = [inner + py_str(chunk) for chunk in _chunks(value, LINE_LENGTH - len(inner))]
        return [f"{pad}{prefix}(", *(_fit(p) for p in parts), f"{pad}){suffix}"]
    if isinstance(value, dict):
        if not value:
            return [_fit(f"{pad}{prefix}{{}}{suffix}")]
        lines = [f"{pad}{prefix}{{"]
        for key in sorted(value):
            lines += py_literal(value[key], indent + 4, f"{py_str(str(key))}: ", ",")
        return [*lines, f"{pad}}}{suffix}"]
    if isinstance(value, list):
        items = [_inline(v) for v in value]
        if all(item is not None for item in items):
            line = f"{pad}{prefix}[{', '.join(str(i) for i in items)}]{suffix}"
            if len(line) <= LINE_LENGTH:
                return [line]
        lines = [f"{pad}{prefix}["]
        for item in value:
            lines += py_literal(item, indent + 4, "", ",")
        return [*lines, f"{pad}]{suffix}"]
    raise TypeError(f"not JSON-like data: {value!r}")


def _inline(value: Any) -> str | None:
    """One-line literal for a scalar, or None for a container (which is then exploded)."""
    if isinstance(value, str):
        return py_str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return None


def _chunks(text: str, width: int) -> list[str]:
    """Split text after spaces into pieces whose literals fit in ``width`` (a long word stays whole)."""
    words = re.findall(r"\S*\s*", text)
    pieces: list[str] = []
    current = ""
    for word in words:
        if not word:
            continue
        if current and len(py_str(current + word)) > width:
            pieces.append(current)
            current = word
        else:
            current += word
    if current or not pieces:
        pieces.append(current)
    return pieces


def _fit(line: str) -> str:
    if len(line) > LINE_LENGTH:
        print(f"warning: generated line longer than {LINE_LENGTH}: {line.strip()[:60]}...", file=sys.stderr)
    return line


_OPTIONS_COMMENT = (
    "# The table is JSON text, one option string a line (a long one continued on the next lines): Python compiles",
    "# one string far faster than the same data as dict literals (about 15 ms against 55 ms to compile and load it,",
    "# which every ansible-playbook run that plans pays: Ansible's collection loader keeps no bytecode).",
)


def json_lines(mapping: Mapping[str, Any], indent: int) -> list[str]:
    """A JSON object as lines of Python string literals, one key a line (split after spaces where too long), that
    concatenate to its JSON text (keys sorted, ASCII only)."""
    keys = sorted(mapping)
    pad = " " * indent
    lines: list[str] = []
    for index, key in enumerate(keys):
        text = (
            ("{" if index == 0 else "")
            + json.dumps(key)
            + ": "
            + json.dumps(mapping[key], sort_keys=True, ensure_ascii=True)
            + ("}" if index == len(keys) - 1 else ", ")
        )
        lines += [_fit(pad + py_str(piece)) for piece in _chunks(text, LINE_LENGTH - indent)]
    return lines or [pad + py_str("{}")]


def render_module(table: Mapping[str, Any], version: str, date: str) -> str:
    """Render the generated module's text (deterministic for a given table, version and date)."""
    python = ".".join(str(p) for p in sys.version_info[:3])
    counts = table["counts"]
    lines = [
        _GENERATED_HEADER.format(version=version, python=python, date=date).rstrip("\n"),
        f"# {counts['option_strings']} option strings, {counts['shown_in_help']} shown in --help, "
        f"{counts['hidden']} hidden aliases; {counts['arguments']} optional arguments.",
        f"SERVE_OPTION_COUNT = {counts['option_strings']}",
        f"SERVE_HELP_OPTION_COUNT = {counts['shown_in_help']}",
        "",
        *_OPTIONS_COMMENT,
        "SERVE_OPTIONS: dict[str, dict[str, Any]] = json.loads(",
        *json_lines(table["options"], indent=4),
        ")",
        "",
        *py_literal(table["positionals"], prefix="SERVE_POSITIONALS: dict[str, dict[str, Any]] = "),
        "",
        *py_literal(SERVE_PREPROCESSED, prefix="SERVE_PREPROCESSED: dict[str, str] = "),
    ]
    return "\n".join(lines) + "\n"


_DATE_LINE = re.compile(r"^``tools/vllm_args/generate\.py`` under Python .*$", re.MULTILINE)


def _without_run_details(text: str) -> str:
    return _DATE_LINE.sub("", text)


def verify_parsing(parser: argparse.ArgumentParser) -> list[str]:
    """Check the parsing facts README.md states against the real parser; return failures."""
    failures: list[str] = []

    def parse(*argv: str) -> argparse.Namespace:
        return parser.parse_args(["Qwen/Qwen3-0.6B", *argv])

    def rejects(*argv: str) -> bool:
        try:
            parse(*argv)
        except SystemExit as exc:
            return exc.code == 2
        return False

    def expect(label: str, ok: bool) -> None:
        print(("ok    " if ok else "FAIL  ") + label)
        if not ok:
            failures.append(label)

    expect("--flag value", parse("--max-model-len", "4096").max_model_len == 4096)
    expect("--flag=value", parse("--max-model-len=4096").max_model_len == 4096)
    expect("--max_model_len (underscores)", parse("--max_model_len", "4096").max_model_len == 4096)
    expect("--max_model_len=4096", parse("--max_model_len=4096").max_model_len == 4096)
    expect("human-readable 128k = 128000", parse("--max-model-len", "128k").max_model_len == 128000)
    expect("human-readable 1K = 1024", parse("--max-model-len", "1K").max_model_len == 1024)
    expect("--max-model-len auto = -1", parse("--max-model-len", "auto").max_model_len == -1)
    expect("-tp 2", parse("-tp", "2").tensor_parallel_size == 2)
    expect("-tp=2", parse("-tp=2").tensor_parallel_size == 2)
    expect(
        "unique prefix --tensor-parallel 2 (allow_abbrev)", parse("--tensor-parallel", "2").tensor_parallel_size == 2
    )
    expect("unknown flag exits 2", rejects("--max-parallel-prefills", "4"))
    expect("switch with =value exits 2", rejects("--enable-prefix-caching=true"))
    expect("--enable-prefix-caching", parse("--enable-prefix-caching").enable_prefix_caching is True)
    expect("--disable-prefix-caching", parse("--disable-prefix-caching").enable_prefix_caching is False)
    expect("--no-enable-prefix-caching (hidden)", parse("--no-enable-prefix-caching").enable_prefix_caching is False)
    expect(
        "--async-scheduling / --no-async-scheduling",
        parse("--async-scheduling").async_scheduling is True
        and parse("--no-async-scheduling").async_scheduling is False,
    )
    spec = parse("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}').speculative_config
    expect("--speculative-config JSON string", spec == {"method": "mtp", "num_speculative_tokens": 2})
    spec = parse("--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "2")
    expect("--speculative-config.key value", spec.speculative_config == {"method": "mtp", "num_speculative_tokens": 2})
    spec = parse("--speculative-config=" + json.dumps({"method": "mtp"})).speculative_config
    expect("--speculative-config=JSON", spec == {"method": "mtp"})
    expect("--speculative-config invalid JSON exits 2", rejects("--speculative-config", "{method: mtp}"))
    cc = parse("--compilation-config", '{"cudagraph_mode": "NONE"}').compilation_config
    expect("--compilation-config JSON validated into CompilationConfig", type(cc).__name__ == "CompilationConfig")
    expect("-O3 -> --optimization-level 3", str(parse("-O3").optimization_level) in ("3", "O3"))
    expect("ambiguous prefix --max-num exits 2", rejects("--max-num", "4"))
    expect("case matters: --Max-Model-Len exits 2", rejects("--Max-Model-Len", "5"))
    expect("repeated flag: last wins", parse("--port", "8000", "--port", "9000").port == 9000)
    expect("--served-model-name a b (nargs +)", parse("--served-model-name", "a", "b").served_model_name == ["a", "b"])
    expect("--hf-token bare = True (nargs ?)", parse("--hf-token").hf_token is True)
    expect(
        "--kv-cache-memory-bytes 80G = 80 GiB",
        parse("--kv-cache-memory-bytes", "80G").kv_cache_memory_bytes == 80 << 30,
    )
    expect("--max-num-seqs 8k exits 2 (plain int)", rejects("--max-num-seqs", "8k"))
    spec = parse("--speculative_config.num_speculative_tokens", "2").speculative_config
    expect("dotted key: prefix normalised, nested key kept", spec == {"num_speculative_tokens": 2})
    spec = parse("--speculative-config", "None").speculative_config
    expect("--speculative-config None = None", spec is None)
    expect(
        "--distributed-executor-backend is free text at parse time",
        parse("--distributed-executor-backend", "bogus").distributed_executor_backend == "bogus",
    )
    return failures


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0] if __doc__ else None)
    cli.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="module to write (default: %(default)s)")
    cli.add_argument(
        "--date",
        default=datetime.datetime.now(datetime.UTC).date().isoformat(),
        help="generation date written into the docstring (default: today, UTC)",
    )
    cli.add_argument("--check", action="store_true", help="do not write; exit 1 if the module is stale")
    cli.add_argument("--verify", action="store_true", help="also check README.md's parsing facts")
    cli.add_argument("--dump-json", metavar="PATH", help="also write the table as JSON ('-' for stdout)")
    cli.add_argument("--expect-version", help="fail unless the installed vLLM has this version")
    args = cli.parse_args(argv)

    parser, version = build_serve_parser()
    if args.expect_version and version != args.expect_version:
        print(f"error: installed vLLM is {version}, expected {args.expect_version}", file=sys.stderr)
        return 1
    table = describe_parser(parser)
    counts = table["counts"]
    print(
        f"vLLM {version}: {counts['option_strings']} option strings ({counts['shown_in_help']} shown in "
        f"help, {counts['hidden']} hidden), {counts['arguments']} arguments, "
        f"positionals: {', '.join(table['positionals'])}",
        file=sys.stderr,
    )

    if args.dump_json:
        text = json.dumps({"vllm_version": version, **table}, indent=1, sort_keys=True) + "\n"
        if args.dump_json == "-":
            sys.stdout.write(text)
        else:
            Path(args.dump_json).write_text(text, encoding="utf-8")

    failures = verify_parsing(parser) if args.verify else []

    module = render_module(table, version, args.date)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        stale = _without_run_details(current) != _without_run_details(module)
        print(f"{args.output}: {'STALE' if stale else 'up to date'}", file=sys.stderr)
        return 1 if stale or failures else 0
    args.output.write_text(module, encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
