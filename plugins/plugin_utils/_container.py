# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rank's planned ``docker run`` as the parameters of ``community.docker.docker_container``.

The plan renders every rank as a ``docker run`` argv (what the seed's rule checks: every render has a
``docker run``); the vllm_container role starts it with community.docker, which compares a running
container with what is wanted field by field. This module turns one into the other. Every option of the
profile's ``docker_run_args`` maps to one module parameter; an option without a mapping is an error
that names it, raised before any node is touched, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._docker_args import parse_docker_args, parse_ulimit
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Problem, ProfileError


def _gpus(value: str) -> dict[str, Any]:
    """``--gpus all``, ``--gpus 2``, ``--gpus device=0,1`` as a device request."""
    request: dict[str, Any] = {"driver": "nvidia", "capabilities": [["gpu"]]}
    text = value.strip().strip('"')
    if text == "all":
        request["count"] = -1
    elif text.isdigit():
        request["count"] = int(text)
    elif text.startswith("device="):
        request["device_ids"] = [d for d in text[len("device=") :].split(",") if d]
    else:
        raise ValueError(f"--gpus {value!r}: expected all, a count or device=<ids>")
    return request


def _ulimit(value: str) -> str:
    name, limit = parse_ulimit(value)
    return f"{name}:{limit.soft}:{limit.hard}"


def _sysctl(value: str) -> tuple[str, str]:
    key, sep, setting = value.partition("=")
    if not sep or not key:
        raise ValueError(f"--sysctl {value!r}: expected name=value")
    return key, setting


# option -> (module parameter, how it is kept, how its value is read): one value, a list of them (the
# option repeats), a map (name=value pairs) or a flag (no value).
_ONE = "one"
_LIST = "list"
_MAP = "map"
_FLAG = "flag"
MAPPING: dict[str, tuple[str, str, Callable[[str], Any] | None]] = {
    "--network": ("network_mode", _ONE, None),
    "--ipc": ("ipc_mode", _ONE, None),
    "--pid": ("pid_mode", _ONE, None),
    "--uts": ("uts", _ONE, None),
    "--gpus": ("device_requests", _LIST, _gpus),
    "--device": ("devices", _LIST, None),
    "--cap-add": ("capabilities", _LIST, None),
    "--cap-drop": ("cap_drop", _LIST, None),
    "--ulimit": ("ulimits", _LIST, _ulimit),
    "--security-opt": ("security_opts", _LIST, None),
    "--shm-size": ("shm_size", _ONE, None),
    "--memory": ("memory", _ONE, None),
    "--memory-swap": ("memory_swap", _ONE, None),
    "--memory-reservation": ("memory_reservation", _ONE, None),
    "--cpuset-cpus": ("cpuset_cpus", _ONE, None),
    "--cpuset-mems": ("cpuset_mems", _ONE, None),
    "--cpus": ("cpus", _ONE, float),
    "--volume": ("volumes", _LIST, None),
    "--tmpfs": ("tmpfs", _LIST, None),
    "--sysctl": ("sysctls", _MAP, _sysctl),
    "--user": ("user", _ONE, None),
    "--workdir": ("working_dir", _ONE, None),
    "--hostname": ("hostname", _ONE, None),
    "--group-add": ("groups", _LIST, None),
    "--oom-score-adj": ("oom_score_adj", _ONE, int),
    "--stop-timeout": ("stop_timeout", _ONE, int),
    "--stop-signal": ("stop_signal", _ONE, None),
    "--log-driver": ("log_driver", _ONE, None),
    "--log-opt": ("log_options", _MAP, _sysctl),
    "--runtime": ("runtime", _ONE, None),
    "--init": ("init", _FLAG, None),
    "--privileged": ("privileged", _FLAG, None),
    "--read-only": ("read_only", _FLAG, None),
}


def docker_container_params(rank: Mapping[str, Any]) -> dict[str, Any]:
    """The ``community.docker.docker_container`` parameters that start ``rank`` (a plan's rank) as planned.

    Starts it detached, never pulls (images come without a registry), never restarts it (a rank that
    dies stays dead for the boot to report), and keeps it when it exits (its logs tell why).
    """
    params: dict[str, Any] = {
        "name": rank["container_name"],
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
    problems: list[Problem] = []
    for option in parse_docker_args(rank["docker_run_args"]):
        where = f"rank {rank.get('rank')} ({rank.get('host')}): docker_run_args {option.name}"
        mapped = MAPPING.get(option.name)
        if mapped is None:
            problems.append(
                Problem(
                    where,
                    "no community.docker.docker_container parameter for this option",
                    found=option.name if option.value is None else f"{option.name}={option.value}",
                    expected="one of " + ", ".join(sorted(MAPPING)),
                )
            )
            continue
        parameter, kind, convert = mapped
        try:
            if kind == _FLAG:
                params[parameter] = True
                continue
            if option.value is None:
                raise ValueError("takes a value")
            value = convert(option.value) if convert else option.value
        except ValueError as error:
            problems.append(Problem(where, str(error), found=option.value))
            continue
        if kind == _LIST:
            params.setdefault(parameter, []).append(value)
        elif kind == _MAP:
            params.setdefault(parameter, {})[value[0]] = value[1]
        else:
            params[parameter] = value
    if problems:
        raise ProfileError(problems)
    return params
