# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small declarative type system for JSON documents.

One :class:`Node` tree describes a document: it validates data (collecting every problem with its
JSON path, with "did you mean" for misspelt keys), fills defaults, and exports a JSON Schema
(draft 2020-12) for editors. The serving profile's format is written in it (``_schema_v2.py``), so
the validator and the published schema cannot drift apart.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, did_you_mean

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_MISSING = object()

_TYPE_NAMES = {
    "object": "an object",
    "map": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "scalar": "a string, number or boolean",
}


@dataclass(frozen=True)
class Node:
    """A typed place in a JSON document."""

    type: str
    doc: str = ""
    required: bool = False
    default: Any = _MISSING
    enum: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    min_items: int | None = None
    pattern: str = ""
    pattern_hint: str = ""
    fields: Mapping[str, Node] = field(default_factory=dict)
    """For ``object``: the known keys (any other key is an error)."""
    values: Node | None = None
    """For ``map`` (free keys) and ``array``: the type of each value or item."""
    key_pattern: str = ""
    key_enum: tuple[str, ...] = ()
    """For ``map``: the only keys allowed, when they are a fixed set."""
    examples: tuple[Any, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING


def optional(node: Node) -> Node:
    """The same shape with nothing required and no defaults: for partial documents such as overrides."""
    return replace(
        node,
        required=False,
        default=_MISSING,
        fields={k: optional(v) for k, v in node.fields.items()},
        values=optional(node.values) if node.values is not None and node.type == "map" else node.values,
    )


def validate(node: Node, data: Any, out: Collector, path: str = "$") -> Any:
    """Check ``data`` against ``node``; report problems to ``out``; return data with defaults filled."""
    if not _type_ok(node.type, data):
        out.error(path, f"wrong type: must be {_TYPE_NAMES[node.type]}", found=data, expected=_TYPE_NAMES[node.type])
        return data
    if node.type == "object":
        return _validate_object(node, data, out, path)
    if node.type == "map":
        result = {}
        for key, value in data.items():
            child = _child(path, key)
            if node.key_enum and key not in node.key_enum:
                out.error(
                    child,
                    "unknown key",
                    found=key,
                    expected="one of: " + ", ".join(node.key_enum),
                    hint=did_you_mean(key, node.key_enum),
                )
            if node.key_pattern and not re.fullmatch(node.key_pattern, key):
                out.error(child, "invalid key", found=key, expected=f"a key matching {node.key_pattern}")
            if _CONTROL.search(key):
                out.error(child, "control character or newline in a key", found=key, expected="printable text")
            result[key] = validate(node.values, value, out, child) if node.values else value
        return result
    if node.type == "array":
        if node.min_items is not None and len(data) < node.min_items:
            out.error(path, f"needs at least {node.min_items} item(s)", found=data)
        return [
            validate(node.values, item, out, f"{path}[{i}]") if node.values else item for i, item in enumerate(data)
        ]
    _check_scalar(node, data, out, path)
    return data


def _validate_object(node: Node, data: Mapping[str, Any], out: Collector, path: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in data.items():
        child = _child(path, key)
        if key not in node.fields:
            hint = did_you_mean(key, node.fields)
            known = ", ".join(sorted(node.fields))
            out.error(child, "unknown key", found=key, expected=f"one of: {known}", hint=hint)
            continue
        result[key] = validate(node.fields[key], value, out, child)
    for key, sub in node.fields.items():
        if key in data:
            continue
        if sub.required:
            out.error(_child(path, key), "required key is missing", expected=f"{_TYPE_NAMES[sub.type]}: {sub.doc}")
        elif sub.has_default:
            result[key] = _copy(sub.default)
    return result


def _check_scalar(node: Node, value: Any, out: Collector, path: str) -> None:
    if node.enum and value not in node.enum:
        options = ", ".join(repr(e) for e in node.enum)
        hint = did_you_mean(value, [e for e in node.enum if isinstance(e, str)]) if isinstance(value, str) else ""
        out.error(path, "not an allowed value", found=value, expected=f"one of {options}", hint=hint)
        return
    if isinstance(value, str):
        if _CONTROL.search(value):
            out.error(
                path,
                "control character or newline in a value (values may reach a command line)",
                found=value,
                expected="printable text on one line",
            )
        if node.pattern and not re.fullmatch(node.pattern, value):
            out.error(path, "invalid value", found=value, expected=node.pattern_hint or f"text matching {node.pattern}")
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if node.minimum is not None and value < node.minimum:
            out.error(path, "too small", found=value, expected=f">= {node.minimum:g}")
        if node.exclusive_minimum is not None and value <= node.exclusive_minimum:
            out.error(path, "too small", found=value, expected=f"> {node.exclusive_minimum:g}")
        if node.maximum is not None and value > node.maximum:
            out.error(path, "too large", found=value, expected=f"<= {node.maximum:g}")


def _type_ok(kind: str, value: Any) -> bool:
    if kind in ("object", "map"):
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "scalar":
        return isinstance(value, (str, int, float, bool))
    raise ValueError(f"unknown node type {kind}")


def _child(path: str, key: str) -> str:
    if key and all(c.isalnum() or c in "_-" for c in key):
        return f"{path}.{key}"
    return f'{path}["{key}"]'


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def json_schema(node: Node, title: str = "", schema_id: str = "") -> dict[str, Any]:
    """Export ``node`` as a JSON Schema (draft 2020-12) document."""
    schema: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if schema_id:
        schema["$id"] = schema_id
    if title:
        schema["title"] = title
    schema.update(_to_schema(node))
    return schema


def _to_schema(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.doc:
        out["description"] = node.doc
    if node.type == "object":
        out["type"] = "object"
        out["properties"] = {k: _to_schema(v) for k, v in node.fields.items()}
        required = [k for k, v in node.fields.items() if v.required]
        if required:
            out["required"] = required
        out["additionalProperties"] = False
    elif node.type == "map":
        out["type"] = "object"
        if node.values is not None:
            out["additionalProperties"] = _to_schema(node.values)
        if node.key_pattern:
            out["propertyNames"] = {"pattern": f"^(?:{node.key_pattern})$"}
        if node.key_enum:
            out["propertyNames"] = {"enum": list(node.key_enum)}
    elif node.type == "array":
        out["type"] = "array"
        if node.values is not None:
            out["items"] = _to_schema(node.values)
        if node.min_items is not None:
            out["minItems"] = node.min_items
    elif node.type == "scalar":
        out["type"] = ["string", "number", "boolean"]
    else:
        out["type"] = node.type
    if node.enum:
        out["enum"] = list(node.enum)
    if node.minimum is not None:
        out["minimum"] = node.minimum
    if node.exclusive_minimum is not None:
        out["exclusiveMinimum"] = node.exclusive_minimum
    if node.maximum is not None:
        out["maximum"] = node.maximum
    if node.type == "string" and not node.enum:
        # Control characters are rejected everywhere; a pattern narrows further.
        out["pattern"] = f"^(?:{node.pattern})$" if node.pattern else "^[^\\x00-\\x1f\\x7f]*$"
    if node.has_default:
        out["default"] = _copy(node.default)
    if node.examples:
        out["examples"] = list(node.examples)
    return out


def reference_rows(node: Node, path: str = "") -> list[tuple[str, str, bool, str, str]]:
    """(path, type, required, default, doc) for every place in the document, depth first."""
    rows: list[tuple[str, str, bool, str, str]] = []
    if node.type == "object":
        for key, sub in node.fields.items():
            rows.extend(_rows_for(sub, f"{path}.{key}" if path else key))
    elif node.type == "map" and node.values is not None:
        rows.extend(_rows_for(node.values, f"{path}.<name>"))
    return rows


def _rows_for(node: Node, path: str) -> list[tuple[str, str, bool, str, str]]:
    kind = node.type
    if node.enum:
        kind += ": " + ", ".join(str(e) for e in node.enum)
    elif node.type == "array" and node.values is not None:
        kind = f"list of {node.values.type}"
    default = json.dumps(node.default) if node.has_default else ""
    row = (path, kind, node.required, default, node.doc)
    children = (
        reference_rows(node, path)
        if node.type in ("object", "map")
        and (node.fields or (node.values is not None and node.values.type in ("object", "map")))
        else []
    )
    return [row, *children]
