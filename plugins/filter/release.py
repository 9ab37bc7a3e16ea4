# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the releases. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils import _image_transfer, _recover, _release_report


def release_report(result: Any, show: bool = False) -> list[str]:
    try:
        return _release_report.showing(result["release"]) if show else _release_report.listing(result)
    except (KeyError, TypeError, AttributeError) as error:
        raise AnsibleFilterError(
            f"dgxspark.cluster.release_report: needs the release module's answer: {error}"
        ) from None


def rollback_target(result: Any, head: str, containers: Any = None, wanted: str = "") -> str:
    try:
        spec = _release_report.head_spec(containers)
        return _release_report.rollback_target(result, head, spec, wanted or "")
    except ValueError as error:
        raise AnsibleFilterError(f"rollback: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise AnsibleFilterError(
            f"dgxspark.cluster.rollback_target: needs the release module's answer: {error}"
        ) from None


def image_plan(
    facts: Any,
    head: str,
    hosts: Any = None,
    release: str = "",
    profile_images: Any = None,
    pull: bool = False,
) -> dict[str, Any]:
    try:
        return _image_transfer.plan(
            facts, head, list(hosts or []), release or "", dict(profile_images or {}) or None, bool(pull)
        )
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.image_plan: needs node_facts' answers by host: {error}") from None


def recover_decision(
    facts: Any,
    hosts: Any,
    head: str,
    now: str,
    max_attempts: int = 3,
    backoff_s: float = 120,
    after_memory_trip: bool = False,
    try_now: bool = False,
    reset: bool = False,
) -> dict[str, Any]:
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError(
            "dgxspark.cluster.recover_decision: needs node_facts' answers by host (a dict), "
            f"found {type(facts).__name__}"
        )
    try:
        settings = _recover.Settings(
            max_attempts=int(max_attempts),
            backoff_s=float(backoff_s),
            after_memory_trip=bool(after_memory_trip),
            try_now=bool(try_now),
            reset=bool(reset),
        )
        return _recover.decide(facts, list(hosts or []), head, now, settings)
    except ValueError as error:
        raise AnsibleFilterError(f"recover: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise AnsibleFilterError(
            f"dgxspark.cluster.recover_decision: needs node_facts' answers by host: {error}"
        ) from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "release_report": release_report,
            "rollback_target": rollback_target,
            "image_plan": image_plan,
            "recover_decision": recover_decision,
        }
