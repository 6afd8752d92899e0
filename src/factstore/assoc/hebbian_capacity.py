"""S1.hebbian-all and S1.hebbian-typical: what the Hebbian W = sum_mu u_mu e_mu^T stores.

Tables: the capacity table's Hebbian rows (method 'hebbian-all': per d, the load where half of
the seeds still recall every fact; `capacity.capacity_table`) and the Hebbian table (columns d,
alpha, seed, accuracy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def hebbian_metrics(hebbian_all: pd.DataFrame, hebbian_curves: pd.DataFrame) -> list[tuple[str, float, str]]:
    """The all-facts capacity per d and at the largest d, its bits per parameter (alpha_c / ln 2:
    p_c facts of log2 p_c bits in d^2 weights), and the mean per-fact accuracy at alpha = 1/2 at
    the largest d of the Hebbian table (interpolated on its load grid)."""
    largest = hebbian_all.sort_values("d").iloc[-1]
    out = [(f"hebbian_all_capacity_d{row.d}", row.alpha_c, "half of the seeds recall every fact") for row in hebbian_all.itertuples()]
    out.append(("hebbian_all_capacity_largest_d", largest.alpha_c, f"d = {largest.d}"))
    out.append(("bits_per_parameter_hebbian", largest.alpha_c / np.log(2), f"Hebbian W, all facts, d = {largest.d}"))
    largest_d = hebbian_curves.d.max()
    at_largest = hebbian_curves[hebbian_curves.d == largest_d].groupby("alpha")["accuracy"].mean()
    out.append(("hebbian_accuracy_at_half_largest_d", np.interp(0.5, at_largest.index.to_numpy(), at_largest.to_numpy()),
                f"mean per-fact accuracy at alpha = 1/2, d = {largest_d}"))
    return out
