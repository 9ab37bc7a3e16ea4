# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: wait for the head to serve, showing progress, and stop waiting when a rank is gone."""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

ARGUMENT_SPEC = {
    "container": {"type": "str", "required": True},
    "api": {"type": "str", "required": True},
    "timeout": {"type": "int", "default": 900},
    "interval": {"type": "float", "default": 5},
    "log_lines": {"type": "int", "default": 20},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = task_vars.get("inventory_hostname", "?")
        started = time.monotonic()
        polls = 0
        last: dict[str, Any] = {}
        while True:
            polls += 1
            look = self._execute_module(
                module_name="dgxspark.cluster.rank_health",
                module_args={"container": args["container"], "api": args["api"], "log_lines": 1},
                task_vars=task_vars,
            )
            elapsed = time.monotonic() - started
            if look.get("failed"):
                result.update(failed=True, msg=f"{host}: could not look at the rank: {look.get('msg')}", polls=polls)
                return result
            last = look
            line = (look.get("log_tail") or [""])[-1][:160]
            phase = _phase(look)
            display.display(f"  [{elapsed:6.1f}s] {host} rank container {args['container']}: {phase}; last log: {line}")
            if look.get("healthy") and look.get("models"):
                result.update(
                    changed=False,
                    healthy=True,
                    models=look["models"],
                    seconds=round(elapsed, 1),
                    polls=polls,
                    msg=f"{host} serves {', '.join(look['models'])} after {elapsed:.1f} s",
                )
                return result
            if not look.get("running") or elapsed >= args["timeout"]:
                tail = self._execute_module(
                    module_name="dgxspark.cluster.rank_health",
                    module_args={"container": args["container"], "log_lines": args["log_lines"]},
                    task_vars=task_vars,
                )
                why = (
                    f"its container is {look.get('status')} (exit code {look.get('exit_code')})"
                    if not look.get("running")
                    else f"not serving after {args['timeout']} s"
                )
                result.update(
                    failed=True,
                    healthy=False,
                    seconds=round(elapsed, 1),
                    polls=polls,
                    log_tail=tail.get("log_tail", []),
                    last=last,
                    msg=f"{host}: the head is not serving: {why}",
                )
                return result
            time.sleep(args["interval"])


def _phase(look: dict[str, Any]) -> str:
    if not look.get("running"):
        return f"{look.get('status')} (exit code {look.get('exit_code')})"
    if look.get("healthy"):
        return "healthy, waiting for /v1/models"
    return f"loading ({look.get('health_error') or 'no answer yet'})"
