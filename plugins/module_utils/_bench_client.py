# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's load client: streamed OpenAI requests at a fixed concurrency, timed where they are sent.

No Ansible imports, standard library only: it runs on the host the operator chose (a node or the
controller). One asyncio event loop; each concurrent user holds one keep-alive HTTP/1.1 connection
and sends its next request as soon as the previous one ends (a closed loop). Nothing is retried: a
failed request is a record with ``ok`` false and the reason.

Timing, on the monotonic clock of this process (docs/benchmark.md has the definitions):

- ``t_send``: just before the request's first byte is written;
- ``ttft``: to the first chunk whose delta carries non-empty content (or reasoning);
- ``gaps``: between successive chunks that carry content, after the first (raw inter-chunk gaps);
- ``e2e``: to the end of the stream (``data: [DONE]``, or the end of the body).

``output_tokens`` is the server's ``usage.completion_tokens`` (asked for with
``stream_options.include_usage``); ``chunks`` counts the content chunks, for when a server sends no usage.

While a level runs, a ticker measures how late the event loop wakes (``loop_lag_ms``): when the client
cannot keep up, that lag grows, and every timestamp above is late by about as much.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import re
import ssl
import time
from typing import Any, Callable
from urllib.parse import urlsplit

USER_AGENT = "dgxspark.cluster-bench/1"

# Words for the synthetic prompts and the needle's haystack: common, so a tokenizer makes about one
# token of each (the stand-in engine counts 4 characters as a token).
WORDS = (
    "the of and to in is was for on that with as by at from his her they this have had were which "
    "their are one all been more when time will some would there into other about could than them "
    "these then first water people many only after most made over did because through before long "
    "river city north south mountain valley station garden market harbour bridge window letter "
    "winter summer morning evening history science music village engine signal island forest"
).split()

NEEDLE_KEY = "secret passphrase"
NEEDLE_QUESTION = "What is the secret passphrase?"


def read_api_key(path: str) -> str:
    """The API key held in the file at ``path`` (on this host), without surrounding whitespace.

    A ValueError names the path, never the content: a missing, unreadable or empty file."""
    try:
        with open(path, encoding="utf-8") as handle:
            key = handle.read().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the API key file {path}: {getattr(error, 'strerror', None) or error}") from None
    if not key or any(ch in key for ch in "\r\n"):
        raise ValueError(f"the API key file {path} holds no key (or more than one line)")
    return key


def tls_context(ca_file: str | None = None, verify: bool = True) -> ssl.SSLContext:
    """A client's TLS context: the system's CAs, or only ``ca_file`` (a PEM on this host) when given."""
    try:
        context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"cannot load the CA file {ca_file}: {error}") from None
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Endpoint:
    """Where the OpenAI API is: ``url`` is its base, such as http://127.0.0.1:8000 (``/v1`` is added).

    ``api_key_file`` names a file on this host holding the key (read here, never passed around); ``ca_file`` is
    what an https server's certificate is checked against (default: the system's CAs)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        api: str = "chat",
        verify_tls: bool = True,
        api_key_file: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port][/path], got {url!r}")
        if api not in ("chat", "completions"):
            raise ValueError(f"api must be chat or completions, got {api!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.tls = tls_context(ca_file, verify_tls)
        if api_key is None and api_key_file:
            api_key = read_api_key(api_key_file)
        base = parts.path.rstrip("/")
        if not base.endswith("/v1"):
            base += "/v1"
        self.root = base[: -len("/v1")]
        self.api = api
        self.path = base + ("/chat/completions" if api == "chat" else "/completions")
        self.api_key = api_key

    def request_bytes(self, body: dict[str, Any]) -> bytes:
        payload = json.dumps(body).encode()
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"User-Agent: {USER_AGENT}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {len(payload)}",
        ]
        if self.api_key:
            head.append(f"Authorization: Bearer {self.api_key}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


class _Connection:
    """One keep-alive connection, opened on first use and again after the server closed it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def ensure(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None or self.reader.at_eof() or self.writer.is_closing():
            self.close()
            self.reader, self.writer = await asyncio.open_connection(
                self.endpoint.host, self.endpoint.port, ssl=self.endpoint.tls
            )
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class _Stream:
    """What one streamed answer said, with the time each piece of content arrived."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.buffer = b""
        self.content_times: list[float] = []
        self.text: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.done = False
        self.error: str | None = None

    def feed(self, data: bytes, now: float) -> None:
        self.buffer += data
        while True:
            cut = _event_end(self.buffer)
            if cut is None:
                return
            event, self.buffer = self.buffer[: cut[0]], self.buffer[cut[1] :]
            self._event(event, now)

    def finish(self, now: float) -> None:
        if self.buffer.strip():
            self._event(self.buffer, now)
        self.buffer = b""

    def _event(self, event: bytes, now: float) -> None:
        for line in event.splitlines():
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                chunk = json.loads(payload)
            except ValueError:
                self.error = f"a stream chunk is not JSON: {payload[:120]!r}"
                continue
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                error = chunk["error"]
                self.error = str(error.get("message", error)) if isinstance(error, dict) else str(error)
            if isinstance(chunk.get("usage"), dict):
                self.usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                piece = _choice_text(choice)
                if piece:
                    self.content_times.append(now)
                    self.text.append(piece)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """(end of the first complete SSE event, start of the rest), or None while it is incomplete."""
    found = [(buffer.find(sep), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
    found = [(at, size) for at, size in found if at >= 0]
    if not found:
        return None
    at, size = min(found)
    return at, at + size


def _choice_text(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        for key in ("content", "reasoning_content", "reasoning"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    value = choice.get("text")
    return value if isinstance(value, str) else ""


async def _read_response(
    reader: asyncio.StreamReader, stream: _Stream, clock: Callable[[], float]
) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 response; a 200's body goes to ``stream`` as it arrives, others are returned."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection before answering")
    try:
        status = int(status_line.split()[1])
    except (IndexError, ValueError):
        raise ConnectionError(f"not an HTTP status line: {status_line[:80]!r}") from None
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _sep, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""

    def take(data: bytes) -> None:
        nonlocal body
        if status == 200:
            stream.feed(data, clock())
        else:
            body += data

    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise ConnectionError("the stream ended inside a chunked body")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            data = await reader.readexactly(size)
            take(data)
            await reader.readexactly(2)
    elif "content-length" in headers:
        take(await reader.readexactly(int(headers["content-length"])))
    else:
        headers["connection"] = "close"
        while True:
            data = await reader.read(65536)
            if not data:
                break
            take(data)
    return status, headers, body


def _error_message(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and error.get("message"):
            return f"HTTP {status}: {error['message']}"
    except (ValueError, AttributeError):
        pass
    return f"HTTP {status}: {text.strip()[:200] or 'no body'}"


async def send(
    connection: _Connection, body: dict[str, Any], timeout: float, clock: Callable[[], float] = time.monotonic
) -> dict[str, Any]:
    """One streamed request on ``connection``: its record (see the module docstring), never an exception."""
    stream = _Stream(clock)
    record: dict[str, Any] = {"ok": False, "error": None, "status": None, "t_send": None, "ttft": None, "e2e": None}
    data = connection.endpoint.request_bytes(body)
    t_send = clock()
    record["t_send"] = t_send
    try:
        reader, writer = await asyncio.wait_for(connection.ensure(), timeout)
        t_send = clock()  # after a (re)connect, the request starts when it can be written
        record["t_send"] = t_send
        writer.write(data)
        await writer.drain()
        status, headers, error_body = await asyncio.wait_for(_read_response(reader, stream, clock), timeout)
        stream.finish(clock())
        end = clock()
        record["status"] = status
        if headers.get("connection", "").lower() == "close":
            connection.close()
        if status != 200:
            record["error"] = _error_message(status, error_body)
        elif stream.error:
            record["error"] = stream.error
        elif not stream.content_times:
            record["error"] = "the answer carried no content"
        else:
            record["ok"] = True
        record["e2e"] = end - t_send
    except asyncio.TimeoutError:
        connection.close()
        record["error"] = f"no complete answer within {timeout:g} s"
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as error:
        connection.close()
        record["error"] = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    times = stream.content_times
    if times:
        record["ttft"] = times[0] - t_send
    record["gaps"] = [round(b - a, 6) for a, b in zip(times, times[1:])]
    record["chunks"] = len(times)
    usage = stream.usage or {}
    record["output_tokens"] = usage.get("completion_tokens")
    record["prompt_tokens"] = usage.get("prompt_tokens")
    record["finish_reason"] = stream.finish_reason
    record["text"] = "".join(stream.text)
    for key in ("t_send", "ttft", "e2e"):
        if record[key] is not None:
            record[key] = round(record[key], 6)
    return record


def request_body(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    max_tokens: int,
    fixed_length: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A streamed request; ``fixed_length`` asks for exactly ``max_tokens`` (vLLM's ignore_eos, min_tokens)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    body["stream_options"] = {"include_usage": True}
    if endpoint.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if fixed_length:
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    body.update(extra or {})
    return body


def synthetic_prompt(tokens: int, index: int, seed: int) -> str:
    """About ``tokens`` tokens (4 characters each) of words; unique per ``index``, so no prefix is shared."""
    rng = random.Random(seed * 1000003 + index)
    words = [f"Request {seed}-{index}."]
    length = len(words[0])
    target = max(4 * tokens - 24, 8)
    while length < target:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words) + ". Continue the text."


async def _ticker(lags: list[float], interval: float, clock: Callable[[], float]) -> None:
    while True:
        before = clock()
        await asyncio.sleep(interval)
        lags.append(max(clock() - before - interval, 0.0))


def _lag_summary(lags: list[float]) -> dict[str, float]:
    if not lags:
        return {"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(lags)

    def at(q: float) -> float:
        return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000, 3)

    return {"samples": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 3)}


async def _run_level(
    endpoint: Endpoint,
    bodies: Callable[[int], dict[str, Any]],
    concurrency: int,
    requests: int,
    timeout: float,
    clock: Callable[[], float],
    ramp: float = 0.0,
) -> dict[str, Any]:
    lags: list[float] = []
    ticker = asyncio.ensure_future(_ticker(lags, 0.01, clock))
    records: list[dict[str, Any]] = []
    issued = 0
    started_at = time.time()
    start_wall, start_cpu = clock(), time.process_time()

    users = min(concurrency, requests)

    async def user(number: int) -> None:
        nonlocal issued
        connection = _Connection(endpoint)
        if ramp > 0:
            await asyncio.sleep(ramp * number / users)
        try:
            while issued < requests:
                index = issued
                issued += 1
                record = await send(connection, bodies(index), timeout, clock)
                record["i"] = index
                records.append(record)
        finally:
            connection.close()

    try:
        await asyncio.gather(*(user(number) for number in range(users)))
    finally:
        ticker.cancel()
    wall, cpu = clock() - start_wall, time.process_time() - start_cpu
    records.sort(key=lambda record: record["i"])
    return {
        "concurrency": concurrency,
        "requests": records,
        "client": {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "cpu_share": round(cpu / wall, 4) if wall > 0 else 0.0,
            "loop_lag": _lag_summary(lags),
            "started_at": round(started_at, 3),
            "finished_at": round(time.time(), 3),
        },
    }


def run_level(
    endpoint: Endpoint,
    model: str,
    concurrency: int,
    requests: int,
    prompt_tokens: int,
    max_tokens: int,
    timeout: float = 600.0,
    seed: int = 0,
    fixed_length: bool = True,
    extra: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    ramp: float = 0.0,
    first_index: int = 0,
) -> dict[str, Any]:
    """``requests`` requests, ``concurrency`` at a time, closed loop; one record each (text dropped).

    ``ramp`` spreads the users' first requests evenly over that many seconds (0: all at once).
    ``first_index`` numbers the requests from there (``i``), for a level sent in parts: each part's prompts
    and numbers follow the previous part's. A burst is a level with ``requests`` equal to ``concurrency``:
    every request is sent at once, each on its own connection.
    """
    if concurrency < 1 or requests < 1:
        raise ValueError("concurrency and requests must be at least 1")
    if first_index < 0:
        raise ValueError("first_index must be at least 0")

    def bodies(index: int) -> dict[str, Any]:
        prompt = synthetic_prompt(prompt_tokens, first_index + index, seed)
        return request_body(endpoint, model, prompt, max_tokens, fixed_length, extra)

    level = asyncio.run(_run_level(endpoint, bodies, concurrency, requests, timeout, clock, ramp))
    for record in level["requests"]:
        record.pop("text", None)
        record["i"] += first_index
    return level


def _one(endpoint: Endpoint, body: dict[str, Any], timeout: float, clock: Callable[[], float]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        connection = _Connection(endpoint)
        try:
            return await send(connection, body, timeout, clock)
        finally:
            connection.close()

    return asyncio.run(go())


def smoke(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    expect: str,
    max_tokens: int = 32,
    timeout: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """One streamed completion at temperature 0 (the boot's smoke): its text, time to first token and to the
    end, and whether the answer matches ``expect`` (a regular expression, case-insensitive)."""
    try:
        pattern = re.compile(expect, re.IGNORECASE | re.DOTALL)
    except re.error as error:
        raise ValueError(f"expect is not a regular expression: {error}") from None
    sent_at = time.time()
    record = _one(endpoint, request_body(endpoint, model, prompt, max_tokens, False), timeout, clock)
    text = record.get("text", "")
    return {
        "sent_at": round(sent_at, 6),
        "ok": bool(record["ok"]),
        "passed": bool(record["ok"] and pattern.search(text)),
        "text": text,
        "error": record["error"],
        "ttft": record["ttft"],
        "e2e": record["e2e"],
        "output_tokens": record["output_tokens"],
    }


def run_gate(
    endpoint: Endpoint,
    model: str,
    checks: list[dict[str, Any]],
    timeout: float = 120.0,
    extra: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Each check's prompt once, at temperature 0; it passes when its ``expect`` regex finds the answer."""
    results = []
    for check in checks:
        body = request_body(endpoint, model, check["prompt"], int(check.get("max_tokens", 64)), False, extra)
        started = clock()
        record = _one(endpoint, body, timeout, clock)
        seconds = round(clock() - started, 6)
        got = record.get("text", "")
        try:
            found = re.search(check["expect"], got, re.IGNORECASE | re.DOTALL) is not None
        except re.error as error:
            raise ValueError(f"gate check {check.get('name')!r}: expect is not a regular expression: {error}") from None
        results.append(
            {
                "name": check.get("name") or check["prompt"][:40],
                "prompt": check["prompt"],
                "expected": check["expect"],
                "got": got[:400],
                "passed": bool(record["ok"] and found),
                "error": record["error"],
                "seconds": seconds,
            }
        )
    return {"passed": all(item["passed"] for item in results) and bool(results), "checks": results}


def haystack(tokens: int, depth: float, seed: int, chars_per_token: float = 4.0) -> tuple[str, str]:
    """(prompt, passphrase): about ``tokens`` tokens of filler with one fact at ``depth`` (0 start, 1 end).

    The filler is ``chars_per_token`` characters a token; :func:`fit_haystack` measures the real ratio with
    the server's tokenizer and builds it again to size."""
    rng = random.Random(seed)
    passphrase = f"{rng.choice(WORDS[40:])}-{rng.choice(WORDS[40:])}-{rng.randint(100, 999)}"
    sentences: list[str] = []
    length = 0
    target = max(chars_per_token * tokens - 120, 200)
    while length < target:
        sentence = " ".join(rng.choice(WORDS) for _word in range(rng.randint(8, 16))).capitalize() + "."
        sentences.append(sentence)
        length += len(sentence) + 1
    at = min(max(int(len(sentences) * depth), 0), len(sentences))
    sentences.insert(at, f"The {NEEDLE_KEY} is {passphrase}.")
    prompt = " ".join(sentences) + f"\n\nAnswer from the text above. {NEEDLE_QUESTION}"
    return prompt, passphrase


def _call_json(
    endpoint: Endpoint, method: str, path: str, body: dict[str, Any] | None, timeout: float
) -> tuple[int, Any]:
    """One plain JSON request (no streaming): (HTTP status, parsed body or None)."""
    if endpoint.tls is not None:
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            endpoint.host, endpoint.port, timeout=timeout, context=endpoint.tls
        )
    else:
        connection = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json", "Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    try:
        payload = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(data) if data else None
    except ValueError:
        return response.status, None


def count_prompt_tokens(endpoint: Endpoint, model: str, prompt: str, timeout: float = 120.0) -> dict[str, Any] | None:
    """The server's own count of ``prompt`` as a request would send it (vLLM's ``POST /tokenize``, with the chat
    template for the chat API): ``{"count", "max_model_len"}``; None when the server has no /tokenize."""
    body: dict[str, Any] = {"model": model}
    if endpoint.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        body["add_generation_prompt"] = True
    else:
        body["prompt"] = prompt
    try:
        status, answer = _call_json(endpoint, "POST", endpoint.root + "/tokenize", body, timeout)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
        return None
    limit = answer.get("max_model_len")
    return {"count": answer["count"], "max_model_len": limit if isinstance(limit, int) else None}


def served_max_model_len(endpoint: Endpoint, model: str, timeout: float = 30.0) -> int | None:
    """``max_model_len`` of ``model`` in the server's ``GET /v1/models`` (vLLM lists it); None when not there."""
    try:
        status, answer = _call_json(endpoint, "GET", endpoint.root + "/v1/models", None, timeout)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200 or not isinstance(answer, dict):
        return None
    for entry in answer.get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model and isinstance(entry.get("max_model_len"), int):
            return entry["max_model_len"]
    return None


def fit_haystack(
    endpoint: Endpoint,
    model: str,
    tokens: int,
    depth: float,
    seed: int,
    timeout: float = 120.0,
    rounds: int = 3,
    tolerance: float = 0.002,
) -> dict[str, Any]:
    """A haystack of ``tokens`` tokens as the server counts them (``POST /tokenize``), not as estimated.

    Built at 4 characters a token, counted by the server, then built again at the ratio it measured, up to
    ``rounds`` times, until the count is within ``tolerance`` of ``tokens`` (or the closest one at or below it).
    Returns prompt, passphrase, ``counted`` (the server's count; None when it has no /tokenize: then the
    haystack is the 4-characters estimate) and the server's ``max_model_len`` (None when it does not say)."""
    chars = 4.0
    best: dict[str, Any] | None = None
    for _round in range(rounds):
        prompt, passphrase = haystack(tokens, depth, seed, chars)
        counted = count_prompt_tokens(endpoint, model, prompt, timeout)
        if counted is None:
            return {"prompt": prompt, "passphrase": passphrase, "counted": None, "max_model_len": None}
        candidate = {"prompt": prompt, "passphrase": passphrase, "counted": counted["count"]}
        candidate["max_model_len"] = counted["max_model_len"]
        if best is None or abs(candidate["counted"] - tokens) < abs(best["counted"] - tokens):
            best = candidate
        if abs(counted["count"] - tokens) <= tolerance * tokens or counted["count"] <= 0:
            break
        chars *= tokens / counted["count"]
    if best is None:  # the loop runs at least once
        raise RuntimeError("the needle could not be sized")
    return best


def run_needle(
    endpoint: Endpoint,
    model: str,
    tokens: int,
    depth: float = 0.5,
    seed: int = 0,
    timeout: float = 1800.0,
    max_tokens: int = 64,
    extra: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    max_model_len: int | None = None,
) -> dict[str, Any]:
    """One needle-in-a-haystack request: found (the passphrase is in the answer) and how long it took.

    The haystack is sized with the server's tokenizer (:func:`fit_haystack`). It is refused, with no request
    sent, when its tokens plus ``max_tokens`` do not fit the context: the smaller of ``max_model_len`` and what
    the server says. ``context_tokens`` is the server's ``usage.prompt_tokens`` of the request (``counted_by``
    ``usage``), else its /tokenize count (``tokenize``), else the 4-characters estimate (``estimate``)."""
    fitted = fit_haystack(endpoint, model, tokens, depth, seed, min(timeout, 300.0))
    prompt, passphrase = fitted["prompt"], fitted["passphrase"]
    limits = [limit for limit in (max_model_len, fitted["max_model_len"]) if limit]
    if not fitted["max_model_len"]:
        served = served_max_model_len(endpoint, model)
        limits += [served] if served else []
    limit = min(limits) if limits else None
    result: dict[str, Any] = {
        "context_tokens": fitted["counted"] if fitted["counted"] is not None else tokens,
        "counted_by": "tokenize" if fitted["counted"] is not None else "estimate",
        "requested_tokens": tokens,
        "tokenized_tokens": fitted["counted"],
        "max_model_len": limit,
        "depth": depth,
        "found": False,
        "seconds": 0.0,
        "ttft": None,
        "started_at": None,
        "finished_at": None,
        "expected": passphrase,
        "got": "",
        "error": None,
        "refused": False,
    }
    needed = result["context_tokens"] + max_tokens
    if limit is not None and needed > limit:
        result["refused"] = True
        result["error"] = (
            f"refused: the needle's {result['context_tokens']} prompt tokens ({result['counted_by']}) and "
            f"{max_tokens} answer tokens exceed max_model_len {limit}; "
            f"choose needle_tokens <= {limit - max_tokens - 64}"
        )
        return result
    body = request_body(endpoint, model, prompt, max_tokens, False, extra)
    result["started_at"] = round(time.time(), 3)
    started = clock()
    record = _one(endpoint, body, timeout, clock)
    result["seconds"] = round(clock() - started, 6)
    result["finished_at"] = round(time.time(), 3)
    got = record.get("text", "")
    if isinstance(record.get("prompt_tokens"), int):
        result["context_tokens"], result["counted_by"] = record["prompt_tokens"], "usage"
    result.update(
        found=bool(record["ok"] and passphrase.lower() in got.lower()),
        ttft=record["ttft"],
        got=got[:400],
        error=record["error"],
    )
    return result
