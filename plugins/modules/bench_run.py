#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the bench_run action plugin."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_run
short_description: Benchmark a serving cluster - gate, warm-up, a concurrency sweep, capacity, a needle - with progress
version_added: 0.1.0
description:
  - Runs M(dgxspark.cluster.bench_load) on the task's host (the client) once per step and prints a line before and
    after each - the functional gate's checks, the warm-up, each concurrency level (requests, failures, median TTFT
    and TPOT, the client's own CPU and event-loop lag), the needle.
  - A failed gate stops the run before any load is sent, and no performance figure is reported; the gate's results
    are still written.
  - On the controller it then summarizes every level (docs/benchmark.md has the definitions, ours and CordatusAI's),
    checks the capacity SLOs, and writes a new folder under O(results_dir) named after the start time, the shape
    and O(label) - C(results.json) (every request's raw data and the run's identity), C(report.md) and
    C(charts/*.png) (charts need matplotlib on the controller; without it the report says so).
  - Warns when the client's event loop wakes late (p99 above 5 ms) - then the client, not the cluster, may be the
    bottleneck.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  levels:
    description: Concurrency levels, run from the lowest.
    type: list
    elements: int
    default: [1, 2, 4, 8]
  requests:
    description: Requests per level (a p99 from fewer than 100 is the largest value or close to it).
    type: int
    default: 100
  prompt_tokens:
    description: About how many tokens each synthetic prompt has.
    type: int
    default: 128
  max_tokens:
    description: Output tokens of every request (asked for exactly - C(ignore_eos), C(min_tokens)).
    type: int
    default: 128
  warmup_requests:
    description: Requests sent at the highest level before the sweep and not counted; V(0) for none.
    type: int
    default: 8
  ramp:
    description:
      - Seconds over which each level's users start, evenly spread; V(0) (CordatusAI's way) starts them all at once,
        and with fixed-length answers they then stay in step.
    type: float
    default: 0
  timeout:
    description: Seconds one request may take.
    type: float
    default: 600
  seed:
    description: Seed of the synthetic prompts and the haystack.
    type: int
    default: 0
  extra_body:
    description: More fields for every request body.
    type: dict
  gate:
    description:
      - The functional checks, each C({name, prompt, expect}) where C(expect) is a regular expression the answer must
        contain (case-insensitive). Default - C(Count from 1 to 10.) expecting 1 to 10 in order, and
        C(What is 17 + 25?) expecting 42.
    type: list
    elements: dict
  needle_tokens:
    description: Haystack size in tokens for the needle test; V(0) skips it.
    type: int
    default: 0
  needle_depth:
    description: Where the needle sits, from 0 (start) to 1 (end).
    type: float
    default: 0.5
  slos:
    description:
      - Capacity SLOs, each C({metric, op, threshold, percentile}). Default - C(ttft_ms <= 1000) at p90 and
        C(tps_user >= 20) at p10 (docs/benchmark.md lists the metrics).
    type: list
    elements: dict
  results_dir:
    description:
      - Where the run's folder is made (on the controller). Not a visible folder inside an inventory directory - Ansible
        would read every file in it as an inventory source; bench.yml uses the hidden C(<inventory>/.bench).
    type: path
    required: true
  label:
    description: A word added to the folder's name.
    type: str
    default: ""
  nodes_after:
    description:
      - The node monitors' samples are added to the run after it (C(dgxspark.cluster.bench_nodes)), which then says
        seed 000's figures - the minimum headroom among them - so C(table) leaves them out rather than say "not
        measured" before the monitors stopped.
    type: bool
    default: false
  identity:
    description: What is benchmarked - profile, profile_hash, shape, model, hosts, image_ids - kept in the results.
    type: dict
    default: {}
extends_documentation_fragment:
  - dgxspark.cluster.endpoint
attributes:
  check_mode:
    support: full
    description: Says what it would send, and sends nothing.
  diff_mode:
    support: none
    description: Changes nothing on any host.
  platform:
    support: full
    platforms: posix
    description: The client host reaches the endpoint; the controller writes the files.
"""

EXAMPLES = r"""
- name: Benchmark from the head
  dgxspark.cluster.bench_run:
    url: http://127.0.0.1:8000
    model: v41-flash-1017
    levels: [1, 2, 4, 8]
    requests: 100
    needle_tokens: 32768
    results_dir: "{{ inventory_dir }}/.bench"
  register: bench
"""

RETURN = r"""
dir:
  description: The run's folder.
  returned: success
  type: str
results_file:
  description: Its C(results.json).
  returned: success
  type: str
report_file:
  description: Its C(report.md).
  returned: success
  type: str
summary:
  description: Per level figures, the capacity and the needle (docs/benchmark.md).
  returned: success
  type: dict
table:
  description: The figures as a plain-text table.
  returned: success
  type: str
"""
