# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the releases. Documentation: the .yml file of each filter."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_head_spec = lazy("plugin_utils.release.report", "head_spec")
_listing = lazy("plugin_utils.release.report", "listing")
_rollback_target = lazy("plugin_utils.release.report", "rollback_target")
_showing = lazy("plugin_utils.release.report", "showing")
_evidence_line = lazy("plugin_utils.release.report", "evidence_line")
_promotion_outcome = lazy("plugin_utils.release.report", "promotion_outcome")
_promote_parameters = lazy("plugin_utils.release.promote_bench", "parameters")
_load_results = lazy("plugin_utils.bench.bench", "load_results")
_image_plan = lazy("plugin_utils.release.images", "plan")
_recover_settings = lazy("plugin_utils.release.recover", "Settings")
_recover_decide = lazy("plugin_utils.release.recover", "decide")
_window_plan = lazy("plugin_utils.release.window", "plan")
_window_closed = lazy("plugin_utils.release.window", "closed")
_window_job_lines = lazy("plugin_utils.release.window", "job_lines")
_window_tripped = lazy("plugin_utils.release.window", "tripped")


def _said(needs: str, refused: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A filter's errors as Ansible shows them: a ValueError is the judgement's own refusal (``refused: ...``,
    when the filter refuses at all); a missing key or a wrong type means the input is not what the filter
    ``needs``."""

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def filtered(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except ValueError as error:
                if refused is None:
                    raise AnsibleFilterError(f"dgxspark.cluster.{function.__name__}: needs {needs}: {error}") from None
                raise AnsibleFilterError(f"{refused}: {error}") from None
            except (KeyError, TypeError, AttributeError) as error:
                raise AnsibleFilterError(f"dgxspark.cluster.{function.__name__}: needs {needs}: {error}") from None

        return filtered

    return wrap


def _by_host(facts: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.{name}: needs node_facts' answers by host (a dict), found {type(facts).__name__}"
        )
    return facts


@_said("the release module's answer")
def release_report(result: Any, show: bool = False) -> list[str]:
    return _showing(result["release"]) if show else _listing(result)


@_said("the release module's answer")
def release_evidence_line(result: Any) -> str:
    if not isinstance(result, Mapping):
        raise TypeError(f"found {type(result).__name__}")
    return _evidence_line(result)


def promotion_outcome(candidate: Any, promoted: Any, rolled_back: Any, verdict: Any = "") -> str:
    return _promotion_outcome(str(candidate), str(promoted), boolean(rolled_back, strict=False), str(verdict))


@_said("the promoted run's results file and the dgxspark_bench_* variables given")
def promote_bench_parameters(given: Any, results: Any, override: Any = False) -> dict[str, Any]:
    document = _load_results(str(results)) if isinstance(results, str) else results
    if not isinstance(given, Mapping) or not isinstance(document, Mapping):
        raise TypeError("needs a dict of the variables given and the results (a path or a document)")
    return _promote_parameters(document, dict(given), boolean(override, strict=False))


@_said("the release module's answer", refused="rollback")
def rollback_target(result: Any, head: str, containers: Any = None, wanted: str = "") -> str:
    spec = _head_spec(containers)
    return _rollback_target(result, head, spec, wanted or "")


@_said("node_facts' answers by host")
def image_plan(
    facts: Any,
    head: str,
    hosts: Any = None,
    release: str = "",
    profile_images: Any = None,
    pull: bool = False,
) -> dict[str, Any]:
    return _image_plan(facts, head, list(hosts or []), release or "", dict(profile_images or {}) or None, bool(pull))


@_said("node_facts' answers by host", refused="recover")
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
    settings = _recover_settings(
        max_attempts=int(max_attempts),
        backoff_s=float(backoff_s),
        after_memory_trip=bool(after_memory_trip),
        try_now=bool(try_now),
        reset=bool(reset),
    )
    return _recover_decide(_by_host(facts, "recover_decision"), list(hosts or []), head, now, settings)


@_said("node_facts' answers by host")
def window_plan(
    facts: Any, hosts: Any, head: str, chosen: Any, name: str, image: str, gpus: Any = True
) -> dict[str, Any]:
    # a survey's list is comma-separated text
    chosen_hosts = (
        [h.strip() for h in chosen.split(",") if h.strip()] if isinstance(chosen, str) else list(chosen or [])
    )
    return _window_plan(
        _by_host(facts, "window_plan"), list(hosts or []), head, chosen_hosts, str(name), str(image), gpus
    )


@_said("the window jobs' answers by host")
def window_closed(jobs: Any, served: bool = True) -> str:
    return _window_closed({str(host): dict(job or {}) for host, job in dict(jobs or {}).items()}, bool(served))


@_said("the window_job module's answer")
def window_job_lines(job: Any, name: str, failure: Any = None) -> list[str]:
    if not isinstance(job, Mapping):
        raise TypeError(f"found {type(job).__name__}")
    return _window_job_lines(job, str(name), failure)


@_said("the node_phase answers of the window's nodes")
def window_tripped(answers: Any) -> bool:
    return _window_tripped(list(answers or []))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "release_report": release_report,
            "rollback_target": rollback_target,
            "release_evidence_line": release_evidence_line,
            "promotion_outcome": promotion_outcome,
            "promote_bench_parameters": promote_bench_parameters,
            "image_plan": image_plan,
            "recover_decision": recover_decision,
            "window_plan": window_plan,
            "window_closed": window_closed,
            "window_job_lines": window_job_lines,
            "window_tripped": window_tripped,
        }
