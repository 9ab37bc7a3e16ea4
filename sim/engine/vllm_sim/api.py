# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The OpenAI-compatible HTTP API of rank 0 (http.server, one thread per connection, HTTP/1.1)."""

from __future__ import annotations

import json
import select
import socket
import ssl
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import EMULATED_VLLM_VERSION, __version__, text
from .engine import Histogram, Request, Scheduler


class ApiError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param


class ServerState:
    """What the handlers need: the engine, the names, the limits."""

    def __init__(
        self,
        scheduler: Scheduler,
        names: list[str],
        root: str,
        max_model_len: int,
        cfg,
        api_keys: list[str],
        override_generation: dict,
        log,
        access_log: bool,
        shape: str,
    ):
        self.scheduler = scheduler
        self.names = names
        self.root = root
        self.max_model_len = max_model_len
        self.cfg = cfg
        self.api_keys = api_keys
        self.override_generation = override_generation or {}
        self.log = log
        self.access_log = access_log
        self.shape = shape
        self.created = int(time.time())
        self.serving = False


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, host: str, port: int, state: ServerState, tls: ssl.SSLContext | None = None):
        self.state = state
        self.tls = tls
        family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
        self.address_family = family
        super().__init__((host or "0.0.0.0", port), Handler, bind_and_activate=False)

    def bind(self) -> None:
        """Bind now (a port conflict fails the start at once); listen only once serving."""
        try:
            self.server_bind()
        except OSError:
            self.server_close()
            raise

    def activate(self) -> None:
        self.server_activate()

    def get_request(self):
        """With TLS (vLLM's --ssl-certfile/--ssl-keyfile), the connection is wrapped here and its handshake runs
        in the connection's own thread (Handler.setup), so a client that never completes one holds up nobody."""
        conn, address = super().get_request()
        if self.tls is not None:
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

    def handle_error(self, request, client_address) -> None:
        if self.tls is not None and isinstance(request, ssl.SSLSocket):
            return  # a failed handshake (a plain-HTTP client, an untrusted certificate): uvicorn says nothing either
        super().handle_error(request, client_address)


def server_tls(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    """The server's TLS context from vLLM's --ssl-certfile and --ssl-keyfile (None without a certificate)."""
    if not certfile:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile or None)
    return context


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"vllm-sim/{__version__}"
    sys_version = ""

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def state(self) -> ServerState:
        return self.server.state

    def log_message(self, fmt, *args) -> None:  # uvicorn's access log shape
        pass

    def log_request(self, code="-", size="-") -> None:
        if self.state.access_log:
            try:
                phrase = HTTPStatus(int(code)).phrase
            except (ValueError, TypeError):
                phrase = ""
            self.state.log.info(
                '%s:%d - "%s" %s %s', self.client_address[0], self.client_address[1], self.requestline, code, phrase
            )

    # ------------------------------------------------------------------ plumbing
    def _send_json(self, status: int, obj, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _send_text(self, status: int, body: str, ctype: str = "text/plain; charset=utf-8") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, exc: ApiError) -> None:
        self._send_json(
            exc.status,
            {"error": {"message": exc.message, "type": exc.err_type, "param": exc.param, "code": exc.status}},
        )

    def _read_json(self) -> dict:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise ApiError(400, f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return body

    def _authorized(self) -> bool:
        keys = self.state.api_keys
        if not keys:
            return True
        if self.headers.get("authorization", "") in [f"Bearer {k}" for k in keys]:
            return True
        self._send_json(401, {"error": "Unauthorized"})
        return False

    # ------------------------------------------------------------------ GET
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ping"):
            self._send_text(200 if self.state.serving else 503, "")
        elif path == "/version":
            self._send_json(
                200, {"version": EMULATED_VLLM_VERSION, "engine": f"vllm-sim {__version__} (stand-in, not vLLM)"}
            )
        elif path == "/v1/models":
            if self._authorized():
                self._send_json(200, self._models())
        elif path == "/metrics":
            self._send_text(200, self._metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/load":
            running, waiting = self.state.scheduler.counts()
            self._send_json(200, {"server_load": running + waiting})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _models(self) -> dict:
        s = self.state
        data = []
        for name in s.names:
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": s.created,
                    "owned_by": "vllm-sim",
                    "root": s.root,
                    "parent": None,
                    "max_model_len": s.max_model_len,
                    "permission": [
                        {
                            "id": f"modelperm-{uuid.uuid4().hex}",
                            "object": "model_permission",
                            "created": s.created,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            )
        return {"object": "list", "data": data}

    def _metrics(self) -> str:
        s = self.state
        sch = s.scheduler
        running, waiting = sch.counts()
        labels = f'engine="0",model_name="{s.names[0]}"'
        st = sch.stats
        out = []

        def metric(name, kind, help_, samples):
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            for suffix, extra, value in samples:
                lab = labels + (("," + extra) if extra else "")
                out.append(f"{name}{suffix}{{{lab}}} {float(value)}")

        def hist(name, help_, h: Histogram):
            samples = []
            for b, c in zip(h.buckets, h.counts, strict=True):
                samples.append(("_bucket", f'le="{b}"', c))
            samples.append(("_bucket", 'le="+Inf"', h.count))
            samples.append(("_count", "", h.count))
            samples.append(("_sum", "", h.sum))
            metric(name, "histogram", help_, samples)

        metric(
            "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", [("", "", running)]
        )
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", [("", "", waiting)])
        metric(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            [("", "", round(sch.kv_usage(), 6))],
        )
        metric(
            "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", [("", "", st.prompt_tokens)]
        )
        metric(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            [("", "", st.generation_tokens)],
        )
        metric(
            "vllm:request_success_total",
            "counter",
            "Count of successfully processed requests.",
            [("", f'finished_reason="{r}"', st.success.get(r, 0)) for r in ("stop", "length", "abort")],
        )
        hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", st.ttft)
        hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", st.itl)
        hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", st.e2e)
        out.append("# HELP vllm_sim_info The stand-in engine (not vLLM) and the timing table it uses.")
        out.append("# TYPE vllm_sim_info gauge")
        out.append(f'vllm_sim_info{{version="{__version__}",shape="{s.shape}"}} 1.0')
        return "\n".join(out) + "\n"

    # ------------------------------------------------------------------ POST
    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path not in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                self._send_json(404, {"detail": "Not Found"})
                return
            if not self._authorized():
                return
            body = self._read_json()
            if path == "/tokenize":
                self._tokenize(body)
                return
            self._generate(body, chat=path.endswith("chat/completions"))
        except ApiError as exc:
            self._error(exc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _resolve_model(self, body: dict) -> str:
        model = body.get("model")
        if model is None:
            return self.state.names[0]
        if model not in self.state.names:
            raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        return model

    def _prompt(self, body: dict, chat: bool) -> tuple[str, str, int]:
        """(prompt text, where the question is, prompt tokens) of a chat or completions body."""
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ApiError(400, "'messages' must be a non-empty list", param="messages")
            try:
                prompt, question = text.render_chat(messages)
            except ValueError as exc:
                raise ApiError(400, str(exc), param="messages") from None
            return prompt, question, text.count_text_tokens(prompt)
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], (str, list)):
            raw = raw[0]
        if isinstance(raw, str):
            return raw, raw, text.count_text_tokens(raw)
        if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            return "", "", len(raw)
        raise ApiError(
            400,
            "'prompt' must be a string, a list of token ids, or a list of one of those "
            "(the stand-in engine serves one prompt per request)",
            param="prompt",
        )

    def _tokenize(self, body: dict) -> None:
        """vLLM's POST /tokenize: ``{"count", "max_model_len", "tokens"}`` for a ``prompt`` or ``messages``.

        The count is the one the completions would report as ``usage.prompt_tokens`` (the stand-in's rule:
        4 characters a token); the token ids are made up (0, 1, 2, ...), and listed only when asked for with
        ``return_tokens`` (the stand-in's own key; vLLM always lists them), so that counting a 443,223-token
        needle does not send megabytes back."""
        self._resolve_model(body)
        _prompt, _question, count = self._prompt(body, chat="messages" in body)
        answer = {"count": count, "max_model_len": self.state.max_model_len, "tokens": [], "token_strs": None}
        if body.get("return_tokens"):
            answer["tokens"] = list(range(count))
        self._send_json(200, answer)

    def _generate(self, body: dict, chat: bool) -> None:
        s = self.state
        model = self._resolve_model(body)
        n = body.get("n", 1)
        if n not in (1, None):
            raise ApiError(400, "the stand-in engine (vllm-sim) supports only n=1", param="n")
        prompt, question, prompt_tokens = self._prompt(body, chat)
        max_len = s.max_model_len
        if prompt_tokens >= max_len:
            raise ApiError(
                400,
                f"This model's maximum context length is {max_len} tokens. However, your prompt contains "
                f"{prompt_tokens} input tokens, which exceeds this limit even without any output tokens. "
                "Please reduce the length of the input prompt.",
                param="input_tokens",
            )
        max_tokens = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        if max_tokens is not None:
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
            if prompt_tokens + max_tokens > max_len:
                raise ApiError(
                    400,
                    f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
                    f"context length is {max_len} tokens and your request has {prompt_tokens} input tokens "
                    f"({max_tokens} > {max_len} - {prompt_tokens}).",
                    param="max_tokens",
                )
        room = max_len - prompt_tokens
        tokens, rule = text.answer_tokens(prompt, question)
        ignore_eos = bool(body.get("ignore_eos"))
        min_tokens = body.get("min_tokens") or 0
        if not isinstance(min_tokens, int) or min_tokens < 0:
            raise ApiError(400, f"min_tokens must be greater than or equal to 0, got {min_tokens}.", param="min_tokens")
        limit = max_tokens
        if limit is None:
            default = s.override_generation.get("max_new_tokens") or s.override_generation.get("max_tokens")
            limit = min(room, int(default)) if default else room
        natural = len(tokens)
        if rule == "filler":
            natural = s.cfg.filler_tokens if max_tokens is None else limit
            tokens = text.filler(min(natural, limit))
        if ignore_eos or min_tokens > len(tokens):
            want = limit if ignore_eos else min(max(min_tokens, len(tokens)), limit)
            if want > len(tokens):
                tokens = tokens + text.filler(want - len(tokens), first=not tokens)
        finish = "stop"
        if len(tokens) > limit:
            tokens = tokens[:limit]
            finish = "length"
        elif len(tokens) == limit and (ignore_eos or rule == "filler") and max_tokens is not None:
            finish = "length"
        stops = body.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        tokens, stopped = text.apply_stop(tokens, [x for x in stops if isinstance(x, str)])
        if stopped:
            finish = "stop"
        if s.cfg.garble:
            tokens = text.garble(tokens)
        if not tokens:
            tokens = [""]
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        req = Request(prompt_tokens, tokens, finish, s.scheduler.timing.prefill_extra(prompt_tokens))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        s.scheduler.submit(req)
        try:
            if stream:
                self._stream(req, rid, created, model, chat, include_usage, continuous)
            else:
                self._complete(req, rid, created, model, chat)
        finally:
            if req.state in ("waiting", "running"):
                s.scheduler.abort(req)

    def _client_gone(self) -> bool:
        if isinstance(self.connection, ssl.SSLSocket):
            return False  # a TLS record cannot be peeked at: a client that leaves is seen when a write fails
        try:
            readable = select.select([self.connection], [], [], 0)[0]
            if readable:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
        return False

    def _events(self, req: Request, watch_client: bool):
        """Yield ("token", text) then ("end", reason); ("abort", None) on shutdown."""
        while True:
            try:
                ev = req.events.get(timeout=0.5)
            except Exception:  # queue.Empty
                if watch_client and self._client_gone():
                    raise BrokenPipeError("client went away") from None
                continue
            yield ev
            if ev[0] in ("end", "abort"):
                return

    def _complete(self, req: Request, rid: str, created: int, model: str, chat: bool) -> None:
        parts = []
        finish = None
        for kind, value in self._events(req, watch_client=True):
            if kind == "token":
                parts.append(value)
            elif kind == "end":
                finish = value
            else:
                raise ApiError(503, "the engine is shutting down", "ServiceUnavailableError")
        content = "".join(parts)
        usage = _usage(req.prompt_tokens, len(parts))
        if chat:
            choice = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
            obj = {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
                "prompt_logprobs": None,
            }
        else:
            choice = {
                "index": 0,
                "text": content,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            obj = {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
            }
        self._send_json(200, obj)

    def _chunk(self, data: str) -> None:
        payload = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def _stream(self, req, rid, created, model, chat, include_usage, continuous) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        obj_type = "chat.completion.chunk" if chat else "text_completion"
        count = 0

        def event(choices, usage=None):
            obj = {"id": rid, "object": obj_type, "created": created, "model": model, "choices": choices}
            if usage is not None:
                obj["usage"] = usage
            self._chunk("data: " + json.dumps(obj) + "\n\n")

        for kind, value in self._events(req, watch_client=False):
            if kind == "abort":
                break
            if kind == "token":
                if count == 0 and chat:
                    event(
                        [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": ""},
                                "logprobs": None,
                                "finish_reason": None,
                            }
                        ]
                    )
                count += 1
                # The scheduler emits the last token and then "end": the last token carries finish_reason.
                finish = req.finish_reason if count >= len(req.tokens) else None
                self._emit(event, chat, value, finish, req, count, continuous)
            elif kind == "end" and include_usage:
                event([], _usage(req.prompt_tokens, count))
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    @staticmethod
    def _emit(event, chat, token, finish, req, count, continuous) -> None:
        usage = _usage(req.prompt_tokens, count) if continuous else None
        if chat:
            event(
                [
                    {
                        "index": 0,
                        "delta": {"content": token},
                        "logprobs": None,
                        "finish_reason": finish,
                        "stop_reason": None,
                    }
                ],
                usage,
            )
        else:
            event([{"index": 0, "text": token, "logprobs": None, "finish_reason": finish, "stop_reason": None}], usage)
