# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who a run is recorded as "by" (a release's creation, its history's events, its evidence): one way to name
them, wherever the record is written (the boot's preflight, bench.yml, window.yml, recover.yml, promote.yml).

The AWX user who launched the job (``<user> (AWX)``), else the AWX schedule that did (``AWX schedule <name>``),
else the controller's login at its host name (``<login>@<host>``): never empty, whatever the environment holds
(``$USER`` is unset in many containers and under cron, which gave ``evidence by  (bench)``). No Ansible imports;
the ``dgxspark.cluster.run_by`` lookup and the boot's preflight call :func:`run_by`.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping
from typing import Any

# the extra variables AWX gives a job (and Tower's older names), in the order they are looked at
AWX_USER_VARS = ("awx_user_name", "tower_user_name")
AWX_SCHEDULE_VARS = ("awx_schedule_name", "tower_schedule_name")


def controller_login() -> str:
    """The controller's login: its user's name, else its uid (a uid without a passwd entry)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def run_by(awx_user: Any = "", awx_schedule: Any = "", login: str | None = None, host: str | None = None) -> str:
    """Who runs: ``<awx_user> (AWX)``, else ``AWX schedule <awx_schedule>``, else ``<login>@<host>`` (by default
    the controller's login and host name)."""
    if awx_user:
        return f"{awx_user} (AWX)"
    if awx_schedule:
        return f"AWX schedule {awx_schedule}"
    return f"{login or controller_login()}@{host or socket.gethostname()}"


def run_by_vars(variables: Mapping[str, Any], login: str | None = None, host: str | None = None) -> str:
    """:func:`run_by` from a task's variables (AWX's extra variables, when the job runs in AWX)."""
    user = next((variables[name] for name in AWX_USER_VARS if variables.get(name)), "")
    schedule = next((variables[name] for name in AWX_SCHEDULE_VARS if variables.get(name)), "")
    return run_by(user, schedule, login, host)
