"""How many parameters storing F facts takes: bits of a fact map, the counting bound, the F log F fit.

Two ways of counting the information in F facts mapping F keys onto F values:
- `permutation_bits` = log2(F!): a one-to-one map (a permutation) is one of F! maps. This is the
  exact content of the study's fact sets, hence the information bound W >= log2(F!) / b.
- `random_map_bits` = F log2 F: each of F facts names one of F values (a random map, F^F maps).
  It is how S0 reports bits per parameter (F log2 F / W); it exceeds log2(F!) by about
  F log2 e (Stirling), so bits per parameter counted this way over-count by that much.

The measured counts are fitted by W = C F (log2 F + b), the shape the encoder-decoder
construction predicts (O(m F) parameters with code size m ~ log F). Across value sets of one F
the paper's cost law W ~ F log F / rho^2 (rho = rho(V), the values' decodability) is tested by
`rho_law_fit`: the exponent of W on 1/rho^2 at fixed F, with its standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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

    S0's count for bits per parameter, F log2 F / W. n_facts: a count or an array of counts.
    """
    n = np.asarray(n_facts, dtype=float)
    return n * np.log2(n)


def allowed_errors(n_facts: int | np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """k = floor((1 - target) F): the most facts a map stored to accuracy `target` may get wrong.

    A small tolerance absorbs the float error of 1 - target (1 - 0.9 = 0.09999...). Arrays
    broadcast; returns integers as floats.
    """
    n = np.asarray(n_facts, dtype=float)
    return np.floor((1.0 - np.asarray(target, dtype=float)) * n + 1e-9)


def covering_bits(n_facts: int | np.ndarray, errors: int | np.ndarray) -> np.ndarray:
    """Bits needed to store a permutation of F values up to k errors: the covering count
    max(0, log2 F! - log2 C(F, k) - k log2 F).

    Derivation. A network with W parameters of b bits each realises at most 2^(bW) maps g from
    the F keys to the F values. Storing a permutation pi to accuracy 1 - k/F means g agrees with
    pi on at least F - k keys. One map g is within k errors of at most C(F, k) F^k permutations
    (choose the keys where they may differ, then a value for each; the other keys are fixed by
    g). For every one of the F! permutations to be stored by some network,
    2^(bW) C(F, k) F^k >= F!, i.e. bW >= log2 F! - log2 C(F, k) - k log2 F. At k = 0 this is
    log2 F! (permutation_bits); it does not increase with k (each extra error adds
    log2((F - k) / (k + 1)) + log2 F >= 0 bits to the subtracted count) and is clipped at 0,
    where the count stops binding. Counting the k! permutations of the k left-over values instead
    of F^k gives a bound larger by k log2 F - log2 k! bits; the F^k form is the one used here.

    n_facts, errors: counts or arrays of counts (broadcast); returns an array.
    """
    n, k = np.broadcast_arrays(np.asarray(n_facts, dtype=float), np.asarray(errors, dtype=float))

    def bits(f: float, e: float) -> float:
        log_binomial = math.lgamma(f + 1) - math.lgamma(e + 1) - math.lgamma(f - e + 1)
        return max(0.0, (math.lgamma(f + 1) - log_binomial) / math.log(2) - e * math.log2(f))

    return np.vectorize(bits, otypes=[float])(n, k)


def target_bits(n_facts: int | np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Bits a map of F facts stored to accuracy `target` must hold: the covering count with
    k = floor((1 - target) F) errors allowed (covering_bits); log2 F! at target 1 (k = 0)."""
    return covering_bits(n_facts, allowed_errors(n_facts, target))


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


@dataclass(frozen=True)
class RhoLawFit:
    """The paper's cost law W ~ F log F / rho^2 tested as an exponent: log W = a_F + g log(1/rho^2).

    exponent: g (the law's is 1), exponent_se: its standard error (residual degrees of freedom
    n - k - 1 with k intercepts; NaN with none left), n_points: the rows fitted, n_facts: the k
    distinct F, rho_span: the largest within-F max rho / min rho (how far 1/rho^2 moved: the fit
    decides little when it is near 1), slope / slope_se: the single-regressor slope of log W on
    log(F log2 F / rho^2) (1 under the law, F and rho mixed; NaN with fewer than 3 rows)."""

    exponent: float
    exponent_se: float
    n_points: int
    n_facts: int
    rho_span: float
    slope: float = math.nan
    slope_se: float = math.nan


def rho_law_fit(n_facts, n_params, rho) -> RhoLawFit:
    """Fit the exponent g of W on 1/rho^2 at fixed F: log W = a_F + g log(1/rho^2), one intercept
    a_F per distinct F (it holds F log F and the constant), least squares over every row.

    n_facts, n_params, rho: 1-D sequences of equal length (one row per value set: each F, kappa
    and seed with its own rho(V)); rows whose W or rho is not finite and positive (not stored) are
    left out. The intercepts are removed by centring log W and log(1/rho^2) within each F (the
    within estimator: the same g as the regression with one intercept per F), the line through the
    centred points is `statistics.linear_fit`, and its standard error is rescaled from that line's
    n - 2 residual degrees of freedom to the model's n - k - 1. NaN exponent when 1/rho^2 does not
    move within any F or fewer than two rows remain.
    """
    f = np.asarray(n_facts, dtype=float)
    w = np.asarray(n_params, dtype=float)
    r = np.asarray(rho, dtype=float)
    keep = np.isfinite(f) & np.isfinite(w) & np.isfinite(r) & (f > 0) & (w > 0) & (r > 0)
    f, w, r = f[keep], w[keep], r[keep]
    groups = np.unique(f)
    n, k = len(f), len(groups)
    if n < 2:
        return RhoLawFit(math.nan, math.nan, n, k, math.nan)
    x, y = -2.0 * np.log(r), np.log(w)
    x_centred, y_centred = x.copy(), y.copy()
    spans = []
    for value in groups:
        here = f == value
        x_centred[here] -= x[here].mean()
        y_centred[here] -= y[here].mean()
        spans.append(float(r[here].max() / r[here].min()))
    rho_span = max(spans)
    single = _single_regressor_slope(f, w, r)
    if np.ptp(x_centred) == 0:
        return RhoLawFit(math.nan, math.nan, n, k, rho_span, *single)
    line = linear_fit(x_centred, y_centred)
    residual_dof = n - k - 1
    se = line.slope_se * math.sqrt((n - 2) / residual_dof) if residual_dof > 0 and math.isfinite(line.slope_se) else math.nan
    return RhoLawFit(float(line.slope), se, n, k, rho_span, *single)


def _single_regressor_slope(f: np.ndarray, w: np.ndarray, r: np.ndarray) -> tuple[float, float]:
    """(slope, its standard error) of log W on log(F log2 F / rho^2); NaN with fewer than 3 rows or
    a regressor that does not move."""
    x = np.log(f * np.log2(f) / r**2)
    if len(x) < 3 or np.ptp(x) == 0:
        return math.nan, math.nan
    line = linear_fit(x, np.log(w))
    return float(line.slope), float(line.slope_se)
