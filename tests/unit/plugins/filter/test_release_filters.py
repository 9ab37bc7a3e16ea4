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


def test_what_a_window_job_did_is_its_message_or_why_it_did_not_run_then_its_log_tail() -> None:
    lines = FILTERS["window_job_lines"]
    ran = {"msg": "window job captions (img:1) succeeded in 12 s", "log_tail": ["done", "  42 files"]}
    assert lines(ran, "captions", "?") == ["window job captions (img:1) succeeded in 12 s", "  done", "    42 files"]
    assert lines({}, "captions", "the guard did not answer") == [
        "window job captions did not run: the guard did not answer"
    ]
    assert lines({"msg": "m", "log_tail": None}, "captions") == ["m"]
    assert lines({}, "captions") == ["window job captions did not run: ?"]
    with pytest.raises(AnsibleFilterError, match="window_job_lines: needs the window_job module's answer: found list"):
        lines(["m"], "captions")


def test_a_guard_tripped_as_the_window_closed_is_the_job_s() -> None:
    tripped = FILTERS["window_tripped"]
    idle = {"guard": {"phase": "idle", "tripped": None}}
    assert tripped([idle, idle]) is False
    assert tripped([idle, {"guard": {"phase": "idle", "tripped": {"reason": "MemAvailable low"}}}]) is True
    assert tripped([idle, {"guard": None}, {"unreachable": True}, None]) is False  # no answer counts for nothing
    assert tripped([]) is False


def test_the_evidence_line_names_the_release_a_run_is_kept_with_or_why_none() -> None:
    line = FILTERS["release_evidence_line"]
    kept = {"changed": True, "release": {"id": "r20261201T120000Z-0123456789ab", "evidence": []}}
    assert line(kept) == "the run is kept as the evidence of release r20261201T120000Z-0123456789ab"
    refused = {"failed": True, "msg": "no release has exactly the specs that run (3 ranks)"}
    assert (
        line(refused)
        == "no release serves (no release has exactly the specs that run (3 ranks)): the run is not kept in one"
    )
    assert line({"failed": True}) == "no release serves (): the run is not kept in one"
    with pytest.raises(AnsibleFilterError, match="release_evidence_line: needs the release module's answer"):
        line("r1")


def test_the_promotion_outcome_says_which_release_serves_and_what_the_other_keeps() -> None:
    outcome = FILTERS["promotion_outcome"]
    assert outcome("r2", "r1", False, "pass") == (
        "promoted: r2 serves and is the promoted release; r1 is retired (rollback.yml goes back to it)"
    )
    assert outcome("r2", "r1", True, "regression") == (
        "NOT promoted (regression): rolled back to r1, which serves again; the candidate r2 keeps its runs and verdict"
    )
    assert outcome("r2", "r1", "false", "pass").startswith("promoted: r2")  # a fact as text
