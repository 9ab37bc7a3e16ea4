# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters over the inventory's hosts: a run's hosts of other clusters, and the answers a task left by host."""

from __future__ import annotations

from ansible_collections.dgxspark.cluster.plugins.filter.inventory import FilterModule

FILTERS = FilterModule().filters()


def test_other_clusters_hosts_are_the_run_s_ranked_hosts_outside_the_cluster_sorted() -> None:
    hostvars = {"s3-h": {"dgxspark_rank": 0}, "s4-w": {"dgxspark_rank": 1}, "s4-h": {"dgxspark_rank": 0}, "ctl": {}}
    others = FILTERS["other_clusters_hosts"]
    assert others(["s4-w", "s3-h", "s4-h", "ctl"], ["s3-h"], hostvars) == ["s4-h", "s4-w"]
    assert others(["s3-h", "ctl"], ["s3-h"], hostvars) == []
    assert others(["gone"], ["s3-h"], hostvars) == []  # a host the inventory does not know


def test_the_answers_by_host_leave_out_a_host_where_the_task_did_not_run() -> None:
    """A task file included for some hosts only (the fabric's verify, where the fabric differed): its report over
    the play's hosts reads the answers of those that ran it."""
    hostvars = {"h": {"fabric_result": {"rank": 0}}, "w1": {"other": 1}, "w2": {"fabric_result": {"rank": 2}}}
    by_host = FILTERS["answers_by_host"]
    assert by_host(hostvars, ["w2", "h", "w1", "gone"], "fabric_result") == {"w2": {"rank": 2}, "h": {"rank": 0}}
    assert by_host(hostvars, [], "fabric_result") == {}
    assert by_host(hostvars, ["w1"], "fabric_result") == {}
