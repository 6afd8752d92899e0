"""S1's capacity readings: where the recall curves of a run stop storing its facts.

The capacity proper (criterion 'all', the paper's): the load up to which at least half of the
seeds store every fact; the apparent capacity (criterion 'mean'): the load where the
seed-averaged accuracy falls below a threshold. Also the grid spacing that turns a gap between
two capacities into steps of the load grid.

Tables: curves have one row per (run, alpha, seed) with columns d, alpha, seed, accuracy and the
run's keys (method, problem, rank_fraction); a capacity table one row per (keys, criterion) with
alpha_c and p_c (`capacity_table`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc import memory
from factstore.statistics import first_crossing_below

CAPACITY_KEYS = ["method", "problem", "rank_fraction", "d"]
"""The columns that name a run of the trained tables: one capacity per run and criterion."""


def capacities(curves: pd.DataFrame, threshold: float, keys: list[str]) -> pd.DataFrame:
    """Apparent capacity per group: the load where the seed-averaged accuracy falls below `threshold`
    (criterion 'mean'). Reported beside the capacity proper, `perfect_storage_capacities`."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("alpha", as_index=False)["accuracy"].mean()
        alpha_c = first_crossing_below(mean["alpha"].to_numpy(), mean["accuracy"].to_numpy(), threshold)
        d = int(curve["d"].iloc[0])
        p_c = memory.facts_for_load(alpha_c, d) if np.isfinite(alpha_c) else np.nan
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"alpha_c": alpha_c, "p_c": p_c})
    return pd.DataFrame(rows).assign(criterion="mean")


def perfect_storage_capacities(curves: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The capacity of the paper (S1, criterion 'all'): per group, the load up to which at least
    half of the seeds store ALL facts (accuracy 1), interpolated where that fraction crosses 1/2
    between grid loads. nan when the grid's smallest load already fails or its largest still stores."""
    perfect = curves.assign(accuracy=(curves["accuracy"] >= 1.0).astype(float))
    return capacities(perfect, 0.5, keys).assign(criterion="all")


def capacity_table(curves: pd.DataFrame, hebbian_curves: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """The study's capacity table (results/assoc/capacity.csv): per run of `curves` (the trained
    tables, keys `CAPACITY_KEYS`) its capacity (criterion 'all') and its apparent capacity at mean
    accuracy >= threshold ('mean'), then per d of `hebbian_curves` (the Hebbian table) the load
    where half of the seeds still recall every fact (method 'hebbian-all', criterion 'all')."""
    capacity = pd.concat([perfect_storage_capacities(curves, CAPACITY_KEYS), capacities(curves, threshold, CAPACITY_KEYS)],
                         ignore_index=True)
    hebbian_all = perfect_storage_capacities(hebbian_curves, ["d"]).assign(
        method="hebbian-all", problem="original", rank_fraction=1.0
    )
    return pd.concat([capacity, hebbian_all], ignore_index=True)


def full_rank_capacity_metrics(trained: pd.DataFrame, threshold: float) -> list[tuple[str, float, str]]:
    """The full-rank trained W's capacity per (problem, d): the capacity proper, then the apparent
    capacity at mean accuracy >= threshold. trained: the capacity table's trained rows."""
    full = trained[trained.rank_fraction == 1.0]
    out = [(f"{row.problem}_capacity_d{row.d}", row.alpha_c, f"all facts stored in >= half the seeds, p_c = {row.p_c}")
           for row in full[full.criterion == "all"].itertuples()]
    out += [(f"{row.problem}_capacity_mean_accuracy_d{row.d}", row.alpha_c,
             f"mean accuracy >= {threshold} (apparent capacity, reported), p_c = {row.p_c}")
            for row in full[full.criterion == "mean"].itertuples()]
    return out


def grid_spacing(loads: np.ndarray, low: float, high: float) -> float:
    """The largest spacing between consecutive grid loads over the interval [low, high] (the two
    grid intervals holding its ends, and every one between). loads: sorted 1-D."""
    spacings = np.diff(loads)
    first = max(int(np.searchsorted(loads, low, side="right")) - 1, 0)
    last = min(max(int(np.searchsorted(loads, high, side="left")), first + 1), len(loads) - 1)
    return float(spacings[first:last].max()) if last > first else float(spacings.max())
