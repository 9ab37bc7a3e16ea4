# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared by the scenarios' pytest-testinfra tests (extensions/molecule/*/tests/test_*.py).

molecule runs them with ``--connection=ansible --ansible-inventory=<the cluster's inventory>`` (config.yml), and
each test module names its hosts (``testinfra_hosts = ["ansible://dgxspark"]``, or a group of it). testinfra reads
the inventory with ``ansible-inventory --list``, which leaves Jinja as it is: the simulated clusters' group_vars
find the SSH key relative to the inventory (``{{ inventory_dir }}/../../.cache/sim/<cluster>/id_ed25519``), and
testinfra would hand ssh that text as the identity file. So before any test is collected, every
``{{ inventory_dir }}`` in the hosts' variables is rendered (the inventory's own directory), the result is written
as a static inventory (the same groups, each host with its variables) and testinfra is pointed at that. Jinja left
in a connection variable (``ansible_*``) stops the run: testinfra cannot render it.

Fixtures:
  inventory   the rendered inventory: ``hostvars`` (host -> variables) and ``groups`` (group -> its hosts, sorted)
  record      record(name): a JSON file that a scenario's Ansible step (side_effect.yml) left in molecule's
              ephemeral directory, such as the role's findings or the serving plan, which testinfra cannot see
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

INVENTORY_DIR = re.compile(r"\{\{\s*inventory_dir\s*\}\}")
RENDERED_NAME = "testinfra-inventory.yml"
INVENTORY = pytest.StashKey[dict]()
SCRATCH = pytest.StashKey[str]()


def _listed(source: str) -> dict[str, Any]:
    """``ansible-inventory --list`` of ``source``, as testinfra reads it (the same command from PATH)."""
    done = subprocess.run(
        ["ansible-inventory", "--list", "-i", source],
        env={**os.environ, "ANSIBLE_VERBOSITY": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise pytest.UsageError(f"ansible-inventory --list -i {source} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def _rendered(value: Any, directory: str) -> Any:
    """``value`` with every ``{{ inventory_dir }}`` in its strings replaced by ``directory``."""
    if isinstance(value, str):
        return INVENTORY_DIR.sub(lambda match: directory, value)
    if isinstance(value, list):
        return [_rendered(item, directory) for item in value]
    if isinstance(value, dict):
        return {key: _rendered(item, directory) for key, item in value.items()}
    return value


def _members(listed: dict[str, Any], group: str) -> set[str]:
    entry = listed.get(group, {})
    hosts = set(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts |= _members(listed, child)
    return hosts


def _document(listed: dict[str, Any], hostvars: dict[str, dict[str, Any]], group: str = "all") -> dict[str, Any]:
    """A YAML inventory's group (JSON is YAML): its hosts with their variables, and its children."""
    entry = listed.get(group, {})
    document: dict[str, Any] = {}
    if entry.get("hosts"):
        document["hosts"] = {host: hostvars.get(host, {}) for host in entry["hosts"]}
    if entry.get("children"):
        document["children"] = {child: _document(listed, hostvars, child) for child in entry["children"]}
    return document


def pytest_configure(config: pytest.Config) -> None:
    source = config.getoption("ansible_inventory", default=None)
    if not source or config.getoption("connection", default=None) != "ansible":
        return
    source = os.path.abspath(source)
    # Ansible's inventory_dir: the directory of the file that holds the host (here the inventory's own top).
    directory = source if os.path.isdir(source) else os.path.dirname(source)
    listed = _listed(source)
    hostvars = {
        host: _rendered(variables, directory) for host, variables in listed.get("_meta", {}).get("hostvars", {}).items()
    }
    unrendered = sorted(
        f"{host}: {name}"
        for host, variables in hostvars.items()
        for name, value in variables.items()
        if name.startswith("ansible_") and "{{" in json.dumps(value)
    )
    if unrendered:
        raise pytest.UsageError(
            f"{source}: connection variables with Jinja that testinfra cannot render: {', '.join(unrendered)}"
        )
    where = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    if not where:
        where = tempfile.mkdtemp(prefix="dgxspark-testinfra-")
        config.stash[SCRATCH] = where
    rendered = Path(where) / RENDERED_NAME
    descriptor = os.open(rendered, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"all": _document(listed, hostvars)}, handle, indent=2, sort_keys=True)
        handle.write("\n")
    config.option.ansible_inventory = str(rendered)
    groups = {group: sorted(_members(listed, group)) for group in listed if group != "_meta"}
    config.stash[INVENTORY] = {"source": source, "hostvars": hostvars, "groups": groups}


def pytest_unconfigure(config: pytest.Config) -> None:
    scratch = config.stash.get(SCRATCH, None)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def inventory(pytestconfig: pytest.Config) -> dict[str, Any]:
    """The cluster's inventory as the tests see it: ``hostvars`` and ``groups`` (sorted host names)."""
    found = pytestconfig.stash.get(INVENTORY, None)
    if found is None:
        pytest.fail("no inventory: run the tests through molecule (--connection=ansible --ansible-inventory=...)")
    return found


@pytest.fixture(scope="session")
def record() -> Callable[[str], Any]:
    """record(name): the JSON file ``name`` that the scenario's side_effect.yml wrote into molecule's ephemeral
    directory (MOLECULE_EPHEMERAL_DIRECTORY)."""

    def read(name: str) -> Any:
        where = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
        if not where:
            pytest.fail(f"MOLECULE_EPHEMERAL_DIRECTORY is not set: {name} is written by the scenario's side_effect.yml")
        path = Path(where) / name
        if not path.is_file():
            pytest.fail(f"{path} is missing: the scenario's side_effect.yml writes it (side_effect, then verify)")
        return json.loads(path.read_text(encoding="utf-8"))

    return read
