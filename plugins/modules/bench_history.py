#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the bench_history action plugin."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_history
short_description: Write the benchmark's history across releases - Markdown and PNG charts over time
version_added: 0.1.0
description:
  - Takes the releases as the C(dgxspark.cluster.release) module's V(history) operation returns them and reads the
    C(results.json) files their evidence names on this controller - a release's C(bench) run (the newest
    C(playbooks/bench.yml) kept in it), the candidate run of its C(promotion) with the verdict against its baseline,
    and that baseline run.
  - Writes O(dest)/C(history.md) (a table per release, oldest first - each run's start, TTFT p50 and p90, TPOT,
    tok/s per user, output tok/s, Max C and verdict, at the highest concurrency every run measured) and
    O(dest)/C(charts/history-ttft.png), C(history-tpot.png), C(history-tps_user.png), C(history-output_tps.png) and
    C(history-max_c.png) - each figure over time, a point per run coloured by its release, the promoted release's
    points larger (docs/benchmark.md).
  - A results file that is not on this controller, or not a results document, is listed as missing with the reason.
    Charts need matplotlib on the controller; without it the report says so.
  - Runs on the controller only.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  releases:
    description: The releases, each whole with its C(evidence) and C(history) (C(records) of the V(history) operation).
    type: list
    elements: dict
    required: true
  dest:
    description: The folder the history is written to (created if needed; its files replaced whole).
    type: path
    required: true
extends_documentation_fragment:
  - dgxspark.cluster.attributes.controller
attributes:
  check_mode:
    support: full
    description: Builds the history and writes nothing.
  diff_mode:
    support: none
    description: Writes the history's own files only.
"""

EXAMPLES = r"""
- name: Read every release with its evidence
  become: true
  dgxspark.cluster.release:
    operation: history
  register: releases_history_read

- name: Write the benchmark history
  dgxspark.cluster.bench_history:
    releases: "{{ releases_history_read.records }}"
    dest: /srv/reports/spark3-history
  delegate_to: localhost
"""

RETURN = r"""
history:
  description: The history - each release with its runs and their figures, the reference level, the missing files.
  returned: always
  type: dict
lines:
  description: What the history holds, a line each, and where it was written.
  returned: always
  type: list
  elements: str
report:
  description: The path of C(history.md).
  returned: always
  type: str
charts:
  description: The paths of the charts written (none in check mode or without matplotlib).
  returned: always
  type: list
  elements: str
"""
