#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: bench_monitor
short_description: Sample a node's MemAvailable and GPU clocks during a benchmark, until told to stop
version_added: 0.1.0
description:
  - Reads MemAvailable from /proc/meminfo every O(interval) seconds and runs node_facts' C(nvidia-smi --query-gpu)
    every O(gpu_interval) seconds, until the file O(stop_file) exists (left for its maker to remove) or O(max_seconds)
    have passed.
  - C(playbooks/bench.yml) starts it on every node as an async task before the benchmark and creates the stop file
    after it; C(dgxspark.cluster.bench_nodes) adds what it returns to the run's results (the minimum MemAvailable per
    node and phase, seed 000's headroom during the long-context test) and judges the GPU clocks under load (the
    clock-latch check).
  - Changes nothing but removing O(stop_file).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  stop_file:
    description: The file whose appearance ends the sampling; its maker removes it (the module leaves it, so that
      the touch that makes it never races a removal).
    type: path
    required: true
  interval:
    description: Seconds between two MemAvailable samples.
    type: float
    default: 0.5
  gpu_interval:
    description: Seconds between two nvidia-smi queries; V(0) takes none.
    type: float
    default: 5
  max_seconds:
    description: The longest it samples when no stop file comes (a benchmark that failed half way).
    type: float
    default: 7200
  nvidia_smi:
    description: Path of nvidia-smi; by default it is looked for on the PATH (none found, no GPU samples).
    type: path
  proc_root:
    description: Where procfs is mounted (tests point it elsewhere).
    type: path
    default: /proc
extends_documentation_fragment:
  - dgxspark.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Samples nothing in check mode.
  platform:
    support: full
    platforms: posix
    description: Linux nodes.
"""

EXAMPLES = r"""
- name: Sample the node for at most an hour, until /tmp/bench.stop appears
  dgxspark.cluster.bench_monitor:
    stop_file: /tmp/bench.stop
    max_seconds: 3600
  async: 3660
  poll: 0
  register: monitor
"""

RETURN = r"""
mem_available:
  description: The MemAvailable samples, each C([epoch seconds, bytes]).
  returned: always
  type: list
  elements: list
gpu:
  description: The GPU samples, each C([epoch seconds, devices]) with node_facts' device keys.
  returned: always
  type: list
  elements: list
gpu_error:
  description: The last nvidia-smi failure, or null.
  returned: always
  type: str
clock_latch:
  description:
    - The GPU clock-latch check over the GPU samples (C(verdict) pass, latched or not_judged, C(gpus), C(summary));
      null without a GPU sample.
  returned: always
  type: dict
stopped_by:
  description: C(stop_file) or C(max_seconds).
  returned: always
  type: str
seconds:
  description: How long it sampled.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_monitor import mem_available, monitor
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import query_argv

ARGUMENT_SPEC = {
    "stop_file": {"type": "path", "required": True},
    "interval": {"type": "float", "default": 0.5},
    "gpu_interval": {"type": "float", "default": 5},
    "max_seconds": {"type": "float", "default": 7200},
    "nvidia_smi": {"type": "path"},
    "proc_root": {"type": "path", "default": "/proc"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["interval"] <= 0 or params["gpu_interval"] < 0 or params["max_seconds"] <= 0:
        module.fail_json(msg="interval and max_seconds must be more than 0, gpu_interval 0 or more")
    if module.check_mode:
        module.exit_json(changed=False, msg="check mode: nothing sampled", mem_available=[], gpu=[])
    binary = params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    timeout_bin = module.get_bin_path("timeout")
    query = None
    if binary:
        argv = ([timeout_bin, "10"] if timeout_bin else []) + query_argv(binary)

        def query():  # type: ignore[no-redef]
            rc, out, err = module.run_command(argv, errors="surrogate_then_replace")
            return None if timeout_bin and rc == 124 else (rc, out, err)

    result = monitor(
        params["stop_file"],
        params["interval"],
        params["gpu_interval"],
        params["max_seconds"],
        query,
        lambda: mem_available(params["proc_root"]),
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
