# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup plugin: the cluster's head and workers groups, from dgxspark_cluster_groups or its one default."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: cluster_groups
short_description: The inventory groups of the cluster's head and workers
version_added: 0.1.0
description:
  - The value of C(dgxspark_cluster_groups) with every key filled in - C(head), the group of the cluster's head (one
    host, rank 0), and C(workers), the group of its workers. Every role, playbook and plugin of the collection
    reads the cluster's groups through it, so the default lives in one place.
  - A key that C(dgxspark_cluster_groups) leaves out (or the whole variable unset) comes from its deprecated
    variable, C(boot_head_group) or C(boot_workers_group), where one is set (with a deprecation warning), else from
    the default, C(dgxspark_head) and C(dgxspark_workers) (the groups of a one-cluster inventory).
  - In a fleet (several clusters in one inventory, as C(inventories/fleet)), each cluster's group sets its own
    C(dgxspark_cluster_groups); a task sees its host's. A play's C(hosts) is resolved before any host's
    variables, so there only an extra variable counts.
  - Fails, naming the variable, on a value that is not a group name, an unknown key, or a deprecated variable that
    names another group than C(dgxspark_cluster_groups) does.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  _terms:
    description: Which groups to return, C(head) or C(workers); none - the dict of both.
    type: list
    elements: str
    required: false
"""

EXAMPLES = r"""
- name: Run once on this cluster's head
  ansible.builtin.command: hostname
  changed_when: false
  run_once: true
  delegate_to: "{{ groups[lookup('dgxspark.cluster.cluster_groups', 'head')][0] }}"

- name: Plan this cluster (the plugins take the groups as cluster_groups)
  dgxspark.cluster.serving_profile:
    src: "{{ dgxspark_profile }}"
    hosts: "{{ groups[_groups.head] + groups[_groups.workers] }}"
    cluster_groups: "{{ _groups }}"
  vars:
    _groups: "{{ lookup('dgxspark.cluster.cluster_groups') }}"
  run_once: true
"""

RETURN = r"""
_raw:
  description:
    - Without terms, one dict, C(head) and C(workers) to their groups' names; with terms, each term's group name.
  type: list
  elements: raw
"""

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    DEFAULT_GROUPS,
    GROUPS_VAR,
    LEGACY_GROUP_VARS,
    cluster_groups,
)

display = Display()


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Mapping[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        variables = variables or {}
        names = [GROUPS_VAR, *LEGACY_GROUP_VARS.values()]
        values = {name: self._templar.template(variables[name]) for name in names if name in variables}
        try:
            groups, used = cluster_groups(
                values.get(GROUPS_VAR), {name: values[name] for name in names[1:] if name in values}
            )
        except ValueError as exc:
            raise AnsibleLookupError(str(exc)) from None
        for name in used:
            key = next(key for key, old in LEGACY_GROUP_VARS.items() if old == name)
            display.deprecated(
                f"{name} names the cluster's {key} group; set {GROUPS_VAR}: {{{key}: {values[name]}}} instead",
                version="1.0.0",
                collection_name="dgxspark.cluster",
            )
        if not terms:
            return [groups]
        unknown = [term for term in terms if term not in DEFAULT_GROUPS]
        if unknown:
            raise AnsibleLookupError(f"cluster_groups: unknown terms {unknown}; the terms are head and workers")
        return [groups[term] for term in terms]
