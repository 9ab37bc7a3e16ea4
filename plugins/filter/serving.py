# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the pieces of a plan users want on their own. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError, format_problems


def _checked(function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ProfileError as exc:
            raise AnsibleFilterError(
                f"dgxspark.cluster.{function.__name__}: " + format_problems(exc.problems)
            ) from None

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


_secret_env_names = lazy("plugin_utils.profile.secrets", "secret_env_names")


def secret_env_names(env: Any) -> list[str]:
    """The names of an environment map that hold a secret, as the plan judges them (it refuses each)."""
    if env is not None and not isinstance(env, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.secret_env_names: needs an environment map (name: value), found {type(env).__name__}"
        )
    return _secret_env_names(env)


_bind = lazy("plugin_utils.plan.plan", "bind")


def plan_bound(planned: Any, hostvars: Any, hosts: Any) -> dict[str, Any]:
    """A serving_profile or boot_preflight result whose plan has the fabric names each host's fabric role found
    (its ``fabric_nccl``) bound in (``_plan.bind``: an overlay, not a new plan); hosts without them keep theirs."""
    if not isinstance(planned, Mapping) or not isinstance(planned.get("plan"), Mapping):
        raise AnsibleFilterError("dgxspark.cluster.plan_bound: needs a serving_profile or boot_preflight result")
    found = {}
    for host in hosts or []:
        names = (hostvars[host] if host in hostvars else {}).get("fabric_nccl")
        if isinstance(names, Mapping):
            found[str(host)] = dict(names)
    return {**planned, "plan": _bind(planned["plan"], found)}


_budget_figures = lazy("plugin_utils.plan.memory", "budget_figures")


def memory_budget_figures(budget: Any) -> dict[str, Any]:
    """The figures of a rank's memory budget that the plan could work out, without its components."""
    if not isinstance(budget, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.memory_budget_figures: needs a memory budget (a dict), found {type(budget).__name__}"
        )
    return _budget_figures(budget)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # the plan's modules, imported when a filter is first called (plugin_utils/_lazy.py says why)
        return {
            "nccl_environment": _checked(lazy("plugin_utils._api", "nccl_environment")),
            "container_ulimits": _checked(lazy("plugin_utils._api", "container_ulimits")),
            "rank_argv": _checked(lazy("plugin_utils._api", "rank_argv")),
            "memory_budget": _checked(lazy("plugin_utils._api", "memory_budget")),
            "docker_container_params": _checked(lazy("plugin_utils.plan.container", "docker_container_params")),
            "secret_env_names": secret_env_names,
            "redact": lazy("plugin_utils.profile.secrets", "redact"),
            "plan_bound": _checked(plan_bound),
            "memory_budget_figures": memory_budget_figures,
        }
