# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: add what each node's monitor saw during a benchmark run to the run, and write its report again.

Controller only. The figures (minimum MemAvailable per node and phase, the clock-latch verdicts, seed 000's
comparison) are plugin_utils/bench/bench.py's and _bench_seed.py's; this plugin reads the run's results.json, adds
``nodes`` and writes the folder again (_bench_report.write_run).
"""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _report

display = Display()


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = {
        "run_dir": {"type": "path", "required": True},
        "monitors": {"type": "dict", "required": True},
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        path = os.path.join(args["run_dir"], "results.json")
        try:
            results = _bench.load_results(path)
            results["nodes"] = _bench.nodes_from_monitors(args["monitors"])
            summary = _bench.summarize(results, results.get("slos"))
        except ValueError as error:
            raise AnsibleActionFail(str(error)) from None
        if self._task.check_mode:
            result.update(changed=False, msg=f"check mode: {path} not written", summary=summary)
            return result
        for warning in _report.write_run(args["run_dir"], results, summary):
            display.warning(f"bench: {warning}")
        lines = _bench.nodes_lines(summary) + _report.seed_lines(summary)
        result.update(changed=True, summary=summary, lines=lines, msg=f"nodes' samples added to {path}")
        return result
