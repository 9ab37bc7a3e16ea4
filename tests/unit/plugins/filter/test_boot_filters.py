# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot role's filters as Ansible calls them: their inputs read, their errors said as filter errors."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.boot_report import FilterModule

FILTERS = FilterModule().filters()
PLAN = {"head": "h", "ranks": [{"host": "h", "spec_sha256": "a", "rank": 0, "api_port": 8000}]}


def test_boot_release_write_refuses_what_is_not_a_decision() -> None:
    write = FILTERS["boot_release_write"]
    assert write({"decision": "first", "record": {"id": "r"}, "by": "op"}, PLAN)["operation"] == "record"
    with pytest.raises(AnsibleFilterError, match="boot_release_write: no release is written for the decision"):
        write({"decision": None}, PLAN)
    with pytest.raises(AnsibleFilterError, match="boot_release_write: needs boot_preflight's release decision"):
        write("first", PLAN)


def test_boot_guard_failure_and_boot_steady_report() -> None:
    assert FILTERS["boot_guard_failure"](None, "h") == ""
    assert FILTERS["boot_guard_failure"]({"tripped": {"reason": "low"}}, "h").startswith(
        "h: the memory guard is TRIPPED"
    )
    with pytest.raises(AnsibleFilterError, match="boot_guard_failure: needs the guard's answer"):
        FILTERS["boot_guard_failure"]("tripped", "h")
    hostvars = {"h": {"inventory_hostname": "h", "boot_rank": {"rank": 0}}}
    lines = FILTERS["boot_steady_report"](hostvars, ["h"], {"plan": PLAN}, {"decision": None}, "Count:", ended="5")
    assert lines[0].startswith("endpoint: http://h:8000/v1") and lines[-1] == "release: none recorded"
    with pytest.raises(AnsibleFilterError, match="boot_steady_report: 'plan'"):
        FILTERS["boot_steady_report"](hostvars, ["h"], {}, {}, "")
