# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's transfer (issue 30), end to end on this machine: the real file server and the real puller,
each a python3 process started as the controller starts them (the node code on its input), over loopback; real files
in tmp_path; the node's manifest cache read back with the manifest's own reader."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _weights_manifest as manifest
from ansible_collections.dgxspark.cluster.plugins.module_utils import _weights_transfer as node
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.weights import transfer

MIB = 1024 * 1024


def _write(root: Path, name: str, data: bytes) -> dict[str, Any]:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path / "source" / "model"
    files = [
        _write(root, "config.json", b'{"model_type": "x"}'),
        _write(root, "model-00001-of-00002.safetensors", os.urandom(3 * MIB + 17)),
        _write(root, "sub/model-00002-of-00002.safetensors", os.urandom(2 * MIB)),
    ]
    return root, files


def _argv(kind: str) -> list[str]:
    return ["sh", "-c", transfer.node_command(kind, sys.executable)]


def _sync(src: Path, dest: Path, files: list[dict[str, Any]], cache: Path, **kw: Any) -> transfer.Outcome:
    secret = transfer.token()
    lines: list[str] = []
    out = transfer.sync(
        _argv("serve"),
        _argv("pull"),
        {"root": str(src), "names": [f["name"] for f in files], "address": "127.0.0.1", "token": secret},
        {"root": str(dest), "files": files, "address": "127.0.0.1", "cache_dir": str(cache), **kw.pop("pull", {})},
        target="worker1",
        source="head",
        total=sum(f["size"] for f in files),
        report=lines.append,
        **kw,
    )
    out.progress = lines
    return out


def test_files_arrive_checked_and_remembered(tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]) -> None:
    src, files = source
    dest, cache = tmp_path / "target" / "model", tmp_path / "cache"
    out = _sync(src, dest, files, cache, every=0.01)
    assert out.ok, out.msg
    assert sorted(out.arrived) == sorted(f["name"] for f in files)
    for item in files:
        assert (dest / item["name"]).read_bytes() == (src / item["name"]).read_bytes()
    assert not list((dest / node.PARTIAL_DIR).rglob("*.safetensors"))
    assert out.moved == sum(f["size"] for f in files)
    assert any("ETA" in line and "of 5.0 MiB" in line for line in out.progress), out.progress
    facts, _problems = manifest.weights_facts(str(dest), cache_dir=str(cache), budget_seconds=0)
    assert facts["from_cache"] == 3 and facts["hashed"]["files"] == 0
    assert {n: e["sha256"] for n, e in facts["files"].items()} == {f["name"]: f["sha256"] for f in files}


def test_a_partial_copy_resumes_from_its_bytes(tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]) -> None:
    src, files = source
    dest, cache = tmp_path / "target", tmp_path / "cache"
    big = files[1]
    partial = Path(node.partial_path(str(dest), big["name"]))
    partial.parent.mkdir(parents=True)
    partial.write_bytes((src / big["name"]).read_bytes()[: 2 * MIB])
    out = _sync(src, dest, [big], cache)
    assert out.ok, out.msg
    assert out.resumed == {big["name"]: 2 * MIB}
    assert out.moved == big["size"] - 2 * MIB
    assert (dest / big["name"]).read_bytes() == (src / big["name"]).read_bytes()
    assert any("resumed at 2,097,152 bytes" in line for line in out.progress)


def test_a_partial_copy_of_other_bytes_starts_again(tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]) -> None:
    src, files = source
    dest, cache = tmp_path / "target", tmp_path / "cache"
    big = files[1]
    partial = dest / node.PARTIAL_DIR / big["name"]
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\0" * MIB)
    out = _sync(src, dest, [big], cache)
    assert out.ok, out.msg
    assert out.resumed == {} and out.moved == big["size"]
    assert (dest / big["name"]).read_bytes() == (src / big["name"]).read_bytes()


def test_a_mismatch_on_arrival_fails_naming_the_file(tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]) -> None:
    src, files = source
    dest, cache = tmp_path / "target", tmp_path / "cache"
    wrong = [dict(files[0], sha256="0" * 64), files[2]]
    out = _sync(src, dest, wrong, cache)
    assert not out.ok
    assert "worker1: config.json: arrived with SHA-256" in out.msg
    assert not (dest / "config.json").exists()
    assert not (dest / files[2]["name"]).exists()


def test_the_source_without_a_file_refuses_before_anything_moves(
    tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]
) -> None:
    src, files = source
    dest = tmp_path / "target"
    missing = [*files, {"name": "gone.safetensors", "size": 5, "sha256": "1" * 64}]
    out = _sync(src, dest, missing, tmp_path / "cache")
    assert not out.ok
    assert "did not start" in out.msg and "gone.safetensors" in out.msg and "nothing was moved" in out.msg
    assert not dest.exists()


def test_a_symlinked_file_is_replaced_not_written_through(
    tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]
) -> None:
    src, files = source
    dest = tmp_path / "target"
    dest.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep me")
    (dest / "config.json").symlink_to(elsewhere)
    out = _sync(src, dest, [files[0]], tmp_path / "cache")
    assert out.ok, out.msg
    assert elsewhere.read_bytes() == b"keep me"
    assert not (dest / "config.json").is_symlink()
    assert (dest / "config.json").read_bytes() == b'{"model_type": "x"}'


def test_a_stalled_source_times_out_naming_node_and_file(tmp_path: Path) -> None:
    """A server that accepts and then says nothing: the idle timeout names the node and the file, keeps the part."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
    fake_server = ["sh", "-c", f"echo '{{\"port\": {listener.getsockname()[1]}}}'; cat >/dev/null"]
    out = transfer.sync(
        fake_server,
        _argv("pull"),
        {"token": "t"},
        {
            "root": str(tmp_path / "t"),
            "files": [{"name": "a.bin", "size": 10, "sha256": "1" * 64}],
            "address": "127.0.0.1",
            "cache_dir": "",
        },
        target="worker2",
        source="head",
        total=10,
        idle_timeout=1.5,
    )
    listener.close()
    assert not out.ok
    assert out.msg.startswith("worker2: no byte came for 2 s while receiving a.bin from head"), out.msg


def test_the_server_refuses_a_wrong_token_and_unlisted_names(tmp_path: Path, source: Any) -> None:
    src, files = source
    events: list[dict[str, Any]] = []
    reader, writer = os.pipe()
    stdin = os.fdopen(reader)
    config = {"root": str(src), "names": [files[0]["name"]], "address": "127.0.0.1", "token": "secret"}
    thread = threading.Thread(target=node.serve, args=(config, stdin, events.append), daemon=True)
    thread.start()
    for _attempt in range(100):
        if events:
            break
        threading.Event().wait(0.05)
    port = events[0]["port"]

    def get(path: str, secret: str) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={node.TOKEN_HEADER: secret})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    assert get("/file/config.json", "wrong")[0] == 403
    assert get("/file/sub/model-00002-of-00002.safetensors", "secret")[0] == 404
    assert get("/file/..%2F..%2Fetc%2Fpasswd", "secret")[0] == 404
    assert get("/file/config.json", "secret") == (200, b'{"model_type": "x"}')
    assert get("/sha256/config.json?length=3", "secret") == (200, hashlib.sha256(b'{"m').hexdigest().encode())
    os.close(writer)
    thread.join(5)
    assert not thread.is_alive(), "the server ends when its input closes"


@pytest.mark.parametrize("name", ["/etc/passwd", "a/../../b", "", "a//b", "./a", f"{node.PARTIAL_DIR}/x"])
def test_names_outside_the_weights_path_are_refused(name: str) -> None:
    assert node.name_problem(name)


def test_node_code_is_the_module_utils_text() -> None:
    given = json.loads(transfer.payload())
    assert given["order"][-1].endswith("._weights_transfer")
    assert "def pull(" in given["sources"][given["order"][-1]]


def test_the_puller_stops_when_the_controller_goes_keeping_its_part(tmp_path: Path) -> None:
    """The controller's connection closes (its input): the file in progress stops, its partial copy kept, and the
    next run resumes it."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    item = _write(src, "big.safetensors", os.urandom(48 * MIB))
    events: list[dict[str, Any]] = []
    server_in, server_keep = os.pipe()
    config = {"root": str(src), "names": [item["name"]], "address": "127.0.0.1", "token": "s"}
    threading.Thread(target=node.serve, args=(config, os.fdopen(server_in), events.append), daemon=True).start()
    for _attempt in range(100):
        if events:
            break
        threading.Event().wait(0.05)
    reader, writer = os.pipe()
    os.close(writer)  # the controller is gone from the start
    said: list[dict[str, Any]] = []
    pull = {"root": str(dest), "files": [item], "address": "127.0.0.1", "port": events[0]["port"], "token": "s"}
    assert node.pull({**pull, "cache_dir": ""}, said.append, stdin=os.fdopen(reader)) == 1
    assert said[-1]["event"] == "failed" and "the controller's connection closed" in said[-1]["msg"], said[-1]
    assert not (dest / item["name"]).exists()
    kept = Path(node.partial_path(str(dest), item["name"])).stat().st_size
    assert kept < item["size"]
    said.clear()
    assert node.pull({**pull, "cache_dir": ""}, said.append) == 0, said[-1]
    assert (dest / item["name"]).read_bytes() == (src / item["name"]).read_bytes()
    assert ({"event": "resumed", "name": item["name"], "offset": kept} in said) == (kept > 0), (kept, said)
    os.close(server_keep)


def test_beside_a_running_rank_files_are_staged_then_put_in_place_without_moving_again(
    tmp_path: Path, source: tuple[Path, list[dict[str, Any]]]
) -> None:
    src, files = source
    dest, cache = tmp_path / "target", tmp_path / "cache"
    dest.mkdir()
    (dest / "config.json").write_bytes(b"the old one, bound into a running rank")
    why = transfer.staging_reason({"containers": [{"name": "dgxspark-rank1", "running": True}], "error": None})
    staged = _sync(src, dest, files, cache, pull={"stage": True, "stage_reason": why})
    assert staged.ok, staged.msg
    assert sorted(staged.staged) == sorted(f["name"] for f in files) and staged.arrived == []
    assert "STAGED under" in staged.msg and "dgxspark-rank1" in staged.msg and "Run weights.yml again" in staged.msg
    assert (dest / "config.json").read_bytes() == b"the old one, bound into a running rank"
    assert not (dest / files[1]["name"]).exists()
    placed = _sync(src, dest, files, cache)
    assert placed.ok, placed.msg
    assert placed.moved == 0, "the staged copies are checked and used, not moved again"
    assert sorted(placed.arrived) == sorted(f["name"] for f in files)
    for item in files:
        assert (dest / item["name"]).read_bytes() == (src / item["name"]).read_bytes()


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [
        (None, ""),
        ({"containers": [], "error": None}, ""),
        ({"containers": [{"name": "r0", "running": False}], "error": None}, ""),
        ({"containers": [{"name": "r0", "running": True}], "error": None}, "a rank is running here (r0)"),
        ({"containers": [], "error": "no Docker engine socket at /run/docker.sock"}, "cannot be told"),
    ],
)
def test_staging_reason(ranks: Any, expected: str) -> None:
    reason = transfer.staging_reason(ranks)
    assert (expected in reason) if expected else reason == ""
    assert bool(reason) == bool(expected)
