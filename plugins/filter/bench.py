# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the benchmark's analysis. Documentation: the .yml file of each filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
compare = lazy("plugin_utils.bench.bench", "compare")
load_results = lazy("plugin_utils.bench.bench", "load_results")
summarize = lazy("plugin_utils.bench.bench", "summarize")
text_table = lazy("plugin_utils.bench.report", "text_table")


def _document(results: Any) -> Any:
    """A results document as given, or read from the JSON file a string names."""
    return load_results(results) if isinstance(results, str) else results


def _number(value: Any, name: str) -> float:
    """A number given as a number or, from ``-e``, as a string; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name} must be a number, not {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {value!r}") from None


def bench_summary(results: Any, slos: Any = None) -> dict[str, Any]:
    try:
        return summarize(_document(results), slos)
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.bench_summary: {error}") from None


def bench_compare(baseline: Any, candidate: Any, threshold: Any = 3.0, alpha: Any = 0.05) -> dict[str, Any]:
    try:
        relative = _number(threshold, "threshold (percent)") / 100
        return compare(_document(baseline), _document(candidate), relative, _number(alpha, "alpha"))
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.bench_compare: {error}") from None


def bench_text_table(summary: Any) -> str:
    try:
        return text_table(summary)
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"dgxspark.cluster.bench_text_table: not a bench_summary result: {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"bench_summary": bench_summary, "bench_compare": bench_compare, "bench_text_table": bench_text_table}
