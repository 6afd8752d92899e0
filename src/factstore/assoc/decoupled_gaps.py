"""S1.decoupled-equivalent: the original problem (all inputs share one set of p outputs) and the
decoupled one (each input its own p candidates) store the same, at the grid's resolution.

Tables: the trained curves (columns method, problem, rank_fraction, d, alpha, seed, accuracy) and
the capacity table's trained rows (`capacity.capacity_table`); only full-rank runs are compared.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc.capacity import grid_spacing


def decoupled_metrics(curves: pd.DataFrame, trained: pd.DataFrame, threshold: float) -> list[tuple[str, float, str]]:
    """The gaps |original - decoupled| of the full-rank trained W: in mean accuracy over the (d,
    alpha) both ran (mean and largest), in apparent capacity (mean accuracy >= threshold: the
    claim's reading, never revised) and in the capacity proper (in loads and in grid steps), and
    in mean accuracy over the transition loads. Empty unless both problems ran."""
    trained_full = curves[(curves.method == "trained") & (curves.rank_fraction == 1.0)]
    mean = trained_full.groupby(["problem", "d", "alpha"])["accuracy"].mean().unstack("problem")
    if not {"original", "decoupled"} <= set(mean.columns):
        return []
    both = mean.dropna()
    gap = (both["original"] - both["decoupled"]).abs()
    out = [("decoupled_mean_accuracy_gap", gap.mean(), f"mean |acc_original - acc_decoupled| over {len(gap)} (d, alpha) points"),
           ("decoupled_max_accuracy_gap", gap.max(), "largest gap on the grid (steep near capacity)")]
    full = trained[trained.rank_fraction == 1.0]
    caps = full[full.criterion == "mean"].pivot_table(index="d", columns="problem", values="alpha_c").dropna()
    out.append(("decoupled_capacity_gap", (caps["original"] - caps["decoupled"]).abs().max(),
                f"apparent capacity (mean accuracy >= {threshold}) at d = {caps.index.tolist()}"))
    caps = full[full.criterion == "all"].pivot_table(index="d", columns="problem", values="alpha_c").dropna()
    out.append(("decoupled_capacity_gap_perfect_storage", (caps["original"] - caps["decoupled"]).abs().max(),
                f"capacity (all facts, >= half the seeds) at d = {caps.index.tolist()}"))
    steps = decoupled_gap_grid_steps(caps, curves)
    out.append(("decoupled_capacity_gap_grid_steps", steps.max(),
                "largest perfect-storage capacity gap |original - decoupled| over d, in steps of the coarser of the two "
                f"load grids at capacity (per d: {', '.join(f'{d}: {v:.3g}' for d, v in steps.items())})"))
    transition = transition_accuracy_gaps(trained_full)
    worst = transition.idxmax() if len(transition) else None
    out.append(("decoupled_max_transition_accuracy_gap", transition.max() if len(transition) else np.nan,
                "largest |mean accuracy original - decoupled| over the transition loads (where some seed of either "
                f"problem fails to store every fact and some stores over half), at (d, alpha) = {worst} (reported)"))
    return out


def decoupled_gap_grid_steps(capacities: pd.DataFrame, curves: pd.DataFrame) -> pd.Series:
    """Per d, |capacity original - capacity decoupled| in grid steps: the spacing of the coarser of
    the two problems' load grids around the capacities. capacities: index d, columns original and
    decoupled (alpha_c); curves: the runs' tables (problem, d, alpha). Within one step, the two
    capacities are the same at the grid's resolution."""
    steps = {}
    for d, row in capacities.iterrows():
        low, high = sorted((row["original"], row["decoupled"]))
        spacing = 0.0
        for problem in ("original", "decoupled"):
            loads = np.sort(curves[(curves.problem == problem) & (curves.d == d)]["alpha"].unique())
            spacing = max(spacing, grid_spacing(loads, low, high))
        steps[d] = (high - low) / spacing if spacing > 0 else np.nan
    return pd.Series(steps, dtype=float)


def transition_accuracy_gaps(curves: pd.DataFrame) -> pd.Series:
    """|mean accuracy original - mean accuracy decoupled| at the transition loads: (d, alpha) where
    both problems ran and, in either, not every seed stores every fact while some seed's accuracy
    is above 1/2. curves: full-rank trained rows (problem, d, alpha, seed, accuracy). Index (d, alpha)."""
    grouped = curves.groupby(["problem", "d", "alpha"])["accuracy"]
    mean = grouped.mean().unstack("problem")
    in_transition = ((grouped.min() < 1.0) & (grouped.max() > 0.5)).unstack("problem")
    if not {"original", "decoupled"} <= set(mean.columns):
        return pd.Series(dtype=float)
    both = mean[["original", "decoupled"]].dropna()
    window = in_transition.loc[both.index].astype(bool).any(axis=1)  # both ran there: no gaps
    return (both["original"] - both["decoupled"]).abs()[window]
