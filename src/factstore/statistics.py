"""Fits and rank statistics shared by every study's summary step.

One convention everywhere: fits are ordinary least squares in float64 (numpy), and R^2 is NaN
when y has no variance (a flat y leaves nothing to explain; NaN makes a claim that reads an R^2
fail visibly instead of passing on a degenerate input).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LineFit:
    """y = slope x + intercept, with the coefficient of determination r2 and the standard errors
    of slope and intercept (scipy.stats.linregress's; NaN with fewer than 3 points, where the
    residuals have no degree of freedom). Unpacks as (slope, intercept, r2), as it always has."""

    slope: float
    intercept: float
    r2: float
    slope_se: float = math.nan
    intercept_se: float = math.nan

    def __iter__(self) -> Iterator[float]:
        return iter((self.slope, self.intercept, self.r2))


@dataclass(frozen=True)
class PowerLawFit:
    """y = prefactor x^exponent, fitted as a line in (log x, log y); r2 of that line; exponent_se
    the line's slope standard error, prefactor_se = prefactor x the intercept's (the delta method
    through exp). Unpacks as (exponent, prefactor, r2)."""

    exponent: float
    prefactor: float
    r2: float
    exponent_se: float = math.nan
    prefactor_se: float = math.nan

    def __iter__(self) -> Iterator[float]:
        return iter((self.exponent, self.prefactor, self.r2))


def _float_vectors(x, y, name: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64)
    y = np.asarray(y.detach().cpu() if hasattr(y, "detach") else y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"{name} needs two 1-D sequences of equal length >= 2, got shapes {x.shape} and {y.shape}")
    return x, y


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """1 - SS_res / SS_tot; NaN when y is constant (SS_tot = 0)."""
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return math.nan
    return 1.0 - float(((y - fitted) ** 2).sum()) / total


def binomial_standard_error(fraction: float, count: int) -> float:
    """sqrt(p (1 - p) / n): the standard error of a fraction p of n independent 0/1 outcomes;
    NaN for no outcomes or an unmeasured fraction."""
    return math.sqrt(fraction * (1 - fraction) / count) if count and math.isfinite(fraction) else math.nan


def linear_fit(x, y) -> LineFit:
    """Least-squares line through the points (x_i, y_i): x, y 1-D of equal length >= 2; the
    standard errors from scipy.stats.linregress (NaN for 2 points, 0 for an exactly flat y)."""
    x, y = _float_vectors(x, y, "linear_fit")
    if np.ptp(y) == 0:  # exactly flat: slope 0, not a rounding-level +-1e-17 whose sign could flip a check
        error = 0.0 if x.size > 2 else math.nan
        return LineFit(0.0, float(y[0]), math.nan, error, error)
    design = np.stack([x, np.ones_like(x)], axis=1)
    (slope, intercept), *_ = np.linalg.lstsq(design, y, rcond=None)
    from scipy.stats import linregress  # not at the top: scipy.stats takes ~1.5 CPU-s to import, and most step processes never fit

    errors = linregress(x, y) if x.size > 2 else None
    return LineFit(float(slope), float(intercept), r_squared(y, slope * x + intercept),
                   math.nan if errors is None else float(errors.stderr),
                   math.nan if errors is None else float(errors.intercept_stderr))


def power_law_fit(x, y) -> PowerLawFit:
    """y ~ prefactor x^exponent by a line through (log x, log y); x, y strictly positive."""
    x, y = _float_vectors(x, y, "power_law_fit")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        raise ValueError("power_law_fit needs strictly positive, finite x and y")
    line = linear_fit(np.log(x), np.log(y))
    prefactor = math.exp(line.intercept)
    return PowerLawFit(line.slope, prefactor, line.r2, line.slope_se, prefactor * line.intercept_se)


def spearman(x, y) -> float:
    """Spearman's rank correlation; NaN (without a warning) when either input is constant or has
    fewer than two points."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def first_crossing_below(x, y, level: float) -> float:
    """The x at which a (roughly decreasing) curve y(x) first falls below `level`: linear
    interpolation between the last grid point at or above it and the first one below.

    NaN when the curve starts below `level` or never falls below it within the grid: a crossing
    outside the grid is not guessed. The points may come in any order (they are sorted by x).
    """
    order = np.argsort(np.asarray(x, dtype=float))
    x, y = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    below = np.flatnonzero(y < level)
    if below.size == 0 or below[0] == 0:
        return math.nan
    i = below[0]
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return float(x0 + (y0 - level) * (x1 - x0) / (y0 - y1))


def residual_sum_of_squares(x, y) -> float:
    """Sum of squared residuals of the least-squares line through (x_i, y_i)."""
    line = linear_fit(x, y)
    x, y = _float_vectors(x, y, "residual_sum_of_squares")
    return float(((y - (line.slope * x + line.intercept)) ** 2).sum())
