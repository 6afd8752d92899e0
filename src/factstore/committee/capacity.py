"""Capacity per weight from embedding fractions, and its extrapolation in 1 / N.

For a machine with W weights, the fraction f(alpha) of random instances (P = alpha W patterns)
that a solver embeds with zero training error falls from 1 to 0 as alpha grows; the capacity per
weight at this N is where f crosses 1/2 (the median capacity of an instance). Finite-size curves
cross 1/2 at alpha_c(N) = alpha_c + b / N + ..., so the N -> infinity value is the intercept of
a line through (1 / N, alpha_c(N)).
"""

from __future__ import annotations

import numpy as np

from factstore.statistics import LineFit, linear_fit


def extrapolate_in_inverse_n(n_values, capacities) -> LineFit:
    """Line through (1 / N, alpha_c(N)); its intercept is the N -> infinity capacity. Needs >= 2 finite points."""
    n_values = np.asarray(n_values, dtype=float)
    capacities = np.asarray(capacities, dtype=float)
    finite = np.isfinite(capacities)
    return linear_fit(1.0 / n_values[finite], capacities[finite])
