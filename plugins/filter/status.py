# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of playbooks/status.yml: the cluster's status document and its screen (logic in
plugin_utils/status/report.py). Documentation: the .yml file of each filter; docs/operations.md, "Status"."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_status = lazy("plugin_utils.status.report", "status")
_lines = lazy("plugin_utils.status.report", "lines")
FORMATS = ("text", "json")
_bench_section = lazy("plugin_utils.status.report", "bench_section")
_promoted_results = lazy("plugin_utils.status.report", "promoted_results")
_summarize = lazy("plugin_utils.bench.bench", "summarize")
_load_results = lazy("plugin_utils.bench.bench", "load_results")


def status_report(
    answers: Any, hosts: Any, head: Any, endpoint: Any = "", bench_dir: Any = "", floor_margin: Any = 0.25
) -> dict[str, Any]:
    name = "dgxspark.cluster.status_report"
    if isinstance(hosts, str) or not isinstance(hosts, Sequence) or not hosts:
        raise AnsibleFilterError(f"{name}: hosts must be a non-empty list of inventory names, found {hosts!r}")
    if isinstance(answers, Sequence) and not isinstance(answers, str) and len(answers) == len(hosts):
        answers = dict(zip([str(h) for h in hosts], answers, strict=True))  # in the order of hosts
    if not isinstance(answers, Mapping):
        raise AnsibleFilterError(
            f"{name}: needs node_facts' answers by host (a dict), or one per host in their order (a list), "
            f"found {type(answers).__name__}"
        )
    try:
        margin = float(floor_margin)
        bench = _bench_section(
            str(bench_dir or "") or None, _promoted_results(answers, str(head)), _summarize, _load_results
        )
        return _status(
            answers, [str(h) for h in hosts], str(head), time.time(), str(endpoint or "") or None, bench, margin
        )
    except (ValueError, TypeError) as error:
        raise AnsibleFilterError(f"{name}: {error}") from None


def status_screen(document: Any, status_format: Any = "text") -> Any:
    name = "dgxspark.cluster.status_screen"
    if status_format not in FORMATS:
        raise AnsibleFilterError(f"{name}: status_format is text or json, found {status_format!r}")
    try:
        return _lines(document) if status_format == "text" else dict(document)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise AnsibleFilterError(f"{name}: needs status_report's document: {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"status_report": status_report, "status_screen": status_screen}
