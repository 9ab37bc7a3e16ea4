# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight against real node facts (the GB10 tree) and seed 000's plan."""

from __future__ import annotations

import copy
import json
import pathlib
import shutil
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles
from ansible_collections.dgxspark.cluster.plugins.module_utils._memguard_state import memguard_facts
from ansible_collections.dgxspark.cluster.plugins.module_utils._model_config import model_configs
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, Tool, gather
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.boot import to_replace
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import CHECKS, preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import (
    FIXTURES,
    SPARK8,
    edited,
    spark3_without_weights,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.memguard_support import (
    GIB as GUARD_GIB,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.memguard_support import (
    STORED,
    WALL_START,
    run_guard,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    GB10,
    IP_ADDR_GB10,
    fake_docker_engine,
)

GIB = 1024**3
MODEL_CONFIGS = FIXTURES / "model_configs"
PROFILE = validate_profile(spark3_without_weights())
HOSTS = ["spark-head", "spark-w1", "spark-w2"]
PLAN = build_plan(
    PROFILE, "tp3-triangle", [HostSpec(h, i, i == 0, f"198.51.100.{10 + i}") for i, h in enumerate(HOSTS)]
)
GB10_NODE = gather(
    Options(
        sections=("memory", "kernel", "fabric", "limits"), proc_root=str(GB10 / "proc"), sys_root=str(GB10 / "sys")
    ),
    lambda argv: CommandResult(1, "", "no tools here"),
)


def node(
    rank: int, available_gib: float = 110, containers: list[dict[str, Any]] | None = None, image_id: str = "sha256:aa"
) -> dict[str, Any]:
    facts = copy.deepcopy(GB10_NODE)
    facts["memory"]["mem_available_bytes"] = int(available_gib * GIB)
    # the GB10 tree's f1 ports are down (as in its samples): this node's fabric is its up port only
    facts["fabric"]["interfaces"] = {k: v for k, v in facts["fabric"]["interfaces"].items() if v.get("carrier")}
    facts["docker"] = {
        "present": True,
        "engine": {"version": "28.2.2"},
        "containers": containers or [],
        "images": [{"id": image_id, "tags": ["spark-ds41f:1030"]}],
    }
    facts["disk"] = {"path": None}
    return facts


def facts(**per_host: dict[str, Any]) -> dict[str, Any]:
    return {host: per_host.get(host, node(i)) for i, host in enumerate(HOSTS)}


def by(result: dict[str, Any], check: str, host: str) -> dict[str, str]:
    return next(line for line in result["lines"] if line["check"] == check and line["host"] == host)


def test_a_ready_cluster_passes_with_a_line_per_check_and_node() -> None:
    result = preflight(facts(), PLAN, PROFILE.data)
    assert not result["failed"], result["report"]
    assert {line["check"] for line in result["lines"]} >= {"mem-available", "previous-container", "image-id", "kernel"}
    assert by(result, "mem-available", "spark-w1")["message"] == "MemAvailable 110.0 GiB, needs >= 100 GiB"
    assert by(result, "image-id", "all")["message"] == "the same image ID on 3 node(s): sha256:aa"
    assert by(result, "weights", "spark-head")["status"] == "SKIP"
    assert by(result, "weights-identity", "spark-w2") == {
        "check": "weights-identity",
        "host": "spark-w2",
        "status": "SKIP",
        "message": "the profile names no host.weights_path",
    }
    assert result["report"][0].startswith("PASS  node-facts")


def test_every_failure_is_named_with_its_node() -> None:
    running = [{"name": "vllm_dsv41", "state": "running", "labels": {"dgxspark.cluster.spec_sha256": "old"}}]
    result = preflight(
        facts(
            **{"spark-w1": node(1, available_gib=42.5, containers=running), "spark-w2": node(2, image_id="sha256:bb")}
        ),
        PLAN,
        PROFILE.data,
    )
    failed = {(line["check"], line["host"]): line["message"] for line in result["failures"]}
    assert failed[("mem-available", "spark-w1")] == "MemAvailable 42.5 GiB, needs >= 100 GiB"
    assert failed[("previous-container", "spark-w1")].startswith("vllm_dsv41 is running with another spec")
    assert failed[("image-id", "all")] == (
        "the nodes hold different images under the same name: sha256:aa: spark-head, spark-w1; sha256:bb: spark-w2"
    )


def test_a_rank_already_serving_as_planned_is_left_alone() -> None:
    def same(rank: int) -> list[dict[str, Any]]:
        labels = {"dgxspark.cluster.spec_sha256": PLAN["ranks"][rank]["spec_sha256"]}
        return [{"name": "vllm_dsv41", "state": "running", "labels": labels}]

    result = preflight(facts(**{h: node(i, containers=same(i)) for i, h in enumerate(HOSTS)}), PLAN, PROFILE.data)
    assert by(result, "previous-container", "spark-w1") == {
        "check": "previous-container",
        "host": "spark-w1",
        "status": "PASS",
        "message": "vllm_dsv41 already runs exactly as planned: left alone",
    }


def test_an_interrupted_boot_is_a_warning_saying_what_it_had_changed() -> None:
    same = [
        {
            "name": "vllm_dsv41",
            "state": "running",
            "labels": {"dgxspark.cluster.spec_sha256": PLAN["ranks"][1]["spec_sha256"]},
        }
    ]
    left = node(1, containers=same)
    left["journal"] = {
        "open": True,
        "error": None,
        "entry": {
            "opened_at": "2026-12-02T03:00:00Z",
            "updated_at": "2026-12-02T03:00:01Z",
            "by": "ops@ctl",
            "helpers": ["comfyui.service"],
            "guard_phase": "startup",
            "rank": "vllm_dsv41",
        },
    }
    clean = node(2)
    clean["journal"] = {"open": False, "error": None, "entry": None}
    broken = node(0)
    broken["journal"] = {"open": True, "error": "/var/lib/x: Permission denied", "entry": None}
    result = preflight(facts(**{"spark-w1": left, "spark-w2": clean, "spark-head": broken}), PLAN, PROFILE.data)
    assert not result["failed"], result["report"]
    line = by(result, "interrupted-boot", "spark-w1")
    assert line["status"] == "WARN" and line["message"] == (
        "a boot interrupted after 2026-12-02T03:00:01Z (by ops@ctl) had paused comfyui.service, armed the memory "
        "guard (startup) and started vllm_dsv41: undone before anything else (its ranks stopped and removed, its "
        "helpers resumed, the guard idle), then the preflight runs again"
    )
    assert by(result, "interrupted-boot", "spark-w2")["status"] == "PASS"
    assert "cannot be read (/var/lib/x: Permission denied)" in by(result, "interrupted-boot", "spark-head")["message"]
    # the rank that boot started serves as planned, yet is stopped with the rest of its undo: not left alone
    assert result["as_planned"]["spark-w1"] is False
    assert not [line for line in result["lines"] if line["check"] == "interrupted-boot" and line["host"] == "x"]
    # a node_facts answer without the section (an older caller): no line
    assert not [line for line in preflight(facts(), PLAN, PROFILE.data)["lines"] if line["check"] == "interrupted-boot"]


def test_ranks_serving_as_planned_restart_with_one_that_must_start() -> None:
    """Tensor parallel: a rank cannot join a group that runs, so a rank that exited makes the others restart."""

    def running(rank: int, state: str = "running") -> list[dict[str, Any]]:
        labels = {"dgxspark.cluster.spec_sha256": PLAN["ranks"][rank]["spec_sha256"]}
        return [{"name": "vllm_dsv41", "state": state, "labels": labels}]

    gathered = facts(
        **{
            "spark-head": node(0, containers=running(0)),
            "spark-w1": node(1, containers=running(1, "exited")),
            "spark-w2": node(2, containers=running(2)),
        }
    )
    result = preflight(gathered, PLAN, PROFILE.data, replace=True)
    assert result["restart"] == ["spark-head", "spark-w2"] and not result["failed"], result["report"]
    assert by(result, "previous-container", "spark-head") == {
        "check": "previous-container",
        "host": "spark-head",
        "status": "WARN",
        "message": "vllm_dsv41 runs as planned, but rank 1 (spark-w1) must start: it is restarted with them (a "
        "tensor-parallel group starts together; a rank cannot join one that runs)",
    }
    assert by(result, "previous-container", "spark-w1")["message"].startswith("vllm_dsv41 is exited with the planned")
    assert to_replace(PLAN, gathered, result["as_planned"]) == {"spark-head": True, "spark-w1": True, "spark-w2": True}
    serving = facts(**{h: node(i, containers=running(i)) for i, h in enumerate(HOSTS)})
    whole = preflight(serving, PLAN, PROFILE.data)
    assert whole["restart"] == [] and set(whole["as_planned"].values()) == {True}
    assert to_replace(PLAN, serving, whole["as_planned"]) == dict.fromkeys(HOSTS, False)


def test_a_container_created_as_planned_and_never_started_is_created_again() -> None:
    """A boot that stopped between its create and start phases left created containers: they hold nothing."""
    labels = {"dgxspark.cluster.spec_sha256": PLAN["ranks"][0]["spec_sha256"]}
    created = [{"name": "vllm_dsv41", "state": "created", "labels": labels}]
    other = [{"name": "vllm_dsv41", "state": "created", "labels": {"dgxspark.cluster.spec_sha256": "old"}}]
    result = preflight(facts(**{"spark-head": node(0, containers=created)}), PLAN, PROFILE.data)
    assert not result["failed"], result["report"]
    assert by(result, "previous-container", "spark-head")["message"] == (
        "vllm_dsv41 was created as planned, never started: created again"
    )
    assert result["recreate"] == ["spark-head"] and result["restart"] == []
    refused = preflight(facts(**{"spark-head": node(0, containers=other)}), PLAN, PROFILE.data)
    assert by(refused, "previous-container", "spark-head")["status"] == "FAIL" and refused["recreate"] == []


def test_replace_and_skip_say_what_they_did() -> None:
    exited = [{"name": "vllm_dsv41", "state": "exited", "labels": {}}]
    low = facts(**{"spark-head": node(0, available_gib=10, containers=exited)})
    result = preflight(low, PLAN, PROFILE.data, replace=True, skip=["mem-available"])
    assert not result["failed"]
    assert by(result, "previous-container", "spark-head")["status"] == "WARN"
    assert by(result, "mem-available", "spark-head")["message"] == (
        "skipped on purpose (would be FAIL: MemAvailable 10.0 GiB, needs >= 100 GiB)"
    )
    with pytest.raises(ValueError, match="unknown preflight checks to skip: mem"):
        preflight(low, PLAN, PROFILE.data, skip=["mem"])


def test_a_node_without_facts_or_image_fails() -> None:
    missing = node(2)
    missing["docker"]["images"] = []
    result = preflight({"spark-head": node(0), "spark-w2": missing}, PLAN, PROFILE.data)
    failed = {(line["check"], line["host"]) for line in result["failures"]}
    assert ("node-facts", "spark-w1") in failed and ("image-present", "spark-w2") in failed


def test_weights_identity_is_a_line_per_node_and_can_be_skipped() -> None:
    profile = {**PROFILE.data, "host": {**PROFILE.data["host"], "weights_path": "/models"}}
    listed = {
        "config.json": {"size": 1843, "sha256": "a" * 64},
        "model.safetensors": {"size": 4096, "sha256": "b" * 64},
    }
    nodes = facts()
    for i, host in enumerate(HOSTS):
        nodes[host]["disk"] = {"path": "/models", "exists": True, "available_bytes": 900 * GIB}
        files = copy.deepcopy(listed)
        if i == 2:
            files["model.safetensors"]["sha256"] = "c" * 64
        nodes[host]["weights"] = {"path": "/models", "exists": True, "error": None, "files": files, "file_count": 2}
    result = preflight(nodes, PLAN, profile)
    assert [line["host"] for line in result["lines"] if line["check"] == "weights-identity"] == HOSTS
    assert by(result, "weights-identity", "spark-head")["status"] == "PASS"
    assert by(result, "weights-identity", "spark-w2")["message"].startswith(
        "/models: 1 file(s) differ from the other nodes: model.safetensors: sha256 cccccccccccccccc..., expected "
        "bbbbbbbbbbbbbbbb... (as on spark-head and spark-w1)"
    )
    assert result["failed"]
    skipped = preflight(nodes, PLAN, profile, skip=["weights-identity"])
    assert not skipped["failed"]
    assert by(skipped, "weights-identity", "spark-w2")["message"].startswith("skipped on purpose (would be FAIL: ")


# ---------------------------------------------------------------- the memory guard (node_facts' memguard section)
def stored_guard() -> dict[str, Any]:
    """The memguard section node_facts reads from the daemon's own files after a steady trip (see
    tests/unit/fixtures/memguard/node-facts/README.md)."""
    return memguard_facts(
        HostFiles([]),
        str(STORED / "state.json"),
        str(STORED / "tripped.json"),
        str(STORED / "decisions.jsonl"),
        str(STORED),  # no /proc/<pid> there: not running now
        lambda: 1796106600.0,
    )


TRIP_TEXT = (
    "the memory guard tripped at 2026-12-01T06:29:36Z: MemAvailable under the steady floor 3.00 GiB (last 2.50 GiB) "
    "for 30.00 s (grace 30 s, phase steady); last 6 of 19 samples (UTC): 06:29:26 2.50 GiB low, "
    "06:29:28 2.50 GiB low, 06:29:30 2.50 GiB low, 06:29:32 2.50 GiB low, 06:29:34 2.50 GiB low, 06:29:36 2.50 GiB low"
)
NOT_TRIPPED = {"installed": True, "running": True, "phase": "steady", "trips": 0, "tripped": None}
DOWN_FIX = (
    "read why with journalctl -u dgxspark-memguard, then systemctl reset-failed dgxspark-memguard "
    "(after a start-limit hit systemd refuses to start it) and systemctl start dgxspark-memguard"
)
GUARD_UNIT = "dgxspark-memguard.service"


def unit(active_state: str, result: str = "success", restarts: str = "0", load_state: str = "loaded") -> dict:
    """node_facts' services section holding the guard's unit."""
    return {
        "present": True,
        "error": None,
        "units": {
            GUARD_UNIT: {
                "id": GUARD_UNIT,
                "load_state": load_state,
                "active_state": active_state,
                "sub_state": None,
                "unit_file_state": "enabled",
                "result": result,
                "restarts": restarts,
            }
        },
    }


def healthy(ok: bool = True, problems: list[str] | None = None, write_errors: int = 0) -> dict[str, Any]:
    return {
        "ok": ok,
        "problems": problems or [],
        "write_errors": write_errors,
        "watchdog_s": 6.0,
        "stale_after_s": 6.0,
        "started": 1796106540.0,
    }


LISTENING = {"listening": True, "listen_error": None, "rejections": 0, "clock_skew": None}
PASSED = "not tripped (phase steady, 0 trip(s) recorded)"


@pytest.mark.parametrize(
    "guard,clear_trip,status,message",
    [
        (
            "stored",
            False,
            "FAIL",
            f"{TRIP_TEXT}; clear it once the cause is understood: the memguard role's clear entry point "
            "(include_role dgxspark.cluster.memguard, tasks_from: clear), or boot with -e boot_clear_trip=true",
        ),
        ("stored", True, "WARN", f"{TRIP_TEXT}; it will be cleared (asked for)"),
        (NOT_TRIPPED, False, "PASS", "not tripped (phase steady, 0 trip(s) recorded)"),
        (NOT_TRIPPED, True, "PASS", "not tripped (phase steady, 0 trip(s) recorded)"),
        (
            {**NOT_TRIPPED, "running": False, "state_age_s": 312.5},
            False,
            "FAIL",
            "not tripped, but the memory guard is down (dgxspark-memguard.service: state unknown (node_facts was "
            "not asked for it); its state is 312.5 s old, stale after 30 s, or its pid is gone); "
            f"{DOWN_FIX}",
        ),
        (
            {"installed": False, "running": None, "tripped": None},
            False,
            "WARN",
            "the memory guard is not installed yet (a fresh node): the boot installs it",
        ),
        (None, False, "WARN", "could not check: node_facts gathered no memguard section"),
    ],
)
def test_guard_tripped(guard: Any, clear_trip: bool, status: str, message: str) -> None:
    worker = node(2)
    if guard is not None:
        worker["memguard"] = stored_guard() if guard == "stored" else guard
    result = preflight(facts(**{"spark-w2": worker}), PLAN, PROFILE.data, clear_trip=clear_trip)
    assert by(result, "guard-tripped", "spark-w2") == {
        "check": "guard-tripped",
        "host": "spark-w2",
        "status": status,
        "message": message,
    }
    assert result["failed"] is (status == "FAIL")


@pytest.mark.parametrize(
    "guard,services,status,message",
    [
        # the unit gave up after its start limit: the state in /run still names the dead pid
        (
            {**NOT_TRIPPED, "running": False, "state_age_s": 95.0, "health": healthy()},
            unit("failed", "start-limit-hit", "5"),
            "FAIL",
            "not tripped, but the memory guard is down (dgxspark-memguard.service failed, result start-limit-hit, "
            "5 restart(s); its state is 95.0 s old, stale after 6 s, or its pid is gone); " + DOWN_FIX,
        ),
        # failed, and no state at all (it never got far enough to write one): installed all the same
        (
            {"installed": False, "running": None, "tripped": None},
            unit("failed", "exit-code", "3"),
            "FAIL",
            "not tripped, but the memory guard is down (dgxspark-memguard.service failed, result exit-code, "
            "3 restart(s)); " + DOWN_FIX,
        ),
        # a fresh node: no files, the unit unknown to systemd: the boot installs it
        (
            {"installed": False, "running": None, "tripped": None},
            unit("inactive", load_state="not-found"),
            "WARN",
            "the memory guard is not installed yet (a fresh node): the boot installs it",
        ),
        # stop-all: the listener could not bind
        (
            {
                **NOT_TRIPPED,
                "health": healthy(False, ["peer listener: cannot listen on 198.51.100.12 port 7391: in use"]),
                "peers": {**LISTENING, "listening": False, "listen_error": "cannot listen: in use"},
            },
            unit("active"),
            "FAIL",
            f"{PASSED}, but the memory guard is unhealthy: peer listener: cannot listen on 198.51.100.12 port 7391: "
            "in use; its peer listener does not listen (cannot listen: in use): a trip on another rank would not "
            "stop this one; free the port or bring the address up (the guard retries every 10 s)",
        ),
        # stop-all: a peer's trip was refused for its date
        (
            {
                **NOT_TRIPPED,
                "health": healthy(False, ["clock skew with spark-head: -300 s (allowed 120 s): its trip was refused"]),
                "peers": {**LISTENING, "clock_skew": {"from": "spark-head", "skew_s": -300.0, "allowed_s": 120.0}},
            },
            unit("active"),
            "FAIL",
            f"{PASSED}, but the memory guard is unhealthy: clock skew with spark-head: -300 s (allowed 120 s): its "
            "trip was refused; a peer's trip was refused for clock skew: fix the clocks (chrony), then clear the "
            "guard (the memguard role's clear entry point, or -e boot_clear_trip=true)",
        ),
        # writes that fail: it keeps guarding
        (
            {
                **NOT_TRIPPED,
                "health": healthy(False, ["writing the decision log: No space left on device"], write_errors=4),
                "peers": LISTENING,
            },
            unit("active"),
            "WARN",
            f"{PASSED}, but the memory guard reports problems (4 write error(s)): writing the decision log: No space "
            "left on device; it keeps guarding, fix them (free space under /var/log/dgxspark-memguard, name "
            "resolution of its peers)",
        ),
        # local policy, healthy, restarted once by systemd and up again
        (
            {**NOT_TRIPPED, "health": healthy(), "peers": {**LISTENING, "listening": None}},
            unit("active", restarts="1"),
            "PASS",
            PASSED,
        ),
    ],
)
def test_a_guard_that_is_down_or_unhealthy(
    guard: dict[str, Any], services: dict[str, Any], status: str, message: str
) -> None:
    worker = node(2)
    worker["memguard"], worker["services"] = guard, services
    line = by(preflight(facts(**{"spark-w2": worker}), PLAN, PROFILE.data), "guard-tripped", "spark-w2")
    assert (line["status"], line["message"]) == (status, message)


@pytest.mark.parametrize(
    "samples,text",
    [
        (None, "its samples were not found (the guard's decision log has no line for this trip)"),
        ([], "no samples recorded"),
        (
            [{"t": 1796106576.25, "mem_available": None, "psi_full_avg10": 61.5, "low": True}],
            "last 1 of 1 samples (UTC): 06:29:36 MemAvailable unreadable PSI 61.5 % low",
        ),
    ],
)
def test_a_trip_without_samples_says_so(samples: Any, text: str) -> None:
    guard = stored_guard()
    guard["tripped"]["samples"] = samples
    worker = node(1)
    worker["memguard"] = guard
    message = by(preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data), "guard-tripped", "spark-w1")["message"]
    assert f"(grace 30 s, phase steady); {text}; clear it" in message


def test_clear_trip_lets_a_tripped_guard_pass() -> None:
    worker = node(1)
    worker["memguard"] = stored_guard()
    assert preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data)["failed"] is True
    assert preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, clear_trip=True)["failed"] is False


# ---------------------------------------------------------------- ports (node_facts' ports section)
CONTAINER_ID = "962259347e84a7e84abd0a7422096c3aab2a03d03c3900bcdb1327e89302c457"


def listener(port: int, pid: int | None, comm: str | None, container: str | None = None, **more: Any) -> dict[str, Any]:
    entry = {"port": port, "family": "ipv4", "address": "0.0.0.0", "inode": 1, "uid": 0, "pids": [pid] if pid else []}
    entry.update(pid=pid, comm=comm, container=container, container_name=None)
    entry.update(more)
    return entry


def head_with(listening: list[dict[str, Any]] | None, spec: str = "other", unreadable: int = 0) -> dict[str, Any]:
    running = [{"name": "vllm_dsv41", "id": CONTAINER_ID, "state": "running", "labels": {SPEC: spec}}]
    head = node(0, containers=running)
    if listening is not None:
        head["ports"] = {"asked": [8000, 29501], "listening": listening, "unreadable_processes": unreadable}
    return head


SPEC = "dgxspark.cluster.spec_sha256"
OWN = PLAN["ranks"][0]["spec_sha256"]


@pytest.mark.parametrize(
    "head,replace,status,message",
    [
        (head_with([]), False, "PASS", "the API port 8000 and the master port 29501: free"),
        (
            head_with([listener(8000, 5150, "python3", "5d0c1e0f" * 8, container_name="open-webui")]),
            False,
            "FAIL",
            "the API port 8000 is held by pid 5150 (python3, container open-webui) on 0.0.0.0; "
            "stop it, or plan other ports (the profile's container.api_port, master_port)",
        ),
        (
            head_with(
                [
                    listener(29501, 6011, "torchrun"),
                    listener(29501, 6011, "torchrun", family="ipv6", address="::"),
                    listener(8000, None, None, uid=1000),
                ],
                unreadable=3,
            ),
            True,  # replace does not free a port another process holds
            "FAIL",
            "the API port 8000 is held by a process node_facts could not name (socket owner uid 1000) on 0.0.0.0; "
            "the master port 29501 is held by pid 6011 (torchrun) on 0.0.0.0, :: "
            "(3 process(es) could not be read: gather node_facts with become to name it); "
            "stop it, or plan other ports (the profile's container.api_port, master_port)",
        ),
        (
            head_with([listener(8000, 4242, "vllm", CONTAINER_ID), listener(29501, 4242, "vllm", CONTAINER_ID)], OWN),
            False,
            "PASS",
            "the API port 8000 and the master port 29501: held by vllm_dsv41 itself, which serves as planned",
        ),
        (
            head_with([listener(8000, 4242, "vllm", CONTAINER_ID)]),
            True,
            "WARN",
            "the API port 8000: held by the previous vllm_dsv41, which will be replaced (asked for)",
        ),
        (
            head_with([listener(8000, 4242, "vllm", CONTAINER_ID)]),
            False,
            "FAIL",
            "the API port 8000: held by the previous vllm_dsv41 (another spec); "
            "remove it, or boot with -e boot_replace=true to replace it",
        ),
        (
            head_with(None),
            False,
            "WARN",
            "could not check the API port 8000 and the master port 29501: node_facts gathered no ports section "
            "(sections: [ports], ports: [8000, 29501])",
        ),
    ],
)
def test_port_free(head: dict[str, Any], replace: bool, status: str, message: str) -> None:
    result = preflight(facts(**{"spark-head": head}), PLAN, PROFILE.data, replace=replace)
    assert by(result, "port-free", "spark-head") == {
        "check": "port-free",
        "host": "spark-head",
        "status": status,
        "message": message,
    }
    assert by(result, "port-free", "spark-w1")["message"] == "rank 1 needs no fixed port (it runs --headless)"


# ---------------------------------------------------------------- a re-boot of a cluster serving as planned
def test_a_cluster_serving_as_planned_passes_whatever_its_memory() -> None:
    serving = {}
    for index, host in enumerate(HOSTS):
        rank = PLAN["ranks"][index]
        running = [
            {"name": "vllm_dsv41", "id": f"{index}" * 64, "state": "running", "labels": {SPEC: rank["spec_sha256"]}}
        ]
        serving[host] = node(index, available_gib=6.2, containers=running)
        serving[host]["memguard"] = NOT_TRIPPED
        serving[host]["ports"] = {"asked": [8000, 29501], "listening": [], "unreadable_processes": 0}
    serving["spark-head"]["ports"]["listening"] = [listener(8000, 4242, "vllm", "0" * 64)]
    result = preflight(serving, PLAN, PROFILE.data)
    assert not result["failed"], result["report"]
    assert result["as_planned"] == dict.fromkeys(HOSTS, True)
    assert by(result, "mem-available", "spark-w2")["message"] == (
        "vllm_dsv41 already serves as planned (MemAvailable 6.2 GiB with it loaded); "
        "the 100 GiB floor applies to a rank that must start"
    )
    # one rank that must start again is held to the floor, and only that one
    serving["spark-w2"]["docker"]["containers"][0]["state"] = "exited"
    result = preflight(serving, PLAN, PROFILE.data, replace=True)
    assert [(line["check"], line["host"]) for line in result["failures"]] == [("mem-available", "spark-w2")]
    assert result["as_planned"] == {"spark-head": True, "spark-w1": True, "spark-w2": False}


# ---------------------------------------------------------------- drift: a previous container with another spec
def gb10_docker() -> dict[str, Any]:
    """The GB10 engine's answers (rank 1 of this very plan, captured), as node_facts returns them."""
    with fake_docker_engine() as (path, _requests):
        return gather(
            Options(sections=("docker",), docker_host=f"unix://{path}"), lambda argv: CommandResult(1, "", "")
        )["docker"]


def plan_with(edits: dict[str, Any], environment: dict[str, str] | None = None) -> dict[str, Any]:
    profile = validate_profile(edited(spark3_without_weights(), edits))
    plan = build_plan(
        profile, "tp3-triangle", [HostSpec(h, i, i == 0, f"198.51.100.{10 + i}") for i, h in enumerate(HOSTS)]
    )
    plan["ranks"][1]["environment"].update(environment or {})
    return plan


def previous_line(plan: dict[str, Any], docker: dict[str, Any], replace: bool = False) -> dict[str, str]:
    worker = node(1)
    worker["docker"] = docker
    return by(
        preflight(facts(**{"spark-w1": worker}), plan, PROFILE.data, replace=replace), "previous-container", "spark-w1"
    )


def test_the_captured_container_is_rank_1_as_planned() -> None:
    # it runs as planned; the other ranks have no container yet, so it restarts with them
    assert previous_line(PLAN, gb10_docker())["message"].startswith(
        "vllm_dsv41 runs as planned, but rank 0 (spark-head), rank 2 (spark-w2) must start"
    )


def test_drift_is_shown_field_by_field() -> None:
    plan = plan_with(
        {"shapes/tp3-triangle/sizing/max_num_seqs": 3, "shapes/tp3-triangle/environment": {"NCCL_DEBUG": "INFO"}},
        {"WANDB_API_KEY": "planned-secret", "HF_TOKEN": "hf_planned"},
    )
    docker = gb10_docker()
    spec = plan["ranks"][1]["spec_sha256"]
    line = previous_line(plan, docker)
    assert line["status"] == "FAIL"
    assert (
        line["message"]
        == (
            "vllm_dsv41 is running with another spec ("
            "command --max-num-seqs: 4 → 3; "
            "env NCCL_DEBUG: WARN → INFO; "
            "env WANDB_API_KEY: (unset) → ***; "  # HF_TOKEN: node_facts gave no value to compare
            f"label dgxspark.cluster.profile_sha256: 9cc18127a6ef → {plan['profile_sha256'][:12]}; "
            f"label dgxspark.cluster.spec_sha256: 72add66b0953 → {spec[:12]}); "
            "remove it, or boot with -e boot_replace=true to replace it"
        )
    )
    assert "planned-secret" not in line["message"] and "hf_" not in line["message"]
    assert previous_line(plan, docker, replace=True)["message"].endswith(": it will be replaced (asked for)")


def test_drift_of_the_image_and_extra_settings() -> None:
    plan = plan_with({"container/image": "spark-ds41f:1101", "model_revision": "2c0ffee0"})
    docker = gb10_docker()
    docker["container"]["env"].update(NCCL_P2P_LEVEL="SYS", NCCL_IB_PKEY="0", PYTHONPATH="/opt/x", MY_SECRET_KEY="x")
    docker["container"]["cmd"].append("--enforce-eager")
    message = previous_line(plan, docker)["message"]
    changes = message[message.index("(") + 1 : message.rindex(")")].split("; ")
    assert changes[:4] == [
        "image: spark-ds41f:1030 → spark-ds41f:1101",
        "command --revision: 1bae0e10 → 2c0ffee0",
        "command --enforce-eager: (set) → (absent)",
        "env NCCL_P2P_LEVEL: SYS → (unset)",  # an NCCL_ setting the plan does not make; PYTHONPATH is the image's
    ]
    assert "env NCCL_IB_PKEY: 0 → (unset)" in changes  # a partition key index, not a secret
    assert "label dgxspark.cluster.model_revision: 1bae0e10 → 2c0ffee0" in changes
    assert not any("PYTHONPATH" in c or "MY_SECRET_KEY" in c for c in changes)


def test_a_retagged_image_and_a_summary_without_detail() -> None:
    docker = gb10_docker()
    docker["container"] = {"exists": False, "name": "vllm_dsv41"}
    docker["containers"][0]["labels"][SPEC] = "0" * 64
    docker["images"] = [{"id": "sha256:" + "b" * 64, "tags": ["spark-ds41f:1030"]}]
    message = previous_line(PLAN, docker)["message"]
    assert message == (
        "vllm_dsv41 is running with another spec ("
        "image: spark-ds41f:1030 sha256:4f0d7c3b9a1e → spark-ds41f:1030 sha256:bbbbbbbbbbbb "
        "(the tag names another image now); "
        f"label dgxspark.cluster.spec_sha256: 000000000000 → {PLAN['ranks'][1]['spec_sha256'][:12]}; "
        "command and environment not compared (node_facts gave no detail of this container)); "
        "remove it, or boot with -e boot_replace=true to replace it"
    )


def test_a_difference_only_in_the_docker_run_options_says_so() -> None:
    plan = plan_with(
        {
            "container/docker_run_args": [
                a for a in spark3_without_weights()["container"]["docker_run_args"] if a != "--ulimit=core=0"
            ]
        }
    )
    message = previous_line(plan, gb10_docker())["message"]
    assert "; the rest differs in the docker run options (not compared here)); remove it" in message


def test_a_rank_replaced_on_purpose_holds_memory_so_a_low_reading_warns() -> None:
    running = [{"name": "vllm_dsv41", "state": "running", "labels": {"dgxspark.cluster.spec_sha256": "old"}}]
    low = facts(**{"spark-w1": node(1, available_gib=12, containers=running)})
    refused = preflight(low, PLAN, PROFILE.data)
    assert by(refused, "mem-available", "spark-w1")["status"] == "FAIL"
    replaced = preflight(low, PLAN, PROFILE.data, replace=True)
    line = by(replaced, "mem-available", "spark-w1")
    assert line["status"] == "WARN" and "this boot replaces it" in line["message"]
    assert not replaced["failed"], replaced["report"]


# ---------------------------------------------------------------- a fabric port must not be the management interface
PLANNED_PORTS = ("enp1s0f0np0", "enP2p1s0f0np0")
# The GB10 tree's planned ports with their addresses (ip/addr-gb10.json) and its default route (proc/net/route):
# 192.168.100.10/24 and 10.99.3.1/32 on enp1s0f0np0, 192.168.100.14/24 on enP2p1s0f0np0, the default route
# through wlP9s9 (192.168.10.1/24), which is not planned.
GB10_FABRIC = gather(
    Options(
        sections=("fabric",),
        proc_root=str(GB10 / "proc"),
        sys_root=str(GB10 / "sys"),
        ip=Tool("ip", "/usr/sbin/ip"),
        fabric_interfaces=PLANNED_PORTS,
    ),
    lambda argv: CommandResult(0, IP_ADDR_GB10.read_text(), ""),
)["fabric"]


def apart_line(management: str | None, **fabric: Any) -> dict[str, str]:
    worker = node(1)
    worker["fabric"] = {**copy.deepcopy(GB10_FABRIC), **fabric}
    managed = {"spark-w1": management} if management else None
    return by(preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, management=managed), CHECK, "spark-w1")


CHECK = "fabric-not-management"
FIX = (
    "the fabric role would take it over (its addresses, MTU 9000) and could cut the connection the boot runs on; "
    "plan the fabric on ports that do not carry management (dgxspark_fabric_cabling names them), or manage the "
    "node on another interface (ansible_host)"
)
ROUTE = {"interface": "enp1s0f0np0", "gateway": "192.168.100.1", "metric": 100}


@pytest.mark.parametrize(
    "management,fabric,status,message",
    [
        (
            "192.168.10.1",
            {},
            "PASS",
            "the management address 192.168.10.1 is on none of the planned ports (enP2p1s0f0np0, enp1s0f0np0); "
            "the fabric addresses (198.51.100.11) are outside the management subnets (192.168.10.0/24); "
            "the IPv4 default route leaves by wlP9s9",
        ),
        (
            "192.168.100.10",
            {},
            "FAIL",
            f"a planned fabric port is the management interface: enp1s0f0np0 carries the management address "
            f"192.168.100.10; {FIX}",
        ),
        (
            "10.99.3.1",  # a secondary address of the port counts as well
            {},
            "FAIL",
            f"a planned fabric port is the management interface: enp1s0f0np0 carries the management address "
            f"10.99.3.1; {FIX}",
        ),
        (
            "192.168.10.1",
            {"default_routes": [ROUTE, {"interface": "wlP9s9", "gateway": "192.168.10.254", "metric": 600}]},
            "FAIL",
            f"a planned fabric port is the management interface: the IPv4 default route leaves by enp1s0f0np0; {FIX}",
        ),
        (
            "192.168.100.14",
            {"default_routes": [ROUTE]},
            "FAIL",
            "a planned fabric port is the management interface: enP2p1s0f0np0 carries the management address "
            f"192.168.100.14; the IPv4 default route leaves by enp1s0f0np0; {FIX}",
        ),
        (
            None,  # no ansible_host: the inventory name, which is not an address
            {},
            "PASS",
            "the fabric addresses (198.51.100.11) are outside the management subnets (192.168.10.0/24); "
            "the IPv4 default route leaves by wlP9s9; not compared: the management address spark-w1 is a name "
            "(not resolved here)",
        ),
        (
            "192.168.10.1",
            {"default_routes": []},
            "PASS",
            "the management address 192.168.10.1 is on none of the planned ports (enP2p1s0f0np0, enp1s0f0np0); "
            "the fabric addresses (198.51.100.11) are outside the management subnets (192.168.10.0/24); "
            "there is no IPv4 default route",
        ),
        (
            "spark-w1.lan",
            {"default_routes": None},
            "WARN",
            "could not check: the management address spark-w1.lan is a name (not resolved here); "
            "the default routes are unknown (node_facts read no /proc/net/route)",
        ),
        (
            "fd00::11",
            {"default_routes": None},
            "WARN",
            "could not check: the management address fd00::11 is IPv6 (node_facts reads the ports' IPv4 "
            "addresses); the default routes are unknown (node_facts read no /proc/net/route)",
        ),
        (
            "192.168.10.1",
            {
                "interfaces": {name: {**port, "ipv4": None} for name, port in GB10_FABRIC["interfaces"].items()},
                "error": "ip not found",
            },
            "PASS",
            "the fabric addresses (198.51.100.11) are outside the management subnets (192.168.10.0/24); "
            "the IPv4 default route leaves by wlP9s9; not compared: the IPv4 addresses of enP2p1s0f0np0, "
            "enp1s0f0np0 are unknown (ip not found)",
        ),
        ("192.168.10.1", {"interfaces": {}}, "WARN", "could not check: node_facts gathered no fabric ports"),
    ],
    ids=[
        "apart",
        "management address on a port",
        "a secondary address",
        "default route on a port",
        "both",
        "a name, routes known",
        "no default route",
        "a name, no routes",
        "IPv6, no routes",
        "addresses unknown",
        "no ports",
    ],
)
def test_a_fabric_port_must_not_be_the_management_interface(
    management: str | None, fabric: dict[str, Any], status: str, message: str
) -> None:
    line = apart_line(management, **fabric)
    assert (line["status"], line["message"]) == (status, message)


def test_fabric_not_management_stops_the_boot_and_can_be_skipped_by_name() -> None:
    assert CHECK in CHECKS
    worker = node(1)
    worker["fabric"] = copy.deepcopy(GB10_FABRIC)
    managed = {"spark-w1": "192.168.100.10"}
    result = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, management=managed)
    assert result["failed"] and [(f["check"], f["host"]) for f in result["failures"]] == [(CHECK, "spark-w1")]
    skipped = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, skip=[CHECK], management=managed)
    assert not skipped["failed"]
    assert by(skipped, CHECK, "spark-w1")["message"].startswith("skipped on purpose (would be FAIL: a planned fabric")


def test_a_profile_that_waives_fabric_not_management_gets_a_warning_with_its_reason() -> None:
    """The plan's waiver of the same name (a one-port lab rig) carries to the preflight: WARN, the reason repeated."""
    worker = node(1)
    worker["fabric"] = copy.deepcopy(GB10_FABRIC)
    waived = {**PROFILE.data, "waivers": {CHECK: "a one-port lab rig"}}
    result = preflight(facts(**{"spark-w1": worker}), PLAN, waived, management={"spark-w1": "192.168.100.10"})
    assert not result["failed"]
    line = by(result, CHECK, "spark-w1")
    assert line["status"] == "WARN"
    assert line["message"] == (
        "waived fabric-not-management (a one-port lab rig): a planned fabric port is the management interface: "
        f"enp1s0f0np0 carries the management address 192.168.100.10; {FIX}"
    )


# ----------------------------------------------------------------------------- node-problems
def test_node_facts_problems_are_a_warning_naming_each() -> None:
    """node_facts' ``problems`` (read or write errors it left behind) were gathered and never shown."""
    cache = {
        "section": "weights",
        "source": "/var/cache/dgxspark-cluster/weights",
        "message": "weights hash cache could not be written: Permission denied",
    }
    meminfo = {"section": "disk", "source": "/models", "message": "Permission denied"}
    worker = node(1)
    worker["problems"] = [cache, meminfo]
    result = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data)
    line = by(result, "node-problems", "spark-w1")
    assert line["status"] == "WARN" and not result["failed"]
    assert line["message"].startswith("node_facts reported 2 problem(s) (section: source: message): ")
    assert (
        "weights: /var/cache/dgxspark-cluster/weights: weights hash cache could not be written: Permission denied"
        in line["message"]
    )
    assert "disk: /models: Permission denied" in line["message"]
    assert by(result, "node-problems", "spark-head") == {
        "check": "node-problems",
        "host": "spark-head",
        "status": "PASS",
        "message": "node_facts reported no problem",
    }
    assert "node-problems" in CHECKS
    skipped = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, skip=["node-problems"])
    assert by(skipped, "node-problems", "spark-w1")["status"] == "SKIP"


def test_a_real_node_facts_problem_reaches_the_report(tmp_path: Any) -> None:
    """From node_facts itself: a weights cache that cannot be written (a non-root login) is in the report."""
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    gathered = gather(
        Options(sections=("memory", "weights"), weights_path=str(weights), weights_cache_dir=str(blocker / "cache")),
        lambda argv: CommandResult(1, "", "no tools here"),
    )
    assert gathered["problems"], gathered
    worker = {**node(1), "problems": gathered["problems"]}
    line = by(preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data), "node-problems", "spark-w1")
    assert line["status"] == "WARN" and "weights hash cache" in line["message"], line


# ----------------------------------------------------------------------------- a load over the startup wait
def guard_after_a_load(tmp_path: Any, samples: int) -> dict[str, Any]:
    """node_facts' memguard section after the real daemon's startup phase ran ``samples`` x 2 s at 8 GiB free
    (above the steady floor, under nothing) and the boot switched it to steady."""
    files = run_guard(tmp_path / "guard", [8 * GUARD_GIB] * samples, phase="startup", then="steady")
    (tmp_path / "proc" / str(files.pid)).mkdir(parents=True)
    return memguard_facts(
        HostFiles([]),
        str(files.state),
        str(files.trip),
        str(files.log),
        str(tmp_path / "proc"),
        lambda: WALL_START + 2 * samples,
    )


def test_a_load_over_the_startup_wait_is_a_warning_with_how_long_it_took(tmp_path: Any) -> None:
    """Seed 000's 120 s wait: a load that ran 187 s was judged as steady after 120 s, not stopped (a slow load
    is not killed for being slow), and the operator is told, naming the node and the load's time."""
    guard = guard_after_a_load(tmp_path, 94)  # 94 samples of 2 s: the boot's switch comes at 188 s
    assert guard["startup_overdue"] is True and guard["startup_seconds"] == 188.0 and guard["tripped"] is None
    worker = node(1)
    worker["memguard"] = guard
    result = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data)
    line = by(result, "guard-tripped", "spark-w1")
    assert line["status"] == "WARN" and not result["failed"], line
    assert line["message"] == (
        "not tripped (phase steady, 0 trip(s) recorded); the last load's startup phase ran 188.0 s, over "
        "host.startup_memguard_wait_seconds (120 s): the guard recorded it overdue and judged it by the steady "
        "floor and grace from then on (a slow load is not stopped for being slow); find out why it was slow (the "
        "weights' disk, helpers not paused, another process's memory)"
    )


def test_a_load_within_the_startup_wait_passes(tmp_path: Any) -> None:
    guard = guard_after_a_load(tmp_path, 40)
    assert guard["startup_overdue"] is False and guard["startup_seconds"] == 80.0
    worker = node(1)
    worker["memguard"] = guard
    line = by(preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data), "guard-tripped", "spark-w1")
    assert line == {"check": "guard-tripped", "host": "spark-w1", "status": "PASS", "message": PASSED}


def test_an_overdue_flag_from_an_older_guard_still_warns() -> None:
    worker = node(1)
    worker["memguard"] = {**NOT_TRIPPED, "startup_overdue": True}
    line = by(preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data), "guard-tripped", "spark-w1")
    assert line["status"] == "WARN"
    assert "the last load's startup phase ran over (how long is not recorded" in line["message"]


# ------------------------------------------------------------------ kv-fit and engram-nvme (seed 002's TP8-1M)
SPARK8_PROFILE = validate_profile(json.loads(SPARK8.read_text()))
SPARK8_HOSTS = ["spark-head", *(f"spark-w{i}" for i in range(1, 8))]
SPARK8_PLAN = build_plan(
    SPARK8_PROFILE, "tp8-1m", [HostSpec(h, i, i == 0, f"198.51.100.{10 + i}") for i, h in enumerate(SPARK8_HOSTS)]
)


def spark8_node(rank: int, weights_dir: pathlib.Path, disk_from: str = "/models") -> dict[str, Any]:
    """A GB10 node's facts with spark8's weights: disk as node_facts gathers it on the GB10 tree (the weights path
    and the plan's preflight disk_paths), the config.json under the weights as node_facts reads it."""
    facts = node(rank)
    gathered = gather(
        Options(
            sections=("disk",),
            proc_root=str(GB10 / "proc"),
            sys_root=str(GB10 / "sys"),
            weights_path=disk_from,
            disk_paths=tuple(SPARK8_PLAN["preflight"][SPARK8_HOSTS[rank]]["disk_paths"]),
        ),
        lambda argv: CommandResult(1, "", "no tools here"),
    )
    facts["disk"] = gathered["disk"]
    facts["weights"] = {"path": "/models", "model_configs": model_configs(str(weights_dir))[0]}
    return facts


def test_tp8_1m_fits_its_kv_cache_and_reads_engram_from_nvme(tmp_path: pathlib.Path) -> None:
    (tmp_path / "DeepSeek-V4.1-Flash").mkdir()
    shutil.copy(MODEL_CONFIGS / "deepseek-v4-flash-base" / "config.json", tmp_path / "DeepSeek-V4.1-Flash")
    nodes = {host: spark8_node(i, tmp_path) for i, host in enumerate(SPARK8_HOSTS)}
    result = preflight(nodes, SPARK8_PLAN, SPARK8_PROFILE.data)
    kv = [line for line in result["lines"] if line["check"] == "kv-fit"]
    assert [(line["host"], line["status"]) for line in kv] == [("spark-head", "PASS")]  # the head only
    assert "needs 3.70 GiB of the 30.00 GiB KV cache per rank" in kv[0]["message"]
    engram = [line for line in result["lines"] if line["check"] == "engram-nvme"]
    assert [line["host"] for line in engram] == SPARK8_HOSTS
    assert {line["status"] for line in engram} == {"PASS"}
    assert "kv-fit" in CHECKS and "engram-nvme" in CHECKS


def test_engram_on_the_heads_nfs_export_stops_the_boot_and_can_be_skipped(tmp_path: pathlib.Path) -> None:
    (tmp_path / "DeepSeek-V4.1-Flash").mkdir()
    shutil.copy(MODEL_CONFIGS / "deepseek-v4-flash-base" / "config.json", tmp_path / "DeepSeek-V4.1-Flash")
    nodes = {host: spark8_node(i, tmp_path) for i, host in enumerate(SPARK8_HOSTS)}
    # a worker whose /models is the head's NFS export (tonyd2wild's TP4 recipe mounts it so)
    nfs = copy.deepcopy(nodes["spark-w3"]["disk"]["mounts"]["/models/DeepSeek-V4.1-Flash"])
    nfs.update(kind="network", fstype="nfs", source="192.168.100.10:/models", mount_point="/models", disks=[])
    nodes["spark-w3"]["disk"]["mounts"]["/models/DeepSeek-V4.1-Flash"] = nfs
    result = preflight(nodes, SPARK8_PLAN, SPARK8_PROFILE.data)
    # (the GB10 tree's nodes hold another image and no /models: those checks fail too, as they should)
    engram = [line for line in result["failures"] if line["check"] in ("engram-nvme", "kv-fit")]
    assert [line["host"] for line in engram] == ["spark-w3"] and engram[0]["check"] == "engram-nvme"
    assert "seed 002 sections 1 and 5.2 ('Engram-rijen op lokale NVMe')" in engram[0]["message"]
    skipped = preflight(nodes, SPARK8_PLAN, SPARK8_PROFILE.data, skip=["engram-nvme"])
    assert not [line for line in skipped["failures"] if line["check"] == "engram-nvme"]
    assert by(skipped, "engram-nvme", "spark-w3")["message"].startswith("skipped on purpose (would be FAIL: ")


def test_a_window_job_that_runs_fails_the_preflight_and_one_that_ended_does_not() -> None:
    """playbooks/window.yml: inference and the window never overlap, whatever starts the ranks (boot, rollback,
    recover)."""
    job = {"name": "dgxspark-window-captions", "state": "running", "labels": {"dgxspark.cluster.window": "captions"}}
    ended = {**job, "name": "dgxspark-window-old", "state": "exited"}
    result = preflight(
        facts(**{"spark-w1": node(1, containers=[job]), "spark-w2": node(2, containers=[ended])}), PLAN, PROFILE.data
    )
    assert "window-job" in CHECKS
    failed = {(line["check"], line["host"]): line["message"] for line in result["failures"]}
    assert failed[("window-job", "spark-w1")].startswith(
        "window job dgxspark-window-captions runs here (playbooks/window.yml): inference and the window never overlap"
    )
    assert not [line for line in result["lines"] if line["check"] == "window-job" and line["host"] != "spark-w1"]


def test_an_interrupted_boots_head_rank_holding_its_ports_is_left_to_the_undo() -> None:
    """A head that stopped answering during its start left its journal, and its rank runs, holding the master and API
    ports. The undo of the interrupted boot stops it before the preflight runs again: neither the ports nor the
    previous container FAIL the first preflight (issue 25, the head lost during its start)."""
    head = head_with([listener(8000, 4242, "vllm", CONTAINER_ID), listener(29501, 4242, "vllm", CONTAINER_ID)], OWN)
    head["journal"] = {
        "open": True,
        "error": None,
        "entry": {"updated_at": "2026-12-07T11:50:14Z", "by": "ops@ctl", "helpers": [], "rank": "vllm_dsv41"},
    }
    result = preflight(facts(**{"spark-head": head}), PLAN, PROFILE.data)
    assert by(result, "port-free", "spark-head")["status"] == "PASS", result["report"]
    assert "the interrupted boot's undo stops first" in by(result, "port-free", "spark-head")["message"]
    assert by(result, "previous-container", "spark-head")["message"] == (
        "vllm_dsv41 is running: the interrupted boot's undo stops and removes it first"
    )
    assert result["interrupted"] == ["spark-head"] and not result["as_planned"]["spark-head"]
    # without the journal, the same ports held by a rank of another spec FAIL as before
    del head["journal"]
    head["docker"]["containers"][0]["labels"] = {SPEC: "other"}
    assert by(preflight(facts(**{"spark-head": head}), PLAN, PROFILE.data), "port-free", "spark-head")["status"] == (
        "FAIL"
    )


# ---------------------------------------------------------------- a trip's stop-all (issue 26)
UNACKNOWLEDGED = {
    "done": True,
    "ok": False,
    "acknowledged": ["spark-w2"],
    "not_acknowledged": [{"host": "spark-head", "error": "no acknowledgement within 2 s", "tries": 9}],
}


@pytest.mark.parametrize("clear_trip", [False, True])
def test_a_trip_whose_stop_all_was_not_acknowledged_fails_even_when_clearing(clear_trip: bool) -> None:
    """Finding: a stop-all could be dropped silently, its sender reporting ok. The trip now keeps which peers
    acknowledged: one that did not may still run its rank, so the preflight FAILs, naming it, and asking to
    clear the trip (boot_clear_trip) does not pass it."""
    guard = stored_guard()
    guard["tripped"]["stop_all"] = UNACKNOWLEDGED
    worker = node(1)
    worker["memguard"] = guard
    result = preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, clear_trip=clear_trip)
    line = by(result, "guard-tripped", "spark-w1")
    assert result["failed"] is True and line["status"] == "FAIL"
    assert line["message"].startswith(TRIP_TEXT)
    assert (
        "its stop-all was not acknowledged by every peer: spark-head (no acknowledgement within 2 s); their ranks "
        "may still run: stop them (playbooks/stop.yml), then clear this guard" in line["message"]
    )


@pytest.mark.parametrize(
    "stop_all,status",
    [
        ({"done": True, "ok": True, "acknowledged": ["spark-head", "spark-w2"], "not_acknowledged": []}, "WARN"),
        (None, "WARN"),  # a peer's trip, or a guard of an older version: nothing to acknowledge
        ({**UNACKNOWLEDGED, "done": False, "ok": False}, "FAIL"),  # the guard stopped before its deadline
    ],
)
def test_a_stop_all_acknowledged_everywhere_can_be_cleared(stop_all: Any, status: str) -> None:
    guard = stored_guard()
    guard["tripped"]["stop_all"] = stop_all
    worker = node(1)
    worker["memguard"] = guard
    line = by(
        preflight(facts(**{"spark-w1": worker}), PLAN, PROFILE.data, clear_trip=True), "guard-tripped", "spark-w1"
    )
    assert line["status"] == status
    if status == "FAIL":
        assert "(the guard stopped before its deadline)" in line["message"]
