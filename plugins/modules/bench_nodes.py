#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the bench_nodes action plugin."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_nodes
short_description: Add the nodes' samples taken during a benchmark run to the run, and write its report again
version_added: 0.1.0
description:
  - Reads the run's C(results.json) (written by C(dgxspark.cluster.bench_run)), adds C(nodes) - per node the
    MemAvailable samples and the clock-latch verdict of its C(dgxspark.cluster.bench_monitor) - and writes
    C(results.json), C(report.md) and the charts again.
  - The report then has the minimum MemAvailable per node and per phase of the run (each level, each burst, the
    needle), the GPU clock-latch verdicts, and seed 000's figures beside the run's, the minimum headroom on the
    head during the needle included.
  - Runs on the controller only.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  run_dir:
    description: The run's folder (C(dir) of C(dgxspark.cluster.bench_run)'s result).
    type: path
    required: true
  monitors:
    description:
      - By node name, what C(dgxspark.cluster.bench_monitor) returned there (its async result), or
        C({error - why}) for a node whose monitor gave nothing.
    type: dict
    required: true
extends_documentation_fragment:
  - dgxspark.cluster.attributes.controller
attributes:
  check_mode:
    support: full
    description: Computes the summary and writes nothing.
  diff_mode:
    support: none
    description: Writes the run's own files only.
"""

EXAMPLES = r"""
- name: Add the nodes' samples to the run
  dgxspark.cluster.bench_nodes:
    run_dir: "{{ dgxspark_bench.dir }}"
    monitors: {spark-head: "{{ hostvars['spark-head'].monitor_result }}"}
"""

RETURN = r"""
summary:
  description: The run's summary with C(nodes) and C(seed_000) (docs/benchmark.md).
  returned: always
  type: dict
lines:
  description: One line per node (minimum MemAvailable, during the needle, the clock-latch verdict).
  returned: success
  type: list
  elements: str
"""
