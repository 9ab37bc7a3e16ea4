# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The published JSON Schema matches the validator, and every shipped number cites a seed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import PROFILE, SCHEMA_ID
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import json_schema
from ansible_collections.dgxspark.cluster.tests.unit.conftest import DELETE, ROOT, SEED000, SPARK3, SPARK8, edited, read

SCHEMA_FILE = ROOT / "schemas" / "serving-profile.v2.schema.json"


def test_committed_schema_is_generated_from_the_definition() -> None:
    generated = json_schema(PROFILE, title="dgxspark.cluster serving profile (schema_version 2)", schema_id=SCHEMA_ID)
    assert json.loads(SCHEMA_FILE.read_text()) == generated, "run tools/gen_schema.py"


def test_committed_reference_page_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_schema.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", [SEED000, SPARK3, SPARK8])
def test_profiles_validate_against_the_published_schema(path: Any) -> None:
    jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text())).validate(read(path))


@pytest.mark.parametrize(
    "edits",
    [
        {"shapes/tp3-triangle/sizing/max_num_seq": 4},
        {"shapes/tp3-triangle/sizing/max_num_seqs": "4"},
        {"container/image": "bad\nimage"},
        {"shapes/tp3-triangle/fabric/transport": "one shot"},
        {"host/memguard_gib": DELETE},
    ],
)
def test_schema_rejects_what_the_validator_rejects(edits: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    assert list(validator.iter_errors(edited(read(SEED000), edits)))


def numbers(node: Any, path: str = "$") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if path == "$" and key == "sources":
                continue
            yield from numbers(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from numbers(value, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path


@pytest.mark.parametrize("path", [SPARK3, SPARK8])
def test_every_shipped_number_cites_a_seed(path: Any) -> None:
    document = read(path)
    cited = document["sources"]
    uncited = [n for n in numbers(document) if not any(n == c or n.startswith((c + ".", c + "[")) for c in cited)]
    assert uncited == []
    assert all("seed" in text or "REFERENCE" in text or "not in seed" in text for text in cited.values())
