# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The image_stream action, end to end on this machine: the inventory's ssh settings resolved as Ansible's ssh
connection plugin resolves them, two real processes with the bytes pumped between them, the IDs checked on arrival.
The ssh executable is a stand-in (ansible_ssh_executable) that records its arguments and runs the remote command
with sh as if on the host it was given; docker is a stand-in that keeps each host's images in a file."""

from __future__ import annotations

import os
import pathlib
from typing import Any
from unittest.mock import MagicMock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.dgxspark.cluster.plugins.action import image_stream

IMAGE = "sha256:" + "e" * 64
OTHER = "sha256:" + "f" * 64
TAG = "dgxspark-sim/engine:latest"

FAKE_SSH = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_STATE/ssh.log"
while [ "$1" != "--" ]; do shift; done
shift; FAKE_HOST=$1; shift
export FAKE_HOST
exec sh -c "$1"
"""
# Each host's images in $FAKE_STATE/<host>/images, a line "NAME ID" (the ID names itself too).
FAKE_DOCKER = """#!/bin/sh
dir="$FAKE_STATE/$FAKE_HOST"; mkdir -p "$dir"; touch "$dir/images"
case "$1" in
save)
  shift
  for n in "$@"; do
    grep -q "^$n " "$dir/images" || { echo "Error response from daemon: No such image: $n" >&2; exit 1; }
  done
  id=$(grep "^$1 " "$dir/images" | tail -1 | cut -d' ' -f2)
  printf 'FAKE %s %s\\n' "$id" "$*"
  i=0
  while [ $i -lt "${FAKE_PIECES:-3}" ]; do
    head -c 1048576 /dev/zero; sleep "${FAKE_SAVE_SLEEP:-0.1}"; i=$((i+1))
  done ;;
load)
  read -r magic id names
  cat > "$dir/received"
  [ -n "$FAKE_LOAD_FAIL" ] && { echo "Error processing tar file(exit status 1): unexpected EOF" >&2; exit 1; }
  id=${FAKE_LOAD_ID:-$id}
  echo "$id $id" >> "$dir/images"
  for n in $names; do [ "$n" = "$id" ] || { echo "$n $id" >> "$dir/images"; echo "Loaded image: $n"; }; done
  [ "$names" = "$id" ] && echo "Loaded image ID: $id"
  exit 0 ;;
pull)
  echo "$3 ${FAKE_PULL_ID}" >> "$dir/images"; echo "${FAKE_PULL_ID} ${FAKE_PULL_ID}" >> "$dir/images"
  echo "${FAKE_PULL_ID}" ;;
image)
  line=$(grep "^$5 " "$dir/images" | tail -1)
  [ -n "$line" ] || { echo "Error: No such image: $5" >&2; exit 1; }
  echo "${line#* }" ;;
esac
"""


@pytest.fixture
def fake(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    for name, text in (("ssh", FAKE_SSH), ("docker", FAKE_DOCKER)):
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o755)
    state = tmp_path / "state"
    (state / "172.31.3.10").mkdir(parents=True)
    (state / "172.31.3.10" / "images").write_text(f"{TAG} {IMAGE}\n{IMAGE} {IMAGE}\n")
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.setattr(image_stream, "display", MagicMock())  # the progress lines, as the controller prints them
    return tmp_path


def hostvars(fake: pathlib.Path, **extra: Any) -> dict[str, dict[str, Any]]:
    common = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": "/keys/sim3/id_ed25519",
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        "ansible_ssh_executable": str(fake / "ssh"),
        **extra,
    }
    return {
        "sim3-head": {"ansible_host": "172.31.3.10", **common},
        "sim3-worker2": {"ansible_host": "172.31.3.12", "ansible_port": 2222, **common},
    }


def run(fake: pathlib.Path, args: dict[str, Any], check_mode: bool = False, **extra: Any) -> tuple[dict, MagicMock]:
    task = MagicMock(Task)
    task.args = {"docker": str(fake / "docker"), **args}
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    loader = DataLoader()
    action = image_stream.ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=PlayContext(),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    shown = image_stream.display
    task_vars = {"inventory_hostname": "sim3-worker2", "hostvars": hostvars(fake, **extra)}
    return action.run(task_vars=task_vars), shown


def images_on(fake: pathlib.Path, address: str) -> str:
    path = fake / "state" / address / "images"
    return path.read_text() if path.exists() else ""


def ssh_log(fake: pathlib.Path) -> list[str]:
    path = fake / "state" / "ssh.log"
    return path.read_text().splitlines() if path.exists() else []


STREAM = {"source": "sim3-head", "image_id": IMAGE, "names": [TAG], "size": 3 * 2**20, "progress_every": 0.1}


def test_streams_from_the_head_with_progress_and_checks_the_id(fake: pathlib.Path) -> None:
    result, shown = run(fake, STREAM)
    assert not result.get("failed"), result
    assert result["changed"] and result["moved_bytes"] > 3 * 2**20 and result["loaded"] == [f"Loaded image: {TAG}"]
    assert f"{TAG} {IMAGE}" in images_on(fake, "172.31.3.12")
    assert (fake / "state" / "172.31.3.12" / "received").stat().st_size == 3 * 2**20
    assert result["msg"].startswith(f"sim3-worker2: streamed {IMAGE[:19]} from sim3-head, 3.0 MiB in ")
    lines = [call.args[0] for call in shown.display.call_args_list]
    assert result["progress"] and lines[: len(result["progress"])] == result["progress"]
    assert lines[0].startswith("sim3-worker2: sim3-head -> sim3-worker2: ") and "of 3.0 MiB" in lines[0]
    assert lines[-1].startswith("sim3-worker2: sim3-head -> sim3-worker2 done: 3.0 MiB in ")
    # the save and the load start together: the log has them in either order, the check after both
    *stream, check = ssh_log(fake)
    [save] = [line for line in stream if "docker save" in line]
    [load] = [line for line in stream if "docker load" in line]
    # every ssh the inventory's way: its user, key, port, common args; BatchMode; the command last
    assert "-l root" in save and "-i /keys/sim3/id_ed25519" in save and "UserKnownHostsFile=/dev/null" in save
    assert save.endswith(f"-- 172.31.3.10 sh -c 'exec {fake}/docker save {TAG}'")
    assert "-p 2222" in load and load.endswith(f"-- 172.31.3.12 sh -c 'exec {fake}/docker load'")
    assert "BatchMode=yes" in check and "image inspect" in check


def test_an_untagged_image_by_its_id(fake: pathlib.Path) -> None:
    result, _shown = run(fake, {**STREAM, "names": []})
    assert not result.get("failed"), result
    assert result["loaded"] == [f"Loaded image ID: {IMAGE}"]


def test_check_mode_moves_nothing(fake: pathlib.Path) -> None:
    result, _shown = run(fake, STREAM, check_mode=True)
    assert result["changed"] and "would stream dgxspark-sim/engine:latest from sim3-head" in result["msg"]
    assert ssh_log(fake) == [] and images_on(fake, "172.31.3.12") == ""


def test_another_id_on_arrival_fails_naming_node_and_ids(fake: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LOAD_ID", OTHER)
    result, _shown = run(fake, STREAM)
    assert result["failed"]
    assert result["msg"].startswith(f"sim3-worker2: after the load, the image there is not the one wanted, {IMAGE}: ")
    assert f"{IMAGE} is missing" in result["msg"] and f"{TAG} is {OTHER}" in result["msg"]


def test_a_failed_load_is_named(fake: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LOAD_FAIL", "1")
    result, _shown = run(fake, STREAM)
    assert result["failed"] and result["msg"].startswith("sim3-worker2: docker load on sim3-worker2 failed (exit 1)")
    assert "unexpected EOF" in result["msg"]


def test_the_head_lacking_the_name_fails_the_save(fake: pathlib.Path) -> None:
    result, _shown = run(fake, {**STREAM, "names": ["gone:1"]})
    assert result["failed"] and result["msg"].startswith("sim3-worker2: docker save on sim3-head failed (exit 1)")
    assert "No such image: gone:1" in result["msg"] and result["changed"] is False


def test_a_stalled_stream_times_out(fake: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SAVE_SLEEP", "30")
    monkeypatch.setenv("FAKE_PIECES", "2")
    result, _shown = run(fake, {**STREAM, "idle_timeout": 1})
    assert result["failed"]
    assert result["msg"].startswith(
        "sim3-worker2: the stream from sim3-head stopped, no byte moved for 1 s, after 1.0 MiB"
    )


def test_pull_only_when_asked(fake: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PULL_ID", IMAGE)
    result, _shown = run(fake, {"image_id": IMAGE, "pull": TAG})
    assert not result.get("failed"), result
    assert result["pulled"] == TAG and result["msg"] == f"sim3-worker2: pulled {IMAGE[:19]}, the ID checked"
    assert len(ssh_log(fake)) == 2 and "docker pull --quiet" in ssh_log(fake)[0]
    monkeypatch.setenv("FAKE_PULL_ID", OTHER)
    (fake / "state" / "172.31.3.12" / "images").unlink()
    wrong, _shown = run(fake, {"image_id": IMAGE, "pull": TAG})
    assert wrong["failed"] and f"{TAG} is {OTHER}" in wrong["msg"]


def test_what_cannot_stream_is_refused(fake: pathlib.Path) -> None:
    result, _shown = run(fake, STREAM, ansible_become=True, ansible_become_password="secret")
    assert result["failed"] and "become with a password" in result["msg"] and ssh_log(fake) == []
    result, _shown = run(fake, STREAM, ansible_password="secret")
    assert result["failed"] and "key authentication only" in result["msg"]
    result, _shown = run(fake, {"image_id": IMAGE})
    assert result["failed"] and "give source" in result["msg"]


def test_become_runs_the_docker_commands_under_sudo(fake: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sudo = fake / "sudo"
    # a stand-in sudo on the remote side: drops its own options and runs the command
    sudo.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n')
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    result, _shown = run(fake, STREAM, ansible_become=True)
    assert not result.get("failed"), result
    assert all("sudo -n -H -u root -- sh -c" in line for line in ssh_log(fake))


def test_a_node_that_stops_answering_before_the_check(fake: pathlib.Path) -> None:
    """The load went through, then the check's ssh fails (exit 255, nothing printed): said as such, not as a wrong
    image."""
    ssh = fake / "ssh"
    ssh.write_text(
        FAKE_SSH.replace(
            'exec sh -c "$1"', 'case "$1" in *inspect*) echo "Connection reset" >&2; exit 255;; esac\nexec sh -c "$1"'
        )
    )
    result, _shown = run(fake, STREAM)
    assert result["failed"] and result["changed"]
    assert (
        result["msg"] == f"sim3-worker2: could not ask it what {IMAGE} is after the load (exit 255): Connection reset"
    )
