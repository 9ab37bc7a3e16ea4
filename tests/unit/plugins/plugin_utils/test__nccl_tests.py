# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.nccl_tests import (
    FAIL,
    PASS,
    WARN,
    bandwidth_verdict,
    gbps,
    human_size,
    nccl_version,
    parse_nccl_tests,
)

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"
SAMPLES = sorted(FIXTURES.glob("nccl-tests-all_gather_perf.*.txt"))
GIB = 1 << 30

TREVOR = "nccl-tests-all_gather_perf.2x-gb10.trevor-dell-promax-16G-22.96GBps.txt"
OTTO_2X = "nccl-tests-all_gather_perf.2x-spark.colonel-otto-E_world2_16G-23.1GBps.txt"
DEGRADED = "nccl-tests-all_gather_perf.2x-spark.koyoimai-direct-degraded-2.8GBps.txt"
SWITCH = "nccl-tests-all_gather_perf.2x-spark.koyoimai-switch-21.4GBps.txt"
ISSUE_25 = "nccl-tests-all_gather_perf.2x-spark.playbooks-issue-25-16G.txt"
ROUTE179 = "nccl-tests-all_gather_perf.2x-spark.route179-merged-nics-512M-16G-22.1GBps.txt"
OTTO_3X = "nccl-tests-all_gather_perf.3x-spark.colonel-otto-A_baseline_16G-24.0GBps.txt"

# Read off each sample by eye: (nccl-tests, NCCL, hosts in rank order, rows, peak busbw GB/s, its size and
# placement, Avg bus bandwidth GB/s, concluded, verdict at 175 Gb/s, message).
EXPECTED: dict[str, tuple[Any, ...]] = {
    TREVOR: (
        "2.18.5", "2.28.9", ["promaxgb10-4c75", "promaxgb10-4c99"], 1, 22.98, 16 * GIB, "in_place", 22.9611, True,
        PASS, "peak bus bandwidth 183.8 Gb/s (22.98 GB/s at 16 GiB) >= floor 175 Gb/s",
    ),
    OTTO_2X: (
        "2.19.7", "2.30.7", ["spark-5fa1", "gx10-e146"], 1, 23.91, 16 * GIB, "in_place", 23.1036, True,
        PASS, "peak bus bandwidth 191.3 Gb/s (23.91 GB/s at 16 GiB) >= floor 175 Gb/s",
    ),
    DEGRADED: (
        "2.18.3", "2.28.9", ["spark-fb97", "spark-4440"], 3, 2.83, 2 * GIB, "in_place", 2.82151, True,
        FAIL, "peak bus bandwidth 22.6 Gb/s (2.83 GB/s at 2 GiB) < floor 175 Gb/s",
    ),
    SWITCH: (
        "2.18.3", "2.28.9", ["spark-fb97", "spark-4440"], 3, 22.46, 4 * GIB, "in_place", 21.4033, True,
        PASS, "peak bus bandwidth 179.7 Gb/s (22.46 GB/s at 4 GiB) >= floor 175 Gb/s",
    ),
    ISSUE_25: (
        "2.17.6", "2.28.3", ["spark", "spark-3995"], 1, 20.95, 16 * GIB, "in_place", None, False,
        FAIL, "peak bus bandwidth 167.6 Gb/s (20.95 GB/s at 16 GiB) < floor 175 Gb/s",
    ),
    ROUTE179: (
        "2.19.6", "2.28.9", ["spark-101", "spark-102"], 6, 24.20, 16 * GIB, "in_place", 22.1205, True,
        PASS, "peak bus bandwidth 193.6 Gb/s (24.20 GB/s at 16 GiB) >= floor 175 Gb/s",
    ),
    OTTO_3X: (
        "2.19.7", "2.30.7", ["node0", "node1", "node2"], 1, 24.15, 17179869168, "in_place", 24.0354, True,
        PASS, "peak bus bandwidth 193.2 Gb/s (24.15 GB/s at 16.00 GiB) >= floor 175 Gb/s",
    ),
}  # fmt: skip


def sample_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def sample_body(name: str) -> str:
    """A hardware sample's output: everything after its first line that is exactly ``#`` (the header's end)."""
    lines = sample_text(name).split("\n")
    return "\n".join(lines[lines.index("#") + 1 :])


def parsed_sample(name: str) -> dict[str, Any]:
    return parse_nccl_tests(sample_body(name))


def busbws(parsed: dict[str, Any], placement: str) -> list[float]:
    return [row[placement]["busbw"] for row in parsed["rows"]]


# ---------------------------------------------------------------- every real sample
def test_every_sample_has_its_figures() -> None:
    assert len(SAMPLES) == 7
    assert {path.name for path in SAMPLES} == set(EXPECTED)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.name)
def test_sample(path: pathlib.Path) -> None:
    tests_version, nccl, hosts, rows, peak, size, placement, avg, concluded, status, message = EXPECTED[path.name]
    parsed = parsed_sample(path.name)
    assert (parsed["test"], parsed["nccl_tests_version"], parsed["nccl_version"]) == (
        "all_gather_perf",
        tests_version,
        nccl,
    )
    assert parsed["hosts"] == hosts
    assert [rank["rank"] for rank in parsed["ranks"]] == list(range(len(hosts)))
    assert {rank["gpu"] for rank in parsed["ranks"]} == {"NVIDIA GB10"}
    assert len(parsed["rows"]) == rows
    assert {(row["type"], row["redop"], row["root"]) for row in parsed["rows"]} == {("float", "none", -1)}
    assert (parsed["avg_busbw"], parsed["out_of_bounds"], parsed["concluded"]) == (avg, 0, concluded)

    verdict = bandwidth_verdict(parsed)
    assert (verdict["status"], verdict["message"]) == (status, message)
    assert (verdict["peak_busbw"], verdict["peak_size"], verdict["peak_placement"]) == (peak, size, placement)
    assert verdict["peak_busbw_gbps"] == pytest.approx(peak * 8)
    assert verdict["avg_busbw"] == avg
    assert verdict["avg_busbw_gbps"] == (None if avg is None else pytest.approx(avg * 8))
    assert (verdict["wrong"], verdict["out_of_bounds"], verdict["rows"], verdict["floor_gbps"]) == (0, 0, rows, 175.0)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.name)
def test_sample_header_changes_nothing(path: pathlib.Path) -> None:
    """The collection's own `# source:` ... header lines are not nccl-tests lines: the whole file reads the same."""
    assert parse_nccl_tests(sample_text(path.name)) == parsed_sample(path.name)


def test_row_read_in_full() -> None:
    assert parsed_sample(TREVOR)["rows"] == [
        {
            "size": 17179869184,
            "count": 2147483648,
            "type": "float",
            "redop": "none",
            "root": -1,
            "out_of_place": {"time_us": 374425.0, "algbw": 45.88, "busbw": 22.94, "wrong": 0},
            "in_place": {"time_us": 373792.0, "algbw": 45.96, "busbw": 22.98, "wrong": 0},
        }
    ]


def test_ranks_read_in_full() -> None:
    assert parsed_sample(OTTO_3X)["ranks"] == [
        {
            "rank": r,
            "group": 0,
            "pid": pid,
            "host": f"node{r}",
            "device": 0,
            "bus_id": "000f:01:00",
            "gpu": "NVIDIA GB10",
        }
        for r, pid in enumerate((62, 66, 65))
    ]
    assert [(rank["host"], rank["pid"]) for rank in parsed_sample(TREVOR)["ranks"]] == [
        ("promaxgb10-4c75", 37755),
        ("promaxgb10-4c99", 30808),
    ]


def test_sweeps_read_row_by_row() -> None:
    route = parsed_sample(ROUTE179)
    assert [row["size"] for row in route["rows"]] == [2**k * 512 * 2**20 for k in range(6)]
    assert busbws(route, "out_of_place") == [18.39, 19.93, 21.80, 22.93, 23.43, 23.74]
    assert busbws(route, "in_place") == [19.48, 21.00, 22.95, 23.62, 23.97, 24.20]
    assert [row["out_of_place"]["time_us"] for row in route["rows"]][:2] == [14594.4, 26932.5]
    switch = parsed_sample(SWITCH)
    assert busbws(switch, "out_of_place") == [19.73, 21.23, 22.14]
    assert busbws(switch, "in_place") == [20.80, 22.05, 22.46]
    degraded = parsed_sample(DEGRADED)
    assert busbws(degraded, "out_of_place") == [2.80, 2.82, 2.82]
    assert busbws(degraded, "in_place") == [2.82, 2.83, 2.83]


@pytest.mark.parametrize("name", [OTTO_2X, OTTO_3X])
def test_wrapper_extract_after_the_test_is_not_counted(name: str) -> None:
    """colonel-otto's wrapper repeats the result row and the Avg line (indented) after the test concluded."""
    body = sample_body(name)
    assert body.count("float    none      -1") == 2 and "  # Avg bus bandwidth" in body
    assert len(parsed_sample(name)["rows"]) == 1


def test_degraded_sample_fails_with_its_figures() -> None:
    verdict = bandwidth_verdict(parsed_sample(DEGRADED))
    assert verdict["status"] == FAIL
    assert "22.6 Gb/s (2.83 GB/s at 2 GiB) < floor 175 Gb/s" in verdict["message"]
    assert verdict["avg_busbw_gbps"] == pytest.approx(22.57208)


def test_truncated_sample_judged_on_its_rows() -> None:
    """Issue 25's excerpt stops at `# Avg`: no average, not concluded, but the row is there (below the floor)."""
    parsed = parsed_sample(ISSUE_25)
    assert (parsed["avg_busbw"], parsed["concluded"], parsed["out_of_bounds"]) == (None, False, 0)
    verdict = bandwidth_verdict(parsed)
    assert (verdict["status"], verdict["avg_busbw"], verdict["avg_busbw_gbps"]) == (FAIL, None, None)


# ---------------------------------------------------------------- floor and min_bytes
def test_switch_sample_peak_clears_the_floor_its_average_does_not() -> None:
    verdict = bandwidth_verdict(parsed_sample(SWITCH))
    assert verdict["status"] == PASS
    assert verdict["peak_busbw_gbps"] == pytest.approx(179.68)
    assert verdict["avg_busbw_gbps"] == pytest.approx(171.2264)  # below 175: the verdict is on the peak


@pytest.mark.parametrize(
    "floor,status,message",
    [
        (180, FAIL, "peak bus bandwidth 179.7 Gb/s (22.46 GB/s at 4 GiB) < floor 180 Gb/s"),
        (179.68, PASS, "peak bus bandwidth 179.7 Gb/s (22.46 GB/s at 4 GiB) >= floor 179.68 Gb/s"),
        (0, PASS, "peak bus bandwidth 179.7 Gb/s (22.46 GB/s at 4 GiB) >= floor 0 Gb/s"),
    ],
)
def test_floor(floor: float, status: str, message: str) -> None:
    verdict = bandwidth_verdict(parsed_sample(SWITCH), floor_gbps=floor)
    assert (verdict["status"], verdict["message"], verdict["floor_gbps"]) == (status, message, floor)


def test_min_bytes_limits_the_rows_judged() -> None:
    degraded = bandwidth_verdict(parsed_sample(DEGRADED), min_bytes=4 * GIB)
    assert (degraded["rows"], degraded["peak_busbw"], degraded["peak_size"]) == (1, 2.83, 4 * GIB)
    assert degraded["message"] == "peak bus bandwidth 22.6 Gb/s (2.83 GB/s at 4 GiB) < floor 175 Gb/s"
    route = bandwidth_verdict(parsed_sample(ROUTE179), min_bytes=GIB)
    assert (route["rows"], route["peak_busbw"], route["status"]) == (5, 24.20, PASS)
    assert route["avg_busbw"] == 22.1205  # nccl-tests' own average, over every row


def test_min_bytes_above_every_row_warns() -> None:
    verdict = bandwidth_verdict(parsed_sample(ROUTE179), min_bytes=32 * GIB)
    assert (verdict["status"], verdict["rows"], verdict["peak_busbw"], verdict["peak_busbw_gbps"]) == (
        WARN,
        0,
        None,
        None,
    )
    assert verdict["message"] == "no result row of at least 32 GiB (the largest is 16 GiB)"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"floor_gbps": -1}, "floor_gbps"),
        ({"floor_gbps": "175"}, "floor_gbps"),
        ({"floor_gbps": float("nan")}, "floor_gbps"),
        ({"min_bytes": -1}, "min_bytes"),
        ({"min_bytes": 1.5}, "min_bytes"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bandwidth_verdict(parsed_sample(TREVOR), **kwargs)


# ---------------------------------------------------------------- wrong values, no rows
def test_wrong_values_fail_above_the_floor() -> None:
    body = sample_body(TREVOR)
    row = "373792   45.96   22.98       0"
    assert row in body
    verdict = bandwidth_verdict(parse_nccl_tests(body.replace(row, "373792   45.96   22.98       5")))
    assert (verdict["status"], verdict["wrong"]) == (FAIL, 5)
    assert verdict["message"] == (
        "peak bus bandwidth 183.8 Gb/s (22.98 GB/s at 16 GiB) >= floor 175 Gb/s; 5 wrong values"
    )


def test_out_of_bounds_values_fail() -> None:
    body = sample_body(ROUTE179)
    line = "# Out of bounds values : 0 OK"
    assert line in body
    verdict = bandwidth_verdict(parse_nccl_tests(body.replace(line, "# Out of bounds values : 1 FAILED")))
    assert (verdict["status"], verdict["out_of_bounds"]) == (FAIL, 1)
    assert verdict["message"].endswith(">= floor 175 Gb/s; 1 out-of-bounds value")


def test_no_rows_warns() -> None:
    body = sample_body(TREVOR)
    before_rows = body[: body.index("\n 17179869184")]
    parsed = parse_nccl_tests(before_rows)
    assert (parsed["test"], parsed["hosts"], parsed["rows"], parsed["concluded"]) == (
        "all_gather_perf",
        ["promaxgb10-4c75", "promaxgb10-4c99"],
        [],
        False,
    )
    verdict = bandwidth_verdict(parsed)
    assert (verdict["status"], verdict["rows"], verdict["wrong"], verdict["peak_busbw"]) == (WARN, 0, None, None)
    assert verdict["message"] == "no result rows in the all_gather_perf output (the test did not conclude)"
    row = next(line for line in body.splitlines() if line.startswith(" 17179869184"))
    concluded = bandwidth_verdict(parse_nccl_tests(body.replace(row + "\n", "")))
    assert (concluded["status"], concluded["message"]) == (WARN, "no result rows in the all_gather_perf output")


# ---------------------------------------------------------------- other layouts
# Not captured on hardware: built line by line with nccl-tests' own printf formats (src/util.cu at 2.19.6:
# writeBenchmarkLinePreamble "%12li  %12li  %8s  %6s  %6s", writeBenchmarkLineBody "  %7s  %6s  %6s  %6g"
# or "    N/A" when validation is off, writeResultHeader, writeResultFooter); the figures are illustrative.
ALL_REDUCE_NO_CHECK = """\
# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 4294967296 step: 2(factor) warmup iters: 1 iters: 20 \
agg iters: 1 validation: 0 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on    spark-a device  0 [000f:01:00] NVIDIA GB10
#  Rank  1 Group  0 Pid   4243 on    spark-b device  0 [000f:01:00] NVIDIA GB10
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
spark-a:4242:4242 [0] NCCL INFO Launch mode Parallel
  1073741824     268435456     float     sum      -1  47901.3   22.42   22.42    N/A  47755.2   22.48   22.48    N/A
  2147483648     536870912     float     sum      -1  93110.8   23.06   23.06    N/A  92871.4   23.12   23.12    N/A
  4294967296    1073741824     float     sum      -1   184220   23.31   23.31    N/A   183990   23.34   23.34    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 22.8
#
# Collective test concluded: all_reduce_perf
#
"""

# Before nccl-tests 2.13 (src/all_gather.cu and src/common.cu before commit 51af557): no redop or root column
# for all_gather, `error` (a relative error, %5.0le) where #wrong is now, rank lines without Group.
OLD_ALL_GATHER = """\
# nThread 1 nGpus 1 minBytes 33554432 maxBytes 67108864 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid    195 on      gpu01 device  0 [0x1a] Tesla V100-SXM2-32GB
#   Rank  1 Pid    196 on      gpu02 device  0 [0x1a] Tesla V100-SXM2-32GB
#
#                                               out-of-place                       in-place
#       size         count      type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
    33554432       4194304     float   3021.4   11.11    5.55  0e+00   3011.9   11.14    5.57  0e+00
    67108864       8388608     float   5980.2   11.22    5.61  0e+00   5967.0   11.25    5.62  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 5.587
#
"""

# Per-iteration columns (-I 1) and timestamps (-T 1) in 2.19.6's writeResultHeader layouts, the row of the
# 22.96 GBps sample with per-iteration figures and a timestamp added.
# Lines longer than this file's are split with a backslash-newline: the text is one line each.
PER_ITERATION = """\
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max\
    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)\
     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
 17179869184    2147483648     float    none      -1   374425   45.88   22.94       0   371002   380117\
   380117     0.61   373792   45.96   22.98       0   370518   379870   379870     0.58
"""
TIMESTAMPS = """\
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\
           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\
           %Y-%m-%d %H:%M:%S
 17179869184    2147483648     float    none      -1   374425   45.88   22.94       0   373792   45.96   22.98       0\
  2026-12-01 10:00:00
"""


def test_all_reduce_without_validation() -> None:
    parsed = parse_nccl_tests(ALL_REDUCE_NO_CHECK)
    assert (parsed["test"], parsed["hosts"], parsed["avg_busbw"], parsed["concluded"]) == (
        "all_reduce_perf",
        ["spark-a", "spark-b"],
        22.8,
        True,
    )
    assert [(row["size"], row["redop"], row["root"]) for row in parsed["rows"]] == [
        (GIB, "sum", -1),
        (2 * GIB, "sum", -1),
        (4 * GIB, "sum", -1),
    ]
    assert parsed["rows"][2]["in_place"] == {"time_us": 183990.0, "algbw": 23.34, "busbw": 23.34, "wrong": None}
    verdict = bandwidth_verdict(parsed)
    assert (verdict["status"], verdict["wrong"], verdict["peak_busbw"]) == (PASS, None, 23.34)
    assert verdict["message"] == "peak bus bandwidth 186.7 Gb/s (23.34 GB/s at 4 GiB) >= floor 175 Gb/s"


def test_layout_before_2_13() -> None:
    parsed = parse_nccl_tests(OLD_ALL_GATHER)
    assert (parsed["test"], parsed["nccl_tests_version"], parsed["nccl_version"], parsed["concluded"]) == (
        None,
        None,
        None,
        False,
    )
    assert parsed["ranks"][1] == {
        "rank": 1,
        "group": None,
        "pid": 196,
        "host": "gpu02",
        "device": 0,
        "bus_id": "0x1a",
        "gpu": "Tesla V100-SXM2-32GB",
    }
    assert parsed["rows"][1] == {
        "size": 67108864,
        "count": 8388608,
        "type": "float",
        "redop": None,
        "root": None,
        "out_of_place": {"time_us": 5980.2, "algbw": 11.22, "busbw": 5.61, "wrong": None},
        "in_place": {"time_us": 5967.0, "algbw": 11.25, "busbw": 5.62, "wrong": None},
    }
    verdict = bandwidth_verdict(parsed)
    assert (verdict["status"], verdict["wrong"], verdict["out_of_bounds"], verdict["avg_busbw"]) == (
        FAIL,
        None,
        0,
        5.587,
    )
    assert verdict["message"] == "peak bus bandwidth 45.0 Gb/s (5.62 GB/s at 64 MiB) < floor 175 Gb/s"


@pytest.mark.parametrize("text", [PER_ITERATION, TIMESTAMPS], ids=["per-iteration", "timestamps"])
def test_extra_columns_are_skipped(text: str) -> None:
    (row,) = parse_nccl_tests(text)["rows"]
    assert row == parsed_sample(TREVOR)["rows"][0]


# ---------------------------------------------------------------- not nccl-tests at all
@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "bash: line 1: /opt/nccl-tests/build/all_gather_perf: No such file or directory\n",
        "Authorization required, but no authorization protocol specified\n",
        "# Copyright (c) dgxspark.cluster contributors\n#\n 17179869184    2147483648     float    none      -1\n",
        '{"results": []}',
    ],
    ids=["empty", "blank", "no-binary", "x11-only", "comments-and-numbers", "json"],
)
def test_not_nccl_tests_output(text: str) -> None:
    with pytest.raises(ValueError, match=r"^not nccl-tests output: no '# nccl-tests version'"):
        parse_nccl_tests(text)


def test_not_nccl_tests_output_names_its_first_line() -> None:
    with pytest.raises(ValueError, match=r"it begins 'bash: all_gather_perf: command not found'"):
        parse_nccl_tests("\nbash: all_gather_perf: command not found\n")
    with pytest.raises(ValueError, match=r"the text is empty"):
        parse_nccl_tests("")


# ---------------------------------------------------------------- small helpers
@pytest.mark.parametrize(
    "size,text",
    [(8, "8 B"), (1024, "1 KiB"), (536870912, "512 MiB"), (16 * GIB, "16 GiB"), (17179869168, "16.00 GiB")],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


@pytest.mark.parametrize("code,version", [(22809, "2.28.9"), (23007, "2.30.7"), (22803, "2.28.3"), (2708, "2.7.8")])
def test_nccl_version(code: int, version: str) -> None:
    assert nccl_version(code) == version


def test_gbps() -> None:
    assert gbps(22.98) == 183.84
