#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the boot_preflight action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: boot_preflight
short_description: Check every node of a serving cluster against the boot's plan, in one pass on the controller
version_added: 0.2.0
description:
  - The boot's preflight, after C(dgxspark.cluster.node_facts) gathered every node's facts in one round trip.
    Runs once, on the controller, and asks nothing more of a node.
  - Binds the plan's late inputs first, what each node offers NCCL on its planned fabric ports (RDMA devices,
    the ports, the RoCE v2 GID index), read from the facts by the fabric role's own rule, and the weights'
    C(config.json) on the head. They are bound into the plan that M(dgxspark.cluster.serving_profile) built as an
    overlay (the C(dgxspark.cluster.plan_bound) filter's rule). Only each changed rank's NCCL environment, spec
    hash, argv and container parameters are redone, and the plan's KV fit (C(plan.kv.fit)) judged, so the plan
    that is judged is the one that starts, and the profile is read and planned once per boot.
  - Then checks every node against that plan, a line per check and node (memory, Docker, a previous container,
    the image, the memory guard, the ports the plan needs, the kernel, ulimits, the fabric, the weights), and
    works out what the fabric role would change on each node from the same facts. In check mode it also says
    what a boot would do on each node (the roles' differences, the helpers it would pause, the guard's phase,
    the rank it would start or leave alone).
  - Fails, with the whole report and each failed check, when any check FAILs; nothing was changed then.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  planned:
    description:
      - The registered result of C(dgxspark.cluster.serving_profile) for the boot's hosts (its C(src), C(shape),
        C(plan), which holds every host's fabric share).
    type: dict
    required: true
  facts:
    description: Each host's C(node_facts) result's C(node), by inventory name. A host without facts FAILs.
    type: dict
    required: true
  replace:
    description: The operator asked to replace a previous container of the collection (C(boot_replace)).
    type: bool
    default: false
  skip:
    description: Checks to skip on purpose, by name; each is still reported, as SKIP, with what it found.
    type: list
    elements: str
    default: []
  clear_trip:
    description: A tripped memory guard is cleared by this boot (C(boot_clear_trip)), so the trip does not FAIL.
    type: bool
    default: false
  candidate:
    description:
      - The boot serves a profile other than the promoted release's, as a candidate release (C(boot_candidate),
        which C(playbooks/promote.yml) sets). Without it such a boot FAILs the C(release) check.
    type: bool
    default: false
  release:
    description:
      - Roll back to this release, by its id (C(boot_release), which C(playbooks/rollback.yml) sets). Left out or
        empty - an ordinary boot.
    type: str
  by:
    description:
      - Who boots, kept in the release the boot records (the result's C(release.by)). Left out - the AWX user
        who launched the job, else the controller's user at its host name.
    type: str
  fabric_settings:
    description:
      - Each host's fabric role settings the difference depends on, C(backend), C(networkd_dir), C(netplan_dir)
        and C(sysctl_dir), by host (the plan's C(fabric_fact_settings), which M(dgxspark.cluster.serving_profile) gives
        from the role's settings). A host left out gets the role's defaults.
    type: dict
    default: {}
  memguard:
    description:
      - The memory guard's role's settings and the peers' key; given, what the role would change on each rank's node
        is worked out here from its facts (C(files), C(services)), as the role's C(difference) entry point would on
        one node, and is the C(memory guard) entry of RV(differences). The key file is read, never made.
      - Left out, no difference is looked for on the guard.
    type: dict
    suboptions:
      settings:
        description:
          - The role's C(memguard_plan_settings) (its C(vars/main.yml)).
          - A host's own inventory values of them win for its guard.
        type: dict
        required: true
      key:
        description: The peers' key (C(memguard_peer_key)); empty, it is read from O(memguard.key_file).
        type: str
        default: ""
      key_file:
        description: Where the peers' key is kept (C(memguard_peer_key_file)); a missing file means no key yet.
        type: path
        required: true
extends_documentation_fragment:
  - dgxspark.cluster.cluster
  - dgxspark.cluster.attributes.read_only
  - dgxspark.cluster.attributes.controller
attributes:
  check_mode:
    description: Read-only; in check mode the result also says what a boot would do (C(would)).
seealso:
  - module: dgxspark.cluster.serving_profile
  - module: dgxspark.cluster.node_facts
"""

EXAMPLES = r"""
- name: Check every node against the plan
  dgxspark.cluster.boot_preflight:
    planned: "{{ boot_validated }}"
    facts: "{{ dict(boot_hosts | zip(boot_hosts | map('extract', hostvars, ['boot_facts', 'node']))) }}"
  vars:
    boot_hosts: "{{ ansible_play_hosts_all }}"
  register: boot_preflight
  run_once: true

- name: Report it
  ansible.builtin.debug:
    msg: "{{ boot_preflight.msg }}"
  run_once: true
"""

RETURN = r"""
msg:
  description: The report, a line per check and node; in check mode followed by what a boot would do.
  returned: always
  type: raw
plan:
  description: The plan with the nodes' NCCL names bound in, as C(dgxspark.cluster.serving_profile) returns it.
  returned: success
  type: dict
profile:
  description: The validated profile, its defaults filled in.
  returned: success
  type: dict
discovered:
  description: Each host's NCCL names on its planned ports (C(hca), C(socket_ifname), C(gid_index)); null without facts.
  returned: success
  type: dict
lines:
  description: Each check, with C(check), C(host), C(status) (PASS, WARN, FAIL or SKIP) and C(message).
  returned: success
  type: list
  elements: dict
report:
  description: The lines as text, aligned.
  returned: success
  type: list
  elements: str
failures:
  description: The lines that FAILed.
  returned: success
  type: list
  elements: dict
as_planned:
  description: Each host to whether its rank already serves exactly as planned (a boot then leaves it alone).
  returned: success
  type: dict
restart:
  description:
    - The hosts whose rank serves as planned but is restarted, because another rank must start (a tensor-parallel
      group starts together; a rank cannot join one that runs). Their C(previous-container) line WARNs so.
  returned: success
  type: list
  elements: str
recreate:
  description:
    - The hosts whose container the boot creates again without O(replace) - those of RV(restart), and containers
      created as planned that never started (a boot that stopped between its create and start phases).
  returned: success
  type: list
  elements: str
interrupted:
  description:
    - The hosts where a boot that did not finish (its controller died) left its journal (node_facts' C(journal)
      section); C(playbooks/boot.yml) undoes it there before anything else, then runs the preflight again.
  returned: success
  type: list
  elements: str
to_replace:
  description: Each host to whether the boot recreates the container of its rank's name that is there - one that does
    not serve as planned (with C(replace); without, the C(previous-container) check FAILs), or one of RV(restart).
  returned: success
  type: dict
to_pause:
  description: Each host to the profile's C(host.helper_services) that are active there now, which its start phase
    pauses (and the undo resumes); empty lists where none runs.
  returned: success
  type: dict
differences:
  description:
    - Each host to what each converging role would change there, by role, C(kernel) (its kernel and limits lines
      that did not pass), C(fabric) and C(memory guard); empty lists when nothing.
  returned: success
  type: dict
to_converge:
  description: The roles (C(kernel), C(fabric), C(memory guard)) that would change something on some node, in the
    boot's order; empty when every node matches the plan (the boot's converge then ends at once).
  returned: success
  type: list
  elements: str
would:
  description: What a boot would do on each node.
  returned: in check mode
  type: list
  elements: str
ended:
  description: When the preflight ended, in seconds since the epoch (the controller's clock).
  returned: success
  type: float
problems:
  description: Every problem of the plan with the nodes' names, each with C(path), C(message), C(found) and C(expected).
  returned: when the plan fails
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import BOOT_PREFLIGHT, refuse_on_host

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(AnsibleModule(argument_spec=BOOT_PREFLIGHT, supports_check_mode=True), "boot_preflight")
