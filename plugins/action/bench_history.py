# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: write the benchmark's history across releases (history.md and charts/history-*.png).

Controller only. The history is plugin_utils/bench/history.py's; this plugin takes the releases as the ``release``
module's ``history`` operation returned them, reads the results files their evidence names on this controller and
writes the folder.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import history as _history

display = Display()


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = {
        "releases": {"type": "list", "elements": "dict", "required": True},
        "dest": {"type": "path", "required": True},
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        dest = args["dest"]
        report = os.path.join(dest, _history.MARKDOWN)
        try:
            if self._task.check_mode:
                history = _history.build(args["releases"])
                lines = [*_history.headline(history), f"check mode: {report} and its charts not written"]
                result.update(history=history, lines=lines, report=report, charts=[], msg=lines[-1])
                return result
            written = _history.write(dest, args["releases"])
        except (KeyError, TypeError) as error:
            raise AnsibleActionFail(f"needs the release module's history records: {error}") from None
        except OSError as error:
            raise AnsibleActionFail(f"{dest}: cannot write the history: {error.strerror or error}") from None
        for warning in written["warnings"]:
            display.warning(f"bench history: {warning}")
        charts = written["charts"]
        lines = [
            *_history.headline(written["history"]),
            f"history: {written['report']}",
            f"charts: {', '.join(os.path.relpath(c, dest) for c in charts) if charts else 'none drawn'}",
        ]
        result.update(
            changed=True,
            history=written["history"],
            lines=lines,
            report=written["report"],
            charts=charts,
            msg=f"benchmark history written to {written['report']}",
        )
        return result
