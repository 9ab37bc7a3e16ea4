# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's action plugins share: their flags, and a ``run`` that checks the task's arguments first.

Every action plugin of the collection declared the same four flags and began ``run`` with the same four lines
(the task's variables, ActionBase's own checks, the arguments against the plugin's spec, ``changed`` false). A
plugin now names its spec and writes :meth:`ValidatedAction.act`, which gets the arguments as validated.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase


class ValidatedAction(ActionBase):
    """An action plugin whose task arguments are checked against ``ARGUMENT_SPEC`` before :meth:`act` runs.

    By default it runs on the controller alone (no connection to the host) and supports check mode; a plugin
    that runs a module on the host sets ``_requires_connection = True``.
    """

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False
    ARGUMENT_SPEC: dict[str, Any] = {}

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        result["changed"] = False
        return self.act(args, task_vars, result)

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """The plugin's work: ``args`` validated, ``result`` ActionBase's (``changed`` false); returns the result."""
        raise NotImplementedError
