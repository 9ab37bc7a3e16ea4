# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, did_you_mean, json_path
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import Node, json_schema, validate

DOC = Node(
    "object",
    fields={
        "count": Node("integer", required=True, minimum=1),
        "ratio": Node("number", exclusive_minimum=0, maximum=1, default=0.5),
        "mode": Node("string", enum=("fast", "slow")),
        "tags": Node("array", values=Node("string", pattern=r"[a-z]+"), min_items=1),
        "env": Node("map", values=Node("string"), key_pattern=r"[A-Z_]+"),
        "flag": Node("boolean"),
    },
)


def run(data: Any) -> tuple[Any, list[str]]:
    out = Collector("f.json")
    result = validate(DOC, data, out)
    return result, [p.render() for p in out.items]


CASES = [
    ({"count": 1}, []),
    ({}, ["f.json: $.count: required key is missing"]),
    ({"count": 0}, ["$.count: too small (found 0; expected >= 1)"]),
    ({"count": True}, ["$.count: wrong type: must be an integer"]),
    ({"count": 1.5}, ["$.count: wrong type"]),
    ({"count": 1, "ratio": 0}, ["$.ratio: too small (found 0; expected > 0)"]),
    ({"count": 1, "ratio": 2}, ["$.ratio: too large"]),
    ({"count": 1, "ratio": float("nan")}, ["$.ratio: wrong type"]),
    ({"count": 1, "mode": "fsat"}, ["$.mode: not an allowed value", "did you mean 'fast'?"]),
    ({"count": 1, "tags": []}, ["$.tags: needs at least 1 item(s)"]),
    ({"count": 1, "tags": ["ok", "NO"]}, ["$.tags[1]: invalid value"]),
    ({"count": 1, "env": {"lower": "x"}}, ["$.env.lower: invalid key"]),
    ({"count": 1, "env": {"A": "x\ny"}}, ["$.env.A: control character or newline"]),
    ({"count": 1, "flag": "yes"}, ["$.flag: wrong type: must be true or false"]),
    ({"count": 1, "cuont": 2}, ["$.cuont: unknown key", "did you mean 'count'?"]),
    ([], ["$: wrong type: must be an object"]),
]


@pytest.mark.parametrize("data,fragments", CASES)
def test_validate(data: Any, fragments: list[str]) -> None:
    problems = run(data)[1]
    if not fragments:
        assert problems == []
    for fragment in fragments:
        assert any(fragment in p for p in problems), (fragment, problems)


def test_defaults_are_filled_and_copied() -> None:
    result = run({"count": 2})[0]
    assert result == {"count": 2, "ratio": 0.5}


def test_all_problems_at_once() -> None:
    problems = run({"count": 0, "mode": "x", "tags": [1], "extra": 1})[1]
    assert len(problems) == 4


def test_json_schema_export() -> None:
    schema = json_schema(DOC, title="t")
    assert schema["required"] == ["count"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["ratio"]["default"] == 0.5
    assert schema["properties"]["env"]["propertyNames"] == {"pattern": "^(?:[A-Z_]+)$"}
    assert schema["properties"]["tags"]["items"]["pattern"] == "^(?:[a-z]+)$"


@pytest.mark.parametrize(
    "word,choices,expected",
    [
        ("max_num_seq", ["max_num_seqs", "max_model_len"], "did you mean 'max_num_seqs'?"),
        ("MAX-NUM-SEQS", ["max_num_seqs"], "did you mean 'max_num_seqs'?"),
        ("zzz", ["max_num_seqs"], ""),
    ],
)
def test_did_you_mean(word: str, choices: list[str], expected: str) -> None:
    assert did_you_mean(word, choices) == expected


def test_json_path() -> None:
    assert json_path("shapes", "tp3-triangle", "sizing", 0) == "$.shapes.tp3-triangle.sizing[0]"
    assert json_path("a b") == '$["a b"]'
