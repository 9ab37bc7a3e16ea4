# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's meta/argument_specs.yml matches its defaults/main.yml, and its README names every option.

The collection's own variable that several roles read, dgxspark_cluster_groups, is in their specs but in no role's
defaults (its default is the lookup's, dgxspark.cluster.cluster_groups): it is the same option in every spec."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = sorted(p.parent.parent for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
# The collection's variables a role's spec may hold without a default of its own.
SHARED = {"dgxspark_cluster_groups"}


def _specs(path: pathlib.Path) -> dict:
    return yaml.safe_load(path.read_text())["argument_specs"]


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_specs_match_defaults_and_readme(role: pathlib.Path) -> None:
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    options = _specs(role / "meta" / "argument_specs.yml")["main"]["options"]
    assert sorted(set(options) - SHARED) == sorted(defaults)
    for name, spec in options.items():
        if name in SHARED:
            assert "default" not in spec, name
            continue
        assert name.startswith(f"{role.name}_"), name
        assert spec.get("default") == defaults[name], name
        assert spec.get("description"), name
    readme = (role / "README.md").read_text()
    missing = [name for name in options if f"`{name}`" not in readme]
    assert not missing, f"{role.name}/README.md does not document {missing}"


def test_there_are_roles() -> None:
    assert {r.name for r in ROLES} >= {"fabric", "kernel"}


SPEC_FILES = [r / "meta" / "argument_specs.yml" for r in ROLES] + [ROOT / "awx" / "playbook_argument_specs.yml"]


def test_a_shared_option_is_the_same_in_every_spec_that_has_it() -> None:
    """dgxspark_cluster_groups is written in each role's spec and awx/playbook_argument_specs.yml (YAML has no
    include): every copy is the boot role's, word for word."""
    reference = _specs(ROOT / "roles" / "boot" / "meta" / "argument_specs.yml")["main"]["options"]
    found = 0
    for path in SPEC_FILES:
        for entry, spec in _specs(path).items():
            for name in SHARED & set(spec.get("options") or {}):
                assert spec["options"][name] == reference[name], f"{path.relative_to(ROOT)} {entry}: {name}"
                found += 1
    assert found >= 3


@pytest.mark.parametrize("path", SPEC_FILES, ids=[str(p.relative_to(ROOT)) for p in SPEC_FILES])
def test_each_option_is_written_once_in_a_spec_file(path: pathlib.Path) -> None:
    """An option that two entry points take as it is is written once and aliased (&anchor, *alias), never copied:
    no two entry points of a file hold equal definitions of an option under separate text."""
    text = path.read_text()
    seen: dict[str, str] = {}
    for entry, spec in _specs(path).items():
        for name, option in (spec.get("options") or {}).items():
            body = yaml.safe_dump(option, sort_keys=True)
            if name in seen:
                assert seen[name] != body or _aliased(text, name), (
                    f"{path.relative_to(ROOT)}: {name} of {entry} is a copy of another entry point's: alias it"
                )
            seen.setdefault(name, body)


def _aliased(text: str, name: str) -> bool:
    """Whether every repeated definition of ``name`` in the file is an alias (or inside an aliased options map)."""
    written = re.findall(rf"(?m)^ +{re.escape(name)}:(?: &\S+)?\s*$", text)
    return len(written) <= 1
