# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a JSON profile strictly: syntax errors with line and column, duplicate keys reported."""

from __future__ import annotations

import json
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


def load_json_file(path: str) -> Any:
    """Read and parse a JSON file; an unreadable file is a :class:`ProfileError` too."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ProfileError([Problem("$", f"cannot read the profile: {exc.strerror or exc}", source=path)]) from None
    except UnicodeDecodeError as exc:
        raise ProfileError([Problem(f"byte {exc.start}", "the profile is not UTF-8 text", source=path)]) from None
    return parse_json(text, path)
