"""S1.optimal-capacity: the full-rank trained W's capacity extrapolated to d -> infinity.

The fit alpha_c(d) = a + b / ln p_c over the d with a measured capacity (`memory.extrapolate_capacity`),
for the capacity proper (criterion 'all': the claim's checks read its intercept a and slope b) and,
reported, for the apparent capacity (criterion 'mean'); the standard errors of a and b and a 95%
interval of a from a bootstrap over seeds.

Tables: the capacity table's trained rows (`capacity.capacity_table`) and the full-rank trained
curves of the original problem (columns d, alpha, seed, accuracy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc import memory
from factstore.statistics import first_crossing_below

# Resamples of the bootstrap over seeds behind the standard errors of S1.optimal-capacity's fit.
BOOTSTRAP_RESAMPLES = 1999


def optimal_capacity_metrics(trained: pd.DataFrame, threshold: float) -> list[tuple[str, float, str]]:
    """S1.optimal-capacity from the capacity table's full-rank, original-problem, trained rows:
    the fit alpha_c(d) = a + b / ln p_c over the d with a measured capacity, for the capacity
    proper (criterion 'all': its intercept a and slope b are the claim's checks) and, reported,
    for the apparent capacity at mean accuracy >= threshold (criterion 'mean')."""
    out = []
    original = trained[(trained.problem == "original") & (trained.rank_fraction == 1.0)]
    for criterion in ("all", "mean"):
        rows = original[original.criterion == criterion].sort_values("d")
        usable = rows[np.isfinite(rows.alpha_c.astype(float))]
        if len(usable) < 2:
            continue
        intercept, slope = memory.extrapolate_capacity(usable.alpha_c.to_numpy(float), usable.p_c.to_numpy(float))
        fit = f"fit alpha_c = a + b / ln p_c over d = {usable.d.tolist()}"
        if criterion == "all":
            out.append(("optimal_capacity_extrapolated", intercept, f"{fit} (all facts stored in >= half the seeds), b = {slope:.3g}"))
            out.append(("optimal_capacity_slope_b", slope, f"{fit}: b > 0 means capacity falls as d grows"))
            out.append(("optimal_capacity_min_finite_d", usable.alpha_c.min(), f"smallest capacity over d = {usable.d.tolist()}"))
            # At capacity W stores p_c facts of log2 p_c bits in d^2 weights: p log2 p / d^2 = alpha_c / ln 2.
            largest = usable.iloc[-1]
            out.append(("bits_per_parameter_optimal", largest.alpha_c / np.log(2), f"trained W at capacity, d = {largest.d}"))
        else:
            out.append(("optimal_capacity_extrapolated_mean_accuracy", intercept,
                        f"{fit}, apparent capacity at mean accuracy >= {threshold} (reported), b = {slope:.3g}"))
            out.append(("optimal_capacity_slope_b_mean_accuracy", slope, f"{fit}, apparent capacity (reported)"))
    return out


def capacity_fit_standard_errors(original: pd.DataFrame, n_resamples: int, seed: int) -> dict[str, float]:
    """The standard errors of `capacity_fit_bootstrap` alone."""
    return capacity_fit_bootstrap(original, n_resamples, seed)[0]


def capacity_fit_bootstrap(
    original: pd.DataFrame, n_resamples: int, seed: int
) -> tuple[dict[str, float], tuple[float, float] | None]:
    """Standard errors of S1.optimal-capacity's fitted intercept a and slope b (alpha_c = a + b /
    ln p_c), by a bootstrap over seeds (scipy.stats.bootstrap, percentile): each d's seeds are
    resampled on their own (d's may have different seed counts; a seed is one problem instance per
    load), the perfect-storage capacity of each d recomputed as `capacity.perfect_storage_capacities` does
    and the line refitted. original: full-rank trained curves of the original problem (columns d,
    alpha, seed, accuracy). Returns {metric name: standard error}; nan where a resample leaves
    fewer than two d with a capacity on the grid. Also returns the 95% percentile interval
    (low, high) of the intercept a from the same resamples (None with fewer than two d)."""
    from scipy.stats import bootstrap

    dims = sorted(original["d"].unique())
    if len(dims) < 2:
        return {}, None
    stored = {d: original[original.d == d].pivot_table(index="seed", columns="alpha", values="accuracy") >= 1.0 for d in dims}

    def fit(*seed_rows):
        alpha_c, p_c = [], []
        for d, rows in zip(dims, seed_rows):
            table = stored[d]
            fraction = table.to_numpy(float)[np.asarray(rows, int)].mean(axis=0)
            crossing = first_crossing_below(table.columns.to_numpy(float), fraction, 0.5)
            if np.isfinite(crossing):
                alpha_c.append(crossing)
                p_c.append(memory.facts_for_load(crossing, d))
        if len(alpha_c) < 2:
            return np.array([np.nan, np.nan])
        return np.array(memory.extrapolate_capacity(np.array(alpha_c), np.array(p_c)))

    samples = tuple(np.arange(len(stored[d])) for d in dims)
    result = bootstrap(samples, fit, vectorized=False, paired=False, n_resamples=n_resamples, method="percentile",
                       rng=np.random.default_rng(seed))
    intercept_error, slope_error = result.standard_error
    interval = (float(result.confidence_interval.low[0]), float(result.confidence_interval.high[0]))
    return {"optimal_capacity_extrapolated": float(intercept_error), "optimal_capacity_slope_b": float(slope_error)}, interval


def optimal_capacity_metrics_with_errors(
    trained: pd.DataFrame, original_curves: pd.DataFrame, threshold: float, seed: int
) -> list[tuple[str, float, str, float | None]]:
    """`optimal_capacity_metrics`, each with its bootstrap standard error where it has one
    (`capacity_fit_bootstrap`, BOOTSTRAP_RESAMPLES resamples drawn from `seed`), then the two ends
    of the extrapolated capacity's 95% bootstrap interval. Rows (name, value, detail, standard error)."""
    errors, interval = capacity_fit_bootstrap(original_curves, BOOTSTRAP_RESAMPLES, seed)
    out = [(name, value, detail, errors.get(name)) for name, value, detail in optimal_capacity_metrics(trained, threshold)]
    if interval is not None:
        for name, value, bound in zip(("optimal_capacity_extrapolated_interval_low", "optimal_capacity_extrapolated_interval_high"),
                                      interval, ("lower", "upper")):
            out.append((name, value, f"{bound} end of the 95% percentile bootstrap interval of the extrapolated capacity a "
                        f"({BOOTSTRAP_RESAMPLES} resamples of each d's seeds; reported)", None))
    return out
