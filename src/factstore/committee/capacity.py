"""Capacity per weight from embedding fractions, and its extrapolation in 1 / N.

For a machine with W weights, the fraction f(alpha) of random instances (P = alpha W patterns)
that a solver embeds with zero training error falls from 1 to 0 as alpha grows; the capacity per
weight at this N is where f crosses 1/2 (the median capacity of an instance). Finite-size curves
cross 1/2 at alpha_c(N) = alpha_c + b / N + ..., so the N -> infinity value is the intercept of
a line through (1 / N, alpha_c(N)).
"""

from __future__ import annotations

import math

import numpy as np

from factstore.statistics import LineFit, linear_fit


def half_crossing(alphas, fractions, level: float = 0.5) -> float:
    """The alpha where the embedded fraction first falls below `level`, by linear interpolation
    between the last grid point at or above it and the next one.

    NaN when the whole grid is below `level` (the grid starts too high) or none of it is (it
    stops too low): a capacity outside the grid is not guessed.
    """
    alphas = np.asarray(alphas, dtype=float)
    fractions = np.asarray(fractions, dtype=float)
    order = np.argsort(alphas)
    alphas, fractions = alphas[order], fractions[order]
    below = np.flatnonzero(fractions < level)
    if below.size == 0 or below[0] == 0:
        return math.nan
    i = below[0]
    a0, a1, f0, f1 = alphas[i - 1], alphas[i], fractions[i - 1], fractions[i]
    return float(a0 + (f0 - level) / (f0 - f1) * (a1 - a0))


def extrapolate_in_inverse_n(n_values, capacities) -> LineFit:
    """Line through (1 / N, alpha_c(N)); its intercept is the N -> infinity capacity. Needs >= 2 finite points."""
    n_values = np.asarray(n_values, dtype=float)
    capacities = np.asarray(capacities, dtype=float)
    finite = np.isfinite(capacities)
    return linear_fit(1.0 / n_values[finite], capacities[finite])
