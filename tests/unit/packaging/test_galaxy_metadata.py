"""galaxy.yml, meta/runtime.yml and requirements.yml against the code and what is tested.

- every collection the content names (FQCNs in roles and playbooks, imports in plugins) is a declared
  dependency, and every declared dependency is used;
- requirements.yml asks for the same collections and ranges as galaxy.yml;
- requires_ansible starts at the oldest ansible-core tested (requirements/constraints-py311.txt, make compat);
- the collections .venv runs with (the `ansible` package's) meet the declared ranges.
The build itself (what the tarball holds, galaxy-importer, antsibull-docs) is `make collection-check`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

ROOT = Path(__file__).resolve().parents[3]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
OWN = {"ansible.builtin", f"{GALAXY['namespace']}.{GALAXY['name']}"}


def _used_collections() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    fqcn = re.compile(r"^\s*-?\s*([a-z_]+\.[a-z_]+)\.[a-z_0-9]+:", re.M)
    for path in [*ROOT.glob("roles/*/**/*.yml"), *ROOT.glob("playbooks/*.yml")]:
        for name in fqcn.findall(path.read_text()):
            used.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    for path in ROOT.glob("plugins/**/*.py"):
        for name in re.findall(r"ansible_collections\.([a-z_]+\.[a-z_]+)\.", path.read_text()):
            used.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return used


def test_every_collection_used_is_declared_and_every_declared_one_used() -> None:
    used = {name: files for name, files in _used_collections().items() if name not in OWN}
    declared = set(GALAXY["dependencies"])
    undeclared = {name: sorted(files)[:3] for name, files in used.items() if name not in declared}
    assert not undeclared, f"used but not in galaxy.yml dependencies: {undeclared}"
    assert declared <= set(used), f"declared in galaxy.yml but used nowhere: {sorted(declared - set(used))}"


def test_requirements_yml_matches_galaxy_yml() -> None:
    requirements = yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]
    assert {c["name"]: c["version"] for c in requirements} == GALAXY["dependencies"]


def test_requires_ansible_is_the_oldest_tested_core() -> None:
    lock = (ROOT / "requirements/constraints-py311.txt").read_text()
    oldest = re.search(r"^ansible-core==(\d+)\.(\d+)\.", lock, re.M)
    assert oldest, "requirements/constraints-py311.txt pins no ansible-core"
    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={oldest[1]}.{oldest[2]}.0"


@pytest.mark.parametrize("collection", sorted(GALAXY["dependencies"]))
def test_the_tested_collections_meet_the_declared_range(collection: str) -> None:
    # the copy this venv runs (the `ansible` package's, in site-packages)
    manifest = next(
        (
            Path(entry) / "ansible_collections" / collection.replace(".", "/") / "MANIFEST.json"
            for entry in sys.path
            if (Path(entry) / "ansible_collections" / collection.replace(".", "/") / "MANIFEST.json").is_file()
        ),
        None,
    )
    assert manifest, f"{collection} is not installed in this venv"
    version = json.loads(manifest.read_text())["collection_info"]["version"]
    requirement = GALAXY["dependencies"][collection]
    assert meets_requirements(version, requirement), f"{collection} {version} (this venv) is outside {requirement}"
