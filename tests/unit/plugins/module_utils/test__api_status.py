# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' api section (module_utils/_api_status.py) against a server on loopback."""

from __future__ import annotations

import http.server
import json
import pathlib
import threading
from collections.abc import Iterator

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._api_status import api_facts


class _Models(http.server.BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        wanted = "Bearer sesame"
        if self.server.key and self.headers.get("Authorization") != wanted:  # type: ignore[attr-defined]
            status, body = 401, b'{"error": "unauthorized"}'
        else:
            status, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Models)
    httpd.answer = (200, json.dumps({"data": [{"id": "dsv41"}, {"id": "other"}]}).encode())  # type: ignore[attr-defined]
    httpd.key = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd: http.server.HTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def test_the_models_are_listed(server: http.server.HTTPServer) -> None:
    facts = api_facts(url(server), timeout=5)
    assert facts["answered"] is True and facts["status"] == 200 and facts["error"] is None
    assert facts["models"] == ["dsv41", "other"] and facts["smoke"] is None and facts["seconds"] >= 0


def test_an_api_key_from_its_file(server: http.server.HTTPServer, tmp_path: pathlib.Path) -> None:
    server.key = True  # type: ignore[attr-defined]
    assert api_facts(url(server), timeout=5)["error"] == "HTTP 401 on /v1/models"
    key = tmp_path / "key"
    key.write_text("sesame\n")
    assert api_facts(url(server), str(key), timeout=5)["answered"] is True
    missing = api_facts(url(server), str(tmp_path / "none"), timeout=5)
    assert missing["answered"] is False and missing["error"].startswith("cannot read the API key file")
    assert "sesame" not in json.dumps(api_facts(url(server), str(key), timeout=5))


def test_not_json_a_refused_port_and_no_url(server: http.server.HTTPServer) -> None:
    server.answer = (200, b"<html>")  # type: ignore[attr-defined]
    assert api_facts(url(server), timeout=5)["error"] == "/v1/models did not answer JSON with a data list"
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    down = api_facts(f"http://127.0.0.1:{port}", timeout=2)
    assert down["answered"] is False and down["status"] is None and down["error"]
    assert api_facts(None)["error"] == "no API URL given"
