# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's load client against a small local server whose chunks leave on a known schedule."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _bench_client as client

TTFT = 0.05
GAP = 0.01


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "stream"  # stream | error | nousage | close | split | slow
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if Handler.mode == "error":
            payload = json.dumps({"error": {"message": "The model `x` does not exist.", "type": "NotFoundError"}})
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        tokens = int(body.get("max_tokens", 4))
        text = body.get("messages", [{}])[-1].get("content", "") if "messages" in body else body.get("prompt", "")
        words = ["1,", " 2,", " 3"] if "Count" in text else [f" w{i}" for i in range(tokens)]
        start = time.monotonic()
        events = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
        for index, word in enumerate(words):
            last = index == len(words) - 1
            events.append({"choices": [{"delta": {"content": word}, "finish_reason": "length" if last else None}]})
        if Handler.mode != "nousage":
            events.append({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(words)}})
        raw = [f"data: {json.dumps(event)}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]
        if Handler.mode == "split":  # SSE events cut across HTTP chunks at odd places
            joined = b"".join(raw)
            raw = [joined[i : i + 7] for i in range(0, len(joined), 7)]
        content_index = 0
        for piece in raw:
            if Handler.mode != "split" and b'"content": "' in piece and b'"content": ""' not in piece:
                due = start + TTFT + content_index * GAP
                time.sleep(max(due - time.monotonic(), 0))
                content_index += 1
            if Handler.mode == "slow":
                time.sleep(0.5)
            if Handler.mode == "close" and content_index == 2:
                self.close_connection = True
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece)  # no chunk end: cut mid-body
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def server() -> Iterator[str]:
    Handler.mode = "stream"
    Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_level_times_every_request(server: str) -> None:
    endpoint = client.Endpoint(server, api_key="sekret")
    level = client.run_level(endpoint, "m", concurrency=4, requests=8, prompt_tokens=32, max_tokens=10)
    records = level["requests"]
    assert [r["i"] for r in records] == list(range(8))
    for record in records:
        assert record["ok"], record
        assert record["status"] == 200
        assert record["output_tokens"] == 10 and record["prompt_tokens"] == 7 and record["chunks"] == 10
        assert record["finish_reason"] == "length"
        assert len(record["gaps"]) == 9
        # the server's schedule is a floor; a busy 2-core machine may add to it, never take away
        assert TTFT <= record["ttft"] < TTFT + 0.3
        assert all(gap >= 0.0 for gap in record["gaps"])
        assert 9 * GAP * 0.9 <= sum(record["gaps"]) < 9 * GAP + 0.3
        assert record["e2e"] >= record["ttft"] + 9 * GAP * 0.9
        assert "text" not in record
    assert level["client"]["loop_lag"]["samples"] > 0
    assert 0 <= level["client"]["cpu_share"] < 1.5
    body = Handler.seen[0]["body"]
    assert Handler.seen[0]["path"] == "/v1/chat/completions"
    assert Handler.seen[0]["auth"] == "Bearer sekret"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["min_tokens"] == 10 == body["max_tokens"]
    prompts = [seen["body"]["messages"][0]["content"] for seen in Handler.seen]
    assert len(set(prompts)) == 8, "every prompt is unique (no shared prefix cache hit)"
    assert all(100 <= len(prompt) <= 160 for prompt in prompts), [len(p) for p in prompts]


def test_sse_events_split_across_chunks_are_reassembled(server: str) -> None:
    Handler.mode = "split"
    level = client.run_level(client.Endpoint(server), "m", 1, 2, 16, 5)
    for record in level["requests"]:
        assert record["ok"], record
        assert record["chunks"] == 5 and record["output_tokens"] == 5


def test_an_http_error_is_a_failed_record_with_the_servers_message(server: str) -> None:
    Handler.mode = "error"
    level = client.run_level(client.Endpoint(server, api="completions"), "x", 2, 3, 16, 5)
    assert Handler.seen[0]["path"] == "/v1/completions"
    for record in level["requests"]:
        assert not record["ok"]
        assert record["status"] == 404
        assert record["error"] == "HTTP 404: The model `x` does not exist."
        assert record["ttft"] is None and record["gaps"] == []
    assert len(Handler.seen) == 3, "no retries"


def test_without_usage_the_tokens_are_unknown_and_chunks_counted(server: str) -> None:
    Handler.mode = "nousage"
    record = client.run_level(client.Endpoint(server), "m", 1, 1, 16, 6)["requests"][0]
    assert record["ok"] and record["output_tokens"] is None and record["chunks"] == 6


def test_a_connection_cut_mid_stream_fails_that_request_only(server: str) -> None:
    Handler.mode = "close"
    level = client.run_level(client.Endpoint(server), "m", 1, 2, 16, 6)
    assert len(level["requests"]) == 2
    for record in level["requests"]:
        assert not record["ok"]
        assert "IncompleteReadError" in record["error"] or "ConnectionError" in record["error"], record["error"]
    assert len(Handler.seen) == 2, "the second request went out on a new connection, and nothing was retried"


def test_a_request_over_its_timeout_fails(server: str) -> None:
    Handler.mode = "slow"
    record = client.run_level(client.Endpoint(server), "m", 1, 1, 16, 6, timeout=0.3)["requests"][0]
    assert not record["ok"] and record["error"] == "no complete answer within 0.3 s"


def test_a_refused_connection_fails_every_request_without_retry() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    level = client.run_level(client.Endpoint(f"http://127.0.0.1:{port}"), "m", 2, 4, 16, 4)
    assert [r["ok"] for r in level["requests"]] == [False] * 4
    assert all("Error" in r["error"] for r in level["requests"])


def test_the_gate_passes_and_fails_on_the_answer(server: str) -> None:
    checks = [
        {"name": "count", "prompt": "Count from 1 to 3.", "expect": r"1\D+2\D+3"},
        {"name": "wrong", "prompt": "Count from 1 to 3.", "expect": r"\b42\b"},
    ]
    gate = client.run_gate(client.Endpoint(server), "m", checks)
    assert [c["passed"] for c in gate["checks"]] == [True, False]
    assert gate["checks"][0]["got"] == "1, 2, 3"
    assert gate["passed"] is False
    assert Handler.seen[0]["body"].get("ignore_eos") is None, "the gate takes the answer as it comes"
    with pytest.raises(ValueError, match="not a regular expression"):
        client.run_gate(client.Endpoint(server), "m", [{"name": "bad", "prompt": "x", "expect": "("}])


def test_the_haystack_holds_one_needle_at_its_depth() -> None:
    prompt, passphrase = client.haystack(4000, 0.25, seed=3)
    assert prompt.count(f"The secret passphrase is {passphrase}.") == 1
    assert 15000 <= len(prompt) <= 16500
    at = prompt.index(passphrase) / len(prompt)
    assert 0.2 < at < 0.3
    assert prompt.rstrip().endswith("What is the secret passphrase?")
    assert client.haystack(4000, 0.25, seed=3) == (prompt, passphrase)
    assert client.haystack(4000, 0.25, seed=4)[1] != passphrase


def test_endpoint_urls() -> None:
    assert client.Endpoint("http://10.0.0.1:8000").path == "/v1/chat/completions"
    assert client.Endpoint("http://h/v1/", api="completions").path == "/v1/completions"
    assert client.Endpoint("https://h").port == 443
    for bad in ("ftp://h", "h:8000", "http://"):
        with pytest.raises(ValueError, match="url must be"):
            client.Endpoint(bad)
    with pytest.raises(ValueError, match="api must be"):
        client.Endpoint("http://h", api="embeddings")


def test_stream_parser_reads_reasoning_text_and_errors() -> None:
    stream = client._Stream(time.monotonic)
    stream.feed(b'data: {"choices": [{"delta": {"reasoning_content": "hmm"}}]}\r\n\r\n', 1.0)
    stream.feed(b'data: {"choices": [{"text": "x", "finish_reason": "stop"}]}\n\ndata: {"error": ', 2.0)
    stream.feed(b'{"message": "boom"}}\n\ndata: [DONE]\n\n', 3.0)
    assert stream.content_times == [1.0, 2.0]
    assert stream.text == ["hmm", "x"]
    assert stream.finish_reason == "stop" and stream.error == "boom" and stream.done


def test_the_smoke_completion_is_timed_and_judged(server: str) -> None:
    endpoint = client.Endpoint(server, api="completions")
    passed = client.smoke(endpoint, "m", "Count from 1 to 3:", r"1\D+2\D+3", max_tokens=8)
    assert passed["ok"] and passed["passed"] and passed["text"] == "1, 2, 3"
    assert TTFT <= passed["ttft"] <= passed["e2e"] and passed["output_tokens"] == 3
    assert Handler.seen[-1]["path"] == "/v1/completions" and Handler.seen[-1]["body"]["temperature"] == 0
    assert "ignore_eos" not in Handler.seen[-1]["body"]
    garbled = client.smoke(endpoint, "m", "Say something:", r"1\D+2\D+3", max_tokens=3)
    assert garbled["ok"] and not garbled["passed"]
    Handler.mode = "error"
    failed = client.smoke(endpoint, "m", "Count from 1 to 3:", r"1\D+2\D+3")
    assert not failed["ok"] and not failed["passed"] and "does not exist" in failed["error"]
    with pytest.raises(ValueError, match="not a regular expression"):
        client.smoke(endpoint, "m", "x", "(")
