# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the inventory's hosts and what they hold (logic in plugin_utils/plan/inventory.py). Documentation: the
.yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_other_clusters_hosts = lazy("plugin_utils.plan.inventory", "other_clusters_hosts")
_host = lazy("plugin_utils.plan.inventory", "Host")
_answers_by_host = lazy("plugin_utils.plan.inventory", "answers_by_host")


def other_clusters_hosts(play_hosts: Any, cluster_hosts: Any, hostvars: Any) -> list[str]:
    try:
        ours = [_host(str(name)) for name in cluster_hosts or []]
        known = {str(h): hostvars[h] for h in play_hosts or [] if h in hostvars}
        return _other_clusters_hosts([str(h) for h in play_hosts or []], ours, known)
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.other_clusters_hosts: {error}") from None


def answers_by_host(hostvars: Any, hosts: Any, name: Any) -> dict[str, Any]:
    try:
        return _answers_by_host(hostvars, [str(h) for h in hosts or []], str(name))
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.answers_by_host: {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"other_clusters_hosts": other_clusters_hosts, "answers_by_host": answers_by_host}
