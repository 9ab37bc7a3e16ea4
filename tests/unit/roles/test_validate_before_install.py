# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files another program parses are checked on the node before they replace the old ones (issue 15): the
``validate`` of each ``copy`` task that writes one, read from the role's task file, and then run here, as
``ansible.builtin.copy`` runs it (``validate % path``, split like ``run_command`` splits a string), on a file the
collection renders and on files that must be refused.

- the memory guard's wrapper (a shell script on root's PATH): ``sh -n``;
- the fabric's systemd-networkd files: the node's Python checks sections, keys and values
  (``dgxspark.cluster.file_check``, plugin_utils/preflight/files.py): systemd has no command that reads a
  ``.network`` file without applying it (``systemd-analyze verify`` reads units only);
- the fabric's and the kernel's sysctl.d files: the same check, ``key = number`` lines of the role's own keys
  (``sysctl -p`` would read them, but it applies them too); ``ansible.posix.sysctl`` then sets each value live and
  finds it in the checked file, so it never writes that file itself.
"""

from __future__ import annotations

import pathlib
import re
import shlex
import subprocess
import sys
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.files import file_check
from ansible_collections.dgxspark.cluster.plugins.filter.kernel import kernel_sysctl_dropin
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import fabric_plan, host_share
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import wrapper_text
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import files as _file_checks
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import fabric_expectation, sha256
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT


def task(role_file: str, name: str) -> dict[str, Any]:
    """The task named ``name`` in ``roles/<role_file>``, blocks included."""

    def walk(tasks: list[Any]) -> Any:
        for item in tasks:
            for part in ("block", "rescue", "always"):
                yield from walk(item.get(part) or [])
            yield item

    found = [t for t in walk(yaml.safe_load((ROOT / "roles" / role_file).read_text())) if t.get("name") == name]
    assert len(found) == 1, f"{role_file}: {name!r} found {len(found)} times"
    return found[0]


def run_validate(command: str, tmp_path: pathlib.Path, content: str, name: str = "candidate") -> Any:
    """``command`` as ansible.builtin.copy runs it on a temporary copy holding ``content``."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return subprocess.run(shlex.split(command % str(path)), capture_output=True, text=True, check=False)


def shares() -> list[dict[str, Any]]:
    """Every host's share of a triangle, a ring of 4 (forwarding and routes), a ring of 8 and a switch of 4."""
    found = []
    for topology, count in (("triangle", 3), ("ring", 4), ("ring", 8), ("switch", 4)):
        hosts = [Host(f"spark-{i}", i, f"10.99.3.{i + 1}", None, i == 0) for i in range(count)]
        plan = fabric_plan(topology, hosts)
        found += [host_share(plan, host.name) for host in hosts]
    return found


SHARES = shares()
# the shares whose files the node's command is run on (a process each): rank 1 of each plan, which forwards in a ring
RUN_ON = [SHARES[1], SHARES[4], SHARES[8], SHARES[16]]


# ----------------------------------------------------------------------------- the memory guard's wrapper

WRAPPER_TASK = (
    "memguard/tasks/install.yml",
    "Put the guard's command on the PATH (read by sh -n before it is installed)",
)
SETTINGS = {
    "memguard_python": "/usr/bin/python3",
    "memguard_install_dir": "/usr/local/lib/dgxspark-memguard",
    "memguard_config_dir": "/etc/dgxspark-memguard",
}


def test_the_guards_wrapper_is_read_by_sh_before_it_is_installed(tmp_path: pathlib.Path) -> None:
    copy = task(*WRAPPER_TASK)["ansible.builtin.copy"]
    assert copy["content"] == "{{ memguard_plan.texts.wrapper }}"
    assert copy["validate"] == "sh -n %s"
    good = run_validate(copy["validate"], tmp_path, wrapper_text(SETTINGS))
    assert good.returncode == 0, good.stderr
    # what pasting a path with a quote into the wrapper would make: sh refuses it, the old wrapper stays
    bad = run_validate(copy["validate"], tmp_path, '#!/bin/sh\nexec /usr/bin/python3 \'/usr/local/lib/x.py "$@"\n')
    assert bad.returncode != 0 and bad.stderr


# ----------------------------------------------------------------------------- the fabric's networkd files

NETWORKD_TASK = ("fabric/tasks/configure.yml", "Write the systemd-networkd file of each fabric port")
GOOD_NETWORKD = "[Match]\nName=enp1s0f0np0\n\n[Link]\nMTUBytes=9000\n\n[Address]\nAddress=10.99.3.1/32\n"
BAD_NETWORKD = {
    "a name off the list": GOOD_NETWORKD.replace("Name=enp1s0f0np0", "Name=*enp1"),
    "two names (a match on both)": GOOD_NETWORKD.replace("Name=enp1s0f0np0", "Name=enp1s0f0np0 eth0"),
    "no [Match]": GOOD_NETWORKD.replace("[Match]\nName=enp1s0f0np0\n", ""),
    "two [Match] sections": GOOD_NETWORKD + "[Match]\nName=eth0\n",
    "a section a port's file has not": GOOD_NETWORKD + "[NetDev]\nKind=bridge\n",
    "a key the role does not write": GOOD_NETWORKD.replace("[Link]\n", "[Link]\nMACAddress=00:11:22:33:44:55\n"),
    "a DNS server": GOOD_NETWORKD + "[Network]\nDNS=192.0.2.53\n",
    "an MTU that is no number": GOOD_NETWORKD.replace("MTUBytes=9000", "MTUBytes=9000;reboot"),
    "an address that is no address": GOOD_NETWORKD.replace("10.99.3.1/32", "10.99.3.1/33"),
    "a control byte": GOOD_NETWORKD.replace("Name=enp1s0f0np0", "Name=enp1\x1bs0"),
    "a line that continues": GOOD_NETWORKD.replace("MTUBytes=9000", "MTUBytes=9000 \\"),
    "a line that is no Key=value": GOOD_NETWORKD + "Address 10.0.0.1/32\n",
    "a key before any section": "Name=enp1s0f0np0\n" + GOOD_NETWORKD,
}


def test_the_fabric_checks_each_networkd_file_before_it_is_installed() -> None:
    copy = task(*NETWORKD_TASK)["ansible.builtin.copy"]
    assert copy["content"] == "{{ fabric_file.value }}"
    assert copy["validate"] == "{{ 'networkd' | dgxspark.cluster.file_check(fabric_python) }}"


def test_every_networkd_file_the_plan_renders_passes(tmp_path: pathlib.Path) -> None:
    command = file_check("networkd", sys.executable)
    files = [text for share in SHARES for text in share["networkd"].values()]
    assert len(files) == 3 * 2 + 4 * 2 + 8 * 2 + 4 and any(
        "[Route]" in text and "IPForward=yes" in text for text in files
    )
    for text in files:
        assert _file_checks.networkd_problems(text) == [], text
    for index, text in enumerate(text for share in RUN_ON for text in share["networkd"].values()):
        result = run_validate(command, tmp_path, text, f"{index}.network")
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("what", sorted(BAD_NETWORKD))
def test_a_networkd_file_off_the_list_is_refused(what: str, tmp_path: pathlib.Path) -> None:
    result = run_validate(file_check("networkd", sys.executable), tmp_path, BAD_NETWORKD[what])
    assert result.returncode == 1, (what, result.stderr)
    assert result.stderr.startswith(f"{tmp_path / 'candidate'}: "), result.stderr


# ----------------------------------------------------------------------------- the sysctl.d files

FABRIC_SYSCTL_TASK = (
    "fabric/tasks/configure.yml",
    "Write the fabric's sysctl.d file (loose reverse-path filtering on the fabric ports, forwarding where needed)",
)
KERNEL_SYSCTL_TASK = ("kernel/tasks/live.yml", "Write the kernel's sysctl.d file")
BAD_FABRIC_SYSCTL = {
    "a key the fabric does not set": "kernel.core_pattern = |/bin/sh -c reboot\n",
    "a port name holding =": "net.ipv4.conf.a=b.rp_filter = 2\n",
    "a port name holding ;": "net.ipv4.conf.a;b.rp_filter = 2\n",
    "a port name too long": "net.ipv4.conf.enp1s0f0np0xxxxxxx.rp_filter = 2\n",
    "a key that may fail": "-net.ipv4.ip_forward = 1\n",
    "a value that is no number": "net.ipv4.ip_forward = 1 2\n",
    "a line that is no key = value": "net.ipv4.ip_forward\n",
    "a control byte": "net.ipv4.ip_forward = 1\r\n",
}


def test_the_fabric_checks_its_sysctl_file_then_sets_it_live() -> None:
    copy = task(*FABRIC_SYSCTL_TASK)["ansible.builtin.copy"]
    assert copy["dest"] == "{{ fabric_sysctl_dir }}/60-dgxspark-fabric.conf"
    assert copy["content"] == "{{ fabric_plan.sysctl }}"
    assert copy["validate"] == "{{ 'sysctl-fabric' | dgxspark.cluster.file_check(fabric_python) }}"
    live = task("fabric/tasks/configure.yml", "Set them live where the kernel has another value")
    assert live["ansible.posix.sysctl"] == {
        "name": "{{ fabric_sysctl.key }}",
        "value": "{{ fabric_sysctl.value }}",
        "sysctl_file": copy["dest"],  # the file just checked, which holds the value already: never written again
        "sysctl_set": True,
        "reload": False,
        "state": "present",
    }
    assert live["loop"] == "{{ fabric_plan.sysctls | dict2items }}"
    tasks = yaml.safe_load((ROOT / "roles/fabric/tasks/configure.yml").read_text())
    assert tasks.index(live) == tasks.index(task(*FABRIC_SYSCTL_TASK)) + 1


def test_every_fabric_sysctl_file_the_plan_renders_passes_and_is_what_the_preflight_expects(
    tmp_path: pathlib.Path,
) -> None:
    command = file_check("sysctl-fabric", sys.executable)
    for share in SHARES:
        assert _file_checks.sysctl_problems(share["sysctl"], "fabric") == [], share["sysctl"]
        expected = fabric_expectation(share, "networkd")["files"]["/etc/sysctl.d/60-dgxspark-fabric.conf"]
        assert expected == sha256(share["sysctl"])  # the file copied whole: the next preflight finds it the same
    for share in RUN_ON:
        result = run_validate(command, tmp_path, share["sysctl"])
        assert result.returncode == 0, result.stderr
    # what ansible.posix.sysctl wrote before (key=value): still a good file
    assert run_validate(command, tmp_path, "net.ipv4.conf.enp1s0f0np0.rp_filter=2\n").returncode == 0


@pytest.mark.parametrize("what", sorted(BAD_FABRIC_SYSCTL))
def test_a_fabric_sysctl_file_off_the_list_is_refused(what: str, tmp_path: pathlib.Path) -> None:
    good = "# Managed by dgxspark.cluster (fabric)\nnet.ipv4.conf.enp1s0f0np0.rp_filter = 2\n"
    result = run_validate(file_check("sysctl-fabric", sys.executable), tmp_path, good + BAD_FABRIC_SYSCTL[what])
    assert result.returncode == 1 and "line 3:" in result.stderr, (what, result.stderr)


def test_the_kernel_checks_its_sysctl_file_then_sets_it_live() -> None:
    copy = task(*KERNEL_SYSCTL_TASK)["ansible.builtin.copy"]
    assert copy["dest"] == "{{ kernel_sysctl_file }}"
    assert "kernel_live_sysctls | dgxspark.cluster.kernel_sysctl_dropin(" in copy["content"]
    assert copy["validate"] == "{{ 'sysctl-kernel' | dgxspark.cluster.file_check(kernel_python) }}"
    live = task("kernel/tasks/live.yml", "Set them live")
    assert live["ansible.posix.sysctl"]["sysctl_file"] == "{{ kernel_sysctl_file }}"
    assert live["ansible.posix.sysctl"]["reload"] is False and live["ansible.posix.sysctl"]["sysctl_set"] is True
    assert live["loop"] == "{{ kernel_live_sysctls | dict2items }}"


class SysctlExit(Exception):
    pass


def run_posix_sysctl(
    monkeypatch: pytest.MonkeyPatch, path: pathlib.Path, name: str, value: str, live: str
) -> tuple[dict[str, Any], list[str]]:
    """ansible.posix.sysctl as the role runs it after the copy (sysctl_set, no reload), the kernel holding ``live``:
    its result and the sysctl commands it ran (reading and setting go through run_command, faked)."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.ansible.posix.plugins.modules import sysctl

    commands: list[str] = []

    def run_command(self: Any, args: Any, **kwargs: Any) -> tuple[int, str, str]:
        commands.append(args)
        return 0, (live if " -n " in args else ""), ""

    def exit_json(self: Any, **kwargs: Any) -> None:
        raise SysctlExit(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: f"/sbin/{name}")
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    args = {"name": name, "value": value, "sysctl_file": str(path), "sysctl_set": True, "reload": False}
    with patch_module_args({**args, "state": "present"}), pytest.raises(SysctlExit) as ended:
        sysctl.main()
    return ended.value.args[0], commands


@pytest.mark.parametrize("role", ["fabric", "kernel"])
def test_ansible_posix_sysctl_finds_each_value_in_the_checked_file_and_never_rewrites_it(
    role: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """The file the role checked and installed is the one that persists: the module only sets the kernel's value."""
    if role == "fabric":
        text, settings = SHARES[4]["sysctl"], SHARES[4]["sysctls"]  # a ring's rank 1: rp_filter twice, forwarding
    else:
        settings = {"fs.nr_open": "2097152"}
        text = kernel_sysctl_dropin(settings, "fs.nr_open=1048576\n")
    path = tmp_path / "60-dgxspark.conf"
    path.write_text(text)
    for name, value in settings.items():
        same, commands = run_posix_sysctl(monkeypatch, path, name, str(value), str(value))
        assert same == {"changed": False} and commands == [f"/sbin/sysctl -e -n {name}"]
        other, commands = run_posix_sysctl(monkeypatch, path, name, str(value), "0")
        assert other == {"changed": True} and re.search(rf" -w {re.escape(name)}=\"?{value}\"?$", commands[-1])
        assert path.read_text() == text  # set live only: the checked file is left as it was


def test_the_kernel_sysctl_file_keeps_what_it_held_and_passes(tmp_path: pathlib.Path) -> None:
    before = "fs.nr_open=1048576\n"  # as ansible.posix.sysctl wrote it
    text = kernel_sysctl_dropin({"fs.nr_open": 2097152}, before)
    assert text.splitlines()[1:] == ["fs.nr_open = 2097152"]
    assert kernel_sysctl_dropin({"fs.nr_open": "2097152"}, text) == text  # a second run writes the same bytes
    result = run_validate(file_check("sysctl-kernel", sys.executable), tmp_path, text)
    assert result.returncode == 0, result.stderr


def test_the_kernel_sysctl_file_holds_nothing_off_the_list(tmp_path: pathlib.Path) -> None:
    with pytest.raises(AnsibleFilterError, match="'vm.swappiness' is not a key the kernel role sets"):
        kernel_sysctl_dropin({"fs.nr_open": "2097152"}, "vm.swappiness = 10\n")
    with pytest.raises(AnsibleFilterError, match="is not a number"):
        kernel_sysctl_dropin({"fs.nr_open": "2097152 3"})
    command = file_check("sysctl-kernel", sys.executable)
    assert run_validate(command, tmp_path, "fs.nr_open = 2097152\nnet.ipv4.ip_forward = 1\n").returncode == 1
    assert run_validate(command, tmp_path, "fs.nr_open = 2097152\n").returncode == 0


# ----------------------------------------------------------------------------- the command itself


def test_the_validate_command_is_one_path_substitution_and_refuses_what_it_does_not_know() -> None:
    command = file_check("networkd")
    assert command.startswith("/usr/bin/python3 -c '") and command.endswith(" networkd %s")
    assert command.count("%") == 1  # copy fills it in with Python's %: nothing else may hold one
    assert "{{" not in command and "{%" not in command
    with pytest.raises(AnsibleFilterError, match="not one of networkd, sysctl-fabric, sysctl-kernel"):
        file_check("grub")
    with pytest.raises(AnsibleFilterError, match="absolute path"):
        file_check("networkd", "python3; reboot")


def test_the_check_names_the_kind_and_the_file(tmp_path: pathlib.Path) -> None:
    source = pathlib.Path(_file_checks.__file__).read_text()

    def check(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", source, *argv], capture_output=True, text=True, check=False)

    usage = check("grub", str(tmp_path))
    assert usage.returncode == 2 and "not a kind of file check: 'grub'" in usage.stderr
    missing = check("networkd", str(tmp_path / "gone"))
    assert missing.returncode == 1 and "cannot be read" in missing.stderr
