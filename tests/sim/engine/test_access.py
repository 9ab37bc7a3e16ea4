# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The served API's access on the stand-in engine, as vLLM does it: --host, a key from VLLM_API_KEY (401 on /v1
without it, /health open) and TLS from --ssl-certfile/--ssl-keyfile; and the collection's clients (the boot's
look, its smoke completion, the benchmark's Endpoint) sending the key read from a file and trusting a CA file."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from engine_helpers import REPO, Engine, free_port

sys.path.insert(0, str(REPO / ".ansible" / "collections"))

from ansible_collections.dgxspark.cluster.plugins.module_utils import _bench_client, _rank_health  # noqa: E402

KEY = "sim-access-key-0123456789"
MODEL = "sim-model"


def make_certificate(where: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (an IP subjectAltName) and its key, by the openssl command."""
    # openssl is part of this machine's base system (the sim3 API test needs it as well): its absence is a failure
    assert shutil.which("openssl"), "the TLS tests need the openssl command (Debian: apt-get install openssl)"
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    key.chmod(0o600)
    return cert, key


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    where = tmp_path_factory.mktemp("access")
    cert, key = make_certificate(where)
    key_file = where / "api_key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    port = free_port()
    args = ["/models/sim", "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port)]
    args += ["--max-model-len", "4096", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    engine = Engine(args, {"SIM_ENGINE_TIME_SCALE": "0.2", "VLLM_API_KEY": KEY}, where, "access")
    context = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{port}"
    try:
        _wait(url, context, engine)
        yield {"url": url, "port": port, "cert": cert, "key_file": key_file, "context": context, "engine": engine}
    finally:
        engine.term()
        engine.wait(10)
        engine.close()


def _wait(url: str, context: ssl.SSLContext, engine: Engine) -> None:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if _status(url + "/health", context) == 200:
            return
        assert engine.alive(), f"engine exited:\n{engine.out()}\n{engine.err()}"
        time.sleep(0.1)
    raise AssertionError(f"engine not serving:\n{engine.out()}\n{engine.err()}")


def _status(url: str, context: ssl.SSLContext | None, key: str | None = None) -> int | None:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None


def test_a_request_without_the_key_gets_a_401_and_one_with_it_works(served):
    url, context = served["url"], served["context"]
    assert _status(url + "/health", context) == 200  # vLLM guards /v1 only
    assert _status(url + "/v1/models", context) == 401
    assert _status(url + "/v1/models", context, "wrong-key") == 401
    assert _status(url + "/v1/models", context, KEY) == 200
    assert "Starting vLLM API server 0 on https://127.0.0.1:" in served["engine"].out() + served["engine"].err()


def test_it_speaks_tls_only_and_binds_the_host_given(served):
    port = served["port"]
    assert _status(f"http://127.0.0.1:{port}/health", None) is None  # plain HTTP gets no answer
    with socket.socket() as probe:  # --host 127.0.0.1: not on the other loopback addresses
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.2", port)) != 0
    # a client that trusts nothing in particular refuses the self-signed certificate
    assert _status(served["url"] + "/health", ssl.create_default_context()) is None


def test_the_boot_look_sends_the_key_from_its_file_and_trusts_the_ca_file(served):
    key = _bench_client.read_api_key(str(served["key_file"]))
    tls = _bench_client.tls_context(str(served["cert"]))
    status, body, error = _rank_health.http_get(served["url"] + "/v1/models", 5, key, tls)
    assert (status, error) == (200, None) and MODEL in body
    assert _rank_health.http_get(served["url"] + "/v1/models", 5, None, tls)[0] == 401


def test_the_smoke_completion_and_the_benchmark_client_send_the_key_over_tls(served):
    endpoint = _bench_client.Endpoint(
        served["url"], api="completions", api_key_file=str(served["key_file"]), ca_file=str(served["cert"])
    )
    result = _bench_client.smoke(endpoint, MODEL, "Count from 1 to 10:", r"1\D+2\D+3", 16, 30)
    assert result["ok"] and result["passed"], result
    record = _bench_client.run_level(
        _bench_client.Endpoint(served["url"], api_key_file=str(served["key_file"]), ca_file=str(served["cert"])),
        MODEL,
        2,
        2,
        16,
        8,
    )
    assert all(r["ok"] for r in record["requests"]), record["requests"]
    keyless = _bench_client.Endpoint(served["url"], api="completions", ca_file=str(served["cert"]))
    refused = _bench_client.smoke(keyless, MODEL, "Count from 1 to 10:", r"1\D+2", 16, 30)
    assert not refused["ok"] and "401" in str(refused["error"])


def test_a_key_file_that_cannot_be_read_is_named_never_shown(tmp_path):
    with pytest.raises(ValueError, match="cannot read the API key file"):
        _bench_client.read_api_key(str(tmp_path / "absent"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="holds no key"):
        _bench_client.read_api_key(str(empty))
