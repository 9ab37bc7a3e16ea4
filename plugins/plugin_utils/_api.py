# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The entry points the action and filter plugins call: profile in, answers out, problems raised."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Problem, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memory import memory_budget as _budget
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import nccl_environment as _nccl
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import docker_args as docker
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import (
    Profile,
    effective_docker_args,
    load_profile,
    select_shape,
    validate_profile,
)

NCCL_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")


def coerce_profile(value: Any) -> Profile:
    """A profile from a path, a parsed document, or an already validated :class:`Profile`."""
    if isinstance(value, Profile):
        return value
    if isinstance(value, str):
        return load_profile(value)
    if isinstance(value, Mapping):
        return validate_profile(_plain(value), "<profile>")
    raise ProfileError(
        [
            Problem(
                "profile",
                "not a profile",
                found=type(value).__name__,
                expected="a path to a profile, or the parsed profile (from_json)",
            )
        ]
    )


def _plain(value: Any) -> Any:
    """Turn Ansible's tagged or lazy containers into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


def nccl_environment(
    profile: Any,
    shape: str | None = None,
    nccl_net: str | None = None,
    hca: Sequence[str] | None = None,
    socket_ifname: str | None = None,
    gid_index: int | None = None,
) -> dict[str, str]:
    """NCCL environment of a shape: computed for its ranks and transport, then the profile's own NCCL_* settings."""
    checked = coerce_profile(profile)
    chosen = checked.data["shapes"][select_shape(checked, shape)]
    fabric = dict(chosen["fabric"])
    if nccl_net is not None:
        if nccl_net not in ("IB", "Socket"):
            raise ProfileError([Problem("nccl_net", "unknown NCCL transport", found=nccl_net, expected="IB or Socket")])
        fabric["nccl_net"] = nccl_net
    env = _nccl(chosen["nodes"], fabric, hca=hca, socket_ifname=socket_ifname, gid_index=gid_index)
    env.update({k: v for k, v in chosen.get("environment", {}).items() if k.startswith(NCCL_PREFIXES)})
    return env


def container_ulimits(profile: Any, shape: str | None = None) -> dict[str, dict[str, int]]:
    checked = coerce_profile(profile)
    args = effective_docker_args(checked.data, select_shape(checked, shape)).args
    return {k: v.as_dict() for k, v in sorted(docker.container_ulimits(args).items())}


def memory_budget(profile: Any, shape: str | None = None) -> dict[str, Any]:
    checked = coerce_profile(profile)
    chosen = checked.data["shapes"][select_shape(checked, shape)]
    return _budget(chosen["sizing"], chosen.get("memory"))


def rank_argv(
    profile: Any,
    rank: int,
    master_addr: str,
    shape: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    address: str | None = None,
) -> list[str]:
    """One rank's `docker run` argv, rendered as the plan renders it (without the cross-rank comparison).

    ``address`` is this rank's own fabric address (the head's is ``master_addr``); without it a
    worker's argv carries no VLLM_HOST_IP.
    """
    checked = coerce_profile(profile)
    name = select_shape(checked, shape)
    nodes = checked.data["shapes"][name]["nodes"]
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < nodes:
        raise ProfileError(
            [Problem("rank", f"not a rank of shape {name}", found=rank, expected=f"an integer in 0..{nodes - 1}")]
        )
    own = master_addr if rank == 0 else address
    hosts = [
        HostSpec(
            f"rank{i}",
            i,
            i == 0,
            master_addr if i == 0 else (own if i == rank and own else _placeholder_address(i, master_addr)),
            _plain(overrides) if i == rank and overrides else None,
        )
        for i in range(nodes)
    ]
    argv = list(build_plan(checked, name, hosts)["ranks"][rank]["argv"])
    if own is None:
        # the placeholder's --env VLLM_HOST_IP=..., read by the one reader of docker run options (argv: docker run ...)
        env = next(
            o
            for o in docker.parse_docker_args(argv[2:], until_image=True)
            if o.name == "--env" and (o.value or "").startswith("VLLM_HOST_IP=")
        )
        del argv[2 + env.index : 2 + env.end]
    return argv


def _placeholder_address(i: int, master_addr: str) -> str:
    # Other ranks' addresses do not appear in this rank's argv; they only need to be distinct.
    # 198.18.0.0/15 (RFC 2544, benchmarking): never a real cluster's address, and accepted as a fabric address.
    return f"198.18.0.{i}" if master_addr != f"198.18.0.{i}" else f"198.18.1.{i}"
