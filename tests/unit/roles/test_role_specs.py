# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's meta/argument_specs.yml matches its defaults/main.yml, and its README names every option."""

from __future__ import annotations

import pathlib

import pytest
import yaml

ROLES = sorted(
    p.parent.parent for p in (pathlib.Path(__file__).resolve().parents[3] / "roles").glob("*/meta/argument_specs.yml")
)


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_specs_match_defaults_and_readme(role: pathlib.Path) -> None:
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(options) == sorted(defaults)
    for name, spec in options.items():
        assert name.startswith(f"{role.name}_"), name
        assert spec.get("default") == defaults[name], name
        assert spec.get("description"), name
    readme = (role / "README.md").read_text()
    missing = [name for name in options if f"`{name}`" not in readme]
    assert not missing, f"{role.name}/README.md does not document {missing}"


def test_there_are_roles() -> None:
    assert {r.name for r in ROLES} >= {"fabric", "kernel"}
