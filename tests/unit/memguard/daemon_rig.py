# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's daemon under test with real files and sockets: a fake Docker engine on a Unix socket,
the daemon's loop in a thread, and small helpers (the fixtures that use them are in conftest.py)."""

from __future__ import annotations

import http.server
import json
import pathlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

GIB = 1024**3
KEY = "a-shared-key-of-40-characters-0123456789"
INTERVAL = 0.05
GRACE = 0.2
SLACK = 2.0  # for a loaded machine
HIGH = 100 * GIB
LOW = 4 * GIB  # under the 5 GiB startup floor, over the 1 GiB emergency floor
PHASES = ("startup", "steady")


# ----------------------------------------------------------------------------- helpers


SERVING_ID = "5e" * 32  # the serving container's full ID in the fake engine
STOP = ("POST", f"/containers/{SERVING_ID}/stop?t=5")


def container(name: str, ident: str, labelled: bool = True, state: str = "running") -> dict[str, Any]:
    """A container as the engine lists it (``GET /containers/json``)."""
    labels = {"dgxspark.cluster.rank": "0"} if labelled else {}
    return {"Id": ident, "Names": [f"/{name}"], "Labels": labels, "State": state}


class _EngineHandler(http.server.BaseHTTPRequestHandler):
    server: FakeEngine

    def do_GET(self) -> None:  # http.server names it
        self.server.requests.append((time.monotonic(), "GET", self.path))
        body = json.dumps(self.server.containers).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # http.server names it
        self.server.requests.append((time.monotonic(), "POST", self.path))
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class FakeEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A Docker engine that lists ``containers`` (the serving one, labelled, by default), answers every POST
    with ``status`` and keeps (monotonic time, method, path) of every request."""

    daemon_threads = True

    def __init__(self, path: pathlib.Path, status: int = 204) -> None:
        self.requests: list[tuple[float, str, str]] = []
        self.status = status
        self.containers: list[dict[str, Any]] = [container("vllm_dsv41", SERVING_ID)]
        super().__init__(str(path), _EngineHandler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def calls(self) -> list[tuple[str, str]]:
        return [(method, path) for _t, method, path in self.requests]

    def stops(self) -> list[tuple[str, str]]:
        """The POSTs (stop, kill): what acted on a container; the lookups (GET) left out."""
        return [(method, path) for _t, method, path in self.requests if method == "POST"]

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(5)


class Running:
    """A Daemon running its loop in a thread."""

    def __init__(self, memguard: ModuleType, settings: dict[str, Any], clock: Callable[[], float] = time.time) -> None:
        self.memguard = memguard
        self.settings = settings
        self.config = memguard.Config(settings)
        self.daemon = memguard.Daemon(self.config, clock=clock)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as error:  # kept for the test to see
            self.error = error

    def ask(self, request: dict[str, Any], timeout: float = 5) -> dict[str, Any]:
        return self.memguard.ask(self.config.control_socket, request, timeout)

    def state(self) -> dict[str, Any] | None:
        try:
            return json.loads(pathlib.Path(self.config.state_path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def decisions(self, kind: str | None = None) -> list[dict[str, Any]]:
        text = pathlib.Path(self.config.log_path).read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]
        return [line for line in lines if kind is None or line["decision"] == kind]

    def stop(self) -> None:
        self.daemon.running = False
        if self.thread.is_alive():
            try:  # wake its select()
                self.ask({"command": "status"}, timeout=2)
            except OSError:
                pass
        self.thread.join(10)
        assert not self.thread.is_alive(), "the daemon did not stop"
        for resource in (self.daemon.peer_server, self.daemon.control, self.daemon.log):
            if resource is not None:
                resource.close()


def wait_for(predicate: Callable[[], Any], timeout: float) -> Any:
    """``predicate()``'s first true value within ``timeout`` seconds, or its last (false) one. A predicate that
    reads the state file before the daemon's first write (``state()`` is None: TypeError) is asked again, until the
    deadline, where its error is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except TypeError:
            if time.monotonic() > deadline:
                raise
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)


def free_ports(count: int) -> list[int]:
    sockets = []
    for _round in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def send_raw(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(data)
