# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' ``api`` section: the OpenAI API as the head reaches it (``GET /v1/models``, and on request one
streamed completion of one token). Standard library only; read-only (a completion changes nothing)."""

from __future__ import annotations

import json
import ssl
import time
from typing import Any, Callable

from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_health import http_get

SMOKE_PROMPT = "Say OK."


def api_facts(
    url: str | None,
    api_key_file: str | None = None,
    ca_file: str | None = None,
    smoke: bool = False,
    timeout: float = 20.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """``url`` (the base, such as http://127.0.0.1:8000), ``answered`` (HTTP 200 on /v1/models), ``status``,
    ``models`` (their ids), ``seconds``, ``error`` and ``smoke`` (null unless asked: ``ok``, ``ttft``, ``e2e``,
    ``output_tokens``, ``error``). Never raises: what went wrong is ``error``."""
    facts: dict[str, Any] = {
        "url": url,
        "answered": False,
        "status": None,
        "models": [],
        "seconds": None,
        "error": None,
        "smoke": None,
    }
    if not url:
        facts["error"] = "no API URL given"
        return facts
    api_key = None
    tls: ssl.SSLContext | None = None
    try:
        if api_key_file:
            from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import read_api_key

            api_key = read_api_key(api_key_file)
        if url.startswith("https"):
            from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import tls_context

            tls = tls_context(ca_file)
    except ValueError as error:
        facts["error"] = str(error)
        return facts
    start = clock()
    status, body, error = http_get(url.rstrip("/") + "/v1/models", timeout, api_key, tls)
    facts.update(status=status, seconds=round(clock() - start, 3))
    if error is not None:
        facts["error"] = error
        return facts
    if status != 200:
        facts["error"] = f"HTTP {status} on /v1/models"
        return facts
    try:
        listed = json.loads(body).get("data") or []
        facts["models"] = [str(model.get("id")) for model in listed if isinstance(model, dict)]
    except (ValueError, AttributeError):
        facts["error"] = "/v1/models did not answer JSON with a data list"
        return facts
    facts["answered"] = True
    if smoke and facts["models"]:
        facts["smoke"] = _smoke(url, api_key_file, ca_file, facts["models"][0], timeout, clock)
    return facts


def _smoke(
    url: str, api_key_file: str | None, ca_file: str | None, model: str, timeout: float, clock: Callable[[], float]
) -> dict[str, Any]:
    """One streamed completion of one token (max_tokens 1) at temperature 0: did a token come, and how fast."""
    from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import Endpoint, smoke

    try:
        endpoint = Endpoint(url, api_key_file=api_key_file, ca_file=ca_file)
        done = smoke(endpoint, model, SMOKE_PROMPT, ".", max_tokens=1, timeout=timeout, clock=clock)
    except ValueError as error:
        return {"ok": False, "ttft": None, "e2e": None, "output_tokens": None, "error": str(error)}
    return {key: done.get(key) for key in ("ok", "ttft", "e2e", "output_tokens", "error")}
