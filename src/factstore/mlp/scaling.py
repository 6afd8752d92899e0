"""How many parameters storing F facts takes: bits of a fact map, the counting bound, the F log F fit.

Two ways of counting the information in F facts mapping F keys onto F values:
- `permutation_bits` = log2(F!): a one-to-one map (a permutation) is one of F! maps. This is the
  exact content of the study's fact sets, hence the information bound W >= log2(F!) / b.
- `random_map_bits` = F log2 F: each of F facts names one of F values (a random map, F^F maps).
  It is how S0 reports bits per parameter (F log2 F / W); it exceeds log2(F!) by about
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
