# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release playbooks find the head where the boot does: ``boot_head_group`` (a question of their AWX surveys).

rollback.yml, promote.yml and releases.yml read the head's releases; rollback.yml and promote.yml import boot.yml,
whose plan and preflight take the head from ``boot_head_group``. A playbook that took ``groups['dgxspark_head']``
instead would read another host's releases, or fail, on an inventory whose head group has another name. Run for
real: every host points SSH at a closed port on loopback, so the first task that reaches a node says which one.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

BIN = pathlib.Path(sys.executable).parent
PLAYBOOKS = ("rollback.yml", "promote.yml", "releases.yml", "boot.yml", "bench.yml", "compare.yml")
BOOT_SPEC = ROOT / "roles/boot/meta/argument_specs.yml"


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


GROUPS = ["-e", "boot_head_group=lab_head", "-e", "boot_workers_group=lab_workers"]


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


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_no_release_playbook_names_the_default_head_group_but_as_the_default(name: str) -> None:
    """Every mention of the default groups is the fallback of the boot's option, equal to the boot's default."""
    text = (ROOT / "playbooks" / name).read_text()
    options = yaml.safe_load(BOOT_SPEC.read_text())["argument_specs"]["main"]["options"]
    for variable, group in (("boot_head_group", "dgxspark_head"), ("boot_workers_group", "dgxspark_workers")):
        assert options[variable]["default"] == group
        mentions = len(re.findall(rf"\b{group}\b", text))
        fallbacks = len(re.findall(rf"\b{variable} \| default\('{group}'\)", text))
        assert mentions == fallbacks, f"playbooks/{name} names {group} outside `{variable} | default('{group}')`"
