# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel role's findings (side_effect.yml: the role expecting each node's own release and page size, its
kernel_checked kept in molecule's ephemeral directory) against what uname, getconf, /proc and sysctl say."""

from __future__ import annotations

import pytest

testinfra_hosts = ["ansible://dgxspark"]


@pytest.fixture(scope="module")
def findings(host, record):
    """This node's findings by check name."""
    name = host.ansible.get_variables()["inventory_hostname"]
    return {finding["check"]: finding for finding in record("kernel_checked.json")[name]}


def test_release_is_what_uname_says(host, findings):
    assert findings["kernel-release"]["status"] == "PASS"
    assert findings["kernel-release"]["found"] == host.check_output("uname -r")


def test_page_size_is_what_getconf_says(host, findings):
    page_size = int(host.check_output("getconf PAGESIZE"))
    assert findings["page-size"]["status"] == "PASS"
    assert findings["page-size"]["found"] == f"{page_size // 1024} KiB"


def test_nofile_is_dockerd_hard_limit(host, findings):
    pid = host.check_output("pidof dockerd")
    limits = host.file(f"/proc/{pid}/limits").content_string
    hard = next(line.split()[4] for line in limits.splitlines() if line.startswith("Max open files"))
    assert findings["ulimit:nofile"]["status"] == "PASS"
    assert findings["ulimit:nofile"]["found"].split()[0] == hard


def test_nr_open_is_the_kernel_setting(host, findings):
    assert findings["nr-open"]["status"] == "PASS"
    assert findings["nr-open"]["found"] == str(host.sysctl("fs.nr_open"))


def test_kho_check_skipped_on_6x(findings):
    assert findings["kho-off-7x"]["status"] == "SKIP"
