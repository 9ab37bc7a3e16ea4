# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""window.yml's judgement: may the window open (everything its restore needs), and the line that closes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.window import closed, gpus_wanted, is_open, plan

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
                "runtimes": ["nvidia", "runc"],
                "gpu_hook": None,
            },
            "gpu": {"present": True, "error": None, "count": 1},
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
        f"window: job captions ({IMAGE}) on spark-head with every GPU of its nodes, then release {PROMOTED} booted "
        "again; serving now on spark-head, spark-w1, spark-w2 stops first"
    ]
    assert result["gpus"] is True
    assert result["would"] == (
        "check mode: the window may open. A real run would stop serving on spark-head, spark-w1, spark-w2, run job "
        f"captions ({IMAGE}) on spark-head with every GPU of its nodes, then boot release {PROMOTED} again (its "
        "preflight above judged that boot). Nothing was changed."
    )


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


def sim_node(facts: dict[str, Any], host: str) -> None:
    """A node as the simulated cluster's are: no nvidia-smi, and a Docker engine without the NVIDIA runtime."""
    facts[host]["node"]["gpu"] = {"present": False, "error": "nvidia-smi not found", "count": 0}
    facts[host]["node"]["docker"].update(runtimes=["io.containerd.runc.v2", "runc"], gpu_hook=None)


def test_a_gpu_job_is_refused_where_it_could_never_start() -> None:
    """window.yml --check passed on sim3, then the real run stopped serving and failed with 'could not select
    device driver "nvidia"' (issue 29): a job given GPUs is judged against its nodes' GPUs and Docker runtimes."""
    facts = cluster()
    sim_node(facts, HEAD)
    result = plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE)
    assert not result["ok"]
    assert result["problems"] == [
        "spark-head: no GPU here (nvidia-smi not found); or run a job that needs none with -e window_gpus=false",
        "spark-head: its Docker engine cannot give a container GPUs (it has the runtimes io.containerd.runc.v2, runc, "
        "no 'nvidia' among them, and no nvidia-container-runtime-hook here): docker run --gpus would fail with "
        "'could not select device driver \"nvidia\"' (install the NVIDIA Container Toolkit and restart Docker); or "
        "run a job that needs none with -e window_gpus=false",
    ]
    # the same job without GPUs may open; a node the job does not run on is not asked for GPUs
    assert plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE, gpus="false")["ok"]
    assert plan(facts, HOSTS, HEAD, ["spark-w1"], "captions", IMAGE)["ok"]


def test_the_toolkits_hook_is_enough_and_a_gpu_runtime_alone_is_not() -> None:
    facts = cluster()
    facts[HEAD]["node"]["docker"].update(runtimes=["runc"], gpu_hook="/usr/bin/nvidia-container-runtime-hook")
    assert plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE)["ok"]
    facts[HEAD]["node"]["docker"].update(runtimes=None, gpu_hook=None)
    assert "(it does not say its runtimes, no 'nvidia'" in plan(facts, HOSTS, HEAD, [HEAD], "c", IMAGE)["problems"][0]
    facts = cluster()
    facts[HEAD]["node"]["gpu"] = {"present": False, "error": "nvidia-smi lists no GPU", "count": 0}
    assert plan(facts, HOSTS, HEAD, [HEAD], "captions", IMAGE)["problems"] == [
        "spark-head: no GPU here (nvidia-smi lists no GPU); or run a job that needs none with -e window_gpus=false"
    ]


@pytest.mark.parametrize(
    ("value", "wanted"), [(True, True), ("true", True), ("Yes", True), (False, False), ("no", False)]
)
def test_window_gpus_is_a_boolean(value: Any, wanted: bool) -> None:
    assert gpus_wanted(value) is wanted
    result = plan(cluster(), HOSTS, HEAD, [HEAD], "captions", IMAGE, gpus=value)
    assert result["ok"] and result["gpus"] is wanted


@pytest.mark.parametrize("value", ["none", "all", 0, 1, "0", [], None, "", {"count": 1}])
def test_any_other_window_gpus_is_refused_not_guessed(value: Any) -> None:
    assert gpus_wanted(value) is None
    result = plan(cluster(), HOSTS, HEAD, [HEAD], "captions", IMAGE, gpus=value)
    assert result["problems"] == [
        f"window_gpus: true (the job gets every GPU of its nodes, the default) or false (no GPU), found {value!r}"
    ]
