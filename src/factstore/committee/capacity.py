"""Capacity per weight from embedding fractions: the certified finite-N value and its 1/N line.

For a machine with W weights, the fraction f(alpha) of random instances (P = alpha W patterns)
that a solver embeds with zero training error falls from 1 to 0 as alpha grows; the capacity per
weight at this N is where f crosses 1/2 (the median capacity of an instance). Every embedded
instance is a proof that it is embeddable, so a solver's f is a lower bound on the embeddable
fraction and its crossing a certified lower bound on the median capacity at that N.

Finite-size curves of an exact solver cross 1/2 at alpha_c(N) = alpha_c + b / N + ..., so the N ->
infinity value would be the intercept of a line through (1 / N, alpha_c(N)); for a solver whose
reach changes with N the intercept extrapolates the solver, not the machine, and is only reported.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from factstore.statistics import first_crossing_below, linear_fit


class InverseNFit(NamedTuple):
    """alpha_c(N) = intercept + slope / N with standard errors: propagated from the points' own
    errors when they are given (`extrapolate_in_inverse_n`), else the regression's (NaN from 2 points)."""

    intercept: float
    intercept_stderr: float
    slope: float
    slope_stderr: float
    r2: float


def extrapolate_in_inverse_n(n_values, capacities, standard_errors=None) -> InverseNFit:
    """Line through (1 / N, alpha_c(N)) by least squares (`statistics.linear_fit`); needs >= 2
    finite points.

    standard_errors (optional, one per point: the crossings' bootstrap errors over instances): the
    intercept's and slope's errors are then those of the same least-squares estimates propagated from
    the points' independent errors (each estimate is a fixed linear combination of the points), which
    exists from two points on; without them, the regression's errors from the residuals (three or more)."""
    n_values = np.asarray(n_values, dtype=float)
    capacities = np.asarray(capacities, dtype=float)
    finite = np.isfinite(capacities)
    x, y = 1.0 / n_values[finite], capacities[finite]
    if x.size < 2:
        raise ValueError(f"the 1/N line needs two finite capacities, got {x.size}")
    fit = linear_fit(x, y)
    r2 = fit.r2 if x.size > 2 else np.nan  # a line through two points: exact, no residual
    if standard_errors is not None:
        errors = np.asarray(standard_errors, dtype=float)[finite]
        combination = np.linalg.pinv(np.column_stack([np.ones_like(x), x]))  # (2, points): the estimates' weights on y
        intercept_se, slope_se = np.sqrt((combination**2) @ errors**2)
        return InverseNFit(fit.intercept, float(intercept_se), fit.slope, float(slope_se), r2)
    if x.size == 2:
        return InverseNFit(fit.intercept, np.nan, fit.slope, np.nan, np.nan)
    return InverseNFit(fit.intercept, fit.intercept_se, fit.slope, fit.slope_se, fit.r2)


def crossing_standard_error(alphas, embedded: np.ndarray, resamples: int = 400, seed: int = 0) -> float:
    """Bootstrap standard error of the 1/2 crossing over instances.

    alphas (A,) the loads; embedded (I, A) bool, instance i at load a (instances resampled with
    replacement by scipy.stats.bootstrap). NaN when the crossing leaves the grid in too many
    resamples to give an error."""
    alphas = np.asarray(alphas, dtype=float)
    data = np.asarray(embedded, dtype=float)

    def crossing(instances: np.ndarray) -> float:  # the resampled instances' indices (I,)
        return first_crossing_below(alphas, data[instances.astype(int)].mean(axis=0), 0.5)

    indices = np.arange(data.shape[0])
    if not np.isfinite(crossing(indices)):
        return np.nan
    from scipy.stats import bootstrap  # not at the top: scipy.stats takes ~1.5 CPU-s to import, and most step processes never fit

    outcome = bootstrap((indices,), crossing, n_resamples=resamples, vectorized=False, method="percentile",
                        rng=np.random.default_rng(seed))
    return float(outcome.standard_error)
