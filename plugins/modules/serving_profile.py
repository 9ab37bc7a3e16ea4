#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the serving_profile action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_profile
short_description: Validate a DGX Spark serving profile and plan every rank's container
version_added: 0.1.0
description:
  - Loads a serving profile (JSON, schema_version 2, the format of seed 000's C(serving-profile.json)), checks all
    of it and, given the cluster's hosts, renders what every rank will run (the C(docker run) argv, environment and
    limits), then compares the settings every rank must share.
  - Every problem is reported at once, each with the file, the JSON path (or the host and variable), the value found
    and the value expected. Nothing on any host is contacted or changed; the task is safe under C(--check).
  - Ad hoc, it validates a profile without hosts, for example
    C(ansible localhost -m dgxspark.cluster.serving_profile -a 'src=inventories/spark3/serving-profile.json').
  - Runs on the controller only, as an action plugin.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  content:
    description:
      - The profile's text, instead of O(src) (a release's profile, kept on the head, for a rollback). Exactly one
        of O(src) and O(content) is given.
    type: str
  src:
    description:
      - Path of the serving profile (JSON, schema_version 2). Exactly one of O(src) and O(content) is given.
    type: path
  shape:
    description:
      - Shape to validate for and plan. Defaults to the profile's C(default_shape).
    type: str
  hosts:
    description:
      - Hosts to plan for. Defaults to the hosts of the groups O(cluster_groups) names that are in the current play,
        so an ad hoc run on C(localhost) only validates.
      - Each host needs C(dgxspark_rank) and C(dgxspark_fabric_address) (an IPv4 address peers reach over the
        fabric, checked as C(dgxspark.cluster.fabric_plan) checks it), and may set C(dgxspark_overrides).
      - A run acts on one cluster - the plan fails, naming them, when the current play has hosts with a
        C(dgxspark_rank) outside the groups O(cluster_groups) names (another cluster's, in an inventory that holds
        a fleet; limit the run to one cluster's group).
    type: list
    elements: str
  discovered:
    description:
      - What the fabric found on each host's ports (host name to C(hca), C(socket_ifname), C(gid_index)), the plan's
        one late input; it sets each rank's NCCL environment and so its spec hash. Without it each host's
        C(fabric_nccl) variable is read (what the fabric role sets).
    type: dict
  show_warnings:
    description:
      - Show each of the profile's (and the plan's) warnings as an Ansible warning, but for those of the rules the
        profile waives (RV(waived)), which one line names. With V(false) none is shown; they are only returned
        (RV(warnings_found)) and counted in the task's C(msg), for a run that checks many profiles and points at
        where to read them (C(playbooks/demo.yml) validates every shipped profile this way).
      - Errors are never hidden, they fail the task either way.
    type: bool
    default: true
  fabric_settings:
    description:
      - The fabric role's settings its converge-from-facts depends on (the role's C(fabric_fact_settings), its
        C(vars/main.yml)). Given, the plan also names, for every host of the plan's C(fabric) (RV(plan)), the files
        M(dgxspark.cluster.node_facts) reads there for the role (RV(fabric_fact_paths)) and each host's settings
        (RV(fabric_fact_settings)); a host's own inventory values of the role's variables win for it.
    type: dict
    suboptions:
      backend:
        description: C(fabric_backend) - C(networkd), C(netplan), or C(auto) (each node's own facts say).
        type: str
        default: auto
      networkd_dir:
        description: C(fabric_networkd_dir).
        type: path
      netplan_dir:
        description: C(fabric_netplan_dir).
        type: path
      sysctl_dir:
        description: C(fabric_sysctl_dir).
        type: path
extends_documentation_fragment:
  - dgxspark.cluster.cluster
  - dgxspark.cluster.attributes.read_only
  - dgxspark.cluster.attributes.controller
seealso:
  - name: Serving profile reference
    description: Every key of the profile, with where its numbers come from.
    link: https://github.com/dgxspark/cluster/blob/main/docs/profile.md
notes:
  - A relative O(src) is looked up from the current directory, then in the play's C(files/) search path.
  - Only the controller is involved; the hosts' variables come from the inventory.
"""

EXAMPLES = r"""
- name: Validate the profile and plan every rank of the chosen shape
  dgxspark.cluster.serving_profile:
    src: "{{ dgxspark_profile }}"
    shape: "{{ dgxspark_shape | default(omit) }}"
    hosts: "{{ groups[cluster.head] + groups[cluster.workers] }}"
    cluster_groups: "{{ cluster }}"
  vars:
    cluster: "{{ lookup('dgxspark.cluster.cluster_groups') }}"  # dgxspark_cluster_groups, or its default
  register: serving
  delegate_to: localhost
  run_once: true

- name: Show rank 1's command
  ansible.builtin.debug:
    msg: "{{ serving.plan.ranks[1].argv | join(' ') }}"
"""

RETURN = r"""
src:
  description: The profile's path.
  returned: success
  type: str
profile_sha256:
  description: SHA-256 of the validated profile (keys sorted, defaults filled).
  returned: success
  type: str
shape:
  description: The shape validated and planned.
  returned: success
  type: str
  sample: tp3-triangle
shapes:
  description: Every shape the profile defines.
  returned: success
  type: list
  elements: str
warnings_found:
  description:
    - The warnings of the profile and of the plan, each as it is shown; a waived rule's says V(waived) and its
      reason. Shown as Ansible warnings unless O(show_warnings=false), except those of RV(waived).
  returned: success
  type: list
  elements: str
waived:
  description:
    - The findings of the rules the profile waives (its C(waivers), each with a reason), a part of
      RV(warnings_found), each with C(check) (the waiver's name) and C(text) (the warning as shown). They are the
      operator's own decision, so a run says them on one line (the checks' names, on stderr) rather than warning
      about each; C(playbooks/plan.yml) lists them whole.
  returned: success
  type: list
  elements: dict
profile:
  description: The profile with defaults filled in.
  returned: success
  type: dict
plan:
  description:
    - The plan, or null when no host was given. It is built once (one function, from the profile, the inventory and
      every host's overrides) and every later step reads its slice of it. Keys include C(shape), C(nodes),
      C(topology), C(head), C(workers), C(master_addr), C(master_port), C(api_url), C(container_name),
      C(memory_budget), C(warnings) and C(ranks).
    - Each rank has C(host), C(rank), C(role) (head or worker), C(fabric_address), C(image),
      C(argv) (the complete C(docker run) command as a list), C(environment), C(ulimits), C(labels),
      C(spec_sha256), C(agreement) (the settings that were compared across ranks) and C(container) (the
      C(community.docker.docker_container) parameters that start the rank, used as they are).
    - C(fabric) holds every host's share of the fabric plan, as M(dgxspark.cluster.fabric_plan) returns it for one
      host (C(fabric), C(networkd), C(netplan), C(sysctl), C(sysctls), C(interfaces), C(settings)); the boot hands
      each host its share to the fabric role.
    - C(kernel) holds, by host, what the profile requires of its kernel and limits (the host section's C(kernel) and
      its rank's C(ulimits)); C(guard) the memory guard's fields of the host section; C(preflight), by host, what
      its preflight gathers and expects (C(ports), C(fabric_interfaces), C(weights_path), C(disk_paths),
      C(helper_services), C(secret_files), C(min_mem_available_gib)); C(kv) what the preflight's KV fit reads of
      the profile (the model's directory under the weights path, C(max_model_len), C(model_config), a measured cost),
      whose C(fit) the boot's preflight judges once the head's facts are bound in.
    - Every C(docker_run_args) option either renders into C(container) or fails validation with the reason, so
      a valid plan is one that starts; see the profile reference for every option.
  returned: success
  type: dict
fabric_fact_settings:
  description: Each host's fabric role settings (O(fabric_settings), with the host's own inventory values), by host.
  returned: with O(fabric_settings), when hosts were planned
  type: dict
fabric_fact_paths:
  description:
    - The files M(dgxspark.cluster.node_facts) reads on each host for the fabric role's converge-from-facts (its
      networkd or netplan files, the sysctl drop-in and the live sysctls; with backend C(auto), both backends'
      files and C(/usr/sbin/netplan)), by host.
  returned: with O(fabric_settings), when hosts were planned
  type: dict
text:
  description: The profile's text exactly as read (a boot keeps it in its release).
  returned: success
  type: str
started:
  description: When the planning began, in seconds since the epoch (the controller's clock).
  returned: success
  type: float
problems:
  description: Every problem found, each with C(severity), C(source), C(where), C(message), C(found), C(expected),
    C(hint) and C(text).
  returned: failure
  type: list
  elements: dict
elapsed_ms:
  description: Time spent validating and planning, in milliseconds.
  returned: success
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import (
    SERVING_PROFILE,
    SERVING_PROFILE_ONE_OF,
    refuse_on_host,
)

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(
        AnsibleModule(argument_spec=SERVING_PROFILE, **SERVING_PROFILE_ONE_OF, supports_check_mode=True),
        "serving_profile",
    )
