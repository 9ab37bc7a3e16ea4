#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the memguard_plan action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: memguard_plan
short_description: Plan one node's memory guard on the controller - its configuration, its files, and what differs
version_added: 0.2.0
description:
  - The memory guard role's plan for the current host, worked out on the controller; asks nothing of a node.
  - Builds the guard's configuration from the validated profile's C(host) section and the role's settings (the
    checks of the C(dgxspark.cluster.memguard_config) filter, which name the variable or the profile field at
    fault), with every play host's address on C(memguard_peer_network) in O(settings) read from the inventory.
  - Renders the texts the role writes, C(config.json), the shell wrapper (every word quoted for the shell) and the
    systemd unit (its values allow-listed), and states what a node must have to match - every file by SHA-256,
    the daemon's own script included (the role's C(files/dgxspark_memguard.py)), and the unit active and enabled.
  - With O(node_facts), compares them with the node's facts (C(dgxspark.cluster.node_facts) sections C(files) and
    C(services)) into C(difference), a line per thing that differs; empty when the node matches.
  - The guards' shared key is O(key), else read from O(key_file), else, when O(key_create) is true and not in
    check mode, generated there (40 letters and digits, mode 0600, made once whatever the number of hosts).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  host_section:
    description: The validated profile's C(host) section (C(dgxspark.cluster.serving_profile)'s C(profile.host), its
      defaults filled in).
    type: dict
    required: true
  container_name:
    description: The profile's C(container.name), the container the guard stops unless
      C(memguard_container) in O(settings) names another.
    type: str
    default: ""
  settings:
    description: The memguard role's settings by their variable names (C(memguard_settings), C(memguard_container),
      C(memguard_emergency_floor_gib), C(memguard_psi_full_avg10_max), C(memguard_stop_timeout_seconds),
      C(memguard_cluster_policy), C(memguard_peer_port), C(memguard_peer_network), C(memguard_docker_socket),
      C(memguard_python), C(memguard_install_dir), C(memguard_config_dir)), and optionally C(memguard_textfile_dir).
    type: dict
    required: true
  hosts:
    description: The hosts whose guards reach each other. Defaults to the play's hosts.
    type: list
    elements: str
  key:
    description: The guards' shared key; empty - read from O(key_file).
    type: str
    default: ""
  key_file:
    description: The key's file on the controller.
    type: path
    required: true
  key_create:
    description: Create O(key_file) when it does not exist (never in check mode). When it is not created, the
      configuration has no key and C(key_missing) is true.
    type: bool
    default: true
  node_facts:
    description: This host's C(dgxspark.cluster.node_facts) result's C(node); empty - no C(difference) is worked out.
    type: dict
    default: {}
  node_facts_by_host:
    description:
      - Every host's C(dgxspark.cluster.node_facts) result's C(node), by inventory name. Given, every host of
        O(hosts) is planned at once (run the task with C(run_once), as the boot's preflight does) and the result
        is RV(differences) and RV(key_missing) only.
    type: dict
    default: {}
extends_documentation_fragment:
  - dgxspark.cluster.attributes.controller
attributes:
  check_mode:
    support: full
    description: Never creates the key file in check mode.
  diff_mode:
    support: none
    description: Changes nothing on a node.
notes:
  - Use C(no_log) on the task, as the memguard role does; C(config) and C(texts.config) hold the guards' key.
seealso:
  - module: dgxspark.cluster.node_facts
  - module: dgxspark.cluster.serving_profile
"""

EXAMPLES = r"""
- name: Plan this node's guard, and what would change from the facts gathered
  dgxspark.cluster.memguard_plan:
    host_section: "{{ boot_validated.profile.host }}"
    container_name: "{{ boot_validated.profile.container.name }}"
    settings: "{{ my_memguard_settings }}"
    key_file: "{{ inventory_dir }}/.dgxspark-memguard.key"
    key_create: false
    node_facts: "{{ boot_facts.node }}"
  register: memguard_plan
  no_log: true
"""

RETURN = r"""
config:
  description: The guard's configuration (what C(config.json) holds).
  returned: success
  type: dict
texts:
  description: The files' texts as written, C(config), C(wrapper) and C(unit).
  returned: success
  type: dict
expected:
  description: What a node must have to match, C(files) (path to SHA-256) and C(units).
  returned: success
  type: dict
difference:
  description:
    - What differs on the node, a line each, naming the file or the unit, what the node has and what is planned (a
      file by the first 12 digits of its SHA-256); empty when the node matches or without O(node_facts).
  returned: success
  type: list
  elements: str
container:
  description: The one container the guard stops.
  returned: success
  type: str
watchdog_s:
  description: The unit's C(WatchdogSec).
  returned: success
  type: int
key_missing:
  description: Whether there was no key (not given, no key file, and none created).
  returned: success
  type: bool
differences:
  description: With O(node_facts_by_host), what differs on each host (as RV(difference)), by inventory name.
  returned: with O(node_facts_by_host)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import MEMGUARD_PLAN, refuse_on_host

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(AnsibleModule(argument_spec=MEMGUARD_PLAN, supports_check_mode=True), "memguard_plan")
