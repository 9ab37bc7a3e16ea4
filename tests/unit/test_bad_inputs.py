# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input corpus (tests/unit/fixtures/bad-inputs/): every value that would land in a file another
program parses is refused with a clear problem, and nothing is planned or rendered from it."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
from typing import Any

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import fabric_plan, render_netplan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kernel import grub_dropin, kernel_findings
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, edited

CORPUS = ROOT / "tests" / "unit" / "fixtures" / "bad-inputs"
CASES = {path.stem: json.loads(path.read_text()) for path in sorted(CORPUS.glob("*.json"))}
HOSTS = ["spark-head", "spark-w1", "spark-w2"]


def test_the_corpus_covers_every_class() -> None:
    assert {case["class"] for case in CASES.values()} == {
        "kernel command-line word",
        "systemd unit name",
        "path",
        "interface name",
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_with_a_clear_problem_and_nothing_planned(name: str) -> None:
    case = CASES[name]
    planned: list[Any] = []
    with pytest.raises(ProfileError) as caught:
        if "profile" in case:
            profile = validate_profile(edited(json.loads(SPARK3.read_text()), case["profile"]), "profile.json")
            planned.append(
                build_plan(
                    profile, "tp3-triangle", [HostSpec(h, i, i == 0, f"10.99.3.{i + 1}") for i, h in enumerate(HOSTS)]
                )
            )
        else:
            hosts = [Host(h, i, f"10.99.3.{i + 1}", case["cabling"].get(h), i == 0) for i, h in enumerate(HOSTS)]
            planned.append(fabric_plan("triangle", hosts))
    assert planned == []
    problems = [p for p in caught.value.problems if p.where == case["where"] and p.found == case["found"]]
    assert problems, [p.render() for p in caught.value.problems]
    problem = problems[0]
    assert problem.expected, problem.render()
    text = problem.render()
    assert case["where"] in text and json.dumps(case["found"]) in text and "expected" in text
    if "profile" in case:
        assert text.startswith("profile.json:")


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CASES.items() if c["class"] == "kernel command-line word" and "profile" in c)
)
def test_the_kernel_role_refuses_the_word_too(name: str) -> None:
    """The role's own check (kernel_expect reaches it without the profile) and the drop-in's renderer."""
    words = CASES[name]["profile"]["host/kernel/cmdline_required"]
    with pytest.raises(ProfileError, match="expect.cmdline_required: wrong value"):
        kernel_findings({"kernel": {"cmdline": ["ro"]}}, {"cmdline_required": words})
    with pytest.raises(ValueError, match="not kernel command-line words"):
        grub_dropin(words)


def test_the_grub_dropin_is_shell_that_sh_reads_as_meant(tmp_path: pathlib.Path) -> None:
    words = ["kho=off", "console=ttyS0,115200n8", "isolcpus=1-3", "nvidia.NVreg_EnableGpuFirmware=0"]
    text = grub_dropin(words + ["kho=off"], waived=words[1:])  # words off the list, as a waiver lets them through
    path = tmp_path / "60-dgxspark.cfg"
    path.write_text(text)
    subprocess.run(["sh", "-n", str(path)], check=True)  # what the role's validate runs
    script = f'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"; . {shlex.quote(str(path))}; '
    out = subprocess.run(
        ["sh", "-c", script + 'printf %s "$GRUB_CMDLINE_LINUX_DEFAULT"'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out == "quiet splash " + " ".join(words)


def test_the_kernel_role_writes_the_dropin_by_the_filter_and_validates_it() -> None:
    tasks = yaml.safe_load((ROOT / "roles/kernel/tasks/reboot.yml").read_text())
    block = next(t for t in tasks if "block" in t)["block"]
    write = next(t for t in block if t["name"] == "Write the GRUB drop-in")["ansible.builtin.copy"]
    assert write["content"] == (
        "{{ kernel_missing_words | dgxspark.cluster.kernel_grub_dropin(kernel_required.cmdline_waived | default([])) }}"
    )
    assert write["validate"] == "sh -n %s"


def test_a_netplan_file_written_by_a_dumper_reads_back_as_planned() -> None:
    plan = fabric_plan("triangle", [Host(h, i, f"10.99.3.{i + 1}", None, i == 0) for i, h in enumerate(HOSTS)])
    text = render_netplan(plan["spark-head"])
    assert set(yaml.safe_load(text)["network"]["ethernets"]) == {"enp1s0f0np0", "enp1s0f1np1"}


def _netplan_validate(tmp_path: pathlib.Path, content: str, fake_netplan: str) -> subprocess.CompletedProcess[str]:
    """The fabric role's validate command, split as Ansible's run_command splits it, with a stand-in netplan."""
    tasks = yaml.safe_load((ROOT / "roles/fabric/tasks/configure.yml").read_text())
    task = next(t for t in tasks if t["name"] == "Write the netplan file of the fabric ports")["ansible.builtin.copy"]
    assert task["validate"].count("%s") == 1
    (tmp_path / "bin").mkdir()
    netplan = tmp_path / "bin" / "netplan"
    netplan.write_text(fake_netplan)
    netplan.chmod(0o755)
    source = tmp_path / "candidate.yaml"
    source.write_text(content)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    argv = shlex.split(task["validate"] % str(source))
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


FAKE_NETPLAN = """#!/bin/sh
# netplan generate --root-dir ROOT: reads ROOT/etc/netplan/*.yaml
[ "$1" = generate ] && [ "$2" = --root-dir ] || exit 9
PYTHON -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' "$3/etc/netplan/60-dgxspark-fabric.yaml"
""".replace("PYTHON", sys.executable)


def test_the_fabric_role_asks_netplan_before_installing(tmp_path: pathlib.Path) -> None:
    plan = fabric_plan("triangle", [Host(h, i, f"10.99.3.{i + 1}", None, i == 0) for i, h in enumerate(HOSTS)])
    for directory in ("good", "bad"):
        (tmp_path / directory).mkdir()
    good = _netplan_validate(tmp_path / "good", render_netplan(plan["spark-head"]), FAKE_NETPLAN)
    assert good.returncode == 0, good.stderr
    # what string pasting used to write for a port named *enp1: YAML reads an alias, netplan refuses the file
    bad = _netplan_validate(tmp_path / "bad", "network:\n  ethernets:\n    *enp1:\n      mtu: 9000\n", FAKE_NETPLAN)
    assert bad.returncode != 0
