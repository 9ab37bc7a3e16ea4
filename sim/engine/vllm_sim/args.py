# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse ``vllm serve ...`` as vLLM 0.33.0's parser does, from the collection's generated option table.

The table (``_vllm_serve_args.py``, SERVE_OPTIONS) is found, in this order, at:

1. the path in ``SIM_ENGINE_SERVE_ARGS``;
2. ``_vllm_serve_args.py`` next to this module (where the engine image copies it);
3. ``plugins/plugin_utils/profile/vllm_serve_args.py`` of the checkout this engine sits in (sim/engine/..).

Every option string of the table becomes a real ``argparse`` option, so unknown flags, missing values,
bad numbers and bad choices fail exactly as argparse fails: the usage line, then
``vllm serve: error: ...`` on stderr, exit 2. Before argparse, the spellings vLLM's
FlexibleArgumentParser rewrites are rewritten the same way (SERVE_PREPROCESSED in the table):
``--opt_name``, ``--json-opt.key value``, ``--model NAME``, ``-O3``, ``--config FILE.yaml``, ``--help=x``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from typing import Any

PROG = "vllm serve"
USAGE = "vllm serve [model_tag] [options]"
TABLE_ENV = "SIM_ENGINE_SERVE_ARGS"
FORK_ENV = "SIM_ENGINE_FORK_FLAGS"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # vLLM's default model_tag


class TableMissing(RuntimeError):
    pass


def table_candidates() -> list[str]:
    env = os.environ.get(TABLE_ENV)
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, "_vllm_serve_args.py"),
        os.path.normpath(
            os.path.join(here, "..", "..", "..", "plugins", "plugin_utils", "profile", "vllm_serve_args.py")
        ),
    ]


_TABLE = None


def load_table():
    """Import the option table module from the first candidate path that exists."""
    global _TABLE
    if _TABLE is not None:
        return _TABLE
    tried = table_candidates()
    for path in tried:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("vllm_sim_serve_args_table", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if not isinstance(getattr(module, "SERVE_OPTIONS", None), dict):
                raise TableMissing(f"{path}: has no SERVE_OPTIONS table")
            module.TABLE_PATH = path
            _TABLE = module
            return module
    raise TableMissing(
        "vllm-sim: the vLLM option table _vllm_serve_args.py was not found (tried: "
        + ", ".join(tried)
        + f"); set {TABLE_ENV} to its path"
    )


# --------------------------------------------------------------------------- value converters
# The __name__ of a converter is what argparse prints: "invalid int value: 'x'".


def _optional(convert):
    def optional(value: str):
        if value in ("", "None"):
            return None
        try:
            return convert(value)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"Value {value} cannot be converted to {_type_repr(convert)}.") from None

    optional.__name__ = getattr(convert, "__name__", "optional")
    return optional


def _type_repr(convert) -> str:
    return {int: "<class 'int'>", float: "<class 'float'>", str: "<class 'str'>"}.get(
        convert, f"<function {getattr(convert, '__name__', 'convert')}>"
    )


def human_readable_int(value: str) -> int:
    """vLLM's human_readable_int: 1k = 1000, 1K = 1024 (decimals only with lowercase suffixes)."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * binary[suffix]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            ) from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    if value.strip().lower() in ("auto", "-1"):
        return -1
    return human_readable_int(value)


def loads(value: str) -> Any:
    """A JSON object (vLLM's config options and dict options)."""
    try:
        parsed = json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Value {value} cannot be converted to <function loads>.") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"Value {value} cannot be converted to <function loads>.")
    return parsed


def json_or_str(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


_CONVERTERS = {
    "int": int,
    "float": float,
    "str": str,
    "json": loads,
    "json_or_str": json_or_str,
    "human_int": human_readable_int,
    "human_int_or_auto": human_readable_int_or_auto,
    "csv": csv,
}


def _default(spec: dict) -> Any:
    default = spec.get("default")
    if default == "==SUPPRESS==":
        return argparse.SUPPRESS
    if isinstance(default, str) and default.startswith("<") and default.endswith(" defaults>"):
        return None  # a vLLM config dataclass's defaults
    return default


class _HelpAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print_help(None)
        parser.exit(0)


class ServeParser(argparse.ArgumentParser):
    """argparse with vLLM's prog and usage line; errors exit 2 as argparse's do."""


def build_parser(table=None) -> ServeParser:
    table = table or load_table()
    options: dict[str, dict] = table.SERVE_OPTIONS
    parser = ServeParser(prog=PROG, usage=USAGE, add_help=False, allow_abbrev=True)
    parser.add_argument("model_tag", nargs="?", default=None)
    done: set[str] = set()
    for opt, spec in options.items():
        if opt in done:
            continue
        action = spec.get("action")
        if action == "help":
            names = [opt] + [a for a in spec.get("aliases", []) if options.get(a, {}).get("action") == "help"]
            done.update(names)
            parser.add_argument(*_order(names), action=_HelpAction)
            continue
        if not spec.get("takes_value"):
            # Switches: each option string on its own, storing its own constant (--enable-x True,
            # --disable-x / --no-enable-x False), so every alias keeps its meaning.
            done.add(opt)
            parser.add_argument(
                opt, dest=spec["dest"], action="store_const", const=spec.get("const"), default=_default(spec)
            )
            continue
        names = [opt] + [
            a
            for a in spec.get("aliases", [])
            if options.get(a, {}).get("takes_value") and options[a].get("dest") == spec["dest"]
        ]
        done.update(names)
        kind = spec.get("type")
        convert = _CONVERTERS.get(kind, str)
        if spec.get("optional") and kind in ("int", "float", "str", "json"):
            convert = _optional(convert)
        kwargs: dict[str, Any] = {"dest": spec["dest"], "default": _default(spec), "type": convert}
        nargs = spec.get("nargs")
        if nargs in ("+", "*", "?"):
            kwargs["nargs"] = nargs
            if nargs == "?":
                kwargs["const"] = spec.get("const")
        choices = spec.get("choices")
        if choices:
            kwargs["choices"] = choices
        kwargs["action"] = "append" if action == "append" else "store"
        parser.add_argument(*_order(names), **kwargs)
    for flag in fork_flags():
        if flag not in options:
            # A fork's flag (SIM_ENGINE_FORK_FLAGS): takes one value when one follows, stored as a string.
            parser.add_argument(flag, dest="fork_" + flag.lstrip("-").replace("-", "_"), nargs="?", const=True)
    return parser


def fork_flags() -> list[str]:
    """Extra flags an image of a vLLM fork would accept (SIM_ENGINE_FORK_FLAGS, comma-separated)."""
    raw = os.environ.get(FORK_ENV, "")
    return [f.strip() for f in raw.split(",") if f.strip().startswith("--")]


def _order(names: list[str]) -> list[str]:
    """Long option strings first, as vLLM declares them (argparse names an argument by them)."""
    return [n for n in names if n.startswith("--")] + [n for n in names if not n.startswith("--")]


# --------------------------------------------------------------------------- preprocessing


def _json_options(table) -> set[str]:
    return {o for o, s in table.SERVE_OPTIONS.items() if str(s.get("type", "")).startswith("json")}


def _parse_scalar(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _set_dotted(target: dict, keys: list[str], value: Any, append: bool) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ValueError(f"key {key!r} is not an object")
    last = keys[-1]
    if append:
        items = value.split(",") if isinstance(value, str) else [value]
        existing = target.setdefault(last, [])
        existing.extend(_parse_scalar(v) if isinstance(v, str) else v for v in items)
    else:
        target[last] = value


def _load_config_file(path: str) -> list[str]:
    """vLLM's --config FILE.yaml, for the flat subset of YAML a serve config uses (stdlib has no YAML).

    ``key: value`` lines (scalars, ``[a, b]`` lists, ``{...}`` JSON objects) and ``- item`` lists under a
    key; ``true`` adds ``--key``, ``false`` adds nothing. Anything else is an error."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read config file {path}: {exc.strerror}") from None
    items: list[tuple[str, Any]] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.lstrip().startswith("- ") and items and line.startswith((" ", "-")):
            key, value = items[-1]
            if value is None:
                value = []
            if not isinstance(value, list):
                raise ValueError(f"{path}:{number}: a list item under a key that has a value")
            value.append(_yaml_scalar(line.lstrip()[2:].strip()))
            items[-1] = (key, value)
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*:\s*(.*)", line)
        if not match or line.startswith(" "):
            raise ValueError(f"{path}:{number}: the stand-in engine reads only flat 'key: value' YAML")
        key, value = match.groups()
        items.append((key, _yaml_scalar(value) if value.strip() else None))
    args: list[str] = []
    for key, value in items:
        flag = "--" + key
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            args.append(flag)
            args.extend(str(v) for v in value)
        elif isinstance(value, dict):
            args.extend([flag, json.dumps(value)])
        else:
            args.extend([flag, str(value)])
    return args


def _yaml_scalar(text: str) -> Any:
    text = text.strip()
    if text.lower() in ("true", "yes", "on"):
        return True
    if text.lower() in ("false", "no", "off"):
        return False
    if text.lower() in ("null", "~"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        return [_yaml_scalar(v) for v in text[1:-1].split(",") if v.strip()]
    if text.startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


class Preprocessed:
    def __init__(self):
        self.warnings: list[str] = []
        self.help_topic: str | None = None


def preprocess(argv: list[str], table, notes: Preprocessed) -> list[str]:
    """Rewrite the spellings FlexibleArgumentParser rewrites before argparse sees them."""
    json_opts = _json_options(table)
    out: list[str] = []
    dotted: dict[str, dict] = {}
    i = 0
    args = list(argv)
    # --config FILE: expanded first, so later command-line flags win (argparse keeps the last).
    if "--config" in args or any(a.startswith("--config=") for a in args):
        expanded: list[str] = []
        j = 0
        config_args: list[str] = []
        while j < len(args):
            a = args[j]
            if a == "--config" and j + 1 < len(args):
                config_args += _load_config_file(args[j + 1])
                j += 2
                continue
            if a.startswith("--config="):
                config_args += _load_config_file(a.split("=", 1)[1])
                j += 1
                continue
            expanded.append(a)
            j += 1
        head = []
        if expanded and not expanded[0].startswith("-"):
            head = [expanded.pop(0)]
        args = head + config_args + expanded
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out.extend(args[i - 1 :])
            break
        if a.startswith("--help="):
            notes.help_topic = a.split("=", 1)[1]
            continue
        opt_level = re.fullmatch(r"-O=?([0-9]*)", a)
        if opt_level:
            level = opt_level.group(1)
            if not level:
                if i < len(args) and args[i] in ("0", "1", "2", "3"):
                    level = args[i]
                    i += 1
                else:
                    out.append(a)  # argparse reports it
                    continue
            out.extend(["--optimization-level", level])
            continue
        if a.startswith("--") and len(a) > 2:
            name, eq, inline = a.partition("=")
            head_, dot, rest = name[2:].partition(".")
            name = "--" + head_.replace("_", "-") + dot + rest
            a = name + eq + inline
            base = "--" + head_.replace("_", "-")
            if dot and base in json_opts:
                append = rest.endswith("+")
                keys = rest.rstrip("+").split(".")
                if eq:
                    raw = inline
                elif i < len(args):
                    raw = args[i]
                    i += 1
                else:
                    out.append(a)  # no value: argparse reports the unknown dotted flag
                    continue
                try:
                    _set_dotted(dotted.setdefault(base, {}), keys, _parse_scalar(raw), append)
                except ValueError as exc:
                    out.extend([a, raw])
                    notes.warnings.append(str(exc))
                continue
            if name == "--model":
                value = inline if eq else (args[i] if i < len(args) else None)
                if not eq and value is not None:
                    i += 1
                if value is None:
                    out.append(a)
                    continue
                notes.warnings.append(
                    "With `vllm serve`, you should provide the model as a positional argument or in a config "
                    "file instead of via the `--model` option."
                )
                out.insert(0, value)
                continue
        out.append(a)
    for base, obj in dotted.items():
        out.extend([base, json.dumps(obj)])
    return out


_PARSER: ServeParser | None = None


def parse_serve_args(argv: list[str]) -> argparse.Namespace:
    """Parse the arguments after ``vllm serve``; exits 2 with argparse's message on any error."""
    global _PARSER
    table = load_table()
    notes = Preprocessed()
    if _PARSER is None:
        _PARSER = build_parser(table)
    parser = _PARSER
    try:
        rewritten = preprocess(argv, table, notes)
    except ValueError as exc:
        parser.error(str(exc))
    if notes.help_topic is not None:
        print_help(notes.help_topic)
        sys.exit(0)
    ns = parser.parse_args(rewritten)
    for warning in notes.warnings:
        print(f"WARNING vllm-sim: {warning}", file=sys.stderr, flush=True)
    if ns.model_tag is None:  # vllm serve: args.model = args.model_tag when one is given
        ns.model_tag = getattr(ns, "model", None) or DEFAULT_MODEL
    ns.model = ns.model_tag
    ns._given = given_dests(rewritten, table)
    return ns


def given_dests(argv: list[str], table) -> list[str]:
    """Destinations set on the command line (for the 'non-default args' log line)."""
    options = table.SERVE_OPTIONS
    dests = []
    for a in argv:
        if a.startswith("-") and not _is_number(a):
            spec = options.get(a.split("=", 1)[0])
            if spec is None:
                matches = [o for o in options if o.startswith(a.split("=", 1)[0]) and o.startswith("--")]
                spec = options[matches[0]] if len(matches) == 1 else None
            if spec and spec["dest"] not in dests:
                dests.append(spec["dest"])
    return dests


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def print_help(topic: str | None) -> None:
    """A plain rendering of vLLM's help from the table (first line of each option's help)."""
    table = load_table()
    options = table.SERVE_OPTIONS
    note = f"vllm-sim: the stand-in engine; options as vLLM {table.VLLM_VERSION} has them."
    out = [f"usage: {USAGE}", "", note, ""]
    groups: dict[str, list[str]] = {}
    seen = set()
    for opt, spec in sorted(options.items()):
        if spec.get("hidden") or opt in seen:
            continue
        names = _order([opt] + [a for a in spec.get("aliases", []) if a in options and not options[a].get("hidden")])
        seen.update(names)
        if topic and topic not in ("all", spec.get("group")) and topic.lower() not in opt:
            continue
        entry = f"  {', '.join(names)}\n      {spec.get('help', '')}"
        groups.setdefault(spec.get("group", "options"), []).append(entry)
    if topic and not groups:
        out.append(f"No group or parameter matching {topic!r}.")
    for group, lines in groups.items():
        out.append(f"{group}:")
        out.extend(lines)
        out.append("")
    print("\n".join(out))
