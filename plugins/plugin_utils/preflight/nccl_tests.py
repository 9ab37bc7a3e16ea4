# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA nccl-tests output (``all_gather_perf``, ``all_reduce_perf``, ...) read, and its bus bandwidth judged.

Controller side, plain data in and out, standard library only. :func:`parse_nccl_tests` reads the text
rank 0 prints (what ``mpirun ... all_gather_perf -b 16G -e 16G`` leaves on stdout); anything around it
(the shell prompt, the mpirun command, ``NCCL INFO`` lines, a wrapper script's banners) is skipped. It
reads ONE test: up to its ``# Collective test concluded`` line, so a wrapper's later copy of the rows
or of the ``Avg bus bandwidth`` line is not counted twice; give each run's output separately.

The result table is read by its own column header, so every layout nccl-tests has printed parses:

- since nccl-tests 2.13: ``size count type redop root`` then ``time algbw busbw #wrong`` out of place
  and again in place. all_gather prints redop ``none`` and root ``-1``; all_reduce ``sum`` and ``-1``;
  ``#wrong`` is ``N/A`` when validation is off (``-c 0``), read as None. Per-iteration columns
  (``-I 1``: i_min, i_max, ...) and a trailing timestamp are skipped.
- before 2.13: no ``root`` column (and no ``redop`` for all_gather), and ``error`` (the largest
  relative error, ``2e-07``, not a count) where ``#wrong`` now is: ``wrong`` is None there, and
  ``Out of bounds values`` is what says whether the data was right.

:func:`bandwidth_verdict` turns that into PASS, FAIL or WARN against a floor in Gb/s: nccl-tests
prints GB/s (bytes), a link is rated in Gb/s (bits), so the figures are multiplied by 8.
"""

from __future__ import annotations

import math
import re
from typing import Any

PASS, FAIL, WARN = "PASS", "FAIL", "WARN"
# The figure below which NVIDIA's DGX Spark playbook warns (as roles/fabric/README.md cites it): 175 Gb/s
# of bus bandwidth on a 200 Gb/s QSFP link.
DEFAULT_FLOOR_GBPS = 175.0
BITS_PER_BYTE = 8
OUT_OF_PLACE, IN_PLACE = "out_of_place", "in_place"
PLACEMENTS = (OUT_OF_PLACE, IN_PLACE)
MEASURES = ("time_us", "algbw", "busbw", "wrong")

_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*?\bnccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_USING_DEVICES = re.compile(r"^#\s*Using devices\s*$")
# `#  Rank  0 Group  0 Pid  37755 on promaxgb10-4c75 device  0 [000f:01:00] NVIDIA GB10`; before 2.13
# without `Group` and with `[0x01]`.
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
# The result table's column names -> the row's keys.
_LEADING = {"size": int, "count": int, "type": str, "redop": str, "root": int}
_TIME_COLUMNS = ("time", "cputime")
_MEASURE_KEYS = {"time": "time_us", "cputime": "time_us", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong"}
_SIZE_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


# ---------------------------------------------------------------- reading
def parse_nccl_tests(text: str) -> dict[str, Any]:
    """nccl-tests' text output as a dict; ValueError when the text is not nccl-tests output at all.

    Keys: ``test`` (``all_gather_perf``), ``nccl_tests_version`` (``2.18.5``), ``nccl_version``
    (``2.28.9``, from ``nccl-library=``), ``ranks`` (rank, group, pid, host, device, bus_id, gpu),
    ``hosts`` (in rank order, once each), ``rows`` (size, count, type, redop, root, and
    ``out_of_place``/``in_place`` each with time_us, algbw and busbw in GB/s, wrong), ``out_of_bounds``,
    ``avg_busbw`` (GB/s) and ``concluded``. What the text does not show is None (an empty list).
    """
    parsed: dict[str, Any] = {
        "test": None,
        "nccl_tests_version": None,
        "nccl_version": None,
        "ranks": [],
        "hosts": [],
        "rows": [],
        "out_of_bounds": None,
        "avg_busbw": None,
        "concluded": False,
    }
    columns: list[str] | None = None
    recognised = False
    for line in (raw.strip() for raw in text.splitlines()):
        if not line.startswith("#"):
            row = _row(line.split(), columns) if columns else None
            if row is not None:
                parsed["rows"].append(row)
            continue
        header = _columns(line)
        if header:
            columns, recognised = header, True
            continue
        concluded = _CONCLUDED.match(line)
        if concluded:
            parsed["test"] = parsed["test"] or concluded.group(1)
            parsed["concluded"] = recognised = True
            break
        recognised = _read_comment(line, parsed) or recognised
    if not recognised:
        raise ValueError(f"not nccl-tests output: {_no_marker(text)}")
    parsed["hosts"] = list(dict.fromkeys(rank["host"] for rank in parsed["ranks"]))
    return parsed


def _no_marker(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    found = f"it begins {first[:80]!r}" if first else "the text is empty"
    return (
        "no '# nccl-tests version', '# Collective test starting', '# Using devices', result-table header "
        f"or '# Avg bus bandwidth' line ({found})"
    )


def _read_comment(line: str, parsed: dict[str, Any]) -> bool:
    """One ``#`` line of the preamble or the footer into ``parsed``; False when it is none of them."""
    if match := _VERSION.match(line):
        parsed["nccl_tests_version"] = match.group(1)
        parsed["nccl_version"] = nccl_version(int(match.group(2))) if match.group(2) else None
    elif match := _STARTING.match(line):
        parsed["test"] = match.group(1)
    elif match := _RANK.match(line):
        parsed["ranks"].append(_rank(match))
    elif match := _OUT_OF_BOUNDS.match(line):
        parsed["out_of_bounds"] = int(match.group(1))
    elif match := _AVG_BUSBW.match(line):
        parsed["avg_busbw"] = _float(match.group(1))
    else:
        return bool(_USING_DEVICES.match(line))
    return True


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE as a version: ``22809`` -> ``2.28.9`` (since 2.9), ``2708`` -> ``2.7.8`` (before)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _rank(match: re.Match[str]) -> dict[str, Any]:
    rank, group, pid, host, device, bus_id, gpu = match.groups()
    return {
        "rank": int(rank),
        "group": int(group) if group is not None else None,
        "pid": int(pid),
        "host": host,
        "device": int(device),
        "bus_id": bus_id,
        "gpu": gpu.strip(),
    }


def _columns(line: str) -> list[str] | None:
    """The result table's column names (``size count type redop root time ...``), or None."""
    names = line[1:].split()
    return names if names[:2] == ["size", "count"] else None


def _row(tokens: list[str], columns: list[str]) -> dict[str, Any] | None:
    """One result line read by the table's columns; None when the line is not one (an NCCL INFO line)."""
    if len(tokens) < len(columns) or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    row: dict[str, Any] = dict.fromkeys(_LEADING)
    groups: list[dict[str, Any]] = []
    try:
        for name, token in zip(columns, tokens, strict=False):  # a timestamp adds a token
            if name in _TIME_COLUMNS:
                groups.append(dict.fromkeys(MEASURES))
            if name in _LEADING and not groups:
                row[name] = _LEADING[name](token)
            elif name in _MEASURE_KEYS and groups:
                groups[-1][_MEASURE_KEYS[name]] = _wrong(token) if name == "#wrong" else _float(token)
    except ValueError:
        return None
    if not groups:
        return None
    for placement, group in zip(PLACEMENTS, groups, strict=False):
        row[placement] = group
    for placement in PLACEMENTS[len(groups) :]:
        row[placement] = None
    return row


def _float(token: str) -> float | None:
    return None if token == "N/A" else float(token)


def _wrong(token: str) -> int | None:
    """``#wrong``: ``0``, ``%g`` of a count (``1e+06``) or ``N/A`` (validation off)."""
    return None if token == "N/A" else int(float(token))


# ---------------------------------------------------------------- judging
def bandwidth_verdict(
    parsed: dict[str, Any], floor_gbps: float = DEFAULT_FLOOR_GBPS, min_bytes: int | None = None
) -> dict[str, Any]:
    """PASS, FAIL or WARN for a parsed run: the peak bus bandwidth against ``floor_gbps`` (Gb/s).

    The peak is the largest busbw, out of place or in place, over the rows of at least ``min_bytes``
    (all rows when None). FAIL: the peak is below the floor, or a row has wrong values, or there are
    out-of-bounds values. WARN: no row to judge. Keys: ``status``, ``message`` (one line), ``floor_gbps``,
    ``min_bytes``, ``rows`` (how many were judged), ``peak_busbw`` (GB/s), ``peak_busbw_gbps``,
    ``peak_size`` (bytes), ``peak_placement``, ``avg_busbw`` (GB/s, nccl-tests' own average over all
    rows), ``avg_busbw_gbps``, ``wrong`` (the sum; None when no row counted) and ``out_of_bounds``.
    """
    number = isinstance(floor_gbps, (int, float)) and not isinstance(floor_gbps, bool)
    if not number or math.isnan(floor_gbps) or floor_gbps < 0:
        raise ValueError(f"floor_gbps must be a number of Gb/s, at least 0, not {floor_gbps!r}")
    if min_bytes is not None and (isinstance(min_bytes, bool) or not isinstance(min_bytes, int) or min_bytes < 0):
        raise ValueError(f"min_bytes must be a whole number of bytes, at least 0, or None, not {min_bytes!r}")
    all_rows = parsed.get("rows") or []
    rows = [row for row in all_rows if min_bytes is None or row["size"] >= min_bytes]
    peak = _peak(rows)
    avg = parsed.get("avg_busbw")
    verdict: dict[str, Any] = {
        "status": WARN,
        "message": "",
        "floor_gbps": floor_gbps,
        "min_bytes": min_bytes,
        "rows": len(rows),
        "peak_busbw": peak[0] if peak else None,
        "peak_busbw_gbps": gbps(peak[0]) if peak else None,
        "peak_size": peak[1] if peak else None,
        "peak_placement": peak[2] if peak else None,
        "avg_busbw": avg,
        "avg_busbw_gbps": gbps(avg) if avg is not None else None,
        "wrong": _wrong_total(all_rows),
        "out_of_bounds": parsed.get("out_of_bounds"),
    }
    verdict["status"], verdict["message"] = _judge(verdict, parsed, all_rows)
    return verdict


def gbps(gbytes_per_s: float) -> float:
    """GB/s (what nccl-tests prints) -> Gb/s (what a link is rated in)."""
    return gbytes_per_s * BITS_PER_BYTE


def _peak(rows: list[dict[str, Any]]) -> tuple[float, int, str] | None:
    """(busbw GB/s, size, placement) of the largest busbw; the first on a tie; None without one."""
    best: tuple[float, int, str] | None = None
    for row in rows:
        for placement in PLACEMENTS:
            busbw = (row.get(placement) or {}).get("busbw")
            if busbw is not None and math.isfinite(busbw) and (best is None or busbw > best[0]):
                best = (busbw, row["size"], placement)
    return best


def _wrong_total(rows: list[dict[str, Any]]) -> int | None:
    counts = [
        (row.get(placement) or {}).get("wrong")
        for row in rows
        for placement in PLACEMENTS
        if (row.get(placement) or {}).get("wrong") is not None
    ]
    return sum(counts) if counts else None


def _judge(verdict: dict[str, Any], parsed: dict[str, Any], all_rows: list[dict[str, Any]]) -> tuple[str, str]:
    problems = []
    if verdict["wrong"]:
        problems.append(_plural(verdict["wrong"], "wrong value"))
    if verdict["out_of_bounds"]:
        problems.append(_plural(verdict["out_of_bounds"], "out-of-bounds value"))
    if verdict["peak_busbw"] is None:
        message = "; ".join([_no_rows(verdict["min_bytes"], parsed, all_rows), *problems])
        return (FAIL if problems else WARN), message
    floor = verdict["floor_gbps"]
    above = verdict["peak_busbw_gbps"] >= floor
    message = (
        f"peak bus bandwidth {verdict['peak_busbw_gbps']:.1f} Gb/s ({verdict['peak_busbw']:.2f} GB/s at "
        f"{human_size(verdict['peak_size'])}) {'>=' if above else '<'} floor {floor:g} Gb/s"
    )
    return (PASS if above and not problems else FAIL), "; ".join([message, *problems])


def _no_rows(min_bytes: int | None, parsed: dict[str, Any], all_rows: list[dict[str, Any]]) -> str:
    if all_rows and min_bytes is not None:
        largest = max(row["size"] for row in all_rows)
        return f"no result row of at least {human_size(min_bytes)} (the largest is {human_size(largest)})"
    if all_rows:
        return "no bus bandwidth in the result rows"
    test = parsed.get("test") or "nccl-tests"
    return f"no result rows in the {test} output" + ("" if parsed.get("concluded") else " (the test did not conclude)")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def human_size(size: int) -> str:
    """Bytes for a person: ``17179869184`` -> ``16 GiB``, ``17179869168`` -> ``16.00 GiB``, ``8`` -> ``8 B``."""
    for unit, scale in _SIZE_UNITS:
        if size >= scale:
            return f"{size // scale} {unit}" if size % scale == 0 else f"{size / scale:.2f} {unit}"
    return f"{size} B"
