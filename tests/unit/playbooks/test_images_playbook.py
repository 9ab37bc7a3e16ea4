# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/images.yml run for real on three stand-in nodes: --check says what would move and moves nothing, a run
streams the release's image from the head to the one node that lacks it and checks its ID there, a second run changes
nothing, and a head that lacks the image itself is refused before anything moves.

Each node is reached through a stand-in ``ssh`` (the inventory's ansible_ssh_executable, used by Ansible's own ssh
connection and by the stream alike) that runs the command here as that node: its Docker engine is a look-alike on a
Unix socket of its own (what node_facts asks), and its ``docker`` command a stand-in working on the same images (what
the stream runs), so that what docker load adds is what the next node_facts sees."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import pathlib
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import yaml

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

BIN = pathlib.Path(sys.executable).parent
IMAGE = "sha256:" + "1" * 64
OTHER = "sha256:" + "2" * 64
TAG = "vllm/vllm-openai:v1"
NODES = {"spark-head": "head", "spark-w1": "w1", "spark-w2": "w2"}  # inventory name: the stand-in's address

FAKE_SSH = """#!/bin/bash
host="${@: -2:1}"; cmd="${@: -1}"
printf '%s\\n' "$*" >> "$FAKE_STATE/ssh.log"
export FAKE_HOST="$host" DOCKER_HOST="unix://$FAKE_STATE/$host/docker.sock" PATH="$FAKE_STATE:$PATH"
exec /bin/sh -c "$cmd"
"""
FAKE_DOCKER = """#!PYTHON
import json, os, sys
path = os.path.join(os.environ["FAKE_STATE"], os.environ["FAKE_HOST"], "images.json")
with open(path) as handle:
    images = json.load(handle)
def find(name):
    return next((i for i in images if i["Id"] == name or name in i["RepoTags"]), None)
args = sys.argv[1:]
if args[0] == "save":
    found = [find(n) for n in args[1:]]
    if None in found:
        sys.exit(f"Error response from daemon: No such image: {args[1 + found.index(None)]}")
    image = found[0]
    head = {"id": image["Id"], "tags": [n for n in args[1:] if not n.startswith("sha256:")], "size": image["Size"]}
    out = sys.stdout.buffer
    out.write(json.dumps(head).encode() + b"\\n")
    left = image["Size"]
    while left:
        out.write(b"\\0" * min(left, 65536))
        left -= min(left, 65536)
elif args[0] == "load":
    source = sys.stdin.buffer
    head = json.loads(source.readline())
    got = sum(len(b) for b in iter(lambda: source.read(65536), b""))
    if got != head["size"]:
        sys.exit(f"unexpected EOF after {got} bytes")
    for image in images:
        image["RepoTags"] = [t for t in image["RepoTags"] if t not in head["tags"]]
    images = [i for i in images if i["Id"] != head["id"]]
    images.append({"Id": head["id"], "RepoTags": head["tags"], "RepoDigests": [], "Size": head["size"]})
    with open(path, "w") as handle:
        json.dump(images, handle)
    for tag in head["tags"]:
        print(f"Loaded image: {tag}")
elif args[:2] == ["image", "inspect"]:
    image = find(args[-1])
    if image is None:
        sys.exit(f"Error: No such image: {args[-1]}")
    print(image["Id"])
"""


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    images_file: pathlib.Path


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Engine

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/version":
            body: Any = {"Version": "27.5.1", "ApiVersion": "1.47", "Os": "linux", "Arch": "arm64"}
        elif self.path.startswith("/containers/json"):
            body = []
        elif self.path.startswith("/images/json"):
            body = json.loads(self.server.images_file.read_text())
        else:
            body = {"message": "page not found"}
        data = json.dumps(body).encode()
        self.send_response(200 if not isinstance(body, dict) or "message" not in body else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass


@contextlib.contextmanager
def cluster(images: dict[str, list[str]]) -> Iterator[pathlib.Path]:
    """Three stand-in nodes (a short directory: a socket path must fit in 108 bytes); ``images``: each node's image
    IDs (IMAGE is tagged TAG)."""
    state = pathlib.Path(tempfile.mkdtemp(prefix="img-"))
    servers = []
    try:
        for address in NODES.values():
            (state / address).mkdir()
            listed = [
                {"Id": i, "RepoTags": [TAG] if i == IMAGE else [], "RepoDigests": [], "Size": 3 * 2**20}
                for i in images.get(address, [])
            ]
            (state / address / "images.json").write_text(json.dumps(listed))
            server = _Engine(str(state / address / "docker.sock"), _Handler)
            server.images_file = state / address / "images.json"
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            servers.append(server)
        for name, text in (("ssh", FAKE_SSH), ("docker", FAKE_DOCKER.replace("PYTHON", sys.executable))):
            (state / name).write_text(text)
            (state / name).chmod(0o755)
        releases = state / "releases"
        created = "2026-12-01T15:53:00Z"
        record = {
            "schema_version": _releases.SCHEMA_VERSION,
            "id": _releases.release_id(created, "3c9f0a1b2d4e" + "0" * 52),
            "state": "promoted",
            "created": created,
            "by": "test",
            "profile": {"path": str(SPARK3), "sha256": "3c9f0a1b2d4e" + "0" * 52, "text": "{}"},
            "shape": "tp3-triangle",
            "spec_sha256": dict.fromkeys(NODES, "0" * 64),
            "images": dict.fromkeys(NODES, IMAGE),
            "image": TAG,
            "history": [{"event": "promoted", "at": created, "by": "test"}],
        }
        _releases.write(str(releases), record, exclusive=True)
        yield state
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        shutil.rmtree(state, ignore_errors=True)


def inventory(state: pathlib.Path) -> str:
    hosts = yaml.safe_load((ROOT / "inventories/spark3/hosts.yml").read_text())
    for group in hosts["dgxspark"]["children"].values():
        for name, host_vars in group["hosts"].items():
            host_vars["ansible_host"] = NODES[name]
    hosts["dgxspark"]["vars"] = {
        "dgxspark_profile": str(SPARK3),
        "ansible_connection": "ssh",
        "ansible_ssh_executable": str(state / "ssh"),
        "ansible_python_interpreter": sys.executable,
        "ansible_user": "nvidia",
        # no sudo on this machine: a login that needs none (the tasks' become: true yields to the inventory's)
        "ansible_become": False,
        # templated, as the sim inventories' key is: the stream's ssh gets the path Ansible's own ssh gets
        "ansible_ssh_private_key_file": "{{ inventory_dir }}/id_ed25519",
    }
    path = state / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def run(state: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(BIN / "ansible-playbook"), "playbooks/images.yml", "-i", inventory(state),
        "-e", f"boot_releases_dir={state / 'releases'}", "-e", "images_progress_every=0", *extra,
    ]  # fmt: skip
    env = dict(
        os.environ,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
        FAKE_STATE=str(state),
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(state / "cp"),
    )
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


def ids(state: pathlib.Path, address: str) -> list[str]:
    return [i["Id"] for i in json.loads((state / address / "images.json").read_text())]


def changed(out: str) -> dict[str, int]:
    return {host: int(n) for host, n in re.findall(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", out, re.M)}


def test_check_then_stream_to_the_node_that_lacks_it_then_nothing() -> None:
    with cluster({"head": [IMAGE, OTHER], "w1": [IMAGE], "w2": [OTHER]}) as state:
        dry = run(state, "--check")
        flat = " ".join(dry.stdout.split())
        assert dry.returncode == 0, dry.stdout[-4000:] + dry.stderr[-2000:]
        assert f"spark-w2: lacks {IMAGE[:19]}: streams {TAG} from spark-head (3.0 MiB), then checks the ID" in flat
        assert "spark-w1: has" in flat and "would stream" in flat, flat[-3000:]
        assert ids(state, "w2") == [OTHER]  # nothing moved
        put = run(state)
        flat = " ".join(put.stdout.split())
        assert put.returncode == 0, put.stdout[-4000:] + put.stderr[-2000:]
        assert f"spark-w2: streamed {IMAGE[:19]} from spark-head, 3.0 MiB in" in flat and "the ID checked" in flat
        assert changed(put.stdout) == {"spark-head": 0, "spark-w1": 0, "spark-w2": 1}, put.stdout[-2000:]
        assert sorted(ids(state, "w2")) == sorted([OTHER, IMAGE])
        log = (state / "ssh.log").read_text()
        # the stream's ssh: the inventory's user and its templated key, the command last
        assert re.search(rf"-i {re.escape(str(state))}/id_ed25519 -o IdentitiesOnly=yes -l nvidia -- head sh -c", log)
        assert "-- w2 sh -c 'exec docker load'" in log
        again = run(state)
        flat = " ".join(again.stdout.split())
        assert again.returncode == 0, again.stdout[-4000:]
        assert "every node has it (3), nothing moves" in flat
        assert set(changed(again.stdout).values()) == {0}, again.stdout[-2000:]


def test_a_head_that_lacks_it_is_refused_before_anything_moves() -> None:
    with cluster({"head": [OTHER], "w1": [IMAGE], "w2": [OTHER]}) as state:
        refused = run(state)
        flat = " ".join(refused.stdout.split())
        assert refused.returncode != 0
        assert "images.yml: nothing was moved: the head spark-head lacks release" in flat, flat[-3000:]
        assert ids(state, "w2") == [OTHER]
        assert "docker" not in (state / "ssh.log").read_text().replace("docker.sock", "")


def test_the_current_profiles_image() -> None:
    """spark3's profile names its image by tag: the ID is the head's image of that tag."""
    profile = json.loads(SPARK3.read_text())
    tag = profile["container"]["image"]
    with cluster({"head": [IMAGE], "w1": [IMAGE], "w2": []}) as state:
        for address in ("head", "w1"):
            listed = json.loads((state / address / "images.json").read_text())
            listed[0]["RepoTags"] = [tag]
            (state / address / "images.json").write_text(json.dumps(listed))
        put = run(state, "-e", "images_profile=true", "--check")
        flat = " ".join(put.stdout.split())
        assert put.returncode == 0, put.stdout[-4000:] + put.stderr[-2000:]
        assert f"image {tag}: 1 of 3 node(s) lack it (spark-w2)" in flat, flat[-3000:]  # YAML doubles the quote
        assert "spark-w2: would stream" in flat and ids(state, "w2") == []
