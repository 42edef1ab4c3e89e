"""Small robust statistics for calibration samples: median, IQR spread and geometric mean (pure, no numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default "linear" method)."""
    if not values:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The sample median."""
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> float:
    """Interquartile range (Q3 - Q1); 0 for a single sample, where the spread is unknown, not zero.

    The policy never trusts a zero spread on its own: its noise margin also has a relative floor.
    """
    if len(values) < 2:
        return 0.0
    return quantile(values, 0.75) - quantile(values, 0.25)


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive values; 0 if any value is 0 (a setting that produced nothing)."""
    if not values:
        raise ValueError("geometric mean of an empty sequence")
    if any(v < 0 for v in values):
        raise ValueError("geometric mean of negative values")
    if any(v == 0 for v in values):
        return 0.0
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))
