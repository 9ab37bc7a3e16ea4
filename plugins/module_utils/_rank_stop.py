# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop the collection's rank containers on a node, found by their label, whatever the profile says now.

A stop must not depend on the plan: the profile may have changed or broken since the ranks started, and
the boot's undo runs exactly when rendering or starting failed. So the ranks are the containers that carry
the ``dgxspark.cluster.rank`` label the plan puts on every rank; a container without it is never touched.
Before a rank is removed, its exit code and its last log lines are saved on the node (and returned), so
that ``stop`` followed by ``boot`` just works and the reason a rank ended is not lost with it. Afterwards
the engine is asked again: a stop that reports success while a rank still runs is a known failure of
other tools. No Ansible imports.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Callable, Mapping
from urllib.parse import quote

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    DockerEngine,
    DockerEngineError,
    demultiplex_logs,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import RANK_LABEL

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
# a record save_record wrote: <container name, made safe>-<UTC time>.json
_RECORD = re.compile(r"^([A-Za-z0-9_.-]+)-(\d{8}T\d{6}Z)\.json$")


# The options of a stop (rank_stop's, and node_phase's stop_ranks), as an argument spec: stop_ranks' own keywords.
STOP_OPTIONS = {
    "remove": {"type": "bool", "default": True},
    "stop_timeout": {"type": "int", "default": 10},
    "save_dir": {"type": "path", "default": "/var/log/dgxspark-cluster/ranks"},
    "log_lines": {"type": "int", "default": 20},
}


class RankStopError(Exception):
    """A rank could not be stopped or removed, or the engine could not be asked."""


def labelled(engine: DockerEngine, label: str) -> list[Mapping[str, Any]]:
    filters = quote(json.dumps({"label": [label]}), safe="")
    status, data = engine.get(f"/containers/json?all=1&filters={filters}")
    if status != 200 or not isinstance(data, list):
        raise RankStopError(f"the Docker engine answered HTTP {status} when asked for its containers: {data}")
    # the engine filters already; checked again so that nothing without the label is ever touched
    return [c for c in data if isinstance(c, Mapping) and label in (c.get("Labels") or {})]


def inspect_container(engine: DockerEngine, ident: str) -> Mapping[str, Any] | None:
    status, data = engine.get(f"/containers/{quote(ident, safe='')}/json")
    if status == 404:
        return None
    if status != 200 or not isinstance(data, Mapping):
        raise RankStopError(f"the Docker engine answered HTTP {status} for container {ident}: {data}")
    return data


def container_logs(engine: DockerEngine, ident: str, lines: int) -> list[str]:
    status, body = engine.get_raw(f"/containers/{quote(ident, safe='')}/logs?stdout=1&stderr=1&tail={int(lines)}")
    if status != 200:
        return []
    return [line for line in demultiplex_logs(body).splitlines() if line.strip()]


def container_record(inspect: Mapping[str, Any], log_tail: list[str]) -> dict[str, Any]:
    state = inspect.get("State") or {}
    labels = dict((inspect.get("Config") or {}).get("Labels") or {})
    return {
        "name": str(inspect.get("Name") or "").lstrip("/"),
        "id": inspect.get("Id"),
        "image": (inspect.get("Config") or {}).get("Image"),
        "image_id": inspect.get("Image"),
        "rank": labels.get(RANK_LABEL),
        "shape": labels.get("dgxspark.cluster.shape"),
        "spec_sha256": labels.get("dgxspark.cluster.spec_sha256"),
        "running": bool(state.get("Running")),
        "status": state.get("Status"),
        "exit_code": state.get("ExitCode"),
        "oom_killed": state.get("OOMKilled"),
        "restart_count": inspect.get("RestartCount"),
        "started_at": state.get("StartedAt"),
        "finished_at": state.get("FinishedAt"),
        "log_tail": log_tail,
    }


def newest_records(directory: str, per_name: int = 1) -> tuple[list[dict[str, Any]], list[str]]:
    """The newest saved records in ``directory`` (``per_name`` for each container name, newest first) as
    :func:`save_record` wrote them, with their ``path``; and a problem line for each that could not be read.
    An absent directory holds none."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return [], []
    except OSError as error:
        return [], [f"{directory}: {error.strerror or error}"]
    # <name>-<YYYYmmddTHHMMSSZ>.json: the stamp sorts by time within a name
    by_name: dict[str, list[str]] = {}
    for entry in names:
        match = _RECORD.match(entry)
        if match:
            by_name.setdefault(match.group(1), []).append(entry)
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for name in sorted(by_name):
        for entry in sorted(by_name[name], reverse=True)[:per_name]:
            path = os.path.join(directory, entry)
            try:
                with open(path, encoding="utf-8") as handle:
                    record = json.load(handle)
                if not isinstance(record, dict):
                    raise ValueError(f"a record is a JSON object, found {type(record).__name__}")
            except (OSError, ValueError) as error:
                problems.append(f"{path}: {getattr(error, 'strerror', None) or error}")
                continue
            records.append({**record, "path": path})
    records.sort(key=lambda r: str(r.get("finished_at") or ""), reverse=True)
    return records, problems


def rank_facts(
    engine: DockerEngine, records_dir: str | None, log_lines: int = 20, label: str = RANK_LABEL
) -> dict[str, Any]:
    """Read-only: every container labelled ``label`` (a record each, as a stop keeps it: state, exit code, OOM
    kill, the last ``log_lines`` log lines) and the newest record saved in ``records_dir`` for each rank name
    (what a stop or a boot's undo kept of a rank it removed). ``error`` says why the engine could not be asked."""
    facts: dict[str, Any] = {"error": None, "containers": [], "records": [], "problems": []}
    if records_dir:
        facts["records"], facts["problems"] = newest_records(records_dir)
    try:
        for item in sorted(labelled(engine, label), key=lambda c: str((c.get("Labels") or {}).get(label))):
            ident = str(item.get("Id"))
            inspect = inspect_container(engine, ident)
            if inspect is not None:  # else gone between the list and the look
                logs = container_logs(engine, ident, log_lines) if log_lines > 0 else []  # 0: no request for them
                facts["containers"].append(container_record(inspect, logs))
    except (DockerEngineError, RankStopError) as error:
        facts["error"] = f"the Docker engine could not be asked: {error}"
    finally:
        engine.close()
    return facts


def save_record(directory: str, record: Mapping[str, Any], now: float) -> str:
    """Write ``record`` to ``directory`` (made 0700) as ``<name>-<UTC time>.json`` (0600); returns the path."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    path = os.path.join(directory, f"{_SAFE.sub('_', str(record['name']))}-{stamp}.json")
    descriptor = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(path + ".tmp", path)
    return path


def stop_ranks(
    engine: DockerEngine,
    *,
    remove: bool,
    stop_timeout: int,
    save_dir: str | None,
    log_lines: int = 20,
    saved_lines: int = 200,
    check_mode: bool = False,
    label: str = RANK_LABEL,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Stop (and with ``remove``, save and remove) every container labelled ``label``; confirm afterwards.

    Returns ``ranks`` (a record each: state before, exit code, log tail, ``saved`` path), ``stopped`` and
    ``removed`` (names), ``changed``. Raises ``RankStopError`` when the engine cannot be asked, a rank
    cannot be stopped, or a rank still runs (or, with ``remove``, still exists) afterwards.
    """
    try:
        found = labelled(engine, label)
        ranks: list[dict[str, Any]] = []
        stopped: list[str] = []
        removed: list[str] = []
        for item in sorted(found, key=lambda c: str((c.get("Labels") or {}).get(label))):
            ident = str(item.get("Id"))
            inspect = inspect_container(engine, ident)
            if inspect is None:  # gone between the list and the look
                continue
            record = container_record(inspect, [])
            name = record["name"]
            was_running = record["running"]
            record["was_running"] = was_running
            if was_running:
                stopped.append(name)
                if not check_mode:
                    status, data = engine.send(
                        "POST", f"/containers/{quote(ident, safe='')}/stop?t={int(stop_timeout)}"
                    )
                    if status not in (204, 304, 404):
                        raise RankStopError(f"{name}: the engine refused to stop it (HTTP {status}: {data})")
                    inspect = inspect_container(engine, ident) or inspect
            tail = container_logs(engine, ident, max(log_lines, saved_lines if (remove and save_dir) else 0))
            record.update(container_record(inspect, tail[-log_lines:] if log_lines else []), was_running=was_running)
            record["saved"] = None
            record["removed"] = False
            if remove:
                removed.append(name)
                if not check_mode:
                    if save_dir:
                        record["saved"] = save_record(save_dir, {**record, "log_tail": tail}, clock())
                    status, data = engine.send("DELETE", f"/containers/{quote(ident, safe='')}")
                    if status not in (204, 404):
                        raise RankStopError(f"{name}: the engine refused to remove it (HTTP {status}: {data})")
                    record["removed"] = True
            ranks.append(record)
        if not check_mode:
            left = labelled(engine, label)
            running = sorted(listed_name(c) for c in left if c.get("State") == "running")
            if running:
                raise RankStopError(f"still running after the stop: {', '.join(running)}")
            if remove and left:
                raise RankStopError(f"still there after the removal: {', '.join(sorted(listed_name(c) for c in left))}")
    except DockerEngineError as error:
        raise RankStopError(f"the Docker engine could not be asked: {error}") from None
    return {"ranks": ranks, "stopped": stopped, "removed": removed, "changed": bool(stopped or removed)}


def listed_name(item: Mapping[str, Any]) -> str:
    names = item.get("Names") or []
    return str(names[0]).lstrip("/") if names else str(item.get("Id"))[:12]
