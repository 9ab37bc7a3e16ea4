# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a JSON profile strictly: syntax errors with line and column, duplicate keys reported."""

from __future__ import annotations

import bisect
import json
import re
from json.decoder import scanstring
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, Problem, ProfileError


class _Pairs(list):
    """Object members in document order, so duplicates survive until we look at them."""


def _keep_pairs(pairs: list[tuple[str, Any]]) -> _Pairs:
    return _Pairs(pairs)


def _build(value: Any, path: str, out: Collector) -> Any:
    if isinstance(value, _Pairs):
        result: dict[str, Any] = {}
        for key, item in value:
            child = f"{path}.{key}" if key.replace("-", "_").isidentifier() else f"{path}[{json.dumps(key)}]"
            if key in result:
                out.error(
                    child,
                    "duplicate key: JSON keeps only the last value, so the first is silently lost",
                    hint="remove one of them",
                )
            result[key] = _build(item, child, out)
        return result
    if isinstance(value, list):
        return [_build(item, f"{path}[{i}]", out) for i, item in enumerate(value)]
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, source: str = "<profile>") -> Any:
    """Parse ``text``; raise :class:`ProfileError` naming line and column, or every duplicate key."""
    try:
        raw = json.loads(text, object_pairs_hook=_keep_pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        line = text.splitlines()[exc.lineno - 1] if 0 < exc.lineno <= len(text.splitlines()) else ""
        hint = f"the line reads: {line.strip()[:100]}" if line.strip() else ""
        raise ProfileError(
            [Problem(f"line {exc.lineno}, column {exc.colno}", f"malformed JSON: {exc.msg}", hint=hint, source=source)]
        ) from None
    except ValueError as exc:
        raise ProfileError([Problem("$", f"malformed JSON: {exc}", source=source)]) from None
    out = Collector(source)
    data = _build(raw, "$", out)
    out.raise_if_errors()
    return data


def read_text(path: str) -> str:
    """A profile's text; an unreadable file is a :class:`ProfileError` too."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ProfileError([Problem("$", f"cannot read the profile: {exc.strerror or exc}", source=path)]) from None
    except UnicodeDecodeError as exc:
        raise ProfileError([Problem(f"byte {exc.start}", "the profile is not UTF-8 text", source=path)]) from None


_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


def _child_path(path: str, key: str) -> str:
    if key and all(c.isalnum() or c in "_-" for c in key):
        return f"{path}.{key}"
    return f'{path}["{key}"]'


def path_lines(text: str) -> dict[str, int]:
    """Line number of every key and list item in a valid JSON document, by JSON path ($.a.b[0])."""
    lines: dict[str, int] = {}
    newlines = [i for i, c in enumerate(text) if c == "\n"]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(newlines, pos - 1) + 1

    def skip(pos: int) -> int:
        return _WS.match(text, pos).end()  # type: ignore[union-attr]

    def value(pos: int, path: str) -> int:
        pos = skip(pos)
        lines.setdefault(path, line_of(pos))
        char = text[pos]
        if char == "{":
            pos = skip(pos + 1)
            if text[pos] == "}":
                return pos + 1
            while True:
                key, after = scanstring(text, pos + 1)
                child = _child_path(path, key)
                lines[child] = line_of(pos)
                pos = skip(after)  # at ':'
                pos = skip(value(pos + 1, child))
                if text[pos] == "}":
                    return pos + 1
                pos = skip(pos + 1)  # past ','
        if char == "[":
            pos = skip(pos + 1)
            if text[pos] == "]":
                return pos + 1
            index = 0
            while True:
                pos = skip(value(pos, f"{path}[{index}]"))
                index += 1
                if text[pos] == "]":
                    return pos + 1
                pos = skip(pos + 1)
        if char == '"':
            return scanstring(text, pos + 1)[1]
        match = _SCALAR.match(text, pos)
        return match.end() if match else pos + 1

    try:
        value(0, "$")
    except (IndexError, ValueError):
        return {}
    return lines
