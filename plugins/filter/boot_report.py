# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot role's reports (logic in plugin_utils/release/boot_report.py). Documentation: each filter's .yml file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_boot_report = lazy("plugin_utils.release.boot_report", "boot_report")
_boot_undo_report = lazy("plugin_utils.release.boot_report", "boot_undo_report")
_boot_outcome = lazy("plugin_utils.release.boot_report", "boot_outcome")
_steady_report = lazy("plugin_utils.release.boot_report", "steady_report")
_release_write = lazy("plugin_utils.release.boot_report", "release_write")
_guard_failure = lazy("plugin_utils.release.boot_report", "guard_failure")


def boot_report(hosts: Any, plan: Any, prompt: str = "", startup_wait: Any = None, ended: Any = None) -> list[str]:
    try:
        return _boot_report(list(hosts), plan, str(prompt), startup_wait, None if ended is None else float(ended))
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_report: {error}") from None


def boot_undo_report(hosts: Any, failed: Any, lost: Any = ()) -> list[str]:
    try:
        return _boot_undo_report(list(hosts), list(failed or ()), list(lost or ()))
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_undo_report: {error}") from None


def boot_outcome(hostvars: Any, hosts: Any, play_hosts: Any = None) -> dict[str, list[str]]:
    try:
        present = None if play_hosts is None else [str(h) for h in play_hosts]
        return _boot_outcome(hostvars, [str(h) for h in hosts], present)
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_outcome: {error}") from None


def boot_steady_report(
    hostvars: Any, hosts: Any, planned: Any, release: Any, prompt: str = "", ended: Any = None
) -> list[str]:
    try:
        when = None if ended is None else float(ended)
        return _steady_report(hostvars, [str(h) for h in hosts], planned, dict(release or {}), str(prompt), when)
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_steady_report: {error}") from None


def boot_release_write(decision: Any, plan: Any) -> dict[str, Any]:
    if not isinstance(decision, Mapping) or not isinstance(plan, Mapping):
        raise AnsibleFilterError(
            "dgxspark.cluster.boot_release_write: needs boot_preflight's release decision and the plan (two dicts)"
        )
    try:
        return _release_write(decision, plan)
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.boot_release_write: {error}") from None


def boot_guard_failure(guard: Any, host: Any) -> str:
    if guard is not None and not isinstance(guard, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.boot_guard_failure: needs the guard's answer (a dict), found {type(guard).__name__}"
        )
    return _guard_failure(guard, str(host))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "boot_report": boot_report,
            "boot_undo_report": boot_undo_report,
            "boot_outcome": boot_outcome,
            "boot_steady_report": boot_steady_report,
            "boot_release_write": boot_release_write,
            "boot_guard_failure": boot_guard_failure,
        }
