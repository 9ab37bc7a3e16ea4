# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rank's planned ``docker run`` as the parameters of ``community.docker.docker_container``.

The plan renders every rank as a ``docker run`` argv (what the seed's rule checks: every render has a
``docker run``); the vllm_container role starts it with community.docker, which compares a running
container with what is wanted field by field. This module turns one into the other. Every option of the
profile's ``docker_run_args`` goes through the one table of ``_docker_args`` (the validator reads the same
table), so an option that validates renders here; one that does not is an error that names it, never
dropped. The plan calls this for every rank (its ``container``), before any node is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Problem, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import (
    DOCKER_RUN_OPTIONS,
    render_docker_args,
)

# What every rank's container sets whatever its docker_run_args (docker_container_params below)
FIXED_PARAMETERS = (
    "name",
    "image",
    "entrypoint",
    "command",
    "command_handling",
    "env",
    "labels",
    "state",
    "detach",
    "pull",
    "restart_policy",
    "auto_remove",
)
# Every docker_container parameter a plan's container can hold: the fixed ones and those a docker_run_args
# option renders to (dgxspark.cluster.rank_container refuses any other)
PARAMETERS = frozenset(FIXED_PARAMETERS) | {row.parameter for row in DOCKER_RUN_OPTIONS.values() if row.renders}


def docker_container_params(rank: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ``community.docker.docker_container`` parameters that start ``rank`` (a plan's rank) as planned, in a
    container named ``name`` (the plan's ``container_name``).

    Starts it detached, never pulls (images come without a registry), never restarts it (a rank that
    dies stays dead for the boot to report), and keeps it when it exits (its logs tell why).
    """
    rendered = render_docker_args(rank["docker_run_args"])
    if rendered.problems:
        where = f"rank {rank.get('rank')} ({rank.get('host')}): docker_run_args"
        raise ProfileError(
            [Problem(f"{where} {p.option}", p.message, p.found, p.expected, p.hint) for p in rendered.problems]
        )
    fixed: dict[str, Any] = {
        "name": name,
        "image": rank["image"],
        "entrypoint": [rank["entrypoint"]],
        "command": list(rank["command"]),
        "command_handling": "correct",
        "env": {key: str(value) for key, value in rank["environment"].items()},
        "labels": dict(rank["labels"]),
        "state": "started",
        "detach": True,
        "pull": "never",
        "restart_policy": "no",
        "auto_remove": False,
    }
    return {**rendered.params, **fixed}
