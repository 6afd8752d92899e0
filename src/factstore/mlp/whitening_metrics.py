"""S0.whitening-capacity: capacity, Lipschitz constants and rho(V) against the whitening strength
alpha, on the whitening sweep (Spearman over alpha, the F / W gain) and at F >> d (the whitening
regime: capacity within a width budget, the stored fraction).
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.decodability_ranking import rho_range_ratio
from factstore.mlp.summary_common import missing_names
from factstore.statistics import spearman

# method -> name of max rho / min rho over the per-alpha means its whitening rho Spearman ranks.
RHO_RANGE_WHITENING_METRICS = {
    "ed_gated": "rho_range_ratio_whitening_ed_gated", "ed_gated_v": "rho_range_ratio_whitening_ed_gated_v",
    "ed_plain": "rho_range_ratio_whitening_ed_plain", "gd_gated": "rho_range_ratio_whitening_gd_gated",
    "gd_plain": "rho_range_ratio_whitening_gd_plain", "ntk": "rho_range_ratio_whitening_ntk",
    "ntk_ustar": "rho_range_ratio_whitening_ntk_ustar",
}
# method -> names of Spearman(alpha, F / W), Spearman(alpha, Lip / RMS), Spearman(alpha, Lip),
# the F / W gain from the weakest to the strongest whitening, and Spearman(rho(V), F / W).
WHITENING_METRICS = {
    "ed_gated": ("whitening_capacity_spearman_ed_gated", "whitening_lipschitz_spearman_ed_gated",
                 "whitening_lipschitz_raw_spearman_ed_gated", "whitening_capacity_gain_ed_gated",
                 "rho_spearman_whitening_ed_gated"),
    "ed_gated_v": ("whitening_capacity_spearman_ed_gated_v", "whitening_lipschitz_spearman_ed_gated_v",
                   "whitening_lipschitz_raw_spearman_ed_gated_v", "whitening_capacity_gain_ed_gated_v",
                   "rho_spearman_whitening_ed_gated_v"),
    "ed_plain": ("whitening_capacity_spearman_ed_plain", "whitening_lipschitz_spearman_ed_plain",
                 "whitening_lipschitz_raw_spearman_ed_plain", "whitening_capacity_gain_ed_plain",
                 "rho_spearman_whitening_ed_plain"),
    "gd_gated": ("whitening_capacity_spearman_gd_gated", "whitening_lipschitz_spearman_gd_gated",
                 "whitening_lipschitz_raw_spearman_gd_gated", "whitening_capacity_gain_gd_gated",
                 "rho_spearman_whitening_gd_gated"),
    "gd_plain": ("whitening_capacity_spearman_gd_plain", "whitening_lipschitz_spearman_gd_plain",
                 "whitening_lipschitz_raw_spearman_gd_plain", "whitening_capacity_gain_gd_plain",
                 "rho_spearman_whitening_gd_plain"),
    "ntk": ("whitening_capacity_spearman_ntk", "whitening_lipschitz_spearman_ntk",
            "whitening_lipschitz_raw_spearman_ntk", "whitening_capacity_gain_ntk", "rho_spearman_whitening_ntk"),
    "ntk_ustar": ("whitening_capacity_spearman_ntk_ustar", "whitening_lipschitz_spearman_ntk_ustar",
                  "whitening_lipschitz_raw_spearman_ntk_ustar", "whitening_capacity_gain_ntk_ustar",
                  "rho_spearman_whitening_ntk_ustar"),
}

# method -> names of the whitening sweep at F >> d: Spearman(alpha, capacity within the width
# budget) and the fraction of (alpha, seed) stored within the width cap.
WHITENING_REGIME_METRICS = {
    "ed_gated": ("whitening_regime_capacity_spearman_ed_gated", "whitening_regime_stored_fraction_ed_gated"),
    "ed_gated_v": ("whitening_regime_capacity_spearman_ed_gated_v", "whitening_regime_stored_fraction_ed_gated_v"),
    "ed_plain": ("whitening_regime_capacity_spearman_ed_plain", "whitening_regime_stored_fraction_ed_plain"),
    "gd_gated": ("whitening_regime_capacity_spearman_gd_gated", "whitening_regime_stored_fraction_gd_gated"),
    "gd_plain": ("whitening_regime_capacity_spearman_gd_plain", "whitening_regime_stored_fraction_gd_plain"),
    "ntk": ("whitening_regime_capacity_spearman_ntk", "whitening_regime_stored_fraction_ntk"),
    "ntk_ustar": ("whitening_regime_capacity_spearman_ntk_ustar", "whitening_regime_stored_fraction_ntk_ustar"),
}


def capacity_within_budget(table: pd.DataFrame) -> tuple[pd.Series, str]:
    """(per-alpha capacity reading, its name) of one method's rows at several whitening strengths:
    F / W (seed means) where every (alpha, seed) stores within the width cap; otherwise the mean
    best accuracy within the cap (1 where it stores), the facts recalled at a fixed width budget.
    Reading F / W with 0 where not stored would tie a fact set that the MLP nearly stores with one
    it does not store at all (the NTK at F >> d stores no alpha within its cap, so it is read at a
    fixed width budget)."""
    if table.stored.all():
        return table.groupby("alpha").facts_per_parameter.mean(), "F / W (every alpha and seed stored)"
    return table.groupby("alpha").best_accuracy.mean(), "best accuracy within the width cap (not every alpha and seed stored)"


def whitening_regime_metrics(table: pd.DataFrame, metrics: MetricsTable) -> None:
    """S0.whitening-capacity at F >> d, every method: Spearman(alpha, capacity_within_budget) and
    the fraction of (alpha, seed) stored within the width cap."""
    if table.empty:
        return
    setting = (f"MiniLM Goodreads facts on their top d = {int(table.d.iloc[0])} principal directions, F = "
               f"{int(table.F.iloc[0])}, alpha in {[float(a) for a in sorted(table.alpha.unique())]}, "
               f"mean over {table.replicate.nunique()} seeds")
    for method, group in table.groupby("method"):
        if method not in WHITENING_REGIME_METRICS:
            missing_names("whitening_regime", method)
            continue
        capacity_name, stored_name = WHITENING_REGIME_METRICS[method]
        reading, read_as = capacity_within_budget(group)
        metrics.add(capacity_name, spearman(reading.index.to_series(), reading),
                    f"Spearman(alpha, capacity) with capacity read as {read_as}; per alpha "
                    + ", ".join(f"{alpha:g}: {value:.4g}" for alpha, value in reading.items()) + f"; {setting}")
        metrics.add(stored_name, float(group.stored.mean()),
                    f"fraction of (alpha, seed) stored within the width cap; {setting}")


def whitening_metrics(table: pd.DataFrame, metrics: MetricsTable) -> None:
    if table.empty:
        return
    setting = (f"MiniLM Goodreads facts, F = {int(table.F.iloc[0])}, d = {int(table.d.iloc[0])}, "
               f"alpha in {[float(a) for a in sorted(table.alpha.unique())]}, mean over {table.replicate.nunique()} seeds")
    for method, group in table.groupby("method"):
        if method not in WHITENING_METRICS:
            missing_names("whitening", method)
            continue
        capacity_name, lipschitz_name, lipschitz_raw_name, gain_name, rho_name = WHITENING_METRICS[method]
        # per alpha: mean facts per parameter (0 where a seed did not store) and mean Lipschitz constants
        means = group.groupby("alpha")[["facts_per_parameter", "lipschitz", "lipschitz_relative", "rho"]].mean().reset_index()
        metrics.add(capacity_name, spearman(means.alpha, means.facts_per_parameter),
                    f"Spearman(alpha, F / W) with F / W = 0 where not stored; {setting}")
        lip = means.dropna(subset=["lipschitz_relative"])
        if len(lip) >= 3:
            metrics.add(lipschitz_name, spearman(lip.alpha, lip.lipschitz_relative),
                        "Spearman(alpha, Lip / RMS output) of the folded MLP at its smallest storing width (the cap if none)")
            metrics.add(lipschitz_raw_name, spearman(lip.alpha, lip.lipschitz),
                        "Spearman(alpha, Lip) without the output-scale normalisation")
        first, last = means.iloc[0], means.iloc[-1]
        metrics.add(gain_name,
                    last.facts_per_parameter / first.facts_per_parameter if first.facts_per_parameter > 0 else math.inf,
                    f"F / W at alpha = {last.alpha:g} over alpha = {first.alpha:g} (inf: not stored at alpha = {first.alpha:g})")
        stored = means[means.facts_per_parameter > 0]
        if stored.rho.nunique() >= 3:
            metrics.add(rho_name, spearman(stored.rho, stored.facts_per_parameter),
                        f"Spearman(rho(V), F / W) over the whitening strengths; {setting}")
        if method in RHO_RANGE_WHITENING_METRICS and len(stored):
            metrics.add(RHO_RANGE_WHITENING_METRICS[method], rho_range_ratio(stored.rho),
                        f"max rho(V) / min rho(V) over the {len(stored)} per-alpha means that Spearman ranks "
                        f"(rho {stored.rho.min():.3g} to {stored.rho.max():.3g}); {setting}")
