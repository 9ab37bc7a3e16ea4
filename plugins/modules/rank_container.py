#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the rank_container action plugin (plugins/action/rank_container.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_container
short_description: Create or start a plan rank's container with community.docker.docker_container
version_added: 0.3.0
description:
  - Runs M(community.docker.docker_container) on the host with the parameters the plan built for one rank
    (C(dgxspark.cluster.serving_profile)'s C(plan.ranks[].container)), passed as they are, one dict.
  - Refuses any key the plan cannot produce (a parameter no C(docker_run_args) option renders to and none of
    the fixed ones), naming it - what starts is what was judged, and nothing is dropped on the way.
  - O(state) and O(recreate) override the plan's; everything else is the plan's. Check mode and diff mode are
    docker_container's own (it compares the container on the host with the plan, field by field).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  params:
    description: A rank's docker_container parameters, from the plan.
    type: dict
    required: true
  state:
    description:
      - V(created) creates the container as planned and leaves it stopped (docker_container's V(present)); the
        boot creates every rank's container at once this way. V(started) creates it when needed and starts it.
    type: str
    choices: [created, started]
    default: started
  recreate:
    description: Remove and create again a container that is there (docker_container's O(recreate)).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: docker_container's own check mode - what would change, nothing changed.
  diff_mode:
    support: full
    description: docker_container's own diff of the container against the plan.
  platform:
    support: full
    platforms: posix
    description: A node with a Docker engine; community.docker on the controller.
seealso:
  - module: community.docker.docker_container
  - module: dgxspark.cluster.node_phase
"""

EXAMPLES = r"""
- name: Create this host's rank container as planned, not started
  dgxspark.cluster.rank_container:
    params: "{{ boot_rank.container }}"
    state: created
"""

RETURN = r"""
container:
  description: docker_container's C(container) (the container's inspect data).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import RANK_CONTAINER, refuse_on_host

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(AnsibleModule(argument_spec=RANK_CONTAINER, supports_check_mode=True), "rank_container")
