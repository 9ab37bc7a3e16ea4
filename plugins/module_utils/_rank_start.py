# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start one rank container that the boot created as planned, through the Docker engine's API.

The boot creates every rank's container at once (community.docker.docker_container, from the plan's
parameters, before a rank starts), then starts the workers and, after them, the head. Starting is one
``POST /containers/{id}/start``: this does it without the weight of docker_container, and only for the
container the plan created. The container must carry the collection's rank label and the plan's spec hash
(a container the collection did not create, or one of another plan, is never started); the name must be the
container's own (Docker answers an all-hex name that names no container with an ID-prefix match). After the
start the engine is asked again: a rank that exited at once fails here with its exit code and log tail.
No Ansible imports.

Why not community.docker.docker_container, which created the container (docs/development.md, "Docker clients"):
the start is one step of node_phase's single call on the node - after the helpers' pause and the guard armed,
nothing started when either failed, one round trip per node (changelogs/fragments/12-fewer-steps.yml) - where
docker_container would be a module call, and a round trip, of its own; and it starts only the container the plan
created, checked as above, which docker_container does not check.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import DockerEngine, DockerEngineError
from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import RANK_LABEL, SPEC_LABEL
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import (
    RankStopError,
    container_logs,
    container_record,
    inspect_container,
)


class RankStartError(Exception):
    """The rank could not be started as planned; ``record`` holds what the engine said of it, when known."""

    def __init__(self, message: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.record = record


def start_rank(
    engine: DockerEngine, *, name: str, spec_sha256: str, check_mode: bool = False, log_lines: int = 20
) -> dict[str, Any]:
    """Start the rank container ``name`` when it does not run; returns ``changed`` and ``container`` (a record).

    Raises ``RankStartError`` when the container is not there, is not the plan's (its rank label or spec
    hash), the engine refuses the start, or the rank is not running right after it.
    """
    try:
        inspect = inspect_container(engine, name)
        if inspect is None:
            raise RankStartError(
                f"no container {name} on this node: the boot's create phase makes every rank's container as "
                "planned before any rank starts"
            )
        record = container_record(inspect, [])
        if record["name"] != name:
            raise RankStartError(
                f"the Docker engine answered for {record['name'] or record['id']} when asked for {name} (an ID-prefix "
                "match): nothing was started"
            )
        labels = (inspect.get("Config") or {}).get("Labels") or {}
        if RANK_LABEL not in labels:
            raise RankStartError(
                f"{name} carries no {RANK_LABEL} label: the collection did not create it, so it is not touched"
            )
        if labels.get(SPEC_LABEL) != spec_sha256:
            raise RankStartError(
                f"{name} carries spec {labels.get(SPEC_LABEL)}, the plan's is {spec_sha256}: it is not the container "
                "this boot created, so it is not started",
                record,
            )
        if record["running"]:
            return {"changed": False, "container": record}
        if check_mode:
            return {"changed": True, "container": record}
        ident = str(inspect.get("Id"))
        status, data = engine.send("POST", f"/containers/{quote(ident, safe='')}/start")
        if status not in (204, 304):
            raise RankStartError(f"{name}: the engine refused to start it (HTTP {status}: {data})", record)
        after = inspect_container(engine, ident)
        if after is None:
            raise RankStartError(f"{name} was removed right after its start (is auto_remove set?)", record)
        record = container_record(after, [])
        if not record["running"]:
            record["log_tail"] = container_logs(engine, ident, log_lines)
            raise RankStartError(
                f"{name} exited right after its start (exit code {record['exit_code']}"
                + (", killed for memory" if record["oom_killed"] else "")
                + ")",
                record,
            )
    except (DockerEngineError, RankStopError) as error:
        raise RankStartError(f"{name}: the Docker engine could not be asked: {error}") from None
    return {"changed": True, "container": record}
