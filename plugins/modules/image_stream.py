#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the image_stream action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_stream
short_description: Put an image on the current host, streamed from another host over SSH, and check its ID
version_added: 0.2.0
description:
  - Runs on the controller. Starts two C(ssh) processes with the inventory's connection settings of each host (the
    C(ssh) connection plugin's options as Ansible resolves them - C(ansible_host), C(ansible_port), C(ansible_user),
    C(ansible_ssh_private_key_file), C(ansible_ssh_args), C(ansible_ssh_common_args), C(ansible_ssh_extra_args),
    host key checking - and C(sudo -n) where become is on), C(docker save) on O(source) and C(docker load) on the
    current host, and pumps the one into the other a chunk (1 MiB) at a time. The image is never held in the
    controller's memory nor written to its disk.
  - A progress line (bytes moved, share of O(size), rate) every O(progress_every) seconds; O(timeout) bounds the
    whole, O(idle_timeout) the time without a byte moving; past either both ends are stopped and the task fails.
  - With O(pull), the current host pulls that name from its registry instead (C(docker pull)); nothing streams.
  - Then asks the host what O(image_id) and every one of O(names) are there, and fails, naming the host and both
    IDs, unless each is O(image_id).
  - In check mode says what it would move, and moves nothing.
  - A password login, a key given as text, or become with a password or by another method than sudo cannot be
    used (the stream's input is the image); the task fails saying so. C(ansible_connection=local) runs the command
    on the controller itself.
  - Used by C(playbooks/images.yml), which plans what moves first (the C(dgxspark.cluster.image_plan) filter).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  source:
    description: The inventory host whose Docker engine saves the image (the head). Required unless O(pull).
    type: str
  image_id:
    description: The image ID the host must have after the transfer (C(sha256:<64 hex>)).
    type: str
    required: true
  names:
    description:
      - What C(docker save) is given on O(source) - the image's tags, so that the host gets them too; empty for
        O(image_id) alone (an untagged image). Every name must resolve to O(image_id) on the host afterwards.
    type: list
    elements: str
    default: []
  pull:
    description: A name to pull from its registry on the host instead of streaming (empty - stream).
    type: str
    default: ""
  size:
    description: The image's size in bytes, for the progress lines' share (the head's C(docker image ls) size).
    type: int
  timeout:
    description: Seconds the whole transfer (or the pull) may take, the load's own work after the last byte included.
    type: int
    default: 3600
  idle_timeout:
    description: Seconds the stream may go without a byte moving.
    type: int
    default: 300
  progress_every:
    description: Seconds between two progress lines; 0 prints none.
    type: float
    default: 10
  docker:
    description: The Docker command on both hosts.
    type: str
    default: docker
attributes:
  check_mode:
    support: full
    description: Says what it would move; runs nothing on either host.
  diff_mode:
    support: none
    description: Nothing to show.
  platform:
    support: full
    platforms: posix
    description: The controller needs C(ssh); the hosts need C(docker) and a POSIX shell.
seealso:
  - module: dgxspark.cluster.node_facts
notes:
  - The node-to-node fabric is not used yet; the image goes through the controller's SSH connections.
"""

EXAMPLES = r"""
- name: Stream the release's image from the head
  dgxspark.cluster.image_stream:
    source: "{{ groups[lookup('dgxspark.cluster.cluster_groups', 'head')][0] }}"  # the cluster's head
    image_id: sha256:4f0c2d0e8e9d0b3f2a8c6f1b5e7d9a0c3b2e1f4d6a8c0e2b4d6f8a0c2e4b6d8f
    names: [vllm/vllm-openai:v0.11.0]
    size: 18000000000
"""

RETURN = r"""
host:
  description: The host that got the image.
  returned: always
  type: str
image_id:
  description: The image ID it has now.
  returned: always
  type: str
moved_bytes:
  description: Bytes streamed.
  returned: always
  type: int
seconds:
  description: How long the stream took.
  returned: always
  type: float
progress:
  description: The progress lines printed.
  returned: always
  type: list
  elements: str
loaded:
  description: What C(docker load) said it loaded.
  returned: after a stream
  type: list
  elements: str
pulled:
  description: The name pulled.
  returned: with O(pull)
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import IMAGE_STREAM, refuse_on_host

# validate-modules runs this with the spec (module_utils/_specs.py); on a host it fails at once
if __name__ == "__main__":
    refuse_on_host(AnsibleModule(argument_spec=IMAGE_STREAM, supports_check_mode=True), "image_stream")
