# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``host.startup_memguard_wait_seconds`` means one thing everywhere: the daemon's behaviour (tests/unit/memguard:
a startup phase over it is recorded overdue and judged as steady, never stopped for being slow), the schema's
description (generated into docs/profile-reference.md and the JSON Schema) and the memguard role's README.

They once disagreed: the reference said such a phase "counts as failed", the role's README that the boot fails,
while the daemon carried on as steady."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import HOST
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

WRONG = ("counts as failed", "fails the boot", "the boot fails")


def _description() -> str:
    return HOST.fields["startup_memguard_wait_seconds"].doc


@pytest.mark.parametrize(
    "where,text",
    [
        ("the schema's description", _description),
        (
            "the JSON Schema",
            lambda: json.loads((ROOT / "schemas/serving-profile.v2.schema.json").read_text())["properties"]["host"][
                "properties"
            ]["startup_memguard_wait_seconds"]["description"],
        ),
        (
            "docs/profile-reference.md",
            lambda: next(
                line
                for line in (ROOT / "docs/profile-reference.md").read_text().splitlines()
                if line.startswith("| `host.startup_memguard_wait_seconds`")
            ),
        ),
        (
            "roles/memguard/README.md",
            lambda: next(
                paragraph
                for paragraph in (ROOT / "roles/memguard/README.md").read_text().split("\n- ")
                if "outlasts `startup_memguard_wait_seconds`" in paragraph
            ),
        ),
        (
            "the daemon's docstring",
            lambda: (ROOT / "roles/memguard/files/dgxspark_memguard.py").read_text().split('"""')[1],
        ),
    ],
)
def test_a_slow_load_is_overdue_not_failed(where: str, text: Callable[[], str]) -> None:
    said = " ".join(text().split())
    assert "overdue" in said and "steady" in said, f"{where}: {said}"
    assert "not stopped for being slow" in said or "not killed for being slow" in said, f"{where}: {said}"
    assert not [phrase for phrase in WRONG if phrase in said], f"{where}: {said}"
