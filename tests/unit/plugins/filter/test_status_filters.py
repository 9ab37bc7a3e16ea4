# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status filters (plugins/filter/status.py): answers by host or in the hosts' order, what they refuse."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.status import status_report, status_screen
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__status import HEAD, HOSTS, healthy


def test_answers_by_host_or_in_the_hosts_order_give_the_same_status(tmp_path) -> None:
    answers = healthy()
    by_host = status_report(answers, HOSTS, HEAD, "http://192.0.2.10:8000/v1", str(tmp_path))
    in_order = status_report([answers[h] for h in HOSTS], HOSTS, HEAD, "http://192.0.2.10:8000/v1", str(tmp_path))
    by_host.pop("at"), in_order.pop("at")
    assert by_host == in_order and by_host["ok"] is True
    assert by_host["bench"]["last"] is None  # no run kept yet
    assert status_screen(in_order | {"at": "now"})[0] == "status: OK - 3 nodes, head sim3-head, at now"
    assert status_screen(in_order, "json") == in_order


def test_what_the_filters_refuse() -> None:
    with pytest.raises(AnsibleFilterError, match="hosts must be a non-empty list"):
        status_report({}, "sim3-head", HEAD)
    with pytest.raises(AnsibleFilterError, match="one per host in their order"):
        status_report([{}], HOSTS, HEAD)
    with pytest.raises(AnsibleFilterError, match="floor_margin must be 0 or more"):
        status_report(healthy(), HOSTS, HEAD, floor_margin=-0.5)
    with pytest.raises(AnsibleFilterError, match="status_format is text or json, found 'yaml'"):
        status_screen({"ok": True}, "yaml")
    with pytest.raises(AnsibleFilterError, match="needs status_report's document"):
        status_screen({"ok": True})
