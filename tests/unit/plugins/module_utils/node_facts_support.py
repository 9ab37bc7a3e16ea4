# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared by the node_facts tests: fixture paths, hardware-sample bodies and a fake Docker engine."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import pathlib
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "node_facts"
GB10 = FIXTURES / "gb10"
BARE = FIXTURES / "bare"
H200 = FIXTURES / "h200"
SAMPLES = FIXTURES / "samples"
IP_ADDR_GB10 = FIXTURES / "ip" / "addr-gb10.json"
"""What ``ip -j -4 addr show`` prints on the GB10 tree's node (see ``ip/README.md``)."""


def sample_body(name: str) -> str:
    """A hardware sample's output: everything after its first line that is exactly ``#``."""
    lines = (SAMPLES / name).read_text(encoding="utf-8").split("\n")
    return "\n".join(lines[lines.index("#") + 1 :])


def docker_routes(root: pathlib.Path = GB10 / "docker-api") -> dict[str, tuple[int, bytes]]:
    """The GB10 engine's answers, by request path."""

    def load(name: str) -> bytes:
        return (root / name).read_bytes()

    return {
        "/version": (200, load("version.json")),
        "/containers/json?all=1": (200, load("containers.json")),
        "/images/json": (200, load("images.json")),
        "/containers/vllm_dsv41/json": (200, load("container-vllm_dsv41.json")),
    }


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    routes: dict[str, tuple[int, bytes]]
    requests: list[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.requests.append(self.path)
        if self.path in self.server.routes:
            status, body = self.server.routes[self.path]
        elif self.path.startswith("/containers/") and self.path.endswith("/json"):
            name = self.path[len("/containers/") : -len("/json")]
            status, body = 404, json.dumps({"message": f"No such container: {name}"}).encode()
        else:
            status, body = 404, b'{"message":"page not found"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass


@contextlib.contextmanager
def fake_docker_engine(routes: dict[str, tuple[int, bytes]] | None = None) -> Iterator[tuple[str, list[str]]]:
    """A Docker-engine look-alike on a Unix socket: yields (socket path, paths requested)."""
    directory = tempfile.mkdtemp(prefix="nf-docker-")  # short: a socket path must fit in 108 bytes
    path = os.path.join(directory, "docker.sock")
    server = _Server(path, _Handler)
    server.routes = docker_routes() if routes is None else routes
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield path, server.requests
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(directory, ignore_errors=True)


def tools_copy(tree: pathlib.Path, destination: pathlib.Path) -> pathlib.Path:
    """A tree's fake tools, copied and made executable (whatever modes the checkout kept)."""
    target = destination / f"{tree.name}-tools"
    shutil.copytree(tree / "tools", target)
    for entry in target.iterdir():
        if not entry.suffix:
            entry.chmod(0o755)
    return target
