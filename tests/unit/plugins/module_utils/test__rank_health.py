# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import http.server
import ssl
import threading
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _rank_health
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import DockerEngineError
from ansible_collections.dgxspark.cluster.tests.unit.conftest import self_signed_certificate


class Engine:
    def __init__(self, running: bool = True, error: bool = False) -> None:
        self.running = running
        self.error = error

    def get(self, url: str) -> tuple[int, Any]:
        if self.error:
            raise DockerEngineError("nothing answers on /var/run/docker.sock (dockerd is not running)")
        state = {"Running": self.running, "Status": "running" if self.running else "exited", "ExitCode": 0}
        return 200, {"State": {**state, "StartedAt": "2026-12-01T12:00:00.5Z"}}

    def get_raw(self, url: str) -> tuple[int, bytes]:
        return 200, b"loading\n"


def api_answers(monkeypatch: pytest.MonkeyPatch, answers: list[tuple[int | None, str]]) -> list[str]:
    """The head's API answers in turn (status, body) per look (health, then models when healthy)."""
    asked: list[str] = []

    def http_get(url: str, timeout: float, api_key=None, tls=None) -> tuple[int | None, str, str | None]:
        asked.append(url)
        status, body = answers.pop(0) if len(answers) > 1 else answers[0]
        return status, body, None if status else "Connection refused"

    monkeypatch.setattr(_rank_health, "http_get", http_get)
    return asked


def test_engine_that_cannot_be_asked_says_running_is_unknown() -> None:
    look = _rank_health.rank_health(Engine(error=True), "vllm_dsv41", None)
    assert look["running"] is None and "dockerd is not running" in look["error"]


def test_waits_on_the_node_until_the_head_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    models = '{"data": [{"id": "m"}]}'
    asked = api_answers(monkeypatch, [(None, ""), (503, ""), (200, ""), (200, models)])
    slept: list[float] = []
    look = _rank_health.rank_health(Engine(), "c", "http://127.0.0.1:8000", wait=10, sleep=slept.append)
    assert look["healthy"] is True and look["models"] == ["m"]
    assert slept == [0.25, 0.25]  # refused, then 503, then served
    assert look["port_open_at"] is not None and look["ready_at"] >= look["port_open_at"]
    assert look["started_at"] == "2026-12-01T12:00:00.5Z"
    assert asked[-1].endswith("/v1/models")


def test_looks_once_without_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    api_answers(monkeypatch, [(None, "")])
    slept: list[float] = []
    look = _rank_health.rank_health(Engine(), "c", "http://127.0.0.1:8000", sleep=slept.append)
    assert slept == [] and look["healthy"] is False and look["port_open_at"] is None


def test_stops_waiting_when_the_container_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    api_answers(monkeypatch, [(None, "")])
    slept: list[float] = []
    look = _rank_health.rank_health(Engine(running=False), "c", "http://127.0.0.1:8000", wait=10, sleep=slept.append)
    assert slept == [] and look["running"] is False


def test_stops_waiting_when_the_api_refuses_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate that does not verify, or a key the API refuses: waiting does not change it."""
    refused = _rank_health.CERTIFICATE_REFUSED + "self-signed certificate"

    def http_get(url: str, timeout: float, api_key=None, tls=None) -> tuple[int | None, str, str | None]:
        return None, "", refused

    monkeypatch.setattr(_rank_health, "http_get", http_get)
    slept: list[float] = []
    look = _rank_health.rank_health(Engine(), "c", "https://127.0.0.1:8000", wait=10, sleep=slept.append)
    assert slept == [] and look["refused"] == refused and look["healthy"] is False

    api_answers(monkeypatch, [(200, ""), (401, "")])
    look = _rank_health.rank_health(Engine(), "c", "http://127.0.0.1:8000", wait=10, sleep=slept.append, api_key="k")
    assert (
        slept == []
        and look["refused"] == "HTTP 401 on /v1/models: the API refuses the key in container.api.api_key_file"
    )


def test_a_certificate_that_does_not_verify_is_said_so(tmp_path) -> None:
    """A real TLS server whose self-signed certificate is not the CA the look trusts."""
    served_cert, served_key = self_signed_certificate(tmp_path, "the-server")
    other_cert, _other_key = self_signed_certificate(tmp_path, "another-ca")
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(served_cert, served_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        trusting_another = ssl.create_default_context(cafile=str(other_cert))
        url = f"https://127.0.0.1:{server.server_address[1]}/health"
        status, _body, error = _rank_health.http_get(url, 5, tls=trusting_another)
        assert status is None and error.startswith(_rank_health.CERTIFICATE_REFUSED), error
    finally:
        server.shutdown()
        server.server_close()
