# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reboot-bound fix was written, and only that: the GRUB drop-in the kernel role wrote when asked
(kernel_apply_reboot), read as a file and as update-grub reads it (sourced by sh), and the running kernel's
command line untouched (no reboot happened)."""

from __future__ import annotations

testinfra_hosts = ["ansible://dgxspark"]

DROPIN = "/etc/default/grub.d/60-dgxspark-kernel.cfg"
# kho=off added to the default command line, each word shell-quoted on a line of its own
LINE = 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} "kho=off'


def test_dropin_adds_kho_off_and_nothing_else(host):
    dropin = host.file(DROPIN)
    assert dropin.is_file
    assert (dropin.user, dropin.group, dropin.mode) == ("root", "root", 0o644)
    lines = dropin.content_string.splitlines()
    assert LINE in lines
    assert [line for line in lines if line.strip() and not line.startswith("#")] == [LINE]


def test_sourced_as_update_grub_does(host):
    # sh, after the distribution's own default
    script = f'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"; . {DROPIN}; echo "$GRUB_CMDLINE_LINUX_DEFAULT"'
    assert host.check_output("sh -c %s", script) == "quiet splash kho=off"


def test_running_command_line_untouched(host):
    assert "kho=off" not in host.file("/proc/cmdline").content_string.split()
