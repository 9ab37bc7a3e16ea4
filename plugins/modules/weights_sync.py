#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the weights_sync action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: weights_sync
short_description: Put weight files on the current host from another node's short-lived file server, checked on arrival
version_added: 0.3.0
description:
  - Runs on the controller. Starts two C(ssh) processes with the inventory's connection settings of each host (as
    C(dgxspark.cluster.image_stream) does, C(sudo -n) where become is on), each running C(python3) on its node with
    the collection's node code on its input (nothing is installed on a node).
  - On O(source), a read-only file server bound to O(source_address) on a free port, which serves only O(files),
    only to the holder of a one-time token made for this task, and ends when the task does.
  - On the current host, a puller that fetches O(files) from it over that address (the bytes go node to node, never
    through the controller; no node needs a key to another). Each file is written under
    C(<weights_path>/.dgxspark-partial/) first. A partial copy an interrupted run left is kept where its SHA-256 is
    the source's for as many bytes (the server hashes that prefix), and the file continues from there; otherwise it
    starts again.
  - Each file that arrived whole is hashed and compared with its C(sha256) (the source manifest's; the server's hash
    of the file where it has none); a mismatch fails, naming the host and the file, and the copy is not put in place.
    A match replaces the file (a symlink there is replaced, never written through), and is remembered in the host's
    weights hash cache (O(cache_dir)), so that node_facts' manifest does not hash it again.
  - A progress line (bytes, share, rate, ETA, the file) every O(progress_every) seconds. O(timeout) bounds the whole,
    O(idle_timeout) the time without a byte; past either both ends are stopped and the failure names the host and
    the file; the partial copy is kept, to resume.
  - In check mode says what it would receive, and runs nothing.
  - Used by C(playbooks/weights.yml), which plans what moves first (the C(dgxspark.cluster.weights_sync_plan) filter).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  source:
    description: The inventory host the files come from.
    type: str
    required: true
  source_address:
    description: The source's address that the current host reaches (its fabric address where the plan pairs one).
    type: str
    required: true
  address:
    description: The current host's address on the same network (said in messages).
    type: str
    required: true
  weights_path:
    description: The weights directory, the same path on both hosts (the profile's C(host.weights_path)).
    type: str
    required: true
  files:
    description: The files to send (the plan's C(send)) - C(name) (relative to O(weights_path)), C(size), C(sha256).
    type: list
    elements: dict
    required: true
  ranks:
    description:
      - The host's C(dgxspark.cluster.node_facts) C(ranks) section. Where a rank container is running (or the
        section says its engine could not be asked), every file is received and checked but left staged under
        C(<weights_path>/.dgxspark-partial/), not put in place under a running rank; the task warns so. The next run
        with no rank running checks the staged copies (no byte moves again) and puts them in place.
      - Omitted - the files go in place.
    type: dict
  cache_dir:
    description: The host's weights hash cache directory (node_facts'); empty - not refreshed.
    type: str
    default: /var/cache/dgxspark-cluster
  timeout:
    description: Seconds the whole transfer may take.
    type: int
    default: 86400
  idle_timeout:
    description: Seconds the transfer may go without a byte arriving.
    type: int
    default: 300
  progress_every:
    description: Seconds between two progress lines; 0 prints none.
    type: float
    default: 10
attributes:
  check_mode:
    support: full
    description: Says what it would receive; runs nothing on either host.
  diff_mode:
    support: none
    description: Nothing to show.
  platform:
    support: full
    platforms: posix
    description: The controller needs C(ssh); both hosts need C(python3) 3.8 or later.
seealso:
  - module: dgxspark.cluster.node_facts
  - module: dgxspark.cluster.image_stream
"""

EXAMPLES = r"""
- name: Receive the files the plan names from the head, over the fabric
  dgxspark.cluster.weights_sync:
    source: sim3-head
    source_address: 10.99.3.1
    address: 10.99.3.2
    weights_path: /srv/models/qwen
    files:
      - {name: model-00001-of-00002.safetensors, size: 4294967296, sha256: "{{ '0' * 64 }}"}
"""

RETURN = r"""
host:
  description: The host that received the files.
  returned: always
  type: str
arrived:
  description: The files that arrived and matched their SHA-256.
  returned: always
  type: list
  elements: str
moved_bytes:
  description: Bytes this run moved (a resumed file's kept part not counted).
  returned: always
  type: int
staged:
  description: The files received and checked but left staged (a rank is running), not put in place.
  returned: always
  type: list
  elements: str
resumed:
  description: The files continued from a partial copy, and from which byte.
  returned: always
  type: dict
seconds:
  description: How long it took.
  returned: always
  type: float
progress:
  description: The progress lines printed.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import WEIGHTS_SYNC, refuse_on_host

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(AnsibleModule(argument_spec=WEIGHTS_SYNC, supports_check_mode=True), "weights_sync")
