# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup plugin: who runs this job, as every record of the collection names them (plugin_utils/release/by.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: run_by
short_description: Who runs this job, as the releases' records name them
version_added: 0.3.0
description:
  - The AWX user who launched the job (C(<user> (AWX)), from C(awx_user_name)), else the AWX schedule that did
    (C(AWX schedule <name>), from C(awx_schedule_name)), else the controller's login at its host name
    (C(<login>@<host>)). Never empty.
  - The one way the collection names who did something - a release's creation (the boot's preflight), its evidence
    (C(bench.yml)), its history's events (C(window.yml), C(recover.yml), C(promote.yml)).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options: {}
"""

EXAMPLES = r"""
- name: Record an event
  dgxspark.cluster.release:
    operation: event
    id: "{{ release_id }}"
    event: window
    detail: opened
    by: "{{ lookup('dgxspark.cluster.run_by') }}"
"""

RETURN = r"""
_raw:
  description: One string - who runs.
  type: list
  elements: str
"""

from collections.abc import Mapping
from typing import Any

from ansible.plugins.lookup import LookupBase

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.by import (
    AWX_SCHEDULE_VARS,
    AWX_USER_VARS,
    run_by_vars,
)


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Mapping[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        variables = variables or {}
        given = {
            name: self._templar.template(variables[name])
            for name in (*AWX_USER_VARS, *AWX_SCHEDULE_VARS)
            if name in variables
        }
        return [run_by_vars(given)]
