"""S1.rank-capacity: the capacity of a rank-constrained W = Q R^T (rank m = kappa d) against its
predicted curve alpha_c(kappa) / alpha_c(1), and the check that the W is trained to its optimum
(retrained with other settings on the loads around its capacity, it must not store more).

Tables: the capacity table's trained rows (`capacity.capacity_table`), the trained curves
(columns method, problem, rank_fraction, d, alpha, seed, accuracy) and the rank check's table
(the same columns plus variant).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc import memory
from factstore.assoc.capacity import grid_spacing
from factstore.assoc.perfect_storage import perfect_fraction
from factstore.statistics import first_crossing_below, spearman

# S1.rank-capacity's predicted curves alpha_c(kappa) / alpha_c(1): the derived one (the top-kappa
# share of the quarter circle's second moment) and, as the declared alternative, parameters per fact.
RANK_CURVES = {
    "rank_capacity_curve_gap_grid_steps": ("the quarter circle's top-kappa second-moment share", memory.rank_capacity_ratio),
    "rank_capacity_curve_gap_grid_steps_parameter_count": ("the parameter count kappa (2 - kappa) (reported)",
                                                           lambda kappa: kappa * (2 - kappa)),
}


def rank_capacity_metrics(trained: pd.DataFrame, curves: pd.DataFrame, d: int) -> list[tuple[str, float, str]]:
    """At the rank runs' d: the capacity (all facts in >= half the seeds) per kappa, its Spearman
    correlation with kappa, and the curve's metrics (`rank_curve_metrics`) on the rank runs' load grid."""
    rank = trained[(trained.problem == "original") & (trained.d == d) & (trained.criterion == "all")]
    rank = rank.sort_values("rank_fraction")
    out = [(f"rank_capacity_kappa{row.rank_fraction:g}", row.alpha_c, f"d = {row.d}, all facts in >= half the seeds")
           for row in rank.itertuples()]
    if len(rank) >= 2:
        out.append(("rank_capacity_spearman", spearman(rank.rank_fraction, rank.alpha_c), "capacity vs kappa"))
    rank_curves = curves[(curves.method == "trained") & (curves.problem == "original") & (curves.d == d)
                         & (curves.rank_fraction < 1.0)]
    return out + rank_curve_metrics(rank, np.sort(rank_curves.alpha.unique()))


def rank_curve_metrics(rank: pd.DataFrame, loads: np.ndarray) -> list[tuple[str, float, str]]:
    """S1.rank-capacity's curve: per kappa < 1 the measured ratio alpha_c(kappa) / alpha_c(1), and
    for each predicted curve of RANK_CURVES the largest |alpha_c(kappa) - ratio(kappa) alpha_c(1)|
    over kappa in steps of the rank load grid around the two values (`grid_spacing`). rank: the
    capacity rows of one d (rank_fraction, alpha_c), the full-rank row (1.0) among them; loads:
    the rank runs' sorted load grid. Empty without a full-rank capacity or a kappa < 1."""
    by_kappa = rank.set_index("rank_fraction")["alpha_c"].astype(float)
    full = by_kappa.get(1.0, np.nan)
    kappas = [k for k in by_kappa.index if k < 1 and np.isfinite(by_kappa[k])]
    if not np.isfinite(full) or not kappas or len(loads) < 2:
        return []
    out = [(f"rank_capacity_ratio_kappa{k:g}", by_kappa[k] / full,
            f"alpha_c(kappa) / alpha_c(1) = {by_kappa[k]:.4g} / {full:.4g} (predicted {memory.rank_capacity_ratio(k):.3f}; "
            f"parameter count {k * (2 - k):.3f})") for k in kappas]
    for name, (what, ratio) in RANK_CURVES.items():
        steps = {}
        for k in kappas:
            measured, predicted = by_kappa[k], ratio(k) * full
            steps[k] = abs(measured - predicted) / grid_spacing(loads, min(measured, predicted), max(measured, predicted))
        listed = ", ".join(f"kappa {k:g}: {v:.3g}" for k, v in steps.items())
        out.append((name, max(steps.values()), f"largest |alpha_c(kappa) - ratio(kappa) alpha_c(1)| in rank-grid steps, "
                    f"ratio = {what}, alpha_c(1) = {full:.4g} ({listed})"))
    return out


def rank_check_metrics(baseline: pd.DataFrame, check: pd.DataFrame, alphas: list[float]) -> list[tuple[str, float, str]]:
    """S1.rank-capacity's optimisation check: each variant's capacity (all facts in >= half the
    seeds) on the window it was run on, the baseline's curve standing in below the window; a
    variant that still stores at the window's top counts with that load (a lower bound). The
    largest gain over the baseline is reported in loads and in grid steps (the spacing of the grid
    loads around the baseline's capacity)."""
    alphas = np.sort(np.asarray(alphas, float))
    base_fraction = perfect_fraction(baseline)
    base_capacity = first_crossing_below(base_fraction.index.to_numpy(), base_fraction.to_numpy(), 0.5)
    window = np.sort(check.alpha.unique())
    out, gains = [], {}
    for name, curve in check.groupby("variant", sort=False):
        fraction = pd.concat([base_fraction[base_fraction.index < window[0]], perfect_fraction(curve)]).sort_index()
        capacity = first_crossing_below(fraction.index.to_numpy(), fraction.to_numpy(), 0.5)
        if not np.isfinite(capacity) and fraction.iloc[-1] >= 0.5:
            capacity = float(fraction.index[-1])  # stores up to the window's top: at least that
        gains[name] = capacity - base_capacity
    gain = max(gains.values()) if gains else np.nan
    # The grid step at the baseline's capacity: the spacing of the two grid loads around it.
    above = np.searchsorted(alphas, base_capacity) if np.isfinite(base_capacity) else 0
    step = alphas[min(max(above, 1), len(alphas) - 1)] - alphas[min(max(above, 1), len(alphas) - 1) - 1]
    described = ", ".join(f"{name}: {value:+.3g}" for name, value in gains.items())
    out.append(("rank_optimisation_baseline_capacity", base_capacity, "the baseline W = Q R^T's capacity at the checked (d, kappa)"))
    out.append(("rank_optimisation_capacity_gain", gain, f"largest capacity gain of a training variant over the baseline ({described})"))
    out.append(("rank_optimisation_gain_grid_steps", gain / step, f"that gain in grid steps (step {step:g} at the baseline's capacity)"))
    return out


def rank_optimisation_metrics(
    curves: pd.DataFrame, check: pd.DataFrame, d: int, alphas: list[float]
) -> list[tuple[str, float, str]]:
    """`rank_check_metrics` of the rank check's table `check` (one kappa) against its baseline: the
    trained curves of the original problem at (d, that kappa). alphas: the rank runs' load grid."""
    kappa = float(check.rank_fraction.iloc[0])
    baseline = curves[(curves.method == "trained") & (curves.problem == "original")
                      & (curves.d == d) & (curves.rank_fraction == kappa)]
    return rank_check_metrics(baseline, check, alphas)

