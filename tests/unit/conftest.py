# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared test helpers: the shipped profiles, seed 000's own profile, and edits of them."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
SPARK3 = ROOT / "inventories" / "spark3" / "serving-profile.json"
SPARK8 = ROOT / "inventories" / "spark8" / "serving-profile.json"
SEED000 = FIXTURES / "seed000-serving-profile.json"
DELETE = object()


def read(path: pathlib.Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def edited(document: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with ``{"a.b.0.c": value}`` edits applied (DELETE removes a key)."""
    result = copy.deepcopy(document)
    for dotted, value in edits.items():
        *parents, last = dotted.split("/")
        node: Any = result
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            del node[last]
        else:
            node[last] = value
    return result


@pytest.fixture
def seed000() -> dict[str, Any]:
    return read(SEED000)


@pytest.fixture
def spark3() -> dict[str, Any]:
    return read(SPARK3)


@pytest.fixture
def spark8() -> dict[str, Any]:
    return read(SPARK8)
