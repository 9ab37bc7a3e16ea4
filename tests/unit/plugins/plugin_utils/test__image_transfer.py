# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""images.yml's plan (which nodes lack which image ID, and how each gets it, worked out on the controller before
anything moves), the ssh command a stream runs, the check of the IDs on arrival, and the stream itself with local
stand-in commands for the two ssh processes."""

from __future__ import annotations

import copy
import shlex
import subprocess
import sys
import time
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release import images as transfer

OLD = "sha256:" + "a" * 64
NEW = "sha256:" + "b" * 64
OTHER = "sha256:" + "c" * 64
RELEASE = "r20261201T155300Z-3c9f0a1b2d4e"
NEWER = "r20261202T101500Z-9d8e7f6a5b4c"
HOSTS = ["head", "w1", "w2"]


def image(ident: str, *tags: str, size: int = 3 * 2**30, digests: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": ident, "tags": list(tags), "digests": list(digests), "size": size}


def summary(ident: str, state: str, image_id: str, name: str = "vllm/vllm-openai:v1") -> dict[str, Any]:
    return {"id": ident, "state": state, "image": name, "images": dict.fromkeys(HOSTS, image_id)}


def facts(**images: list[dict[str, Any]]) -> dict[str, Any]:
    """Every host's node_facts; the head's with two releases (NEWER promoted on NEW, RELEASE retired on OLD)."""
    out = {h: {"docker": {"present": True, "error": None, "images": images.get(h, [])}} for h in HOSTS}
    out["head"]["releases"] = {
        "releases": [summary(RELEASE, "retired", OLD, "vllm/vllm-openai:v0"), summary(NEWER, "promoted", NEW)],
        "promoted": NEWER,
        "previous": RELEASE,
    }
    return out


EVERYWHERE = {h: [image(NEW, "vllm/vllm-openai:v1"), image(OLD, "vllm/vllm-openai:v0")] for h in HOSTS}


def test_every_node_has_it_nothing_moves() -> None:
    planned = transfer.plan(facts(**EVERYWHERE), "head", HOSTS)
    assert planned["refusal"] == "" and planned["moves"] == [] and planned["present"] == HOSTS
    assert planned["release"] == NEWER and "every node has it (3), nothing moves" in planned["summary"]


def test_the_promoted_release_by_default_a_named_one_when_asked() -> None:
    lacking = copy.deepcopy(EVERYWHERE)
    lacking["w2"] = [image(NEW, "vllm/vllm-openai:v1")]  # the retired release's image is gone from w2
    assert transfer.plan(facts(**lacking), "head", HOSTS)["moves"] == []
    planned = transfer.plan(facts(**lacking), "head", HOSTS, release=RELEASE)
    assert planned["lacking"] == ["w2"] and planned["present"] == ["head", "w1"]
    assert planned["moves"] == [{"host": "w2", "image_id": OLD, "names": ["vllm/vllm-openai:v0"], "size": 3 * 2**30}]
    assert (
        planned["lines"][2]
        == f"w2: lacks {OLD[:19]}: streams vllm/vllm-openai:v0 from head (3.0 GiB), then checks the ID"
    )
    assert planned["summary"].endswith("1 of 3 node(s) lack it (w2)")


def test_an_untagged_image_goes_by_its_id_and_a_moved_tag_warns() -> None:
    lacking = copy.deepcopy(EVERYWHERE)
    lacking["head"] = [image(NEW, "vllm/vllm-openai:v1"), image(OLD)]  # v0 was retagged away; OLD is untagged
    lacking["w1"] = lacking["w2"] = [image(NEW, "vllm/vllm-openai:v1")]
    planned = transfer.plan(facts(**lacking), "head", HOSTS, release=RELEASE)
    assert [m["names"] for m in planned["moves"]] == [[OLD], [OLD]]
    assert any("vllm/vllm-openai:v0 no longer names image" in w for w in planned["warnings"])


def test_the_head_itself_lacking_it_is_refused() -> None:
    lacking = copy.deepcopy(EVERYWHERE)
    lacking["head"] = lacking["w2"] = [image(NEW, "vllm/vllm-openai:v1")]
    planned = transfer.plan(facts(**lacking), "head", HOSTS, release=RELEASE)
    assert planned["moves"] == [] or planned["refusal"]
    assert planned["refusal"].startswith("images.yml: nothing was moved: the head head lacks release")
    assert OLD in planned["refusal"] and "images_pull=true" in planned["refusal"]


def test_refusals_before_anything_moves() -> None:
    known = facts(**EVERYWHERE)
    assert (
        "no release r2099" in transfer.plan(known, "head", HOSTS, release="r20990101T000000Z-000000000000")["refusal"]
    )
    broken = copy.deepcopy(known)
    broken["w1"]["docker"] = {"present": False, "error": "permission denied on /var/run/docker.sock", "images": []}
    refusal = transfer.plan(broken, "head", HOSTS)["refusal"]
    assert "cannot tell which nodes lack the image: w1: its Docker engine could not be asked" in refusal
    missing = copy.deepcopy(known)
    del missing["w2"]
    assert "w2: its facts were not read" in transfer.plan(missing, "head", HOSTS)["refusal"]
    none = copy.deepcopy(known)
    none["head"]["releases"] = {"releases": [], "promoted": None}
    assert "no promoted release on the head" in transfer.plan(none, "head", HOSTS)["refusal"]
    unread = copy.deepcopy(known)
    del unread["head"]["releases"]
    assert "releases were not read" in transfer.plan(unread, "head", HOSTS)["refusal"]


def test_pull_only_when_asked_and_never_by_id() -> None:
    lacking = copy.deepcopy(EVERYWHERE)
    lacking["w1"] = [image(OLD, "vllm/vllm-openai:v0")]
    planned = transfer.plan(facts(**lacking), "head", HOSTS, pull=True)
    assert planned["mode"] == "pull"
    assert planned["moves"] == [{"host": "w1", "image_id": NEW, "pull": "vllm/vllm-openai:v1", "size": None}]
    by_id = facts(**lacking)
    for release in by_id["head"]["releases"]["releases"]:
        release["image"] = NEW
    assert "a registry cannot be asked for an ID" in transfer.plan(by_id, "head", HOSTS, pull=True)["refusal"]


def test_the_current_profiles_image_by_tag_digest_or_id() -> None:
    digest = "sha256:" + "d" * 64
    lacking = {
        "head": [image(NEW, "vllm/vllm-openai:v1", digests=(f"vllm/vllm-openai@{digest}",))],
        "w1": [image(NEW, "vllm/vllm-openai:v1")],
        "w2": [image(OLD, "vllm/vllm-openai:v1")],  # the tag, but another build
    }
    planned = transfer.plan(facts(**lacking), "head", HOSTS, profile_images=dict.fromkeys(HOSTS, "vllm/vllm-openai:v1"))
    assert planned["release"] is None and [m["host"] for m in planned["moves"]] == ["w2"]
    assert planned["moves"][0]["image_id"] == NEW
    by_digest = transfer.plan(
        facts(**lacking), "head", HOSTS, profile_images=dict.fromkeys(HOSTS, f"vllm/vllm-openai@{digest}")
    )
    assert any("carry no repository digest" in w for w in by_digest["warnings"])
    absent = transfer.plan(facts(**lacking), "head", HOSTS, profile_images=dict.fromkeys(HOSTS, OTHER))
    assert f"the head head lacks the profile's image {OTHER} itself" in absent["refusal"]


def test_ssh_command_from_the_connection_options() -> None:
    options = {
        "host": "172.31.3.12",
        "port": 2222,
        "remote_user": "root",
        "private_key_file": "/keys/id_ed25519",
        "ssh_args": "-o ControlMaster=auto -o ControlPersist=600s",
        "ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        "ssh_extra_args": "",
        "ssh_executable": "ssh",
        "host_key_checking": False,
        "timeout": 30,
    }
    argv = transfer.ssh_command(options, "docker load")
    assert argv[0] == "ssh" and argv[-3:] == ["--", "172.31.3.12", "docker load"]
    joined = " ".join(argv)
    for part in (
        "-p 2222",
        "-i /keys/id_ed25519",
        "-l root",
        "UserKnownHostsFile=/dev/null",
        "BatchMode=yes",
        "ConnectTimeout=30",
        "ControlPersist=600s",
    ):
        assert part in joined, part
    assert transfer.ssh_command({"connection": "local"}, "true") == ["sh", "-c", "true"]
    with pytest.raises(transfer.TransferError, match="password"):
        transfer.ssh_command({**options, "password": "x"}, "true")
    with pytest.raises(transfer.TransferError, match="not ssh"):
        transfer.ssh_command({**options, "connection": "community.docker.docker"}, "true")


def test_remote_scripts_quote_and_become() -> None:
    assert transfer.remote_script("docker load") == "sh -c 'docker load'"
    sudo = transfer.remote_script("docker load", {"enabled": True, "user": "root"})
    assert sudo == "sudo -n -H -u root -- sh -c 'docker load'"
    assert transfer.save_script(["a:b", "it's"]) == "exec docker save a:b 'it'\"'\"'s'"


def test_verify_names_every_name_that_is_not_the_id(tmp_path) -> None:
    docker = tmp_path / "docker"
    docker.write_text(
        f'#!/bin/sh\n[ "$5" = good:1 ] && echo {NEW} && exit 0\n[ "$5" = {NEW} ] && echo {NEW} && exit 0\n'
        f"[ \"$5\" = moved:1 ] && echo {OTHER} && exit 0\necho 'No such image' >&2; exit 1\n"
    )
    docker.chmod(0o755)
    names = [NEW, "good:1", "moved:1", "gone:1"]
    out = subprocess.run(
        ["sh", "-c", transfer.verify_script(names, str(docker))], capture_output=True, text=True, check=True
    ).stdout
    assert transfer.verify(out, names, NEW) == [f"moved:1 is {OTHER}", "gone:1 is missing"]
    assert transfer.verify(out, [NEW, "good:1"], NEW) == []


# ------------------------------------------------------------------------------------------------ the stream
def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def test_stream_pumps_every_byte_with_progress(tmp_path) -> None:
    out = tmp_path / "loaded"
    lines: list[str] = []
    # 6 MiB in 3 pieces a little apart: progress lines come while bytes move
    source = sh("for i in 1 2 3; do head -c 2097152 /dev/zero; sleep 0.3; done")
    sink = sh(f"cat > {shlex.quote(str(out))}; echo 'Loaded image: x:1'")
    moved = transfer.stream(
        source,
        sink,
        timeout=30,
        idle_timeout=10,
        label="w2",
        size=6 * 2**20,
        every=0.25,
        report=lines.append,
        chunk=65536,
    )
    assert moved.ok, moved
    assert moved.moved == out.stat().st_size == 6 * 2**20
    assert moved.sink_output == "Loaded image: x:1"
    assert lines and lines == moved.progress and lines[0].startswith("w2: ") and "of 6.0 MiB (" in lines[0]
    assert "/s" in lines[-1]


def test_a_slow_sink_slows_the_source(tmp_path) -> None:
    """The pump reads a chunk and writes it before the next: a slow sink slows the source (the pipe's back
    pressure), nothing piles up in the controller."""
    source = sh("head -c 8388608 /dev/zero")
    sink = sh('while [ "$(head -c 65536 | wc -c)" -gt 0 ]; do sleep 0.01; done')
    moved = transfer.stream(source, sink, timeout=30, idle_timeout=10, every=0, chunk=65536)
    assert moved.ok and moved.moved == 8 * 2**20


def test_a_failing_source_is_named(tmp_path) -> None:
    moved = transfer.stream(
        sh("echo 'Error response from daemon: reference does not exist' >&2; exit 1"),
        sh("cat > /dev/null; echo 'requested load from stdin, but stdin is empty' >&2; exit 1"),
        timeout=10,
        idle_timeout=5,
        every=0,
    )
    assert not moved.ok and moved.source_rc == 1 and moved.moved == 0
    assert "reference does not exist" in moved.source_error


def test_a_sink_that_dies_stops_the_source() -> None:
    started = time.monotonic()
    moved = transfer.stream(
        sh("while :; do head -c 1048576 /dev/zero; done"),
        sh("head -c 100000 > /dev/null; echo 'unexpected EOF' >&2; exit 1"),
        timeout=30,
        idle_timeout=10,
        every=0,
    )
    assert not moved.ok and moved.sink_rc == 1 and "unexpected EOF" in moved.sink_error
    assert moved.source_rc != 0 and time.monotonic() - started < 15


def test_idle_and_overall_timeouts_stop_both_ends() -> None:
    started = time.monotonic()
    idle = transfer.stream(
        sh("head -c 1000 /dev/zero; sleep 60"), sh("cat > /dev/null"), timeout=30, idle_timeout=1, every=0
    )
    assert idle.stopped == "no byte moved for 1 s" and idle.moved == 1000 and not idle.ok
    overall = transfer.stream(
        sh("while :; do head -c 1000 /dev/zero; sleep 0.1; done"),
        sh("cat > /dev/null"),
        timeout=1.5,
        idle_timeout=10,
        every=0,
    )
    assert overall.stopped == "timed out after 2 s" and overall.moved > 0
    assert time.monotonic() - started < 20
    assert overall.sink_rc is not None and overall.source_rc is not None  # neither is left running


def test_a_command_that_cannot_start() -> None:
    moved = transfer.stream(["/nonexistent/ssh"], sh("cat"), timeout=5, idle_timeout=5)
    assert moved.stopped.startswith("the source could not be started") and not moved.ok
    moved = transfer.stream([sys.executable, "-c", "print(1)"], ["/nonexistent/ssh"], timeout=5, idle_timeout=5)
    assert moved.stopped.startswith("the sink could not be started")
