# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's node-side Docker engine client: the engine's API over its Unix socket, standard library only.

node_facts reads the engine's state with it: four GET requests on one connection, all documented in the Docker
Engine API (unversioned paths, so the daemon answers in its own API version): ``/version``,
``/containers/json?all=1`` (names, image references and image IDs, state, labels as a map), ``/images/json`` and
``/containers/<name>/json`` for the serving container (404 when it does not exist). The docker CLI would need three
processes for the same (``ps`` cannot print image IDs, so ``inspect`` on top) and flattens labels into one
comma-joined string.

Why a client of the collection's own beside community.docker (docs/development.md, "Docker clients"): the
modules that use it - node_facts, node_phase, rank_health, rank_stop, window_job (and _rank_start.py,
_rank_stop.py, _window_job.py) - each do their Docker work inside one module call on the node, beside work no
community.docker module does: node_facts reads the whole node in one round trip; node_phase stops or starts the
ranks in the same call that pauses or resumes the helpers and sets the memory guard; rank_health polls the head every
0.25 s on the node; rank_stop finds the ranks by label whatever the profile says and confirms that none runs after;
window_job runs a job to its end. community.docker's modules are a module call each, and its API modules need
Python's requests on the node, where module_utils is standard library only. The ranks themselves are created
with community.docker.docker_container (the rank_container action, the vllm_container role), because the plan
renders a rank as docker_container's parameters and the profile's docker_run_args are judged in its terms.
"""

from __future__ import annotations

import http.client
import json
import socket
from contextlib import contextmanager
from typing import Any, Iterator, Mapping
from urllib.parse import quote

from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import is_secret_name

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
REDACTED = "<redacted>"
# How much longer than its stop timeout a request that stops a container may take: the engine answers once the
# container has exited, after SIGTERM, the timeout and SIGKILL.
STOP_GRACE_S = 30


class DockerEngineError(Exception):
    """The engine could not be asked, or answered with an error."""


def socket_path(docker_host: str) -> str:
    """``unix:///var/run/docker.sock`` -> ``/var/run/docker.sock``; other schemes raise ``ValueError``."""
    if docker_host.startswith("unix://"):
        path = docker_host[len("unix://") :]
        if path.startswith("/"):
            return path
    raise ValueError(f"docker_host must be a unix:// socket URL such as {DEFAULT_DOCKER_HOST}, found {docker_host!r}")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DockerEngine:
    """A keep-alive HTTP connection to the engine's socket; ``get`` returns (status, decoded JSON)."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._connection = _UnixHTTPConnection(path, timeout)

    def get(self, url: str) -> tuple[int, Any]:
        try:
            self._connection.request("GET", url, headers={"Accept": "application/json"})
            response = self._connection.getresponse()
            body = response.read()
        except FileNotFoundError:
            raise DockerEngineError(f"no Docker engine socket at {self.path}") from None
        except PermissionError:
            raise DockerEngineError(
                f"permission denied on {self.path}: run the task with become, or as a member of the docker group"
            ) from None
        except ConnectionRefusedError:
            raise DockerEngineError(f"nothing answers on {self.path} (dockerd is not running)") from None
        except socket.timeout:
            raise DockerEngineError(f"the Docker engine did not answer GET {url} within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise DockerEngineError(f"GET {url} on {self.path} failed: {error}") from None
        try:
            data = json.loads(body.decode("utf-8")) if body else None
        except ValueError:
            raise DockerEngineError(f"GET {url}: the engine's answer is not JSON: {body[:120]!r}") from None
        return response.status, data

    def get_raw(self, url: str) -> tuple[int, bytes]:
        """GET ``url`` for a body that is not JSON (container logs)."""
        try:
            self._connection.request("GET", url)
            response = self._connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as error:
            raise DockerEngineError(f"GET {url} on {self.path} failed: {error}") from None

    def send(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """``method`` (POST, DELETE) on ``url``, with ``body`` as JSON when given: (status, decoded JSON or None)."""
        payload = json.dumps(body).encode("utf-8") if body is not None else b""
        headers = {"Accept": "application/json", "Content-Length": str(len(payload))}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            self._connection.request(method, url, body=payload or None, headers=headers)
            response = self._connection.getresponse()
            answer = response.read()
        except socket.timeout:
            raise DockerEngineError(
                f"the Docker engine did not answer {method} {url} within {self.timeout:g} s"
            ) from None
        except (OSError, http.client.HTTPException) as error:
            raise DockerEngineError(f"{method} {url} on {self.path} failed: {error}") from None
        try:
            return response.status, json.loads(answer.decode("utf-8")) if answer else None
        except ValueError:
            return response.status, answer.decode("utf-8", "replace")

    def get_ok(self, url: str) -> Any:
        status, data = self.get(url)
        if status != 200:
            raise DockerEngineError(f"GET {url}: HTTP {status}: {_message(data)}")
        return data

    def close(self) -> None:
        self._connection.close()


def stop_wait(stop_timeout: int) -> float:
    """How long an engine request may take that stops a container with ``stop_timeout``: the timeout for an engine
    a stop is asked of."""
    return float(stop_timeout) + STOP_GRACE_S


@contextmanager
def engine_at(docker_host: str, timeout: float) -> Iterator[DockerEngine]:
    """The engine on ``docker_host``'s socket (``ValueError`` when that is not a ``unix://`` URL), closed when the
    block ends. Nothing is asked until the block asks."""
    engine = DockerEngine(socket_path(docker_host), timeout)
    try:
        yield engine
    finally:
        engine.close()


def _message(data: Any) -> str:
    if isinstance(data, Mapping) and isinstance(data.get("message"), str):
        return data["message"]
    return json.dumps(data)[:200]


# ---------------------------------------------------------------- shaping the answers (pure)
def engine_summary(version: Mapping[str, Any]) -> dict[str, Any]:
    """From ``/version``."""
    return {
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "os": version.get("Os"),
        "arch": version.get("Arch"),
        "kernel_version": version.get("KernelVersion"),
    }


def _name(names: Any) -> str | None:
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0].lstrip("/")
    return None


def container_summary(item: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of ``/containers/json``."""
    return {
        "name": _name(item.get("Names")),
        "id": item.get("Id"),
        "image": item.get("Image"),
        "image_id": item.get("ImageID"),
        "state": item.get("State"),
        "status": item.get("Status"),
        "created": item.get("Created"),
        "labels": dict(item.get("Labels") or {}),
    }


def image_summary(item: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of ``/images/json``."""
    return {
        "id": item.get("Id"),
        "tags": list(item.get("RepoTags") or []),
        "digests": list(item.get("RepoDigests") or []),
        "created": item.get("Created"),
        "size": item.get("Size"),
        "labels": dict(item.get("Labels") or {}),
    }


def redacted_environment(env: Any) -> dict[str, str]:
    """``["K=V", ...]`` as a map, with the values of secret names (:func:`is_secret_name`) replaced by
    ``<redacted>``: node_facts never returns them."""
    result: dict[str, str] = {}
    for entry in env or []:
        key, _sep, value = str(entry).partition("=")
        result[key] = REDACTED if is_secret_name(key) else value
    return result


def container_detail(inspect: Mapping[str, Any]) -> dict[str, Any]:
    """The serving container from ``/containers/<name>/json``: what a preflight compares with the plan."""
    state = inspect.get("State") or {}
    config = inspect.get("Config") or {}
    host = inspect.get("HostConfig") or {}
    health = state.get("Health") or {}
    return {
        "exists": True,
        "name": str(inspect.get("Name") or "").lstrip("/"),
        "id": inspect.get("Id"),
        "image": config.get("Image"),
        "image_id": inspect.get("Image"),
        "created": inspect.get("Created"),
        "state": {
            "status": state.get("Status"),
            "running": state.get("Running"),
            "restarting": state.get("Restarting"),
            "oom_killed": state.get("OOMKilled"),
            "exit_code": state.get("ExitCode"),
            "error": state.get("Error") or None,
            "pid": state.get("Pid"),
            "started_at": state.get("StartedAt"),
            "finished_at": state.get("FinishedAt"),
            "health": health.get("Status"),
        },
        "restart_count": inspect.get("RestartCount"),
        "restart_policy": (host.get("RestartPolicy") or {}).get("Name"),
        "entrypoint": config.get("Entrypoint"),
        "cmd": config.get("Cmd"),
        "labels": dict(config.get("Labels") or {}),
        "env": redacted_environment(config.get("Env")),
        "network_mode": host.get("NetworkMode"),
        "ipc_mode": host.get("IpcMode"),
        "privileged": host.get("Privileged"),
        "cap_add": list(host.get("CapAdd") or []),
        "security_opt": list(host.get("SecurityOpt") or []),
        "shm_size": host.get("ShmSize"),
        "memory": host.get("Memory"),
        "memory_swap": host.get("MemorySwap"),
        "ulimits": {
            u.get("Name"): {"soft": u.get("Soft"), "hard": u.get("Hard")}
            for u in host.get("Ulimits") or []
            if isinstance(u, Mapping)
        },
        "devices": [d.get("PathOnHost") for d in host.get("Devices") or [] if isinstance(d, Mapping)],
        "gpus": [
            {"driver": r.get("Driver"), "count": r.get("Count"), "capabilities": r.get("Capabilities")}
            for r in host.get("DeviceRequests") or []
            if isinstance(r, Mapping)
        ],
        "mounts": [
            {
                "type": m.get("Type"),
                "source": m.get("Source"),
                "destination": m.get("Destination"),
                "rw": m.get("RW"),
            }
            for m in inspect.get("Mounts") or []
            if isinstance(m, Mapping)
        ],
    }


# ---------------------------------------------------------------- gathering
def _objects(engine: DockerEngine, url: str) -> list[Mapping[str, Any]]:
    data = engine.get_ok(url)
    if not isinstance(data, list):
        raise DockerEngineError(f"GET {url}: expected a JSON list, found {type(data).__name__}")
    return [item for item in data if isinstance(item, Mapping)]


def docker_facts(engine: DockerEngine, container_name: str | None) -> dict[str, Any]:
    """Ask the engine everything; a failure is reported in ``error`` with whatever was read before it."""
    facts: dict[str, Any] = {
        "present": False,
        "error": None,
        "socket": engine.path,
        "engine": None,
        "containers": [],
        "images": [],
        "container": {"exists": False, "name": container_name} if container_name else None,
        "runtimes": None,
        "default_runtime": None,
    }
    try:
        facts["engine"] = engine_summary(engine.get_ok("/version"))
        facts["present"] = True
        facts["containers"] = [container_summary(c) for c in _objects(engine, "/containers/json?all=1")]
        facts["images"] = [image_summary(i) for i in _objects(engine, "/images/json")]
        if container_name:
            status, data = engine.get(f"/containers/{quote(container_name, safe='')}/json")
            if status == 200:
                facts["container"] = container_detail(data)
            elif status != 404:
                raise DockerEngineError(f"GET /containers/{container_name}/json: HTTP {status}: {_message(data)}")
        facts.update(runtime_summary(engine))
    except DockerEngineError as error:
        facts["error"] = str(error)
    finally:
        engine.close()
    return facts


def runtime_summary(engine: DockerEngine) -> dict[str, Any]:
    """The engine's container runtimes (``/info``: ``Runtimes``' names and ``DefaultRuntime``), what tells whether a
    container may be given GPUs (the NVIDIA runtime); both None when the engine does not say (an unknown, not a no)."""
    status, info = engine.get("/info")
    if status != 200 or not isinstance(info, Mapping):
        return {"runtimes": None, "default_runtime": None}
    runtimes = info.get("Runtimes")
    return {
        "runtimes": sorted(str(name) for name in runtimes) if isinstance(runtimes, Mapping) else None,
        "default_runtime": info.get("DefaultRuntime") if isinstance(info.get("DefaultRuntime"), str) else None,
    }


def demultiplex_logs(body: bytes) -> str:
    """Container logs as the engine sends them: frames of an 8-byte header (stream, 0, 0, 0, size) and the
    payload when the container has no TTY; the bare text otherwise."""
    if len(body) < 8 or body[0] not in (0, 1, 2) or body[1:4] != b"\x00\x00\x00":
        return body.decode("utf-8", "replace")
    out = bytearray()
    at = 0
    while at + 8 <= len(body):
        size = int.from_bytes(body[at + 4 : at + 8], "big")
        out += body[at + 8 : at + 8 + size]
        at += 8 + size
    return out.decode("utf-8", "replace")
