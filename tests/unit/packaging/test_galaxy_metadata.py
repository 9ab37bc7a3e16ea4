"""galaxy.yml, meta/runtime.yml and requirements.yml against the code and what is tested.

- every collection the content names (FQCNs in roles and playbooks, imports in plugins) is a declared
  dependency, and every declared dependency is used;
- requirements.yml pins galaxy.yml's collections (and community.docker's own) to one version each, within
  galaxy.yml's ranges: the versions inside the `ansible` package that the dev lock pins (and hashes);
- requires_ansible starts at the oldest ansible-core tested (requirements/constraints-py311.txt, make compat);
- the collections .venv runs with (the `ansible` package's) meet the declared ranges.
The build itself (what the tarball holds, galaxy-importer, antsibull-docs) is `make collection-check`.
"""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import PackageNotFoundError, version
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


def _installed_collection(collection: str) -> dict | None:
    """collection_info of the copy this venv runs (the `ansible` package's, in site-packages), or None."""
    for entry in sys.path:
        manifest = Path(entry) / "ansible_collections" / collection.replace(".", "/") / "MANIFEST.json"
        if manifest.is_file():
            return json.loads(manifest.read_text())["collection_info"]
    return None


REQUIREMENTS = {c["name"]: c["version"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}


def test_requirements_yml_pins_galaxy_yml_dependencies_and_theirs_exactly() -> None:
    assert set(GALAXY["dependencies"]) <= set(REQUIREMENTS)
    for name, pinned in REQUIREMENTS.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"requirements.yml: {name} {pinned} is not one version"
    for name, declared in GALAXY["dependencies"].items():
        assert meets_requirements(REQUIREMENTS[name], declared), f"{name} {REQUIREMENTS[name]} is outside {declared}"
    # nothing but galaxy.yml's dependencies and what they depend on (as the pinned versions declare)
    needed = set(GALAXY["dependencies"])
    for name in GALAXY["dependencies"]:
        info = _installed_collection(name)
        if info:
            needed |= set(info.get("dependencies") or {})
    unneeded = sorted(set(REQUIREMENTS) - needed)
    assert not unneeded, f"requirements.yml pins what nothing needs: {unneeded}"


def test_requirements_yml_is_what_the_pinned_ansible_package_carries() -> None:
    # the versions inside the `ansible` of requirements/constraints-py313.txt, which .venv runs
    lock = (ROOT / "requirements/constraints-py313.txt").read_text()
    pinned = re.search(r"^ansible==(\S+)", lock, re.M)
    assert pinned, "requirements/constraints-py313.txt pins no ansible"
    assert f"ansible=={pinned[1]}" in (ROOT / "requirements.yml").read_text()
    try:
        running = version("ansible")
    except PackageNotFoundError:
        running = None
    compat = re.search(r"^ansible==(\S+)", (ROOT / "requirements/constraints-py311.txt").read_text(), re.M)
    assert compat, "requirements/constraints-py311.txt pins no ansible"
    assert running in (pinned[1], compat[1]), f"this venv runs ansible {running}, neither lock's"
    if running == compat[1]:
        # .venv-compat (ansible-core 2.19): its older ansible carries older copies; requirements.yml's pins (the dev
        # lock's) are those or newer, never older than what the oldest tested core was tested with
        for name, required in REQUIREMENTS.items():
            info = _installed_collection(name)
            assert info, f"{name} is not in the ansible package {running}"
            older = tuple(map(int, info["version"].split("."))) > tuple(map(int, required.split(".")))
            assert not older, f"requirements.yml: {name} {required} is older than ansible {running}'s {info['version']}"
        return
    for name, required in REQUIREMENTS.items():
        info = _installed_collection(name)
        assert info, f"{name} is not in the ansible package"
        assert info["version"] == required, f"requirements.yml: {name} {required}; ansible {running}: {info['version']}"


def test_requires_ansible_is_the_oldest_tested_core() -> None:
    lock = (ROOT / "requirements/constraints-py311.txt").read_text()
    oldest = re.search(r"^ansible-core==(\d+)\.(\d+)\.", lock, re.M)
    assert oldest, "requirements/constraints-py311.txt pins no ansible-core"
    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={oldest[1]}.{oldest[2]}.0"


@pytest.mark.parametrize("collection", sorted(GALAXY["dependencies"]))
def test_the_tested_collections_meet_the_declared_range(collection: str) -> None:
    # the copy this venv runs (the `ansible` package's, in site-packages)
    info = _installed_collection(collection)
    assert info, f"{collection} is not installed in this venv"
    found = info["version"]
    requirement = GALAXY["dependencies"][collection]
    assert meets_requirements(found, requirement), f"{collection} {found} (this venv) is outside {requirement}"
