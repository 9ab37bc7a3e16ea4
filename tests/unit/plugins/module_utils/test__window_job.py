# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A window job on a node: started from its image and command, watched to its end or its timeout, kept, removed."""

from __future__ import annotations

import json
import os
import stat
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._window_job import (
    WINDOW_LABEL,
    Job,
    WindowJobError,
    run_job,
)

IMAGE = "captioner:2026.11"


def frame(text: str) -> bytes:
    payload = text.encode()
    return b"\x01\x00\x00\x00" + len(payload).to_bytes(4, "big") + payload


class Engine:
    """A Docker engine with one image; a created job runs for ``runs`` looks, then exits with ``exit_code``
    (or runs until stopped, when ``runs`` is None)."""

    def __init__(self, runs: int | None = 2, exit_code: int = 0, containers: list[dict[str, Any]] | None = None):
        self.runs, self.exit_code = runs, exit_code
        self.containers: dict[str, dict[str, Any]] = {c["Id"]: c for c in containers or []}
        self.requests: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    def _state(self, ident: str) -> dict[str, Any]:
        return self.containers[ident]["State"]

    def get(self, url: str) -> tuple[int, Any]:
        self.requests.append(f"GET {url}")
        parts = urlsplit(url)
        if parts.path == "/containers/json":
            wanted = json.loads(parse_qs(parts.query)["filters"][0])["label"]
            return 200, [
                {"Id": c["Id"], "Names": [c["Name"]], "State": c["State"]["Status"], "Labels": c["Config"]["Labels"]}
                for c in self.containers.values()
                if all(label in c["Config"]["Labels"] for label in wanted)
            ]
        if parts.path.startswith("/images/"):
            return (200, {"Id": "sha256:" + "c" * 64}) if unquote(parts.path.split("/")[2]) == IMAGE else (404, {})
        ident = parts.path.split("/")[2]
        found = self.containers.get(ident)
        if found is None:
            return 404, {"message": "no such container"}
        state = found["State"]
        if state["Running"] and self.runs is not None:
            self.runs -= 1
            if self.runs < 0:
                state.update(Running=False, Status="exited", ExitCode=self.exit_code, FinishedAt="2026-12-02T06:00:09Z")
        return 200, found

    def get_raw(self, url: str) -> tuple[int, bytes]:
        self.requests.append(f"GET {url}")
        return 200, b"".join(frame(f"line {n}\n") for n in range(30))

    def send(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        self.requests.append(f"{method} {url}")
        parts = urlsplit(url)
        if parts.path == "/containers/create":
            self.bodies.append(body or {})
            name = parse_qs(parts.query)["name"][0]
            ident = "d" * 64
            self.containers[ident] = {
                "Id": ident,
                "Name": f"/{name}",
                "Image": "sha256:" + "c" * 64,
                "Config": {"Image": IMAGE, "Labels": (body or {})["Labels"]},
                "State": {
                    "Running": False,
                    "Status": "created",
                    "ExitCode": 0,
                    "OOMKilled": False,
                    "StartedAt": "",
                    "FinishedAt": "0001-01-01T00:00:00Z",
                },
            }
            return 201, {"Id": ident}
        ident = parts.path.split("/")[2]
        if ident not in self.containers:
            return 404, {"message": "no such container"}
        action = parts.path.split("/")[-1]
        if method == "DELETE":
            del self.containers[ident]
            return 204, None
        if action == "start":
            self._state(ident).update(Running=True, Status="running", StartedAt="2026-12-02T06:00:00Z")
            return 204, None
        if action == "stop":
            self._state(ident).update(Running=False, Status="exited", ExitCode=143, FinishedAt="2026-12-02T06:01:00Z")
            return 204, None
        raise AssertionError(url)

    def close(self) -> None:
        self.requests.append("CLOSE")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def job(engine: Engine, tmp_path: Any, timeout_s: float = 60, **overrides: Any) -> dict[str, Any]:
    clock = Clock()
    fields: dict[str, Any] = {
        "name": "captions",
        "image": IMAGE,
        "command": ["python", "-m", "captioner"],
        "env": {"CAPTION_LANG": "en"},
        "volumes": ["/srv/data:/data:ro"],
        "gpus": True,
        "network_mode": "host",
    }
    fields.update((key, overrides.pop(key)) for key in list(overrides) if key in fields)
    arguments: dict[str, Any] = {
        "timeout_s": timeout_s,
        "stop_timeout": 10,
        "save_dir": str(tmp_path / "windows"),
        "log_lines": 5,
        "clock": clock,
        "sleep": clock.sleep,
        **overrides,
    }
    return run_job(engine, Job(**fields), **arguments)


def test_a_job_runs_to_its_end_and_is_kept_then_removed(tmp_path: Any) -> None:
    engine = Engine(runs=2, exit_code=0)
    result = job(engine, tmp_path)
    assert result["outcome"] == "succeeded" and result["exit_code"] == 0 and result["changed"]
    assert result["container"] == "dgxspark-window-captions" and result["seconds"] == 2.0
    assert result["log_tail"] == [f"line {n}" for n in range(25, 30)]
    assert result["msg"] == f"window job captions ({IMAGE}) succeeded (exit code 0) after 2.0 s"
    assert engine.containers == {}  # removed once its record was kept
    saved = result["saved"]
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    record = json.loads(open(saved, encoding="utf-8").read())
    assert record["outcome"] == "succeeded" and len(record["log_tail"]) == 30 and record["window"] == "captions"
    [body] = engine.bodies
    assert body["Labels"] == {WINDOW_LABEL: "captions"} and body["Cmd"] == ["python", "-m", "captioner"]
    assert body["HostConfig"]["DeviceRequests"] == [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]
    assert body["HostConfig"]["Binds"] == ["/srv/data:/data:ro"] and body["Env"] == ["CAPTION_LANG=en"]


@pytest.mark.parametrize(
    ("exit_code", "outcome", "said"),
    [
        (3, "failed", "failed (exit code 3)"),
        (137, "killed", "was killed (SIGKILL, exit code 137: the memory guard or an operator)"),
    ],
)
def test_a_job_that_fails_or_is_killed_is_said_so(tmp_path: Any, exit_code: int, outcome: str, said: str) -> None:
    result = job(Engine(runs=1, exit_code=exit_code), tmp_path)
    assert result["outcome"] == outcome and result["msg"].endswith(f"{said} after 1.0 s")


def test_a_job_past_its_timeout_is_stopped(tmp_path: Any) -> None:
    engine = Engine(runs=None)
    result = job(engine, tmp_path, timeout_s=5)
    assert result["outcome"] == "timed-out" and result["exit_code"] == 143
    assert (
        result["msg"] == f"window job captions ({IMAGE}) ran past its 5 s and was stopped (exit code 143) after 5.0 s"
    )
    assert f"POST /containers/{'d' * 64}/stop?t=10" in engine.requests and engine.containers == {}


def test_an_earlier_window_container_is_removed_and_a_running_one_refused(tmp_path: Any) -> None:
    def window(ident: str, status: str) -> dict[str, Any]:
        return {
            "Id": ident,
            "Name": f"/dgxspark-window-{ident[:3]}",
            "Config": {"Labels": {WINDOW_LABEL: "x"}},
            "State": {"Running": status == "running", "Status": status},
        }

    engine = Engine(containers=[window("e" * 64, "exited")])
    assert job(engine, tmp_path)["outcome"] == "succeeded"
    assert f"DELETE /containers/{'e' * 64}" in engine.requests

    busy = Engine(containers=[window("f" * 64, "running")])
    with pytest.raises(WindowJobError, match="window job container.s. dgxspark-window-fff still run on this node"):
        job(busy, tmp_path)
    assert not busy.bodies


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"image": "nope:1"}, "image nope:1 is not on this node .playbooks/images.yml"),
        ({"name": "Captions"}, "name: a job name is 1-48 of a-z"),
        ({"command": []}, "command: the job's command is a non-empty list"),
        ({"env": {"HF_TOKEN": "x"}}, "env: HF_TOKEN look.s. like a secret"),
        ({"volumes": ["data:/data"]}, "volumes: each is HOST_PATH:CONTAINER_PATH"),
        ({"volumes": ["/a:/b:rx"]}, "volumes: the mode of '/a:/b:rx' is ro or rw"),
    ],
)
def test_what_could_not_run_is_refused_before_anything_is_created(
    tmp_path: Any, overrides: dict[str, Any], message: str
) -> None:
    engine = Engine()
    with pytest.raises(WindowJobError, match=message):
        job(engine, tmp_path, **overrides)
    assert not engine.bodies


def test_check_mode_runs_nothing(tmp_path: Any) -> None:
    engine = Engine()
    result = job(engine, tmp_path, check_mode=True)
    assert result["outcome"] is None and result["msg"] == f"would run dgxspark-window-captions from {IMAGE}"
    assert not engine.bodies and not [r for r in engine.requests if r.startswith(("POST", "DELETE"))]


def test_no_gpus_no_device_request() -> None:
    body = Job("x", IMAGE, ["true"], gpus=False, network_mode="none").create_body()
    assert "DeviceRequests" not in body["HostConfig"] and body["HostConfig"]["NetworkMode"] == "none"
