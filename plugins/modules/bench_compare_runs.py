#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the bench_compare_runs action plugin."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_compare_runs
short_description: Compare two benchmark runs and give a verdict against a regression threshold
version_added: 0.1.0
description:
  - Reads two C(results.json) files written by C(dgxspark.cluster.bench_run) (by default the two newest runs under
    O(results_dir)) and compares the candidate with the baseline, level by level and metric by metric - the change of
    each mean, and whether it is significant by Welch's two-sided t-test (docs/benchmark.md).
  - The verdict is V(pass), V(regression) (a per-request metric significantly worse by more than O(threshold); or,
    whatever a test says, a level whose SLOs the baseline met lost, a lower Max C, or a seed figure that drops by
    more than O(threshold)), V(inconclusive) (the runs are too short to bound every metric's worsening within
    O(threshold); it says how many requests per level would decide) or V(incomparable) (different model, shape or
    workload, a failed gate, no level in common).
  - Writes the comparison (JSON and Markdown) into the candidate's folder, named after the baseline's. Fails on any
    verdict but V(pass) unless O(fail_on_regression=false).
  - The same comparison on data already loaded is the C(dgxspark.cluster.bench_compare) filter.
  - Runs on the controller only.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  results_dir:
    description:
      - Where the runs' folders are; the newest two are compared when O(baseline) and O(candidate) are not given.
    type: path
  baseline:
    description: The baseline run - its folder or its C(results.json). Default - the run before the candidate.
    type: path
  candidate:
    description: The candidate run - its folder or its C(results.json). Default - the newest run.
    type: path
  threshold:
    description: The regression threshold, in percent of the baseline's mean.
    type: float
    default: 3.0
  alpha:
    description: The significance level of Welch's test.
    type: float
    default: 0.05
  fail_on_regression:
    description: Fail the task when the verdict is not V(pass).
    type: bool
    default: true
extends_documentation_fragment:
  - dgxspark.cluster.attributes.controller
attributes:
  check_mode:
    support: full
    description: Compares, and writes no file.
  diff_mode:
    support: none
    description: Changes nothing on any host.
"""

EXAMPLES = r"""
- name: Compare the two newest runs
  dgxspark.cluster.bench_compare_runs:
    results_dir: "{{ inventory_dir }}/.bench"

- name: Compare a candidate with the promoted baseline, without failing
  dgxspark.cluster.bench_compare_runs:
    baseline: /srv/bench/20261201T101500Z-tp3-triangle
    candidate: /srv/bench/20261201T113000Z-tp3-triangle
    threshold: 5
    fail_on_regression: false
"""

RETURN = r"""
verdict:
  description: V(pass), V(regression), V(inconclusive) or V(incomparable).
  returned: always
  type: str
comparison:
  description: Every figure compared (docs/benchmark.md, "Comparison").
  returned: always
  type: dict
lines:
  description: The verdict, its reasons and one line per metric and level.
  returned: always
  type: list
  elements: str
baseline:
  description: The baseline's results file.
  returned: always
  type: str
candidate:
  description: The candidate's results file.
  returned: always
  type: str
report_file:
  description: The comparison in Markdown.
  returned: when not in check mode
  type: str
"""
