# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""recover.yml's judgement: the cause from every node's facts, and the decision (boot, refuse, wait, none)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.recover import (
    Settings,
    decide,
    previous_attempts,
)

HOSTS = ["spark-head", "spark-w1", "spark-w2"]
HEAD = "spark-head"
NOW = "2026-12-02T03:00:00Z"
PROMOTED = "r20261201T100000Z-0123456789ab"


def rank(name: str = "vllm_dsv41", number: str = "0", running: bool = True, **state: Any) -> dict[str, Any]:
    return {
        "name": name,
        "rank": number,
        "running": running,
        "status": "running" if running else "exited",
        "exit_code": 0,
        "oom_killed": False,
        "finished_at": "0001-01-01T00:00:00Z",
        "log_tail": [f"{name} says hello"],
        **state,
    }


def release(last_event: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "releases": [
            {
                "id": PROMOTED,
                "state": "promoted",
                "spec_sha256": dict.fromkeys(HOSTS, "s" * 64),
                "last_event": last_event or {"event": "served again", "at": "2026-12-01T12:00:00Z", "by": "ops"},
            }
        ],
        "promoted": PROMOTED,
    }


def cluster(running: bool = True, last_event: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every node's registered node_facts answer: each runs its rank, no guard tripped."""
    facts = {}
    for number, host in enumerate(HOSTS):
        node = {
            "ranks": {"error": None, "containers": [rank(number=str(number), running=running)], "records": []},
            "memguard": {"tripped": None},
        }
        if host == HEAD:
            node["releases"] = release(last_event)
        facts[host] = {"changed": False, "node": node}
    return facts


def attempt_event(number: int, at: str) -> dict[str, Any]:
    return {
        "event": "recover",
        "at": at,
        "by": "AWX schedule recover",
        "detail": f"attempt {number} of 3: rank-exit: x",
    }


def test_every_rank_running_is_nothing_to_do() -> None:
    decision = decide(cluster(), HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("serving", "none")
    assert decision["release"] == PROMOTED and decision["attempt"] is None
    assert decision["msg"][0] == "cause: serving - every rank container runs"


def test_a_worker_that_exited_is_booted_again_and_its_log_tail_is_the_cause() -> None:
    facts = cluster()
    tail = [f"line {i}" for i in range(12)] + ["RuntimeError: NCCL error: unhandled system error"]
    facts["spark-w1"]["node"]["ranks"]["containers"] = [
        rank(number="1", running=False, exit_code=1, finished_at="2026-12-02T02:58:00Z", log_tail=tail)
    ]
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"], decision["attempt"]) == ("rank-exit", "boot", 1)
    assert (
        decision["summary"] == "spark-w1: rank container vllm_dsv41 (rank 1) exited with code 1 at 2026-12-02T02:58:00Z"
    )
    assert decision["clear_trip"] is False
    assert decision["event_detail"].startswith("attempt 1 of 3: rank-exit: spark-w1: rank container vllm_dsv41")
    text = "\n".join(decision["msg"])
    assert "    RuntimeError: NCCL error: unhandled system error" in text
    assert "line 4" not in text and "line 5" in text  # the last 8 lines
    assert decision["msg"][1] == "decision: boot - boot the promoted release again"


def test_a_rank_gone_while_the_others_run_is_a_failure() -> None:
    facts = cluster()
    facts["spark-w2"]["node"]["ranks"]["containers"] = []
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("rank-exit", "boot")
    assert decision["summary"].startswith("spark-w2: no rank container, while other ranks run")


@pytest.mark.parametrize("how", ["guard", "oom", "peer"])
def test_a_memory_trip_is_refused_and_says_why(how: str) -> None:
    facts = cluster(running=False)
    if how == "oom":
        facts["spark-w2"]["node"]["ranks"]["containers"] = [
            rank(number="2", running=False, exit_code=137, oom_killed=True)
        ]
        expected = "spark-w2: rank container vllm_dsv41 (rank 2) killed by the kernel's OOM killer"
    else:
        facts["spark-w1"]["node"]["memguard"]["tripped"] = {
            "time": 1764644000,
            "time_utc": "2026-12-02T02:53:20Z",
            "reason": "emergency: MemAvailable 0.80 GiB under 1.00 GiB",
            "from_peer": "spark-head" if how == "peer" else None,
            "samples": [{"mem_available": 1}, {"mem_available": 2}],
        }
        expected = "spark-w1: memory guard tripped at 2026-12-02T02:53:20Z" + (
            " (on word from spark-head)" if how == "peer" else ""
        )
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("memory", "refuse")
    assert decision["summary"].startswith(expected)
    assert "needs a changed profile (promote.yml) or an explicit override" in decision["msg"][1]
    assert decision["attempt"] is None and decision["clear_trip"] is False

    overridden = decide(facts, HOSTS, HEAD, NOW, Settings(after_memory_trip=True))
    assert (overridden["cause"], overridden["action"], overridden["clear_trip"]) == ("memory", "boot", True)


def test_the_guard_that_tripped_on_its_own_is_the_cause_not_those_on_its_word() -> None:
    facts = cluster(running=False)
    for host in HOSTS:  # stop-all: the head (first in host order) stopped on spark-w2's word
        origin = host == "spark-w2"
        facts[host]["node"]["memguard"]["tripped"] = {
            "time_utc": "2026-12-02T02:53:20Z",
            "reason": "emergency: MemAvailable 0.80 GiB" if origin else "peer spark-w2 tripped",
            "from_peer": None if origin else "spark-w2",
        }
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (
        decision["summary"]
        == "spark-w2: memory guard tripped at 2026-12-02T02:53:20Z: emergency: MemAvailable 0.80 GiB"
    )
    assert [line.split(":")[0] for line in decision["msg"][3:6]] == ["spark-w2", "spark-head", "spark-w1"]


def test_a_node_that_does_not_answer_is_refused() -> None:
    facts = cluster()
    facts["spark-w2"] = {
        "unreachable": True,
        "msg": "Failed to connect to the host via ssh: timed out\nmore",
        "changed": False,
    }
    facts["spark-w1"]["node"]["ranks"]["error"] = "the Docker engine could not be asked: dockerd is not running"
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("not-answering", "refuse")
    assert decision["summary"] == "cannot tell: spark-w1, spark-w2 could not be asked"
    assert "spark-w2: not answering (Failed to connect to the host via ssh: timed out)" in decision["msg"]
    missing = decide({h: f for h, f in cluster().items() if h != "spark-w1"}, HOSTS, HEAD, NOW)
    assert missing["cause"] == "not-answering" and "spark-w1: not answering (no answer)" in missing["msg"]


def test_no_promoted_release_is_refused() -> None:
    facts = cluster(running=False)
    facts[HEAD]["node"]["releases"] = {"releases": [], "promoted": None}
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"], decision["release"]) == ("no-release", "refuse", None)


def test_a_cluster_stopped_on_purpose_is_left_stopped() -> None:
    facts = cluster()
    for answer in facts.values():
        answer["node"]["ranks"]["containers"] = []
    facts["spark-w1"]["node"]["ranks"]["records"] = [
        rank(number="1", running=False, exit_code=143, path="/var/log/dgxspark-cluster/ranks/vllm_dsv41-x.json")
    ]
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("stopped", "none")
    assert "recovery never starts a cluster stopped on purpose" in decision["msg"][1]
    assert any("last removed (/var/log/dgxspark-cluster/ranks/vllm_dsv41-x.json)" in line for line in decision["msg"])


def test_a_failed_attempt_backs_off_then_boots_again_then_gives_up() -> None:
    def after(event: dict[str, Any], now: str, **settings: Any) -> dict[str, Any]:
        facts = cluster(last_event=event)
        for answer in facts.values():
            answer["node"]["ranks"]["containers"] = []  # the attempt's undo removed them
        return decide(facts, HOSTS, HEAD, now, Settings(**settings))

    first = attempt_event(1, "2026-12-02T03:00:00Z")
    waiting = after(first, "2026-12-02T03:01:59Z")
    assert (waiting["cause"], waiting["action"], waiting["next_at"]) == (
        "attempt-failed",
        "wait",
        "2026-12-02T03:02:00Z",
    )
    assert "attempt 2 of 3 not before 2026-12-02T03:02:00Z (backing off 120 s after attempt 1" in waiting["msg"][1]
    assert after(first, "2026-12-02T03:01:59Z", try_now=True)["action"] == "boot"
    second = after(first, "2026-12-02T03:02:00Z")
    assert (second["action"], second["attempt"]) == ("boot", 2)
    assert second["event_detail"].startswith("attempt 2 of 3: attempt-failed: ")

    # doubled: 240 s after the second attempt
    assert after(attempt_event(2, "2026-12-02T03:10:00Z"), "2026-12-02T03:13:59Z")["next_at"] == "2026-12-02T03:14:00Z"
    gave_up = after(attempt_event(3, "2026-12-02T03:20:00Z"), "2026-12-02T05:00:00Z")
    assert (gave_up["action"], gave_up["attempts_before"]) == ("refuse", 3)
    assert "gave up after 3 attempts without serving (the last at 2026-12-02T03:20:00Z)" in gave_up["msg"][1]
    assert "recover_reset=true" in gave_up["msg"][1]
    # reset: the count starts again, and a cluster with nothing failing (the count gone) is a stopped one
    assert after(attempt_event(3, "2026-12-02T03:20:00Z"), NOW, reset=True)["cause"] == "stopped"


def test_a_rank_exit_after_earlier_attempts_counts_them() -> None:
    facts = cluster(last_event=attempt_event(1, "2026-12-02T02:00:00Z"))
    facts["spark-w1"]["node"]["ranks"]["containers"] = [rank(number="1", running=False, exit_code=1)]
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"], decision["attempt"]) == ("rank-exit", "boot", 2)


def test_previous_attempts_reads_the_last_event() -> None:
    assert previous_attempts(None) == (0, None)
    assert previous_attempts({"last_event": {"event": "served again", "at": "t"}}) == (0, None)
    assert previous_attempts({"last_event": {"event": "recover", "at": "t", "detail": "attempt 2 of 5: x"}}) == (2, "t")
    assert previous_attempts({"last_event": {"event": "recover", "at": "t", "detail": "odd"}}) == (1, "t")


@pytest.mark.parametrize(
    "settings,message",
    [
        (Settings(max_attempts=0), "recover_max_attempts must be 1 or more, found 0"),
        (Settings(backoff_s=-1), "recover_backoff_s must be 0 or more seconds, found -1"),
    ],
)
def test_bad_settings_are_refused(settings: Settings, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decide(cluster(), HOSTS, HEAD, NOW, settings)


def test_now_must_be_a_time() -> None:
    with pytest.raises(ValueError, match="now must be an ISO 8601 time, found 'soon'"):
        decide(cluster(), HOSTS, HEAD, "soon")


def test_an_interrupted_boot_is_undone_whatever_is_decided_then_booted_again() -> None:
    facts = cluster()
    facts["spark-w1"]["node"]["journal"] = {
        "open": True,
        "error": None,
        "entry": {"updated_at": "2026-12-02T02:50:00Z", "by": "ops@ctl", "helpers": ["comfy.service"], "rank": "vllm"},
    }
    decision = decide(facts, HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"], decision["interrupted"]) == (
        "interrupted-boot",
        "boot",
        ["spark-w1"],
    )
    assert decision["summary"] == (
        "spark-w1: a boot interrupted after 2026-12-02T02:50:00Z (by ops@ctl) had paused comfy.service, armed the "
        "memory guard (not switched) and started vllm"
    )
    facts["spark-w2"]["node"]["memguard"]["tripped"] = {"time_utc": "2026-12-02T02:49:00Z", "reason": "low"}
    refused = decide(facts, HOSTS, HEAD, NOW)
    assert (refused["cause"], refused["action"], refused["interrupted"]) == ("memory", "refuse", ["spark-w1"])


def test_a_window_whose_controller_died_is_booted_again() -> None:
    """window.yml opened a window (its history says so), stopped every rank and never came back."""
    opened = {
        "event": "window",
        "at": "2026-12-02T02:00:00Z",
        "by": "ops",
        "detail": "opened: job captions (captioner:1) on spark-head; serving stops",
    }

    def stopped(last_event: dict[str, Any]) -> dict[str, Any]:
        facts = cluster(last_event=last_event)
        for host in HOSTS:
            facts[host]["node"]["ranks"]["containers"] = []  # window.yml removed them
        return facts

    decision = decide(stopped(opened), HOSTS, HEAD, NOW)
    assert (decision["cause"], decision["action"]) == ("interrupted-window", "boot")
    assert decision["summary"] == (
        "a window was opened (window at 2026-12-02T02:00:00Z (opened: job captions (captioner:1) on spark-head; "
        "serving stops)) and never closed: its controller stopped before serving was restored"
    )
    closed = {**opened, "detail": "closed: spark-head: succeeded; served again"}
    assert decide(stopped(closed), HOSTS, HEAD, NOW)["cause"] == "stopped"
    # ranks that run again are judged as ever (a window that was restored by hand)
    assert decide(cluster(running=True, last_event=opened), HOSTS, HEAD, NOW)["cause"] == "serving"
