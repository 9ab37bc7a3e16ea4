# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The releases' filters as playbooks call them: recover_decision (the judgement itself: test__recover.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.release import FilterModule

FILTERS = FilterModule().filters()
HOSTS = ["spark-head", "spark-w1"]


def answers(running: bool) -> dict:
    container = {"name": "vllm_dsv41", "rank": "0", "running": running, "exit_code": 0 if running else 1}
    return {
        host: {
            "node": {
                "ranks": {"error": None, "containers": [container], "records": []},
                "memguard": {"tripped": None},
                "releases": {"promoted": "r1", "releases": [{"id": "r1", "spec_sha256": {}, "last_event": None}]},
            }
        }
        for host in HOSTS
    }


def test_recover_decision_takes_the_playbooks_arguments() -> None:
    decide = FILTERS["recover_decision"]
    assert decide(answers(True), HOSTS, "spark-head", "2026-12-02T03:00:00Z")["action"] == "none"
    decision = decide(answers(False), HOSTS, "spark-head", "2026-12-02T03:00:00Z", max_attempts="2", backoff_s="30")
    assert (decision["action"], decision["attempt"], decision["max_attempts"]) == ("boot", 1, 2)


@pytest.mark.parametrize(
    "args,kwargs,message",
    [
        ((HOSTS, "spark-head", "later"), {}, "recover: now must be an ISO 8601 time"),
        ((HOSTS, "spark-head", "2026-12-02T03:00:00Z"), {"max_attempts": 0}, "recover_max_attempts must be 1 or more"),
        ((HOSTS, "spark-head", "2026-12-02T03:00:00Z"), {"max_attempts": "x"}, "recover: invalid literal"),
    ],
)
def test_recover_decision_says_what_is_wrong(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["recover_decision"](answers(True), *args, **kwargs)


def test_recover_decision_needs_node_facts_answers() -> None:
    with pytest.raises(AnsibleFilterError, match="needs node_facts' answers by host"):
        FILTERS["recover_decision"](["not", "a", "mapping"], HOSTS, "spark-head", "2026-12-02T03:00:00Z")
