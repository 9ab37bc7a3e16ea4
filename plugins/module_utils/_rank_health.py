# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One look at a rank: its container (running, exit code), its API (health, models) and its last log lines.

No Ansible imports. The container is asked over the Docker engine's socket; the API over HTTP on the
node itself (the head serves it). Nothing is changed.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from typing import Any, Callable
from urllib.parse import quote, urlsplit

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    DockerEngine,
    DockerEngineError,
    demultiplex_logs,
)

# How http_get says that the server's certificate does not verify against the CA given: waiting does not change it.
CERTIFICATE_REFUSED = "the API's certificate does not verify: "


def http_get(
    url: str, timeout: float, api_key: str | None = None, tls: ssl.SSLContext | None = None
) -> tuple[int | None, str, str | None]:
    """(status, body, error): a refused or timed-out connection, or a certificate that does not verify, is an
    error, not an exception. ``api_key`` goes as ``Authorization: Bearer``; an https URL uses ``tls``."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = tls or ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, parts.port or 443, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, parts.port or 80, timeout=timeout)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        connection.request("GET", parts.path or "/", headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace"), None
    except ssl.SSLCertVerificationError as error:
        return None, "", CERTIFICATE_REFUSED + (error.verify_message or str(error))
    except (OSError, http.client.HTTPException) as error:
        return None, "", str(error) or type(error).__name__
    finally:
        connection.close()


def rank_health(
    engine: DockerEngine,
    container: str,
    api: str | None,
    log_lines: int = 1,
    timeout: float = 5.0,
    wait: float = 0.0,
    poll: float = 0.25,
    sleep: Callable[[float], None] = time.sleep,
    api_key: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """Look at the rank; with ``wait`` (and ``api``) look again every ``poll`` seconds, on the node, until the
    head serves (health and models), its container stops, or ``wait`` seconds passed: one round trip from the
    controller notices readiness within ``poll``. ``port_open_at`` and ``ready_at`` (epoch seconds, the
    node's clock) say when the API port first accepted a connection and when the head first served, as seen
    by this call; ``started_at`` is Docker's own start time of the container."""
    started = time.monotonic()
    first: dict[str, Any] = {}
    while True:
        look = _look_once(engine, container, api, log_lines, timeout, api_key, tls)
        for key in ("port_open_at", "ready_at"):
            if look.get(key) is not None:
                first.setdefault(key, look[key])
        serving = bool(look.get("healthy") and look.get("models"))
        done = serving or not look.get("running") or look.get("refused")
        if not api or done or time.monotonic() - started + poll > wait:
            look.update({key: first.get(key) for key in ("port_open_at", "ready_at")})
            look["elapsed_ms"] = round((time.monotonic() - started) * 1000, 1)
            return look
        sleep(poll)


def _look_once(
    engine: DockerEngine,
    container: str,
    api: str | None,
    log_lines: int,
    timeout: float,
    api_key: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """One look: the container state, last log lines and (with ``api``, the head's base URL) health and models.

    ``running`` is None, never False, when the engine could not be asked (``error`` says why): "it does not
    run" is only said after it was checked."""
    result: dict[str, Any] = {
        "container": container,
        "exists": False,
        "running": False,
        "status": None,
        "exit_code": None,
        "oom_killed": None,
        "log_tail": [],
        "healthy": None,
        "models": None,
        "error": None,
        # why the API refuses this look for good (its certificate does not verify, or its key is not the one
        # sent): waiting does not change it
        "refused": None,
    }
    name = quote(container, safe="")
    try:
        status, data = engine.get(f"/containers/{name}/json")
        if status == 404:
            result["status"] = "absent"
        elif status != 200 or not isinstance(data, dict):
            result["error"] = f"the Docker engine answered HTTP {status} for {container}"
        else:
            state = data.get("State") or {}
            result["started_at"] = state.get("StartedAt")
            result.update(
                exists=True,
                running=bool(state.get("Running")),
                status=state.get("Status"),
                exit_code=state.get("ExitCode"),
                oom_killed=state.get("OOMKilled"),
            )
            code, body = engine.get_raw(f"/containers/{name}/logs?stdout=1&stderr=1&tail={int(log_lines)}")
            if code == 200:
                result["log_tail"] = [line for line in demultiplex_logs(body).splitlines() if line.strip()]
    except DockerEngineError as error:
        result["error"] = str(error)
    if result["error"] is not None:
        result["running"] = None  # not known: the engine could not be asked
    if api and result["running"]:
        base = api.rstrip("/")
        code, _body, error = http_get(f"{base}/health", timeout, api_key, tls)
        if code is not None:
            result["port_open_at"] = time.time()
        result["healthy"] = code == 200
        result["health_error"] = error or (None if code == 200 else f"HTTP {code}")
        if error and error.startswith(CERTIFICATE_REFUSED):
            result["refused"] = error
        if code == 200:
            code, body, error = http_get(f"{base}/v1/models", timeout, api_key, tls)
            if code == 401:
                result["health_error"] = (
                    "HTTP 401 on /v1/models: the API wants a key this look did not send"
                    if not api_key
                    else "HTTP 401 on /v1/models: the API refuses the key in container.api.api_key_file"
                )
                result["refused"] = result["health_error"]
            if code == 200:
                try:
                    result["models"] = [m.get("id") for m in json.loads(body).get("data", [])]
                    if result["models"]:
                        result["ready_at"] = time.time()
                except (ValueError, AttributeError):
                    result["models"] = None
    return result
