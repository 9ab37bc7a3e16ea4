# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""window.yml's judgement: may the window open (everything its restore needs), and the line that closes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.window import closed, is_open, plan

HOSTS = ["spark-head", "spark-w1", "spark-w2"]
HEAD = "spark-head"
PROMOTED = "r20261201T100000Z-0123456789ab"
IMAGE = "captioner:2026.11"
RANK = {"name": "vllm_dsv41", "state": "running", "labels": {"dgxspark.cluster.rank": "0"}}


def cluster() -> dict[str, Any]:
    """Every node's registered node_facts answer: serving, the job's image on every node, no guard tripped."""
    facts = {}
    for host in HOSTS:
        node: dict[str, Any] = {
            "docker": {
                "present": True,
                "containers": [copy.deepcopy(RANK)],
                "images": [{"id": "sha256:" + "c" * 64, "tags": [IMAGE]}],
            },
            "memguard": {"tripped": None},
        }
        if host == HEAD:
            node["releases"] = {"promoted": PROMOTED, "releases": [{"id": PROMOTED, "state": "promoted"}]}
        facts[host] = {"node": node, "changed": False}
    return facts


def test_a_serving_cluster_may_open_a_window_on_its_head() -> None:
    result = plan(cluster(), HOSTS, HEAD, [HEAD], "captions", IMAGE)
    assert result["ok"] and result["problems"] == []
    assert result["release"] == PROMOTED and result["serving"] == HOSTS and result["hosts"] == [HEAD]
    assert result["container"] == "dgxspark-window-captions"
    assert result["opened"] == f"opened: job captions ({IMAGE}) on spark-head; serving stops"
    assert result["msg"] == [
        f"window: job captions ({IMAGE}) on spark-head, then release {PROMOTED} booted again; serving now on "
        "spark-head, spark-w1, spark-w2 stops first"
    ]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda f: f["spark-w2"].update(unreachable=True, msg="ssh: connect refused"),
            "spark-w2: not answering (ssh: connect refused): a window must be able to restore every node",
        ),
        (
            lambda f: f["spark-w1"]["node"]["docker"].update(present=False, error="no Docker engine socket"),
            "spark-w1: its Docker engine does not answer: no Docker engine socket",
        ),
        (
            lambda f: f[HEAD]["node"].update(releases={"promoted": None, "releases": []}),
            "spark-head: no promoted release: nothing to boot again after the window (boot.yml records the first one)",
        ),
        (
            lambda f: f["spark-w1"]["node"]["memguard"].update(
                tripped={"time_utc": "2026-12-02T01:00:00Z", "reason": "low"}
            ),
            "spark-w1: its memory guard is tripped (2026-12-02T01:00:00Z: low): serving could not be restored after "
            "the window; clear it first (the memguard role's clear entry point, or a boot with "
            "-e boot_clear_trip=true)",
        ),
        (
            lambda f: f[HEAD]["node"]["docker"]["images"].clear(),
            f"spark-head: image {IMAGE} is not here (a window never pulls: playbooks/images.yml puts an image on "
            "the nodes)",
        ),
        (
            lambda f: f["spark-w2"]["node"]["docker"]["containers"].append(
                {"name": "dgxspark-window-old", "state": "running", "labels": {"dgxspark.cluster.window": "old"}}
            ),
            "spark-w2: window job dgxspark-window-old still runs: one window at a time",
        ),
    ],
)
def test_a_window_that_could_not_be_restored_never_opens(change: Any, problem: str) -> None:
    facts = cluster()
    change(facts)
    result = plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE)
    assert not result["ok"]
    assert result["problems"] == [problem]
    assert f"refused: {problem}" in result["msg"]


def test_the_image_is_needed_only_where_the_job_runs_and_the_inputs_are_judged() -> None:
    facts = cluster()
    facts["spark-w2"]["node"]["docker"]["images"] = []
    assert plan(facts, HOSTS, HEAD, [HEAD, "spark-w1"], "captions", IMAGE)["ok"]
    assert plan(facts, HOSTS, HEAD, ["spark-w2"], "captions", IMAGE)["problems"] == [
        f"spark-w2: image {IMAGE} is not here (a window never pulls: playbooks/images.yml puts an image on the nodes)"
    ]
    problems = plan(cluster(), HOSTS, HEAD, ["spark-w9"], "Captions!", "")["problems"]
    assert problems == [
        "window_hosts: spark-w9 not a node of this cluster (spark-head, spark-w1, spark-w2)",
        "window_name: 1-48 of a-z, 0-9, '_', '.', '-' (first a letter or digit), found 'Captions!'",
        "window_image: the job's image is required",
    ]
    assert plan(cluster(), HOSTS, HEAD, [], "captions", IMAGE)["problems"] == [
        "window_hosts: name at least one node to run the job on"
    ]


def test_a_stopped_cluster_may_open_a_window_too() -> None:
    facts = cluster()
    for host in HOSTS:
        facts[host]["node"]["docker"]["containers"] = []
    result = plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE)
    assert result["ok"] and result["serving"] == [] and result["msg"][0].endswith("; nothing serves now")


def test_the_closing_line_says_what_each_job_did() -> None:
    jobs = {"spark-w1": {"outcome": "failed", "exit_code": 3}, "spark-head": {"outcome": "succeeded", "exit_code": 0}}
    assert closed(jobs, True) == "closed: spark-head: succeeded; spark-w1: failed (exit code 3); served again"
    assert closed({"spark-head": {}}, False) == "closed: spark-head: not run; serving NOT restored"


def test_a_window_is_open_until_an_event_follows_its_opening() -> None:
    assert is_open({"last_event": {"event": "window", "detail": "opened: job x (i) on h; serving stops"}})
    assert not is_open({"last_event": {"event": "window", "detail": "closed: h: succeeded; served again"}})
    assert not is_open({"last_event": {"event": "served again"}})
    assert not is_open(None)
