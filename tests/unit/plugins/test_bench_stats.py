# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's statistics against hand-computed values and scipy's.

The reference values marked "scipy" were computed once with scipy 1.18.1 (numpy 2.5) on Python 3.13, in a
throwaway venv (``python3.13 -m venv /tmp/scipyvenv && /tmp/scipyvenv/bin/pip install scipy``), with
``scipy.stats.ttest_ind(candidate, baseline, equal_var=False)`` (``.statistic``, ``.df``, ``.pvalue``),
``2 * scipy.stats.t.sf(t, df)`` and ``scipy.special.betainc(a, b, x)``, and pasted here; scipy is not a
dependency of the collection or its tests.
"""

from __future__ import annotations

import json
import math

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.stats import (
    betainc,
    describe,
    finite,
    mean,
    percentile,
    stdev,
    t_two_sided_p,
    welch,
)

# The example of numpy's percentile documentation style: sorted 1 1 2 3 4 5 6 9 (n = 8).
VALUES = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0, 1.0),
        (10, 1.0),  # h = 7 * 0.10 = 0.7: 1 + 0.7 * (1 - 1)
        (25, 1.75),  # h = 1.75: 1 + 0.75 * (2 - 1)
        (50, 3.5),  # h = 3.5: 3 + 0.5 * (4 - 3)
        (90, 6.9),  # h = 6.3: 6 + 0.3 * (9 - 6)
        (99, 8.79),  # h = 6.93: 6 + 0.93 * (9 - 6)
        (100, 9.0),
    ],
)
def test_percentile_linear_interpolation_by_hand(p: float, expected: float) -> None:
    assert percentile(VALUES, p) == pytest.approx(expected, abs=1e-12)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 50) == 1.5
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile(VALUES, 101)
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile(VALUES, -1)


def test_describe() -> None:
    figures = describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert figures["n"] == 8 and figures["mean"] == 5.0
    assert figures["stdev"] == pytest.approx(math.sqrt(32 / 7))  # sample stdev, n - 1
    assert (figures["min"], figures["max"], figures["p50"]) == (2.0, 9.0, 4.5)
    assert set(figures) == {"n", "mean", "stdev", "min", "max", "p10", "p50", "p90", "p99"}
    empty = describe([])
    assert empty["n"] == 0 and all(value is None for key, value in empty.items() if key != "n")
    single = describe([3.0])
    assert single["mean"] == 3.0 and single["stdev"] is None and single["p99"] == 3.0
    assert mean([]) is None and stdev([1.0]) is None
    assert finite(float("nan")) is None and finite(float("inf")) is None and finite(2) == 2.0


# scipy: (baseline, candidate) -> (t, df, p) of ttest_ind(candidate, baseline, equal_var=False)
SCIPY_WELCH = [
    (
        [1.0, 2.0, 3.0, 4.0, 5.0],
        [2.0, 3.5, 4.0, 6.0, 7.5, 8.0],
        1.8027756377319948,
        8.66111467008328,
        0.10623228267864832,
    ),
    ([1.0, 2.0], [3.0, 5.0], 2.23606797749979, 1.4705882352941178, 0.19872738893452602),
    ([3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0, 6.0], 0.23249527748763876, 4.0, 0.8275647196020316),
    (
        [0.025 + 0.001 * ((i * 37) % 11) for i in range(200)],
        [0.0255 + 0.001 * ((i * 53) % 13) for i in range(150)],
        3.664085314786015,
        289.8440413570971,
        0.0002950857635505637,
    ),
    (
        [10.0 + 0.1 * (i % 7) for i in range(60)],
        [12.0 + 0.1 * (i % 5) for i in range(40)],
        55.52133262193417,
        97.49092523747507,
        1.3733755038058218e-75,
    ),
    (
        [5.0 + (i % 3) for i in range(30)],
        [5.05 + (i % 3) for i in range(31)],
        0.08314399293912755,
        58.958057741237035,
        0.9340186978069845,
    ),
]


@pytest.mark.parametrize(("baseline", "candidate", "t", "df", "p"), SCIPY_WELCH)
def test_welch_matches_scipy(baseline: list[float], candidate: list[float], t: float, df: float, p: float) -> None:
    result = welch(baseline, candidate)
    assert result["t"] == pytest.approx(t, rel=1e-9)
    assert result["df"] == pytest.approx(df, rel=1e-9)
    assert result["p"] == pytest.approx(p, rel=1e-9)
    assert result["note"] is None
    # Swapping the runs flips t only.
    swapped = welch(baseline=candidate, candidate=baseline)
    assert swapped["t"] == pytest.approx(-t, rel=1e-9) and swapped["p"] == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (0.5, 1.0, 0.7048327646991335),
        (2.0, 3.0, 0.13932596855884305),
        (1.96, 1000.0, 0.050273184955748736),
        (4.0, 2.5, 0.03901297584131825),
        (10.0, 50.0, 1.6077334688335447e-13),
        (0.0, 7.0, 1.0),
    ],
)
def test_student_t_two_sided_p_matches_scipy(t: float, df: float, p: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(p, rel=1e-9)
    assert t_two_sided_p(-t, df) == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize(
    ("x", "a", "b", "expected"),
    [
        (0.3, 2.0, 3.0, 0.34829999999999994),
        (0.9, 0.5, 0.5, 0.7951672353008665),
        (0.01, 50.0, 0.5, 7.998227417904836e-102),
        (0.999, 500.0, 0.5, 0.31731044730971725),
    ],
)
def test_betainc_matches_scipy(x: float, a: float, b: float, expected: float) -> None:
    assert betainc(a, b, x) == pytest.approx(expected, rel=1e-9)


def test_betainc_and_t_arguments() -> None:
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0
    with pytest.raises(ValueError, match="a > 0"):
        betainc(0.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="0 <= x <= 1"):
        betainc(1.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_two_sided_p(1.0, 0.0)
    assert t_two_sided_p(float("inf"), 5.0) == 0.0
    # A huge df (nearly the normal distribution); scipy: 2 * t.sf(3.0, 1e7) = 0.0026998027110371635.
    assert t_two_sided_p(3.0, 1e7) == pytest.approx(0.0026998027110371635, rel=1e-6)


def test_welch_edge_cases_never_nan() -> None:
    few = welch([1.0], [1.0, 2.0, 3.0])
    assert (few["t"], few["df"], few["p"]) == (None, None, None) and "fewer than 2" in few["note"]
    assert welch([], [])["p"] is None
    same = welch([2.0, 2.0, 2.0], [2.0, 2.0])
    assert same["p"] == 1.0 and same["t"] is None and same["df"] is None and "equal means" in same["note"]
    apart = welch([2.0, 2.0, 2.0], [3.0, 3.0])
    assert apart["p"] == 0.0 and apart["t"] is None and "different means" in apart["note"]
    # One constant side: df is the other side's n - 1 (scipy agrees, above).
    one = welch([3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0, 6.0])
    assert one["df"] == pytest.approx(4.0)
    # Nothing of these is NaN or infinite: JSON without NaN accepts them all.
    json.dumps([few, same, apart, one], allow_nan=False)
