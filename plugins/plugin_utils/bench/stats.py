# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The statistics of the benchmark's analysis, standard library only (no numpy, no scipy).

- :func:`percentile`: linear interpolation between closest ranks, numpy's default ``"linear"`` method
  (Hyndman and Fan's definition 7): for ``n`` sorted values and a percentile ``p``, the rank is
  ``h = (n - 1) * p / 100`` and the value ``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``.
- :func:`describe`: count, mean, sample standard deviation (``n - 1``), min, max, p10, p50, p90, p99.
- :func:`welch`: Welch's unequal-variance t-test, two-sided, with the Welch-Satterthwaite degrees of
  freedom; the Student t distribution through the regularized incomplete beta function
  (:func:`betainc`, a continued fraction evaluated with the modified Lentz method, ``math.lgamma``).

Nothing here returns NaN or an infinity: where a figure is undefined it is None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

PERCENTILES = (10, 50, 90, 99)
_EPSILON = 1e-15
_TINY = 1e-300
_MAX_ITERATIONS = 100_000


def finite(value: float | None) -> float | None:
    """``value`` when it is a finite number, else None (NaN and the infinities never leave this module)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0-100) of ``values`` by linear interpolation; None for no values."""
    if not 0 <= p <= 100:
        raise ValueError(f"a percentile is between 0 and 100, not {p!r}")
    return _sorted_percentile(sorted(values), p) if values else None


def _sorted_percentile(ordered: Sequence[float], p: float) -> float | None:
    """:func:`percentile` of values already sorted (at least one)."""
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return finite(ordered[low] + (rank - low) * (ordered[high] - ordered[low]))


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean (``math.fsum``); None for no values."""
    return finite(math.fsum(values) / len(values)) if values else None


def variance(values: Sequence[float]) -> float | None:
    """The sample variance (divisor ``n - 1``); None for fewer than 2 values."""
    if len(values) < 2:
        return None
    centre = math.fsum(values) / len(values)
    return finite(math.fsum((value - centre) ** 2 for value in values) / (len(values) - 1))


def stdev(values: Sequence[float]) -> float | None:
    """The sample standard deviation (divisor ``n - 1``); None for fewer than 2 values."""
    spread = variance(values)
    return None if spread is None else math.sqrt(spread)


def describe(values: Sequence[float]) -> dict[str, Any]:
    """``n``, ``mean``, ``stdev``, ``min``, ``max`` and ``p10``, ``p50``, ``p90``, ``p99`` of ``values``.

    Every figure but ``n`` is None when there are no values (``stdev`` also for a single value).
    """
    ordered = sorted(values)
    figures: dict[str, Any] = {
        "n": len(ordered),
        "mean": mean(ordered),
        "stdev": stdev(ordered),
        "min": finite(ordered[0]) if ordered else None,
        "max": finite(ordered[-1]) if ordered else None,
    }
    for p in PERCENTILES:
        figures[f"p{p}"] = _sorted_percentile(ordered, p) if ordered else None
    return figures


# ---------------------------------------------------------------- Student t
def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for ``a, b > 0`` and ``0 <= x <= 1``.

    The continued fraction of Numerical Recipes (``betacf``), evaluated with the modified Lentz method, on
    whichever of ``I_x(a, b)`` and ``1 - I_(1-x)(b, a)`` converges faster.
    """
    if a <= 0 or b <= 0:
        raise ValueError(f"betainc needs a > 0 and b > 0, not a={a!r}, b={b!r}")
    if not 0 <= x <= 1:
        raise ValueError(f"betainc needs 0 <= x <= 1, not {x!r}")
    if x in (0, 1):
        return float(x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _MAX_ITERATIONS + 1):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > _TINY else _TINY)
            c = 1 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            step = c * d
            result *= step
        if abs(step - 1) < _EPSILON:
            return result
    raise ArithmeticError(f"the incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom: ``I_(df / (df + t^2))(df / 2, 1 / 2)``."""
    if df <= 0 or not math.isfinite(df):
        raise ValueError(f"degrees of freedom must be a positive number, not {df!r}")
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, betainc(df / 2, 0.5, df / (df + t * t))))


def welch(baseline: Sequence[float], candidate: Sequence[float]) -> dict[str, Any]:
    """Welch's two-sided t-test of ``candidate`` against ``baseline``.

    Keys: ``t`` (``(mean(candidate) - mean(baseline)) / sqrt(var_b / n_b + var_c / n_c)``, so positive when
    the candidate is larger), ``df`` (Welch-Satterthwaite), ``p`` (two-sided) and ``note``. Undefined
    figures are None, never NaN: with fewer than 2 values on a side there is no test (all None); when both
    sides are constant, ``p`` is 1 for equal means and 0 for different ones, and ``t`` and ``df`` are None.
    """
    result: dict[str, Any] = {"t": None, "df": None, "p": None, "note": None}
    if len(baseline) < 2 or len(candidate) < 2:
        result["note"] = "fewer than 2 values on a side: no test"
        return result
    mean_b, mean_c = math.fsum(baseline) / len(baseline), math.fsum(candidate) / len(candidate)
    share_b = (variance(baseline) or 0.0) / len(baseline)
    share_c = (variance(candidate) or 0.0) / len(candidate)
    spread = share_b + share_c
    if spread == 0:
        result["p"] = 1.0 if mean_b == mean_c else 0.0
        result["note"] = "both runs are constant: " + ("equal means" if mean_b == mean_c else "different means")
        return result
    t = (mean_c - mean_b) / math.sqrt(spread)
    denominator = (share_b**2 / (len(baseline) - 1) if share_b else 0.0) + (
        share_c**2 / (len(candidate) - 1) if share_c else 0.0
    )
    # The shares underflow to 0 when squared only for variances near 1e-300: fall back to the pooled df.
    df = spread**2 / denominator if denominator > 0 else float(len(baseline) + len(candidate) - 2)
    result.update(t=finite(t), df=finite(df), p=finite(t_two_sided_p(t, df)))
    return result


def t_quantile(alpha: float, df: float) -> float:
    """The one-sided ``1 - alpha`` quantile of Student's t with ``df`` degrees of freedom: the ``t`` whose
    two-sided p is ``2 * alpha`` (:func:`t_two_sided_p`, inverted by bisection to 1e-9)."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5, not {alpha!r}")
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > 2 * alpha:
        high *= 2
    while high - low > 1e-9:
        middle = (low + high) / 2
        if t_two_sided_p(middle, df) > 2 * alpha:
            low = middle
        else:
            high = middle
    return high
