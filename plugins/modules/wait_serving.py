#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the wait_serving action plugin."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wait_serving
short_description: Wait for the head rank to serve, with progress, and stop waiting when a rank is gone
version_added: 0.1.0
description:
  - Looks at the head every O(interval) seconds with M(dgxspark.cluster.rank_health) and prints a line each time -
    elapsed seconds, the phase (loading, healthy, exited with its code) and the rank's last log line.
  - Succeeds once C(/health) answers and C(/v1/models) lists the model. Fails at once when the head's container
    no longer runs, when (with O(head)) a worker's container is gone, or after O(timeout), with the rank's last
    O(log_lines) log lines in RV(log_tail). Never restarts anything.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  container:
    description: The name of the rank's container on the task's host (the head's where O(api) is given).
    type: str
    required: true
  api:
    description:
      - The head's API base URL on the head itself, such as V(http://127.0.0.1:8000) or V(https://192.0.2.10:8000).
        Given on the head only.
    type: str
  api_key_file:
    description:
      - A file on the head holding the API's key (the profile's C(container.api.api_key_file)), given with O(api).
        C(dgxspark.cluster.rank_health) reads it there and sends it to C(/v1/models); the key never reaches the
        controller.
    type: str
  ca_file:
    description: With an C(https) O(api), the PEM file on the head the server's certificate is checked against.
    type: str
  head:
    description:
      - The head's inventory name, when every rank of the play runs this task at once (a boot). The head then
        stops waiting as soon as any worker's container is gone (a worker that dies while the ranks load leaves
        the head hanging in NCCL's first collective, not exiting), and each worker watches its own container
        until the head's wait ends. The ranks meet in a private directory on the controller.
      - With fewer forks than ranks they cannot all wait at once; the head then waits alone (with a warning)
        and each worker looks at its own container once.
      - Without it, the task runs on the head only and watches the head alone.
    type: str
  rank:
    description: This rank's number, for the messages.
    type: int
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 900
  interval:
    description: Seconds between two looks.
    type: float
    default: 5
  log_lines:
    description: Log lines returned when it fails.
    type: int
    default: 20
extends_documentation_fragment:
  - dgxspark.cluster.attributes
attributes:
  check_mode:
    support: none
    description: It waits for a boot; a check run has nothing to wait for.
  platform:
    support: full
    platforms: posix
    description: The head node, with a Docker engine.
"""

EXAMPLES = r"""
- name: Wait for the head to serve, every rank at once, stopping when any rank is gone
  dgxspark.cluster.wait_serving:
    container: vllm_dsv41
    api: "{{ 'https://127.0.0.1:8000' if inventory_hostname == 'spark-head' else omit }}"
    ca_file: "{{ '/etc/dgxspark/secrets/api.crt' if inventory_hostname == 'spark-head' else omit }}"
    head: spark-head
    rank: "{{ dgxspark_rank }}"
"""

RETURN = r"""
healthy:
  description: The head serves.
  returned: always
  type: bool
models:
  description: The model IDs it serves.
  returned: success
  type: list
  elements: str
seconds:
  description: Seconds waited.
  returned: always
  type: float
polls:
  description: Looks taken.
  returned: always
  type: int
log_tail:
  description: The head's last log lines.
  returned: failure
  type: list
  elements: str
"""
