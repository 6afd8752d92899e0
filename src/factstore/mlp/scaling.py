"""How many parameters storing F facts takes: bits of a fact map, the counting bound, the F log F fit.

Two ways of counting the information in F facts mapping F keys onto F values:
- `permutation_bits` = log2(F!): a one-to-one map (a permutation) is one of F! maps. This is the
  exact content of the study's fact sets, hence the information bound W >= log2(F!) / b.
- `random_map_bits` = F log2 F: each of F facts names one of F values (a random map, F^F maps).
  It is how SPEC reports bits per parameter (F log2 F / W); it exceeds log2(F!) by about
  F log2 e (Stirling), so bits per parameter counted this way over-count by that much.

The measured counts are fitted by W = C F (log2 F + b), the shape the encoder-decoder
construction predicts (O(m F) parameters with code size m ~ log F).
"""

from __future__ import annotations

import math

import numpy as np

from factstore.statistics import linear_fit, power_law_fit


def permutation_bits(n_facts: int | np.ndarray) -> np.ndarray:
    """log2(F!): the bits that single out one permutation fact map among all F! (lgamma, exact).

    n_facts: a count or an array of counts; returns an array of the same shape.
    """
    n = np.asarray(n_facts, dtype=float)
    return np.vectorize(lambda f: math.lgamma(f + 1) / math.log(2))(n)


def random_map_bits(n_facts: int | np.ndarray) -> np.ndarray:
    """F log2 F: the bits of F facts that each name one of F values (a random map).

    SPEC's count for bits per parameter, F log2 F / W. n_facts: a count or an array of counts.
    """
    n = np.asarray(n_facts, dtype=float)
    return n * np.log2(n)


def information_bound(n_facts: int | np.ndarray, bits_per_parameter: float) -> np.ndarray:
    """Counting bound W >= log2(F!) / b: parameters needed to hold a permutation of F values if
    each parameter holds at most b bits (the assumption; b = 2 is the ceiling measured for trained
    networks, Allen-Zhu & Li 2024, and Gardner's 2 bits per weight of a perceptron)."""
    return permutation_bits(n_facts) / bits_per_parameter


def fit_f_log_f(n_facts, n_params) -> dict[str, float]:
    """Fit W = C F (log2 F + b): W / F = C log2 F + C b is linear in log2 F (least squares).

    n_facts, n_params: 1-D sequences of equal length (F and the measured W); points that are
    not finite and positive (e.g. W = NaN where nothing stored) are left out. Returns C, b,
    r2 (of the line W / F against log2 F; NaN when W / F is flat, statistics' convention) and
    exponent (the log-log slope of W against F). All NaN with fewer than two distinct F.
    """
    f = np.asarray(n_facts, dtype=float)
    w = np.asarray(n_params, dtype=float)
    keep = np.isfinite(f) & np.isfinite(w) & (f > 0) & (w > 0)
    f, w = f[keep], w[keep]
    if len(np.unique(f)) < 2:
        return {"C": math.nan, "b": math.nan, "r2": math.nan, "exponent": math.nan}
    line = linear_fit(np.log2(f), w / f)
    return {"C": line.slope, "b": line.intercept / line.slope if line.slope != 0 else math.nan,
            "r2": line.r2, "exponent": power_law_fit(f, w).exponent}


def fitted_params(n_facts, fit: dict[str, float]) -> np.ndarray:
    """W = C F (log2 F + b) at the given F, for a fit of `fit_f_log_f` (keys C and b)."""
    f = np.asarray(n_facts, dtype=float)
    return fit["C"] * f * (np.log2(f) + fit["b"])
