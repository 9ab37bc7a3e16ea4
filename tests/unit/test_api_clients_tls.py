# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The served API locked down (issue 15): every client of it sends the key it reads from a file and speaks TLS.

A loopback HTTPS server made here (a self-signed certificate for 127.0.0.1, made by the test) answers as vLLM does
with an API key: 401 on ``/v1/...`` without ``Authorization: Bearer <key>``, ``/health`` and ``/metrics`` open. Each
client is run as it runs for real: tools/bench_fidelity.py from its command-line options, and the modules the boot
and the benchmark use (``rank_health`` under the boot's wait, ``smoke_completion``, ``bench_load``) from their
module arguments (the key file's path and the CA file, never the key). The server records, for each request, the
``Authorization`` header it got and the TLS version it was spoken over; without the key the same clients get 401.

(tests/sim/engine/test_access.py does the same against the stand-in engine, in the simulated cluster's stage.)
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.cluster.plugins.module_utils import _docker_engine
from ansible_collections.dgxspark.cluster.plugins.modules import bench_load, rank_health, smoke_completion
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, self_signed_certificate

KEY = "unit-access-key-0123456789"
MODEL = "fidelity"
METRICS = (
    'vllm:time_to_first_token_seconds_sum{model_name="fidelity"} 0.5\n'
    'vllm:time_to_first_token_seconds_count{model_name="fidelity"} 2\n'
)


class LockedApi(BaseHTTPRequestHandler):
    """vLLM's front end with an API key, in brief; every request is kept in ``seen``."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def admitted(self) -> bool:
        """Record the request; answer 401 and return False when it wants the key and does not carry it."""
        auth = self.headers.get("Authorization")
        allowed = not self.path.startswith("/v1/") or auth == f"Bearer {KEY}"
        tls = self.connection.version() if isinstance(self.connection, ssl.SSLSocket) else None
        LockedApi.seen.append(
            {"method": self.command, "path": self.path, "auth": auth, "tls": tls, "status": 200 if allowed else 401}
        )
        if not allowed:
            self.reply(401, "application/json", json.dumps({"error": "Unauthorized"}).encode())
        return allowed

    def reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self.admitted():
            return
        if self.path == "/health":
            self.reply(200, "text/plain", b"")
        elif self.path == "/metrics":
            self.reply(200, "text/plain", METRICS.encode())
        elif self.path == "/v1/models":
            self.reply(200, "application/json", json.dumps({"data": [{"id": MODEL}]}).encode())
        else:
            self.reply(404, "application/json", b'{"error": "not found"}')

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.admitted():
            return
        text = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
        words = ["1,", " 2,", " 3"] if "Count" in text else [f" w{i}" for i in range(int(body.get("max_tokens", 4)))]
        events: list[dict[str, Any]] = []
        for index, word in enumerate(words):
            last = index == len(words) - 1
            choice = {"delta": {"content": word}} if "messages" in body else {"text": word}
            events.append({"choices": [{**choice, "finish_reason": "length" if last else None}]})
        events.append({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(words)}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in [f"data: {json.dumps(event)}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]:
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def locked_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = tmp_path_factory.mktemp("locked-api")
    cert, key = self_signed_certificate(where, "api")
    key_file = where / "api_key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), LockedApi)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"url": f"https://127.0.0.1:{httpd.server_address[1]}", "cert": cert, "key": key, "key_file": key_file}
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def api(locked_api: dict[str, Any]) -> dict[str, Any]:
    LockedApi.seen = []
    return locked_api


def v1_requests() -> list[dict[str, Any]]:
    return [seen for seen in LockedApi.seen if seen["path"].startswith("/v1/")]


def assert_keyed_over_tls(requests: list[dict[str, Any]]) -> None:
    assert requests, "the client sent nothing to /v1"
    for request in requests:
        assert request["auth"] == f"Bearer {KEY}", request
        assert request["tls"] in ("TLSv1.2", "TLSv1.3"), request
        assert request["status"] == 200, request


# --------------------------------------------------------------------------- tools/bench_fidelity.py


@pytest.fixture
def fidelity(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "tools" / "bench_fidelity.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ACCESS", {})
    return module


def test_bench_fidelity_sends_the_key_from_its_file_over_tls(api: dict[str, Any], fidelity: ModuleType) -> None:
    tls = ["--ssl-certfile", str(api["cert"]), "--ssl-keyfile", str(api["key"])]
    fidelity.take_access(fidelity.parse_args(["--api-key-file", str(api["key_file"]), *tls]))
    mine = fidelity.ours(api["url"], concurrency=2, requests=4, output_tokens=5, prompt_tokens=16, ramp=0.0)
    assert mine["errors"] == 0 and mine["tokens"] == [5], mine
    posts = v1_requests()
    assert len(posts) == 4 and {p["path"] for p in posts} == {"/v1/chat/completions"}
    assert_keyed_over_tls(posts)
    # the engine's own figures come over TLS as well, the certificate trusted as the CA
    assert fidelity.engine_ttft(api["url"]) == (0.5, 2)
    assert LockedApi.seen[-1]["path"] == "/metrics" and LockedApi.seen[-1]["tls"]


def test_bench_fidelity_without_the_key_gets_401_on_every_request(api: dict[str, Any], fidelity: ModuleType) -> None:
    fidelity.take_access(fidelity.parse_args(["--ssl-certfile", str(api["cert"]), "--ssl-keyfile", str(api["key"])]))
    mine = fidelity.ours(api["url"], concurrency=2, requests=4, output_tokens=5, prompt_tokens=16, ramp=0.0)
    assert mine["errors"] == 4
    assert [p["status"] for p in v1_requests()] == [401] * 4 and all(p["auth"] is None for p in v1_requests())


def test_bench_fidelity_refuses_half_the_tls_files(fidelity: ModuleType) -> None:
    with pytest.raises(SystemExit, match="go together"):
        fidelity.parse_args(["--ssl-certfile", "/etc/tls/cert.pem"])


# --------------------------------------------------------------------------- the modules


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    def exit_json(self: Any, **kwargs: Any) -> None:
        raise ExitJson(kwargs)

    def fail_json(self: Any, **kwargs: Any) -> None:
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run(module: ModuleType, args: dict[str, Any], outcome: type[Exception] = ExitJson) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(outcome) as ended:
        module.main()
    return ended.value.args[0]


class RunningRank:
    """The Docker engine as rank_health asks it (over its socket, faked here): the head's container runs."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path, self.timeout = path, timeout

    def get(self, url: str) -> tuple[int, Any]:
        state = {"Running": True, "Status": "running", "ExitCode": 0, "StartedAt": "2026-12-01T12:00:00Z"}
        return 200, {"State": state}

    def get_raw(self, url: str) -> tuple[int, bytes]:
        return 200, b""

    def close(self) -> None:
        pass


def test_the_boot_wait_sends_the_key_from_its_file_over_tls(
    api: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_docker_engine, "DockerEngine", RunningRank)  # what module_engine opens
    args = {"container": "vllm_dsv41", "api": api["url"], "ca_file": str(api["cert"])}
    args["api_key_file"] = str(api["key_file"])
    look = run(rank_health, args)
    assert look["healthy"] is True and look["models"] == [MODEL] and look["refused"] is None, look
    assert KEY not in json.dumps(look)
    assert_keyed_over_tls(v1_requests())
    assert all(seen["tls"] for seen in LockedApi.seen)  # /health too
    LockedApi.seen = []
    keyless = run(rank_health, {**args, "api_key_file": None})
    assert keyless["refused"] == "HTTP 401 on /v1/models: the API wants a key this look did not send"
    assert [p["status"] for p in v1_requests()] == [401]


def test_the_smoke_completion_sends_the_key_from_its_file_over_tls(api: dict[str, Any]) -> None:
    args = {"url": api["url"], "api_key_file": str(api["key_file"]), "ca_file": str(api["cert"]), "model": MODEL}
    answer = run(smoke_completion, {**args, "expect": r"1\D+2\D+3"})
    assert answer["passed"] and answer["text"] == "1, 2, 3" and KEY not in json.dumps(answer)
    assert [p["path"] for p in v1_requests()] == ["/v1/completions"]
    assert_keyed_over_tls(v1_requests())
    LockedApi.seen = []
    refused = run(smoke_completion, {**args, "api_key_file": None}, FailJson)
    assert "HTTP 401" in refused["msg"] and [p["status"] for p in v1_requests()] == [401]


def test_the_benchmark_load_sends_the_key_from_its_file_over_tls(api: dict[str, Any]) -> None:
    args = {"url": api["url"], "model": MODEL, "mode": "load", "concurrency": 2, "requests": 4, "max_tokens": 3}
    args |= {"api_key_file": str(api["key_file"]), "ca_file": str(api["cert"]), "prompt_tokens": 16}
    level = run(bench_load, args)["level"]
    assert all(record["ok"] and record["output_tokens"] == 3 for record in level["requests"]), level["requests"]
    assert len(v1_requests()) == 4
    assert_keyed_over_tls(v1_requests())
    LockedApi.seen = []
    keyless = run(bench_load, {**args, "api_key_file": None})["level"]
    assert [record["status"] for record in keyless["requests"]] == [401] * 4
    assert [p["status"] for p in v1_requests()] == [401] * 4


def test_a_client_that_does_not_trust_the_certificate_sends_nothing(api: dict[str, Any]) -> None:
    """The key goes only where TLS verified the server: a client trusting another CA never sends it."""
    other = pathlib.Path(api["cert"]).parent / "other"
    other.mkdir(exist_ok=True)
    other_ca, _other_key = self_signed_certificate(other, "another-ca")
    args = {"url": api["url"], "api_key_file": str(api["key_file"]), "ca_file": str(other_ca), "model": MODEL}
    failed = run(smoke_completion, args, FailJson)
    assert "CERTIFICATE_VERIFY_FAILED" in failed["msg"] or "certificate verify failed" in failed["msg"], failed
    assert v1_requests() == []
