# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The analysis of ``playbooks/bench.yml``: a results document in, figures, capacity and comparisons out.

Controller side, plain data in and out, standard library only. The results document
(``dgxspark.cluster/bench-results/1``, written by the load client; its format is in docs/benchmark.md)
holds every request of every concurrency level with its raw timings. From it:

- :func:`request_metrics`: one request's N, TTFT, TPOT, tokens/s per user, latency and CordatusAI's TPS,
  by the definitions of docs/benchmark.md (REFERENCE.md, "Benchmark definitions").
- :func:`summarize`: per level the distributions (mean, stdev, min, max, p10, p50, p90, p99), RPS, output
  tokens/s, errors, CordatusAI's columns, and the capacity: every SLO per level and Max C.
- :func:`compare`: a baseline and a candidate run, metric by metric and level by level, with Welch's
  t-test, the capacity and the seed figures; ``pass``, ``regression``, ``inconclusive`` or ``incomparable``.

Reports (Markdown, a terminal table, charts) are in ``_bench_report``; the statistics in ``_bench_stats``.
Every figure that cannot be computed is None (JSON null), never NaN.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.seed import (
    burst_summary,
    node_memory,
    seed_comparison,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.stats import (
    describe,
    finite,
    mean,
    percentile,
    stdev,
    t_quantile,
    variance,
    welch,
)

FORMAT = "dgxspark.cluster/bench-results/1"
SUMMARY_FORMAT = "dgxspark.cluster/bench-summary/1"
COMPARISON_FORMAT = "dgxspark.cluster/bench-comparison/1"
LOWER, HIGHER = "lower", "higher"
PASS, REGRESSION, INCOMPARABLE, INCONCLUSIVE = "pass", "regression", "incomparable", "inconclusive"
# The seed figures a candidate may not lose more than the threshold of, whatever a test says (bench/seed.py).
GUARDED_SEED_FIGURES = ("single_stream_tps", "burst_4_tps", "burst_6_tps")

# Per-request metrics: name -> (label, unit, which way is better). ``itl_gap_ms`` pools the raw gaps
# between content chunks of every request of a level (many per request); the others are one per request.
METRICS: dict[str, tuple[str, str, str]] = {
    "ttft_ms": ("TTFT", "ms", LOWER),
    "tpot_ms": ("TPOT", "ms", LOWER),
    "tps_user": ("tok/s per user", "tok/s", HIGHER),
    "e2e_s": ("latency", "s", LOWER),
    "itl_gap_ms": ("ITL gap (raw, pooled)", "ms", LOWER),
    "cordatus_tps": ("CordatusAI TPS (N / latency)", "tok/s", HIGHER),
}
# What compare() tests: one value per request (the pooled gaps are not independent samples).
COMPARED_METRICS = ("ttft_ms", "tpot_ms", "tps_user", "e2e_s", "cordatus_tps")
# Level-wide figures: one value per level and run, compared as a change only.
LEVEL_FIGURES: dict[str, tuple[str, str, str]] = {
    "rps": ("RPS", "req/s", HIGHER),
    "output_tps": ("output tok/s", "tok/s", HIGHER),
    "errors": ("errors", "requests", LOWER),
}
SLO_OPS = ("<=", "<", ">=", ">")
DEFAULT_SLOS: tuple[dict[str, Any], ...] = (
    {"metric": "ttft_ms", "op": "<=", "threshold": 1000, "percentile": 90},
    {"metric": "tps_user", "op": ">=", "threshold": 20, "percentile": 10},
)
# CordatusAI Benchmark Explorer's default targets (seed 002, section 9): mean TTFT and mean N / latency.
CORDATUS_TTFT_MS = 1000.0
CORDATUS_TPS = 20.0
CAPACITY_RULE = (
    "Max C is the largest tested concurrency C such that the level at C and every tested level below it "
    "have no failed request and meet every SLO; a level with any error fails."
)
CORDATUS_RULE = (
    "CordatusAI's Max C: the same rule on CordatusAI's Benchmark Explorer targets, mean TTFT <= 1000 ms and "
    "mean TPS (N / latency) >= 20 tok/s, on the successful requests (errors are not part of its targets)."
)
WORKLOAD_KEYS = ("model", "shape", "prompt_tokens", "max_tokens")
_MAX_LISTED = 25
_SIGNIFICANT = 6


# ---------------------------------------------------------------- the results document
class _Problems:
    """Problems found in a document, each naming the source and the JSON path."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.found.append(f"{self.source}: {path}: {message}")

    def raise_if_any(self) -> None:
        if not self.found:
            return
        shown = self.found[:_MAX_LISTED]
        more = len(self.found) - len(shown)
        tail = [f"... and {more} more"] if more else []
        raise ValueError(
            f"not a valid {FORMAT} document ({len(self.found)} problem(s)):\n  - " + "\n  - ".join(shown + tail)
        )


def _found(value: Any) -> str:
    text = json.dumps(value, default=repr) if not isinstance(value, str) else repr(value)
    return f"{type(value).__name__} {text[:60]}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(out: _Problems, parent: Mapping[str, Any], path: str, key: str, kind: str, nullable: bool = False) -> Any:
    """``parent[key]`` checked against ``kind``; a problem (and None) when missing or of another kind."""
    where = f"{path}.{key}"
    if key not in parent:
        out.add(where, f"missing (expected {kind}{' or null' if nullable else ''})")
        return None
    value = parent[key]
    if value is None and nullable:
        return None
    good = {
        "a string": lambda v: isinstance(v, str),
        "a boolean": lambda v: isinstance(v, bool),
        "an integer >= 0": lambda v: _is_int(v) and v >= 0,
        "an integer >= 1": lambda v: _is_int(v) and v >= 1,
        "a number": _is_number,
        "a number >= 0": lambda v: _is_number(v) and v >= 0,
        "an object": lambda v: isinstance(v, Mapping),
        "a list": lambda v: isinstance(v, list),
    }[kind](value)
    if not good:
        out.add(where, f"expected {kind}{' or null' if nullable else ''}, found {_found(value)}")
        return None
    return value


def validate_results(results: Any, source: str = "<results>") -> None:
    """Raise ValueError listing every problem of a results document (source, JSON path, found, expected).

    Checks the format string, every field of ``identity``, ``gate``, ``levels`` and ``needle`` and their
    kinds, and that the parts agree: the gate's ``passed`` with its checks, each level's concurrency in
    ``identity.workload.levels`` and tested once, each request's ``i`` once per level, a successful
    request's ``ttft`` and ``e2e`` present with ``ttft <= e2e``. Unknown keys are allowed.
    """
    out = _Problems(source)
    if not isinstance(results, Mapping):
        out.add("$", f"expected an object, found {_found(results)}")
        out.raise_if_any()
    if results.get("format") != FORMAT:
        out.add("$.format", f"expected {FORMAT!r}, found {_found(results.get('format'))}")
    identity = _check(out, results, "$", "identity", "an object")
    levels_planned = _validate_identity(out, identity) if identity is not None else None
    gate = _check(out, results, "$", "gate", "an object")
    if gate is not None:
        _validate_gate(out, gate)
    levels = _check(out, results, "$", "levels", "a list")
    if levels is not None:
        _validate_levels(out, levels, levels_planned)
    needle = _check(out, results, "$", "needle", "an object", nullable=True)
    if needle is not None:
        _check(out, needle, "$.needle", "context_tokens", "an integer >= 0")
        _check(out, needle, "$.needle", "found", "a boolean")
        _check(out, needle, "$.needle", "seconds", "a number >= 0")
        _check(out, needle, "$.needle", "expected", "a string")
        _check(out, needle, "$.needle", "got", "a string", nullable=True)
        _check(out, needle, "$.needle", "error", "a string", nullable=True)
    out.raise_if_any()


def _validate_identity(out: _Problems, identity: Mapping[str, Any]) -> list[int] | None:
    path = "$.identity"
    for key in ("profile", "profile_hash", "shape", "model", "client_host", "endpoint"):
        _check(out, identity, path, key, "a string")
    for key in ("started_at", "finished_at"):
        stamp = _check(out, identity, path, key, "a string")
        if stamp is not None:
            try:
                datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                out.add(f"{path}.{key}", f"expected an ISO-8601 time (2026-11-20T10:00:00Z), found {stamp!r}")
    hosts = _check(out, identity, path, "hosts", "a list")
    for index, host in enumerate(hosts or []):
        if not isinstance(host, str):
            out.add(f"{path}.hosts[{index}]", f"expected a string, found {_found(host)}")
    image_ids = _check(out, identity, path, "image_ids", "an object")
    for host, image in (image_ids or {}).items():
        if not isinstance(image, str):
            out.add(f"{path}.image_ids.{host}", f"expected a string, found {_found(image)}")
    workload = _check(out, identity, path, "workload", "an object")
    if workload is None:
        return None
    wpath = f"{path}.workload"
    _check(out, workload, wpath, "prompt_tokens", "an integer >= 0")
    for key in ("max_tokens", "requests_per_level"):
        _check(out, workload, wpath, key, "an integer >= 1")
    if _check(out, workload, wpath, "stream", "a boolean") is False:
        out.add(f"{wpath}.stream", "must be true: TTFT and the gaps between chunks need a streamed response")
    levels = _check(out, workload, wpath, "levels", "a list")
    if levels is None:
        return None
    for index, level in enumerate(levels):
        if not (_is_int(level) and level >= 1):
            out.add(f"{wpath}.levels[{index}]", f"expected an integer >= 1, found {_found(level)}")
    return [level for level in levels if _is_int(level)]


def _validate_gate(out: _Problems, gate: Mapping[str, Any]) -> None:
    passed = _check(out, gate, "$.gate", "passed", "a boolean")
    checks = _check(out, gate, "$.gate", "checks", "a list")
    failed = []
    for index, check in enumerate(checks or []):
        cpath = f"$.gate.checks[{index}]"
        if not isinstance(check, Mapping):
            out.add(cpath, f"expected an object, found {_found(check)}")
            continue
        name = _check(out, check, cpath, "name", "a string")
        if _check(out, check, cpath, "passed", "a boolean") is False:
            failed.append(name or f"checks[{index}]")
        for key in ("expected", "got"):
            _check(out, check, cpath, key, "a string")
        _check(out, check, cpath, "seconds", "a number >= 0")
    if passed is True and failed:
        out.add("$.gate.passed", f"is true, but these checks failed: {', '.join(map(str, failed))}")


def _validate_levels(out: _Problems, levels: list[Any], planned: list[int] | None) -> None:
    seen: set[int] = set()
    for index, level in enumerate(levels):
        lpath = f"$.levels[{index}]"
        if not isinstance(level, Mapping):
            out.add(lpath, f"expected an object, found {_found(level)}")
            continue
        concurrency = _check(out, level, lpath, "concurrency", "an integer >= 1")
        if concurrency is not None:
            if concurrency in seen:
                out.add(f"{lpath}.concurrency", f"concurrency {concurrency} is tested twice")
            elif planned is not None and concurrency not in planned:
                out.add(f"{lpath}.concurrency", f"{concurrency} is not in $.identity.workload.levels {planned}")
            seen.add(concurrency)
        requests = _check(out, level, lpath, "requests", "a list")
        numbers: set[int] = set()
        for rindex, request in enumerate(requests or []):
            number = _validate_request(out, request, f"{lpath}.requests[{rindex}]")
            if number is not None and number in numbers:
                out.add(f"{lpath}.requests[{rindex}].i", f"request {number} appears twice in this level")
            if number is not None:
                numbers.add(number)


def _validate_request(out: _Problems, request: Any, path: str) -> int | None:
    if not isinstance(request, Mapping):
        out.add(path, f"expected an object, found {_found(request)}")
        return None
    number = _check(out, request, path, "i", "an integer >= 0")
    ok = _check(out, request, path, "ok", "a boolean")
    _check(out, request, path, "error", "a string", nullable=True)
    _check(out, request, path, "status", "an integer >= 0", nullable=True)
    _check(out, request, path, "t_send", "a number")
    ttft = _check(out, request, path, "ttft", "a number >= 0", nullable=True)
    e2e = _check(out, request, path, "e2e", "a number >= 0", nullable=True)
    gaps = _check(out, request, path, "gaps", "a list")
    for gindex, gap in enumerate(gaps or []):
        if not (_is_number(gap) and gap >= 0):
            out.add(f"{path}.gaps[{gindex}]", f"expected a number >= 0, found {_found(gap)}")
    for key in ("output_tokens", "prompt_tokens"):
        _check(out, request, path, key, "an integer >= 0", nullable=True)
    _check(out, request, path, "chunks", "an integer >= 0")
    _check(out, request, path, "finish_reason", "a string", nullable=True)
    if ok is True:
        for key, value in (("ttft", ttft), ("e2e", e2e)):
            if value is None and key in request and request[key] is None:
                out.add(f"{path}.{key}", "a successful request (ok: true) needs it, found null")
        if ttft is not None and e2e is not None and ttft > e2e + 1e-9:
            out.add(f"{path}.ttft", f"{ttft} s is after the end of the stream (e2e {e2e} s)")
    return number


def load_results(path: str) -> dict[str, Any]:
    """The results document at ``path``, validated; ValueError naming the file (and line, for bad JSON)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ValueError(f"{path}: cannot read the results: {error.strerror or error}") from None
    try:
        results = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: line {error.lineno}, column {error.colno}: not JSON: {error.msg}") from None
    except ValueError as error:
        raise ValueError(f"{path}: not JSON: {error}") from None
    validate_results(results, source=path)
    return results


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (a figure the client could not measure is null)")


# ---------------------------------------------------------------- one request
def request_metrics(request: Mapping[str, Any]) -> dict[str, Any]:
    """One request's figures, in seconds and tokens/s, from its raw timings (docs/benchmark.md).

    Keys: ``i``, ``ok``, ``error`` (a failed request's message: its ``error``, else ``HTTP <status>``),
    ``n`` (the server's ``usage.completion_tokens``, else the content chunks, with ``n_from_chunks``
    true), ``ttft_s``, ``e2e_s``, ``tpot_s`` (``(e2e - ttft) / (n - 1)``, None for ``n < 2``),
    ``tps_user`` (``1 / tpot``), ``cordatus_tps`` (``n / e2e``, CordatusAI's TPS), ``gaps_s``, ``t_send``
    and ``end`` (``t_send + e2e``). A failed request's timing figures are None (``gaps_s`` empty).
    """
    ok = bool(request["ok"])
    e2e = request.get("e2e")
    metrics: dict[str, Any] = {
        "i": request.get("i"),
        "ok": ok,
        "error": None if ok else _error_message(request),
        "t_send": request["t_send"],
        "end": request["t_send"] + e2e if e2e is not None else None,
        "n": None,
        "n_from_chunks": False,
        "ttft_s": None,
        "e2e_s": None,
        "tpot_s": None,
        "tps_user": None,
        "cordatus_tps": None,
        "gaps_s": [],
    }
    if not ok:
        return metrics
    ttft = request["ttft"]
    n = request.get("output_tokens")
    if n is None:
        n, metrics["n_from_chunks"] = request.get("chunks") or 0, True
    tpot = (e2e - ttft) / (n - 1) if n >= 2 else None
    metrics.update(
        n=n,
        ttft_s=ttft,
        e2e_s=e2e,
        tpot_s=tpot,
        tps_user=finite(1 / tpot) if tpot else None,
        cordatus_tps=finite(n / e2e) if e2e > 0 else None,
        gaps_s=list(request.get("gaps") or []),
    )
    return metrics


def _error_message(request: Mapping[str, Any]) -> str:
    if request.get("error"):
        return str(request["error"])
    if request.get("status") is not None:
        return f"HTTP {request['status']}"
    return "failed without an error message"


def _values(requests: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    """The values of a per-request metric over the successful requests, in the metric's unit."""
    ok = [request for request in requests if request["ok"]]
    if metric == "itl_gap_ms":
        return [gap * 1000 for request in ok for gap in request["gaps_s"]]
    key, scale = {
        "ttft_ms": ("ttft_s", 1000),
        "tpot_ms": ("tpot_s", 1000),
        "tps_user": ("tps_user", 1),
        "e2e_s": ("e2e_s", 1),
        "cordatus_tps": ("cordatus_tps", 1),
    }[metric]
    return [request[key] * scale for request in ok if request[key] is not None]


# ---------------------------------------------------------------- one level
def level_summary(level: Mapping[str, Any]) -> dict[str, Any]:
    """One concurrency level's figures (unrounded): counts, errors, distributions, RPS and CordatusAI's columns.

    ``rps`` is completed requests / (last end - first send) and ``output_tps`` the sum of N over the same
    span, where the span starts at the first request's ``t_send`` and ends at the last ``t_send + e2e`` of
    any request that has an ``e2e``. ``stats`` holds :func:`describe` of every metric of :data:`METRICS`
    over the successful requests. ``cordatus`` holds CordatusAI's columns: mean TTFT (ms), ITL (ms, the
    mean TPOT), TPS (mean N / latency), latency (s, mean) and RPS (1 / mean latency).
    """
    requests = [request_metrics(request) for request in level["requests"]]
    ok = [request for request in requests if request["ok"]]
    span = _span(level["requests"], requests)
    tokens = sum(request["n"] for request in ok)
    errors = Counter(request["error"] for request in requests if not request["ok"])
    stats = {metric: describe(_values(requests, metric)) for metric in METRICS}
    latency = stats["e2e_s"]["mean"]
    return {
        "concurrency": level["concurrency"],
        "requests": len(requests),
        "ok": len(ok),
        "errors": len(requests) - len(ok),
        "error_messages": [
            {"error": message, "count": count}
            for message, count in sorted(errors.items(), key=lambda item: (-item[1], item[0]))
        ],
        "n_from_chunks": sum(1 for request in ok if request["n_from_chunks"]),
        "tpot_undefined": sum(1 for request in ok if request["tpot_s"] is None),
        "finish_reasons": dict(
            sorted(Counter(str(r.get("finish_reason")) for r in level["requests"] if r.get("ok")).items())
        ),
        "output_tokens": tokens,
        "span_s": span,
        "rps": len(ok) / span if span else None,
        "output_tps": tokens / span if span else None,
        "stats": stats,
        "cordatus": {
            "ttft_ms": stats["ttft_ms"]["mean"],
            "itl_ms": stats["tpot_ms"]["mean"],
            "tps": stats["cordatus_tps"]["mean"],
            "latency_s": latency,
            "rps": finite(1 / latency) if latency else None,
        },
    }


def _span(records: Sequence[Mapping[str, Any]], requests: Sequence[Mapping[str, Any]]) -> float | None:
    """First send to last end; for a level sent in parts (records with ``part``), the sum of each part's span,
    so that the pause between two parts (the next part's start) is not counted as the level's time."""
    parts: dict[Any, list[Mapping[str, Any]]] = {}
    for record, request in zip(records, requests, strict=True):
        parts.setdefault(record.get("part"), []).append(request)
    total = 0.0
    for members in parts.values():
        starts = [request["t_send"] for request in members]
        ends = [request["end"] for request in members if request["end"] is not None]
        if starts and ends:
            total += max(max(ends) - min(starts), 0.0)
    return total if total > 0 else None


# ---------------------------------------------------------------- steps of a run
def level_parts(requests: int, concurrency: int, progress_every: int) -> list[tuple[int, int]]:
    """The parts a level is sent in, as (first request number, requests): a progress line follows each part.

    A part holds ``progress_every`` requests per user (``progress_every x concurrency`` requests), so each
    part lasts about ``progress_every`` request latencies at any concurrency: a 100-request level at C=1 with
    25 is four parts of 25 (a line every ~20 s), at C=4 one part. ``progress_every`` 0: one part. The last
    part takes the rest; a rest smaller than half a part joins the part before it."""
    if requests < 1 or concurrency < 1:
        raise ValueError("requests and concurrency must be at least 1")
    if progress_every <= 0:
        return [(0, requests)]
    size = progress_every * concurrency
    parts = [(first, min(size, requests - first)) for first in range(0, requests, size)]
    if len(parts) > 1 and parts[-1][1] * 2 < size:
        first, count = parts[-2]
        parts[-2:] = [(first, count + parts[-1][1])]
    return parts


def merge_client(total: Mapping[str, Any] | None, part: Mapping[str, Any]) -> dict[str, Any]:
    """The client figures of a level sent in parts: times and CPU added, the worst loop lag kept."""
    if total is None:
        return dict(part)
    wall = total["wall_s"] + part["wall_s"]
    cpu = total["cpu_s"] + part["cpu_s"]
    lag = dict(max(total["loop_lag"], part["loop_lag"], key=lambda item: item.get("p99_ms", 0)))
    merged = dict(total)
    merged.update(
        wall_s=round(wall, 3),
        cpu_s=round(cpu, 3),
        cpu_share=round(cpu / wall, 4) if wall > 0 else 0.0,
        loop_lag=lag,
        finished_at=part.get("finished_at"),
    )
    return merged


def needle_refusal(needle_tokens: int, max_model_len: int | None, answer_tokens: int) -> str | None:
    """Why a needle of ``needle_tokens`` cannot run at ``max_model_len`` (with its answer), or None when it fits.

    vLLM refuses a prompt whose tokens and ``max_tokens`` exceed ``max_model_len`` (HTTP 400); the benchmark
    refuses it first, before anything is sent, naming the largest needle that fits."""
    if needle_tokens < 0:
        return f"needle_tokens must be 0 (no needle) or more, got {needle_tokens}"
    if not needle_tokens or max_model_len is None:
        return None
    if needle_tokens + answer_tokens > max_model_len:
        return (
            f"needle_tokens {needle_tokens} does not fit max_model_len {max_model_len} with its {answer_tokens} "
            f"answer tokens: vLLM would refuse it; choose needle_tokens <= {max_model_len - answer_tokens}"
        )
    return None


# ---------------------------------------------------------------- SLOs and capacity
def parse_slos(slos: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The SLOs, checked and normalised (:data:`DEFAULT_SLOS` when None); ValueError naming the SLO and field.

    Each SLO is ``{"metric", "op", "threshold", "percentile"}``: ``metric`` one of :data:`METRICS`, ``op``
    one of ``<= < >= >`` pointing the metric's better way (``<=`` or ``<`` for lower-is-better metrics),
    ``threshold`` a number, ``percentile`` 0-100 on the metric's bad tail: at least 50 for a
    lower-is-better metric (p90, p99), at most 50 for a higher-is-better one (p10).
    """
    if slos is None:
        slos = DEFAULT_SLOS
    if isinstance(slos, (str, bytes, Mapping)) or not isinstance(slos, Sequence):
        raise ValueError(f"slos must be a list of SLOs, not {_found(slos)}")
    if not slos:
        raise ValueError("slos is empty: give at least one SLO, or none (null) for the defaults")
    parsed = []
    for index, slo in enumerate(slos):
        where = f"slos[{index}]"
        if not isinstance(slo, Mapping):
            raise ValueError(f"{where}: expected an object with metric, op, threshold, percentile, not {_found(slo)}")
        unknown = sorted(set(slo) - {"metric", "op", "threshold", "percentile"})
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}; an SLO has metric, op, threshold, percentile")
        metric, op, threshold, pct = (slo.get(key) for key in ("metric", "op", "threshold", "percentile"))
        if metric not in METRICS:
            raise ValueError(f"{where}.metric: {metric!r} is not a metric; expected one of {', '.join(METRICS)}")
        if op not in SLO_OPS:
            raise ValueError(f"{where}.op: {op!r} is not an operator; expected one of {', '.join(SLO_OPS)}")
        better = METRICS[metric][2]
        if (better == LOWER) != (op in ("<=", "<")):
            right = "<= or <" if better == LOWER else ">= or >"
            raise ValueError(f"{where}.op: {metric} is {better}-is-better, so its SLO is {right}, not {op!r}")
        if not _is_number(threshold):
            raise ValueError(f"{where}.threshold: expected a number, found {_found(threshold)}")
        if not _is_number(pct) or not 0 <= pct <= 100:
            raise ValueError(f"{where}.percentile: expected a number from 0 to 100, found {_found(pct)}")
        if better == LOWER and pct < 50 or better == HIGHER and pct > 50:
            tail = "at least 50 (p90, p99)" if better == LOWER else "at most 50 (p10)"
            raise ValueError(
                f"{where}.percentile: an SLO judges the bad tail; {metric} is {better}-is-better, so its "
                f"percentile is {tail}, not {pct}"
            )
        parsed.append({"metric": metric, "op": op, "threshold": threshold, "percentile": pct})
    return parsed


def slo_label(slo: Mapping[str, Any]) -> str:
    """``TTFT p90 <= 1000 ms``."""
    label, unit, _better = METRICS[slo["metric"]]
    return f"{label} p{slo['percentile']:g} {slo['op']} {slo['threshold']:g} {unit}"


def _meets(value: float | None, op: str, threshold: float) -> bool:
    if value is None:
        return False
    return {"<=": value <= threshold, "<": value < threshold, ">=": value >= threshold, ">": value > threshold}[op]


def _max_c(passed: Sequence[tuple[int, bool]]) -> int | None:
    """The largest concurrency whose level and every lower one passed (levels sorted); None when the lowest fails."""
    best = None
    for concurrency, ok in passed:
        if not ok:
            break
        best = concurrency
    return best


def capacity(levels: Sequence[Mapping[str, Any]], raw: Mapping[int, list[dict[str, Any]]], slos: Any) -> dict[str, Any]:
    """Each level against every SLO and Max C (:data:`CAPACITY_RULE`); CordatusAI's Max C alongside.

    ``levels`` are :func:`level_summary` results sorted by concurrency; ``raw`` maps a concurrency to its
    :func:`request_metrics`, from which each SLO's percentile is computed exactly.
    """
    parsed = parse_slos(slos)
    rows, cordatus_rows = [], []
    for level in levels:
        concurrency = level["concurrency"]
        checks = []
        for slo in parsed:
            value = percentile(_values(raw[concurrency], slo["metric"]), slo["percentile"])
            checks.append(
                {**slo, "label": slo_label(slo), "value": value, "passed": _meets(value, slo["op"], slo["threshold"])}
            )
        reasons = [f"{level['errors']} failed request(s)"] if level["errors"] else []
        reasons += [
            f"{check['label']}: " + ("no value" if check["value"] is None else f"{check['value']:.4g}")
            for check in checks
            if not check["passed"]
        ]
        rows.append(
            {
                "concurrency": concurrency,
                "errors": level["errors"],
                "checks": checks,
                "passed": not reasons,
                "reasons": reasons,
            }
        )
        cordatus = level["cordatus"]
        cordatus_rows.append(
            {
                "concurrency": concurrency,
                "ttft_ms": cordatus["ttft_ms"],
                "tps": cordatus["tps"],
                "passed": _meets(cordatus["ttft_ms"], "<=", CORDATUS_TTFT_MS)
                and _meets(cordatus["tps"], ">=", CORDATUS_TPS),
            }
        )
    return {
        "rule": CAPACITY_RULE,
        "slos": [{**slo, "label": slo_label(slo)} for slo in parsed],
        "levels": rows,
        **_verdict(rows),
        "cordatus": {
            "rule": CORDATUS_RULE,
            "ttft_ms": CORDATUS_TTFT_MS,
            "tps": CORDATUS_TPS,
            "levels": cordatus_rows,
            **_verdict(cordatus_rows),
        },
    }


def _verdict(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Max C over ``rows`` (sorted, each with ``concurrency`` and ``passed``), and what it means."""
    if not rows:
        return {"max_c": None, "may_be_higher": False, "passing_levels": [], "users_supported": "no level was tested"}
    max_c = _max_c([(row["concurrency"], row["passed"]) for row in rows])
    passing = [row["concurrency"] for row in rows if row["passed"]]
    highest = rows[-1]["concurrency"]
    may_be_higher = max_c == highest
    if max_c is None:
        text = f"none: the lowest level tested (C={rows[0]['concurrency']}) already fails"
    elif may_be_higher:
        text = f"at least {max_c}: the highest level tested passes, so the real Max C may be higher"
    else:
        text = f"{max_c} concurrent users"
    beyond = [c for c in passing if max_c is None or c > max_c]
    if beyond:
        text += f" (C={', '.join(map(str, beyond))} passes again above a failing level, and does not count)"
    return {"max_c": max_c, "may_be_higher": may_be_higher, "passing_levels": passing, "users_supported": text}


# ---------------------------------------------------------------- the summary
def summarize(results: Mapping[str, Any], slos: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A results document's figures: identity, gate, every level, capacity, needle (JSON-ready, rounded).

    ValueError when the document or the SLOs are not valid. When the gate failed there are no performance
    figures: ``figures`` is false, ``levels`` empty and ``capacity`` None. Floats are rounded to 6
    significant digits; figures that cannot be computed are None.
    """
    validate_results(results)
    parsed = parse_slos(slos)
    gate = results["gate"]
    identity = results["identity"]
    summary: dict[str, Any] = {
        "format": SUMMARY_FORMAT,
        "identity": dict(identity),
        "gate": {
            "passed": gate["passed"],
            "checks": [dict(check) for check in gate["checks"]],
            "failed": [check["name"] for check in gate["checks"] if not check["passed"]],
        },
        "figures": bool(gate["passed"]),
        "levels": [],
        "capacity": None,
        "needle": dict(results["needle"]) if results.get("needle") is not None else None,
        "notes": [],
    }
    if not gate["passed"]:
        summary["notes"].append("the gate failed: no performance figures are reported")
        return _rounded(summary)
    ordered = sorted(results["levels"], key=lambda level: level["concurrency"])
    raw = {level["concurrency"]: [request_metrics(r) for r in level["requests"]] for level in ordered}
    summary["levels"] = [level_summary(level) for level in ordered]
    summary["capacity"] = capacity(summary["levels"], raw, parsed)
    summary["notes"] = _notes(summary["levels"], identity["workload"]["levels"])
    summary["bursts"] = [burst_summary(burst) for burst in results.get("bursts") or []]
    summary["phases"] = [dict(phase) for phase in results.get("phases") or []]
    summary["nodes"] = _nodes(results.get("nodes"), summary["phases"])
    summary["seed_000"] = seed_comparison(summary)
    return _rounded(summary)


def nodes_from_monitors(monitors: Mapping[str, Any]) -> dict[str, Any]:
    """The results document's ``nodes`` from each node's bench_monitor result (or its failure)."""
    nodes: dict[str, Any] = {}
    for host, monitor in monitors.items():
        if not isinstance(monitor, Mapping):
            nodes[host] = {"error": f"no monitor result (found {_found(monitor)})"}
            continue
        error = monitor.get("error") or (monitor.get("msg") if monitor.get("failed") else None)
        if error or monitor.get("mem_available") is None:
            nodes[host] = {"error": str(error or "the monitor returned no samples")}
            continue
        nodes[host] = {
            "error": None,
            "mem_available": [list(sample) for sample in monitor["mem_available"]],
            "clock_latch": monitor.get("clock_latch"),
            "gpu_error": monitor.get("gpu_error"),
            "stopped_by": monitor.get("stopped_by"),
        }
    return nodes


def nodes_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per node: the lowest MemAvailable over the run and during the needle, and the GPU clocks."""
    lines = []
    for host, node in (summary.get("nodes") or {}).items():
        if node.get("error"):
            lines.append(f"{host}: no samples ({node['error']})")
            continue
        memory = node["memory"] or {}
        needle = (memory.get("phases") or {}).get("needle") or {}
        low = memory.get("min_bytes")
        line = f"{host}: MemAvailable min {low / 1024**3:.2f} GiB over {memory.get('samples')} samples"
        if needle.get("min_bytes") is not None:
            line += f", {needle['min_bytes'] / 1024**3:.2f} GiB during the needle"
        latch = node.get("clock_latch")
        line += f"; GPU clocks: {latch['verdict']}" if latch else "; GPU clocks: no sample"
        lines.append(line)
    return lines


def _nodes(nodes: Mapping[str, Any] | None, phases: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per node, what its monitor saw during the run (``bench_nodes``): MemAvailable per phase and the clocks."""
    if not nodes:
        return None
    out: dict[str, Any] = {}
    for host, node in nodes.items():
        entry: dict[str, Any] = {"error": node.get("error"), "memory": None, "clock_latch": node.get("clock_latch")}
        if node.get("mem_available") is not None:
            entry["memory"] = node_memory(node["mem_available"], phases)
        out[host] = entry
    return out


def _notes(levels: Sequence[Mapping[str, Any]], planned: Sequence[int]) -> list[str]:
    notes = []
    missing = sorted(set(planned) - {level["concurrency"] for level in levels})
    if missing:
        notes.append(f"planned but not in the results: C={', '.join(map(str, missing))}")
    for level in levels:
        c = level["concurrency"]
        if level["n_from_chunks"]:
            notes.append(
                f"C={c}: N counted from content chunks for {level['n_from_chunks']} request(s): the server sent no "
                "usage (a chunk may carry more than one token)"
            )
        if level["tpot_undefined"]:
            notes.append(f"C={c}: TPOT undefined for {level['tpot_undefined']} request(s) with N < 2")
        if not level["requests"]:
            notes.append(f"C={c}: no request")
    return notes


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to 6 significant digits (NaN and infinities as None), recursively."""
    if isinstance(value, float):
        return round_figure(value)
    if isinstance(value, Mapping):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(item) for item in value]
    return value


def round_figure(value: float | None, digits: int = _SIGNIFICANT) -> float | None:
    """``value`` rounded to ``digits`` significant digits; None for None, NaN and the infinities."""
    value = finite(value)
    if value is None or value == 0:
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


# ---------------------------------------------------------------- comparing two runs
def compare(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    threshold: float = 0.03,
    alpha: float = 0.05,
    slos: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A candidate run against a baseline run: ``pass``, ``regression``, ``inconclusive`` or ``incomparable``
    (docs/benchmark.md, "Comparing two runs").

    ``threshold`` is a relative change (0.03: 3 %), ``alpha`` the significance level, ``slos`` the capacity's SLOs
    (:func:`parse_slos`; None: the default ones). The verdict is ``incomparable`` (with ``reasons``) when the runs
    differ in model, shape, prompt_tokens or max_tokens, when either gate failed, or when no concurrency level was
    tested in both. Otherwise, for every level in both and each metric of :data:`COMPARED_METRICS`: both means, the
    relative change, whether it is worse, Welch's t, df and two-sided p, ``significant`` (p < alpha),
    ``regression`` (significant and worse by more than ``threshold``), and ``decided``: a regression, or the
    one-sided ``1 - alpha`` upper bound of the worsening (``worst_change``) is within the threshold; else the
    requests per level that would decide (``requests_needed``).

    A candidate is a ``regression``, whatever a test says, when it fails a level's SLOs that the baseline passed,
    when its Max C over the levels both tested is lower, or when a seed figure of :data:`GUARDED_SEED_FIGURES` it
    has beside the baseline's drops by more than ``threshold`` (or is not measured where the baseline's was). With
    none of these and no metric regression, a metric that is not ``decided`` makes the verdict ``inconclusive``:
    the runs are too short to tell a change of the threshold's size from noise, and that is not a pass. RPS,
    output tokens/s and errors are one figure per level and run: their change is reported with no test. ValueError
    for an invalid document, threshold or alpha.
    """
    if not _is_number(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a relative change >= 0 (0.03 for 3 %), not {threshold!r}")
    if not _is_number(alpha) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be a number between 0 and 0.5 (0.05), not {alpha!r}")
    validate_results(baseline, source="baseline")
    validate_results(candidate, source="candidate")
    result: dict[str, Any] = {
        "format": COMPARISON_FORMAT,
        "verdict": INCOMPARABLE,
        "threshold": threshold,
        "alpha": alpha,
        "baseline": _run_identity(baseline),
        "candidate": _run_identity(candidate),
        "reasons": _incomparable(baseline, candidate),
        "notes": [],
        "metrics": [],
        "level_figures": [],
        "regressions": [],
        "undecided": [],
        "requests_needed": None,
    }
    levels_b = {level["concurrency"]: level for level in baseline["levels"]}
    levels_c = {level["concurrency"]: level for level in candidate["levels"]}
    common = sorted(set(levels_b) & set(levels_c))
    for name, only in (("baseline", set(levels_b) - set(levels_c)), ("candidate", set(levels_c) - set(levels_b))):
        if only:
            result["notes"].append(f"only in the {name}: C={', '.join(map(str, sorted(only)))} (not compared)")
    if not common and not result["reasons"]:
        result["reasons"].append("no concurrency level was tested in both runs")
    if result["reasons"]:
        return _rounded(result)
    for concurrency in common:
        requests_b = [request_metrics(r) for r in levels_b[concurrency]["requests"]]
        requests_c = [request_metrics(r) for r in levels_c[concurrency]["requests"]]
        for metric in COMPARED_METRICS:
            row = _compare_metric(
                concurrency, metric, _values(requests_b, metric), _values(requests_c, metric), threshold, alpha
            )
            result["metrics"].append(row)
            if row["regression"]:
                result["regressions"].append(_regression_line(row))
        summary_b, summary_c = level_summary(levels_b[concurrency]), level_summary(levels_c[concurrency])
        for figure, (_label, _unit, better) in LEVEL_FIGURES.items():
            result["level_figures"].append(
                _change_row(concurrency, figure, better, summary_b[figure], summary_c[figure])
            )
        if summary_c["errors"] > summary_b["errors"]:
            result["notes"].append(
                f"C={concurrency}: the candidate has more failed requests ({summary_c['errors']} against "
                f"{summary_b['errors']}); errors do not enter the verdict, look at them"
            )
    for key, label in (("profile_hash", "profile hash"), ("image_ids", "image IDs")):
        if result["baseline"][key] != result["candidate"][key]:
            result["notes"].append(f"the {label} differ (expected when comparing two configurations)")
    whole_b, whole_c = summarize(baseline, slos), summarize(candidate, slos)
    result["regressions"] += _capacity_regressions(whole_b["capacity"], whole_c["capacity"], common)
    result["regressions"] += _seed_regressions(whole_b.get("seed_000") or [], whole_c.get("seed_000") or [], threshold)
    undecided = [row for row in result["metrics"] if not row["decided"]]
    result["undecided"] = [_undecided_line(row) for row in undecided]
    needed = [row["requests_needed"] for row in undecided if row["requests_needed"] is not None]
    result["requests_needed"] = max(needed) if needed else None
    if result["regressions"]:
        result["verdict"] = REGRESSION
    elif undecided:
        result["verdict"] = INCONCLUSIVE
    else:
        result["verdict"] = PASS
    return _rounded(result)


def _capacity_regressions(
    base: Mapping[str, Any] | None, new: Mapping[str, Any] | None, common: Sequence[int]
) -> list[dict[str, Any]]:
    """A level whose SLOs the baseline met and the candidate does not, and a lower Max C over the levels both
    runs tested: regressions whatever the t-tests say."""
    if not base or not new:
        return []
    rows_b = {row["concurrency"]: row for row in base["levels"] if row["concurrency"] in common}
    rows_c = {row["concurrency"]: row for row in new["levels"] if row["concurrency"] in common}
    found = []
    for concurrency in common:
        if rows_b[concurrency]["passed"] and not rows_c[concurrency]["passed"]:
            found.append(
                {
                    "concurrency": concurrency,
                    "metric": "slo",
                    "change": None,
                    "p": None,
                    "message": f"C={concurrency} fails its SLOs ({'; '.join(rows_c[concurrency]['reasons'])}), "
                    "which the baseline met",
                }
            )
    max_b = _verdict([rows_b[c] for c in common])["max_c"]
    max_c = _verdict([rows_c[c] for c in common])["max_c"]
    if max_b is not None and (max_c is None or max_c < max_b):
        found.append(
            {
                "concurrency": None,
                "metric": "max_c",
                "change": None,
                "p": None,
                "message": f"Max C fell from {max_b} to {'none' if max_c is None else max_c} "
                f"(over C={', '.join(map(str, common))})",
            }
        )
    return found


def _seed_regressions(
    base: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], threshold: float
) -> list[dict[str, Any]]:
    """A guarded seed figure (:data:`GUARDED_SEED_FIGURES`) that drops by more than ``threshold``, or that the
    baseline measured and the candidate did not: a regression whatever a test says (they are one figure per run)."""
    rows_c = {row["figure"]: row for row in new}
    found = []
    for row_b in base:
        if row_b["figure"] not in GUARDED_SEED_FIGURES or row_b["value"] is None:
            continue
        row_c = rows_c.get(row_b["figure"]) or {"value": None, "note": "not in the candidate's run"}
        change = _relative(row_b["value"], row_c["value"])
        if row_c["value"] is None:
            message = f"{row_b['label']}: {_short(row_b['value'])} {row_b['unit']} in the baseline, {row_c['note']}"
        elif change is not None and change < -threshold:
            message = (
                f"{row_b['label']}: {_short(row_b['value'])} -> {_short(row_c['value'])} {row_b['unit']} "
                f"({change * 100:+.1f} %, more than the {threshold * 100:g} % threshold)"
            )
        else:
            continue
        found.append({"concurrency": None, "metric": row_b["figure"], "change": change, "p": None, "message": message})
    return found


def _undecided_line(row: Mapping[str, Any]) -> dict[str, Any]:
    label, _unit, _better = METRICS[row["metric"]]
    worst = row["worst_change"]
    bound = "no bound (fewer than 2 requests on a side)" if worst is None else f"could be {worst * 100:+.1f} % worse"
    needed = row["requests_needed"]
    return {
        "concurrency": row["concurrency"],
        "metric": row["metric"],
        "requests_needed": needed,
        "message": f"{label} at C={row['concurrency']}: {bound} at the {(1 - row['alpha']) * 100:g} % bound; "
        + (
            f"about {needed} requests per level on each run would decide"
            if needed is not None
            else "at least 2 requests per level on each run are needed for any bound (a spread to judge by)"
            if worst is None
            else "its change alone reaches the threshold, so more requests of the same would not show it is within"
        ),
    }


def _run_identity(results: Mapping[str, Any]) -> dict[str, Any]:
    identity = results["identity"]
    return {
        "profile": identity["profile"],
        "profile_hash": identity["profile_hash"],
        "shape": identity["shape"],
        "model": identity["model"],
        "image_ids": dict(identity["image_ids"]),
        "started_at": identity["started_at"],
        "workload": dict(identity["workload"]),
        "gate_passed": results["gate"]["passed"],
    }


def _incomparable(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    reasons = []
    for key in WORKLOAD_KEYS:
        found_b, found_c = _workload_value(baseline, key), _workload_value(candidate, key)
        if found_b != found_c:
            reasons.append(f"{key} differs: baseline {found_b!r}, candidate {found_c!r}")
    for name, run in (("baseline", baseline), ("candidate", candidate)):
        if not run["gate"]["passed"]:
            failed = [check["name"] for check in run["gate"]["checks"] if not check["passed"]]
            reasons.append(f"the {name}'s gate failed ({', '.join(failed) or 'no check listed'}): it has no figures")
    return reasons


def _workload_value(results: Mapping[str, Any], key: str) -> Any:
    identity = results["identity"]
    return identity[key] if key in ("model", "shape") else identity["workload"][key]


def _relative(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return finite((new - base) / abs(base))


def _is_worse(better: str, base: float | None, new: float | None) -> bool:
    if base is None or new is None:
        return False
    return new > base if better == LOWER else new < base


def _compare_metric(
    concurrency: int, metric: str, base: list[float], new: list[float], threshold: float, alpha: float
) -> dict[str, Any]:
    better = METRICS[metric][2]
    mean_b, mean_c = mean(base), mean(new)
    change = _relative(mean_b, mean_c)
    worse = _is_worse(better, mean_b, mean_c)
    test = welch(base, new)
    significant = test["p"] is not None and test["p"] < alpha
    beyond = change is None or abs(change) > threshold
    regression = bool(significant and worse and beyond and mean_b is not None and mean_c is not None)
    worst, needed = _worst_case(better, base, new, threshold, alpha, test["df"])
    return {
        "concurrency": concurrency,
        "metric": metric,
        "better": better,
        "baseline": {"n": len(base), "mean": mean_b, "stdev": stdev(base)},
        "candidate": {"n": len(new), "mean": mean_c, "stdev": stdev(new)},
        "change": change,
        "worse": worse,
        "t": test["t"],
        "df": test["df"],
        "p": test["p"],
        "significant": significant,
        "regression": regression,
        "alpha": alpha,
        "worst_change": worst,
        "decided": regression or (worst is not None and worst <= threshold),
        "requests_needed": None if regression or (worst is not None and worst <= threshold) else needed,
        "note": test["note"],
    }


def _worst_case(
    better: str, base: list[float], new: list[float], threshold: float, alpha: float, df: float | None
) -> tuple[float | None, int | None]:
    """How much worse than the baseline the candidate could be, relative to the baseline's mean: the one-sided
    ``1 - alpha`` upper confidence bound of the worsening (Welch's standard error and df); and the requests per
    level on each run that would bring that bound within ``threshold`` at the same spread and change (None when the
    change alone reaches the threshold). (None, None) with fewer than 2 values on a side or a zero baseline."""
    if len(base) < 2 or len(new) < 2:
        return None, None
    mean_b, mean_c = math.fsum(base) / len(base), math.fsum(new) / len(new)
    if mean_b == 0:
        return None, None
    worsening = (mean_c - mean_b) if better == LOWER else (mean_b - mean_c)
    var_b, var_c = variance(base) or 0.0, variance(new) or 0.0
    error = math.sqrt(var_b / len(base) + var_c / len(new))
    quantile = t_quantile(alpha, df) if df else statistics.NormalDist().inv_cdf(1 - alpha)
    worst = (worsening + quantile * error) / abs(mean_b)
    room = threshold * abs(mean_b) - worsening
    if room <= 0:
        return finite(worst), None
    z = statistics.NormalDist().inv_cdf(1 - alpha)
    return finite(worst), max(2, math.ceil((z * math.sqrt(var_b + var_c) / room) ** 2))


def _change_row(concurrency: int, figure: str, better: str, base: float | None, new: float | None) -> dict[str, Any]:
    return {
        "concurrency": concurrency,
        "figure": figure,
        "better": better,
        "baseline": base,
        "candidate": new,
        "change": _relative(base, new),
        "worse": _is_worse(better, base, new),
        "test": None,
    }


def _regression_line(row: Mapping[str, Any]) -> dict[str, Any]:
    label, unit, _better = METRICS[row["metric"]]
    change = "n/a" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
    return {
        "concurrency": row["concurrency"],
        "metric": row["metric"],
        "change": row["change"],
        "p": row["p"],
        "message": (
            f"{label} at C={row['concurrency']}: {_short(row['baseline']['mean'])} -> "
            f"{_short(row['candidate']['mean'])} {unit} ({change}, p={_short(row['p'])})"
        ),
    }


def _short(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
