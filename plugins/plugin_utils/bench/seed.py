# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seed 000's measurements and the figures of a run that set beside them: bursts, node memory, the needle.

Controller side, plain data, standard library only. Seed 000 ("Measured operating figures", tp3-triangle on
three DGX Sparks) gives five figures; :data:`SEED_000` holds them with how this benchmark measures each:

- single-stream prose, 53.9 tok/s: the mean tok/s per user (1 / TPOT) of the concurrency-1 level;
- the aggregate of a 4-request and of a 6-request burst, 137.6 and 123.2 tok/s: :func:`burst_summary`, the sum
  of the burst's output tokens over its span (first send to last end; TTFT and queueing included);
- the 443,223-token needle retrieval, 87.1 s: the needle's time, comparable only when its context (the
  server's ``usage.prompt_tokens``) is within 1 % of 443,223 tokens;
- the minimum headroom during the long-context test, 6.8 GiB on the head: the lowest MemAvailable the node
  monitor sampled on the head while the needle ran (:func:`node_memory`).

The seed does not define "aggregate" or "headroom" further; these are our reading, written in
docs/benchmark.md. :func:`seed_comparison` lists each figure with the seed's value, the run's and their
ratio. It judges nothing: other hardware gives other figures. The sim test judges the stand-in's figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GIB = 1024**3
SEED_NEEDLE_TOKENS = 443223
NEEDLE_MATCH = 0.01

SEED_000: tuple[dict[str, Any], ...] = (
    {
        "figure": "single_stream_tps",
        "label": "Single-stream prose",
        "seed": 53.9,
        "unit": "tok/s",
        "how": "mean tok/s per user (1 / TPOT) at concurrency 1",
    },
    {
        "figure": "burst_4_tps",
        "label": "Aggregate, 4-request burst",
        "seed": 137.6,
        "unit": "tok/s",
        "how": "4 requests sent at once: sum of output tokens / (last end - first send)",
    },
    {
        "figure": "burst_6_tps",
        "label": "Aggregate, 6-request burst",
        "seed": 123.2,
        "unit": "tok/s",
        "how": "6 requests sent at once: sum of output tokens / (last end - first send)",
    },
    {
        "figure": "needle_seconds",
        "label": "443,223-token needle retrieval",
        "seed": 87.1,
        "unit": "s",
        "how": "the needle request, send to end of answer, at a context within 1 % of 443,223 tokens (server's usage)",
    },
    {
        "figure": "needle_min_headroom_gib",
        "label": "Minimum headroom during the long-context test (head node)",
        "seed": 6.8,
        "unit": "GiB",
        "how": "lowest MemAvailable the node monitor sampled on the head while the needle ran",
    },
)


def burst_summary(burst: Mapping[str, Any]) -> dict[str, Any]:
    """One burst's figures: ``size``, ``ok``, ``errors``, ``output_tokens``, ``span_s`` and ``aggregate_tps``.

    ``burst`` is ``{"size": n, "requests": [records]}`` (the load client's records, all sent at once).
    ``aggregate_tps`` is the sum of the successful requests' output tokens (the server's usage) over the span
    from the first send to the last end; None when a request failed (a burst with errors has no aggregate)."""
    records = list(burst.get("requests") or [])
    ok = [record for record in records if record.get("ok")]
    starts = [record["t_send"] for record in records if record.get("t_send") is not None]
    ends = [record["t_send"] + record["e2e"] for record in records if record.get("e2e") is not None]
    span = max(ends) - min(starts) if starts and ends else None
    tokens = sum(int(record.get("output_tokens") or record.get("chunks") or 0) for record in ok)
    errors = len(records) - len(ok)
    ttfts = sorted(record["ttft"] for record in ok if record.get("ttft") is not None)
    return {
        "size": burst["size"],
        "requests": len(records),
        "ok": len(ok),
        "errors": errors,
        "first_error": next((str(r.get("error")) for r in records if not r.get("ok")), None),
        "output_tokens": tokens,
        "span_s": span if span and span > 0 else None,
        "aggregate_tps": tokens / span if span and span > 0 and not errors and records else None,
        "ttft_max_s": ttfts[-1] if ttfts else None,
    }


def node_memory(samples: Sequence[Sequence[float]], phases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A node's MemAvailable samples (``[epoch seconds, bytes]``) summed up: the whole run and each phase.

    Returns ``samples``, ``min_bytes``, ``min_at`` and ``phases``: by phase name, the lowest sample taken
    between its ``started_at`` and ``finished_at`` (``min_bytes`` None when none was taken in it)."""
    points = [(float(t), int(value)) for t, value in samples]
    lowest = min(points, key=lambda point: point[1]) if points else None
    by_phase: dict[str, Any] = {}
    for phase in phases:
        start, end = phase.get("started_at"), phase.get("finished_at")
        if start is None or end is None:
            continue
        inside = [point for point in points if start <= point[0] <= end]
        low = min(inside, key=lambda point: point[1]) if inside else None
        by_phase[phase["name"]] = {"samples": len(inside), "min_bytes": low[1] if low else None}
    return {
        "samples": len(points),
        "min_bytes": lowest[1] if lowest else None,
        "min_at": lowest[0] if lowest else None,
        "phases": by_phase,
    }


def _single_stream(levels: Sequence[Mapping[str, Any]]) -> tuple[float | None, str]:
    for level in levels:
        if level["concurrency"] == 1:
            return level["stats"]["tps_user"]["mean"], f"{level['ok']} requests at C=1"
    return None, "not measured: concurrency 1 was not among the levels"


def _burst(bursts: Sequence[Mapping[str, Any]], size: int) -> tuple[float | None, str]:
    for burst in bursts:
        if burst["size"] == size:
            if burst["aggregate_tps"] is None:
                return None, f"not measured: {burst['errors']} of the {size} requests failed ({burst['first_error']})"
            return burst["aggregate_tps"], f"{burst['output_tokens']} tokens in {burst['span_s']:.2f} s"
    return None, f"not measured: no {size}-request burst in this run"


def _needle(needle: Mapping[str, Any] | None) -> tuple[float | None, str]:
    if not needle:
        return None, "not measured: the needle was not run"
    tokens = needle.get("context_tokens") or 0
    if needle.get("refused"):
        return None, f"not measured: {needle.get('error')}"
    if abs(tokens - SEED_NEEDLE_TOKENS) > NEEDLE_MATCH * SEED_NEEDLE_TOKENS:
        return None, f"not comparable: the needle had {tokens} tokens ({needle.get('counted_by', 'usage')})"
    verdict = "found" if needle.get("found") else "NOT found"
    return needle.get("seconds"), f"{tokens} tokens ({needle.get('counted_by', 'usage')}), {verdict}"


def _headroom(
    nodes: Mapping[str, Any] | None, head: str | None, needle: Mapping[str, Any] | None
) -> tuple[float | None, str]:
    if not nodes:
        return None, "not measured: no node monitor in this run"
    if not head or head not in nodes:
        return None, "not measured: the head's samples are missing"
    node = nodes[head]
    if node.get("error"):
        return None, f"not measured: {node['error']}"
    phase = (node.get("memory") or {}).get("phases", {}).get("needle")
    if not needle or phase is None or phase["min_bytes"] is None:
        return None, "not measured: no sample on the head while the needle ran"
    tokens = needle.get("context_tokens") or 0
    note = f"{phase['samples']} samples on {head} during the {tokens}-token needle"
    if abs(tokens - SEED_NEEDLE_TOKENS) > NEEDLE_MATCH * SEED_NEEDLE_TOKENS:
        note += " (not the seed's context)"
    return phase["min_bytes"] / GIB, note


def seed_comparison(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Seed 000's figures beside this run's: per figure ``label``, ``seed``, ``value`` (None: not measured),
    ``unit``, ``ratio`` (value / seed), ``how`` it is measured and a ``note`` (what was measured, or why not)."""
    levels = summary.get("levels") or []
    bursts = summary.get("bursts") or []
    needle = summary.get("needle")
    head = (summary.get("identity") or {}).get("hosts", [None])[0] if summary.get("identity") else None
    found = {
        "single_stream_tps": _single_stream(levels),
        "burst_4_tps": _burst(bursts, 4),
        "burst_6_tps": _burst(bursts, 6),
        "needle_seconds": _needle(needle),
        "needle_min_headroom_gib": _headroom(summary.get("nodes"), head, needle),
    }
    rows = []
    for figure in SEED_000:
        value, note = found[figure["figure"]]
        rows.append(
            {
                **figure,
                "value": value,
                "ratio": value / figure["seed"] if value is not None else None,
                "note": note,
            }
        )
    return rows
