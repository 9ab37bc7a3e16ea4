# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one job of the multimodal window on a node: a container from a given image and command, to its end.

``playbooks/window.yml`` stops serving first; this runs the job in the gap. The job's container carries the
``dgxspark.cluster.window`` label (its value is the job's name): the memory guard stops a running container with
that label when it trips, the boot's preflight refuses to start ranks while one runs (inference and the window
never overlap), and nothing else of the collection touches it. The container is named
``dgxspark-window-<name>``; an exited one of an earlier window is removed first (its record was saved when it
ended). The job runs until it exits, or until ``timeout_s``, when it is stopped (SIGTERM, then SIGKILL after
``stop_timeout``). Its exit code, OOM kill, times and last log lines are saved on the node (0600, like a rank's
record) and returned, and the container is removed. No Ansible imports.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import quote

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    DockerEngine,
    DockerEngineError,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import WINDOW_LABEL
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import (
    RankStopError,
    container_logs,
    container_record,
    inspect_container,
    labelled,
    listed_name,
    save_record,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import is_secret_name

NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,47}$")
NETWORK_MODES = ("host", "bridge", "none")
# exit codes of a container ended by a signal: 128 + SIGKILL, 128 + SIGTERM
_SIGNALLED = {137: "SIGKILL", 143: "SIGTERM"}
OUTCOMES = ("succeeded", "failed", "killed", "oom-killed", "timed-out")


class WindowJobError(Exception):
    """The job could not be started (or the engine could not be asked): nothing of it runs."""


def container_name(name: str) -> str:
    return f"dgxspark-window-{name}"


@dataclass(frozen=True)
class Job:
    """What runs: the job's name, image and command, its environment, bind mounts, GPUs and network."""

    name: str
    image: str
    command: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    volumes: Sequence[str] = ()
    gpus: bool = True
    network_mode: str = "host"

    def check(self) -> None:
        """Refuse what the engine would refuse later, or what must not reach a container's configuration."""
        if not NAME.match(self.name):
            raise WindowJobError(
                f"name: a job name is 1-48 of a-z, 0-9, '_', '.', '-' (first a letter or digit), found {self.name!r}"
            )
        if not self.image.strip():
            raise WindowJobError("image: the job's image is required (a tag or an image ID on the node)")
        if not self.command or not all(isinstance(word, str) for word in self.command):
            raise WindowJobError(
                f"command: the job's command is a non-empty list of words, found {list(self.command)!r}"
            )
        secret = sorted(key for key in self.env if is_secret_name(key))
        if secret:
            raise WindowJobError(
                f"env: {', '.join(secret)} look(s) like a secret: give it to the job as a file in a mounted volume "
                "(a secret is never put in a container's environment)"
            )
        for volume in self.volumes:
            parts = volume.split(":")
            if len(parts) not in (2, 3) or not parts[0].startswith("/") or not parts[1].startswith("/"):
                raise WindowJobError(
                    f"volumes: each is HOST_PATH:CONTAINER_PATH[:ro|rw], absolute paths, found {volume!r}"
                )
            if len(parts) == 3 and parts[2] not in ("ro", "rw"):
                raise WindowJobError(f"volumes: the mode of {volume!r} is ro or rw")

    def create_body(self) -> dict[str, Any]:
        """The engine's ``/containers/create`` body for the job."""
        host_config: dict[str, Any] = {"Binds": list(self.volumes), "NetworkMode": self.network_mode}
        if self.gpus:
            host_config["DeviceRequests"] = [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]
        return {
            "Image": self.image,
            "Cmd": list(self.command),
            "Env": [f"{key}={value}" for key, value in sorted(self.env.items())],
            "Labels": {WINDOW_LABEL: self.name},
            "HostConfig": host_config,
        }


def outcome_of(record: Mapping[str, Any], timed_out: bool) -> str:
    if timed_out:
        return "timed-out"
    if record.get("oom_killed"):
        return "oom-killed"
    if record.get("exit_code") == 0:
        return "succeeded"
    if record.get("exit_code") in _SIGNALLED:
        return "killed"
    return "failed"


def said(result: Mapping[str, Any]) -> str:
    """One line for the report: what the job did."""
    code = result.get("exit_code")
    how = {
        "succeeded": "succeeded (exit code 0)",
        "failed": f"failed (exit code {code})",
        "killed": f"was killed ({_SIGNALLED.get(code, 'a signal')}, exit code {code}: the memory guard or an operator)",
        "oom-killed": f"was ended by the kernel's OOM killer (exit code {code})",
        "timed-out": f"ran past its {result.get('timeout_s')} s and was stopped (exit code {code})",
    }.get(str(result.get("outcome")), str(result.get("outcome")))
    return f"window job {result.get('name')} ({result.get('image')}) {how} after {result.get('seconds')} s"


def _expect(status: int, data: Any, wanted: Sequence[int], what: str) -> None:
    if status not in wanted:
        message = data.get("message") if isinstance(data, Mapping) else data
        raise WindowJobError(f"{what}: the Docker engine answered HTTP {status}: {message}")


def run_job(
    engine: DockerEngine,
    job: Job,
    *,
    timeout_s: float,
    stop_timeout: int,
    save_dir: str | None,
    log_lines: int = 20,
    saved_lines: int = 200,
    poll_s: float = 1.0,
    check_mode: bool = False,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Run the job to its end (or ``timeout_s``) and return its record: ``outcome`` (one of :data:`OUTCOMES`),
    ``exit_code``, ``oom_killed``, ``seconds``, ``log_tail``, ``saved``. Raises :class:`WindowJobError` when
    it could not be started: another window job runs here, the image is missing, the engine refused."""
    job.check()
    name, image = job.name, job.image
    container = container_name(name)
    result: dict[str, Any] = {"name": name, "container": container, "image": image, "timeout_s": timeout_s}
    try:
        found = labelled(engine, WINDOW_LABEL)
        running = sorted(listed_name(c) for c in found if c.get("State") == "running")
        if running:
            raise WindowJobError(
                f"window job container(s) {', '.join(running)} still run on this node: one window job at a time "
                "(wait for it, or docker stop it)"
            )
        status, data = engine.get(f"/images/{quote(image, safe='')}/json")
        if status == 404:
            raise WindowJobError(f"image {image} is not on this node (playbooks/images.yml puts an image on the nodes)")
        _expect(status, data, (200,), f"image {image}")
        if check_mode:
            return {**result, "outcome": None, "changed": True, "msg": f"would run {container} from {image}"}
        for item in found:  # the exited containers of earlier windows (their records were saved as they ended)
            status, data = engine.send("DELETE", f"/containers/{quote(str(item.get('Id')), safe='')}")
            _expect(status, data, (204, 404), f"removing the earlier window container {listed_name(item)}")
        status, data = engine.send("POST", f"/containers/create?name={quote(container, safe='')}", job.create_body())
        _expect(status, data, (201,), f"creating {container}")
        ident = str(data["Id"])
        started = clock()
        status, data = engine.send("POST", f"/containers/{ident}/start")
        _expect(status, data, (204, 304), f"starting {container}")
        timed_out = False
        inspect = inspect_container(engine, ident)
        while inspect is not None and (inspect.get("State") or {}).get("Running"):
            if clock() - started >= timeout_s:
                timed_out = True
                status, data = engine.send("POST", f"/containers/{ident}/stop?t={int(stop_timeout)}")
                _expect(status, data, (204, 304, 404), f"stopping {container} after {timeout_s:g} s")
                inspect = inspect_container(engine, ident)
                break
            sleep(poll_s)
            inspect = inspect_container(engine, ident)
        if inspect is None:
            raise WindowJobError(f"{container} disappeared while it ran (removed by someone else)")
        seconds = round(clock() - started, 1)
        tail = container_logs(engine, ident, max(log_lines, saved_lines if save_dir else 0))
        record = {**container_record(inspect, tail), "window": name, "seconds": seconds, "timeout_s": timeout_s}
        record["outcome"] = outcome_of(record, timed_out)
        saved = save_record(save_dir, record, clock()) if save_dir else None
        status, data = engine.send("DELETE", f"/containers/{ident}")
        _expect(status, data, (204, 404), f"removing {container}")
    except (DockerEngineError, RankStopError) as error:
        raise WindowJobError(f"the Docker engine could not be asked: {error}") from None
    out = {
        **result,
        "outcome": record["outcome"],
        "exit_code": record["exit_code"],
        "oom_killed": bool(record["oom_killed"]),
        "started_at": record["started_at"],
        "finished_at": record["finished_at"],
        "seconds": seconds,
        "log_tail": tail[-log_lines:] if log_lines else [],
        "saved": saved,
        "changed": True,
    }
    out["msg"] = said(out)
    return out
