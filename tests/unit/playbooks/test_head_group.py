# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's groups are one variable, ``dgxspark_cluster_groups``, read everywhere through one lookup.

rollback.yml, promote.yml and releases.yml read the head's releases; rollback.yml and promote.yml import boot.yml,
whose plan and preflight take the head from the same variable. A playbook that took ``groups['dgxspark_head']``
instead would read another host's releases, or fail, on an inventory whose head group has another name. Run for
real: every host points SSH at a closed port on loopback, so the first task that reaches a node says which one.
No role, playbook or plugin names a group but the variable's one default (module_utils/_specs.py); the
deprecated ``boot_head_group`` and ``boot_workers_group`` still work where an inventory or a command line sets them.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    DEFAULT_GROUPS,
    HEAD_GROUP,
    WORKERS_GROUP,
    cluster_groups,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

BIN = pathlib.Path(sys.executable).parent


def _inventory(tmp_path: pathlib.Path) -> str:
    """spark3's hosts with the head in ``lab_head`` and the workers in ``lab_workers``: no dgxspark_head."""
    hosts = yaml.safe_load((ROOT / "inventories/spark3/hosts.yml").read_text())
    groups = hosts["dgxspark"]["children"]
    groups["lab_head"] = groups.pop("dgxspark_head")
    groups["lab_workers"] = groups.pop("dgxspark_workers")
    for group in groups.values():
        for host_vars in group["hosts"].values():
            host_vars.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1)
    hosts["dgxspark"]["vars"] = {"dgxspark_profile": str(SPARK3)}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def _run(name: str, inventory: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "ansible-playbook"), f"playbooks/{name}", "-i", inventory, *extra]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


GROUPS = ["-e", json.dumps({"dgxspark_cluster_groups": {"head": "lab_head", "workers": "lab_workers"}})]
LEGACY = ["-e", "boot_head_group=lab_head", "-e", "boot_workers_group=lab_workers"]


def test_rollback_reads_the_releases_of_the_configured_head(tmp_path: pathlib.Path) -> None:
    run = _run("rollback.yml", _inventory(tmp_path), *GROUPS)
    out = run.stdout + run.stderr
    assert run.returncode != 0  # nothing answers on loopback port 1
    assert "dgxspark_head" not in out, out[-3000:]
    # the first task is delegated to the head (shown as [spark-head], or [other -> spark-head])
    assert re.search(r"fatal: \[(?:[\w-]+ -> )?spark-head\]: UNREACHABLE", out), out[-3000:]


def test_releases_runs_on_the_configured_head(tmp_path: pathlib.Path) -> None:
    run = _run("releases.yml", _inventory(tmp_path), *GROUPS)
    out = run.stdout + run.stderr
    assert "fatal: [spark-head]: UNREACHABLE" in out, out[-3000:]
    assert "skipping: no hosts matched" not in out


def test_the_deprecated_variables_still_name_the_groups(tmp_path: pytest.TempPathFactory) -> None:
    """An inventory or a command line that sets boot_head_group and boot_workers_group (the names before
    dgxspark_cluster_groups) still gets its head, with a deprecation warning that names the new variable."""
    run = _run("rollback.yml", _inventory(tmp_path), *LEGACY)
    out = " ".join((run.stdout + run.stderr).split())
    assert re.search(r"fatal: \[(?:[\w-]+ -> )?spark-head\]: UNREACHABLE", out), out[-3000:]
    assert "boot_head_group names the cluster's head group; set dgxspark_cluster_groups" in out, out[-3000:]


def test_a_deprecated_variable_that_names_another_group_is_refused_before_any_contact(tmp_path) -> None:
    run = _run("rollback.yml", _inventory(tmp_path), *GROUPS, "-e", "boot_head_group=dgxspark_head")
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0
    assert "dgxspark_cluster_groups.head is 'lab_head' but boot_head_group, its deprecated name, is" in out, out[-3000:]
    assert "UNREACHABLE" not in out


def test_the_groups_given_in_the_inventory_are_every_task_s(tmp_path) -> None:
    """Set in the inventory (a cluster's group variables, as in a fleet), the variable reaches every task without an
    extra variable: rollback.yml's first task is delegated to lab_head's host."""
    path = pathlib.Path(_inventory(tmp_path))
    hosts = yaml.safe_load(path.read_text())
    hosts["dgxspark"]["vars"]["dgxspark_cluster_groups"] = {"head": "lab_head", "workers": "lab_workers"}
    path.write_text(yaml.safe_dump(hosts))
    run = _run("rollback.yml", str(path))
    out = run.stdout + run.stderr
    assert re.search(r"fatal: \[(?:[\w-]+ -> )?spark-head\]: UNREACHABLE", out), out[-3000:]
    assert "DEPRECATION" not in out


@pytest.mark.parametrize(
    ("given", "legacy", "expected"),
    [
        (None, {}, DEFAULT_GROUPS),
        ({"head": "a"}, {}, {"head": "a", "workers": WORKERS_GROUP}),
        (None, {"boot_workers_group": "w"}, {"head": HEAD_GROUP, "workers": "w"}),
        ({"head": "a", "workers": "b"}, {"boot_head_group": "a"}, {"head": "a", "workers": "b"}),
    ],
)
def test_cluster_groups_fills_every_key(given, legacy, expected) -> None:
    assert cluster_groups(given, legacy)[0] == expected


@pytest.mark.parametrize(
    ("given", "legacy", "problem"),
    [
        ("lab_head", {}, "must be a dict"),
        ({"heads": "a"}, {}, "unknown keys"),
        ({"head": ""}, {}, "must be an inventory group's name"),
        ({"head": "a"}, {"boot_head_group": "b"}, "its deprecated name"),
    ],
)
def test_cluster_groups_refuses(given, legacy, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        cluster_groups(given, legacy)


# The files that run: task files, playbooks, role defaults and vars, and the plugins' code (not their documentation).
RUNNING = sorted(
    [*ROOT.glob("playbooks/*.yml"), *ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/defaults/*.yml")]
    + [*ROOT.glob("roles/*/vars/*.yml"), *ROOT.glob("roles/*/handlers/*.yml"), *ROOT.glob("plugins/**/*.py")]
)
DOCS = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def _code(path: pathlib.Path) -> str:
    """The file as it runs: a plugin without its documentation strings (DOCUMENTATION, EXAMPLES, RETURN, and
    docstrings), whose text may say what the default is."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    lines = text.splitlines()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        documented = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in DOCS for t in node.targets
        )
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if documented or docstring:
            for number in range(node.lineno - 1, node.end_lineno):
                lines[number] = ""
    return "\n".join(lines)


@pytest.mark.parametrize("path", RUNNING, ids=[str(p.relative_to(ROOT)) for p in RUNNING])
def test_no_role_playbook_or_plugin_names_a_group_but_the_one_default(path: pathlib.Path) -> None:
    """dgxspark_head and dgxspark_workers are written once, as module_utils/_specs.py's HEAD_GROUP and
    WORKERS_GROUP; everything else reads dgxspark_cluster_groups (the lookup dgxspark.cluster.cluster_groups, the
    plugins' cluster_groups argument). Nor is any group indexed by a literal name (groups['...'])."""
    code = _code(path)
    found = re.findall(r"\b(dgxspark_head|dgxspark_workers)\b", code)
    if path == ROOT / "plugins/module_utils/_specs.py":  # where the modules' specs can read them too
        assert sorted(found) == ["dgxspark_head", "dgxspark_workers"], found
    else:
        assert not found, f"{path.relative_to(ROOT)} names {sorted(set(found))}"
    assert not re.search(r"groups\[\s*['\"]", code), f"{path.relative_to(ROOT)} indexes groups by a literal name"
    if path != ROOT / "plugins/plugin_utils/plan/inventory.py":  # where the deprecated names are read, once
        assert not re.search(r"\bboot_(head|workers)_group\b", code), f"{path.relative_to(ROOT)}: a deprecated name"


def test_no_argument_spec_gives_a_group_name_as_a_default() -> None:
    specs = [*ROOT.glob("roles/*/meta/argument_specs.yml"), ROOT / "awx" / "playbook_argument_specs.yml"]

    def defaults(options: dict) -> list:
        found = []
        for option in (options or {}).values():
            found.append(option.get("default"))
            found += defaults(option.get("options"))
        return found

    for path in specs:
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            assert not {HEAD_GROUP, WORKERS_GROUP} & {d for d in defaults(entry.get("options")) if isinstance(d, str)}
