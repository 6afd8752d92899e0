"""S0.others-robust: the trained MLP's and the encoder-decoder's stored fraction and cost ratio
W(kappa) / W(kappa = 1) across a kappa sweep (and that ratio over the earlier fixed band), with
the ceiling the encoder-decoder's code size m <= d puts on its ratio; at the anisotropy sweep's d
and in the paper's regime (robust_regime, d = 128), where the cost law is read too.
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.anisotropy_cost_law import law_metrics
from factstore.mlp.encoder_decoder import gated_parameter_count
from factstore.mlp.results import seed_means
from factstore.mlp.summary_common import families, missing_names

EARLIER_COST_BAND = 2.0
"""The fixed band that S0.others-robust read before the cost law (W(kappa) / W(1) at most 2): its
band metrics are the cost ratio over it (at most 1 inside), a declared alternative."""
# method -> names of its stored fraction, cost ratio and that ratio over EARLIER_COST_BAND across the
# kappa sweep (S0.others-robust).
ROBUST_METRICS = {
    "gd_gated": ("robust_stored_fraction_gd_gated", "robust_cost_ratio_gd_gated", "robust_cost_band_gd_gated"),
    "gd_plain": ("robust_stored_fraction_gd_plain", "robust_cost_ratio_gd_plain", "robust_cost_band_gd_plain"),
    "ed_gated": ("robust_stored_fraction_ed_gated", "robust_cost_ratio_ed_gated", "robust_cost_band_ed_gated"),
    "ed_plain": ("robust_stored_fraction_ed_plain", "robust_cost_ratio_ed_plain", "robust_cost_band_ed_plain"),
    "ed_gated_v": ("robust_stored_fraction_ed_gated_v", "robust_cost_ratio_ed_gated_v", "robust_cost_band_ed_gated_v"),
}
# (method, family) -> the same three names across the d = 128 kappa sweep (robust_regime).
ROBUST_REGIME_METRICS = {
    ("ed_gated", "geometric"): ("robust_regime_stored_fraction_ed_gated_geometric",
                                "robust_regime_cost_ratio_ed_gated_geometric", "robust_regime_cost_band_ed_gated_geometric"),
    ("ed_gated", "linspace"): ("robust_regime_stored_fraction_ed_gated_linspace",
                               "robust_regime_cost_ratio_ed_gated_linspace", "robust_regime_cost_band_ed_gated_linspace"),
    ("ed_plain", "geometric"): ("robust_regime_stored_fraction_ed_plain_geometric",
                                "robust_regime_cost_ratio_ed_plain_geometric", "robust_regime_cost_band_ed_plain_geometric"),
    ("ed_plain", "linspace"): ("robust_regime_stored_fraction_ed_plain_linspace",
                               "robust_regime_cost_ratio_ed_plain_linspace", "robust_regime_cost_band_ed_plain_linspace"),
}


def robust_metrics(main: pd.DataFrame, main_facts: list[int], setting: str, metrics: MetricsTable) -> None:
    """S0.others-robust at the anisotropy sweep's d: stored fraction and cost ratio W(kappa) / W(1)
    at every F of main_facts (GD's are checked; the encoder-decoder's are checked at d = 128,
    robust_regime_metrics, and reported here)."""
    ran = [f for f in main_facts if {"gd_gated", "ed_gated"} <= set(main[main.F == f].method)]
    metrics.add("robust_n_facts", len(ran), f"number of F at which both GD and the encoder-decoder ran the sweep: {ran}")
    _cost_ratio_metrics(main, ROBUST_METRICS, setting, metrics)
    ceiling = encoder_decoder_ceiling(main)
    if not math.isnan(ceiling):
        metrics.add("robust_cost_ceiling_ed_gated", ceiling,
                    f"min over F of W(m = d = {int(main.d.iloc[0])}) / W(kappa = 1): the largest cost ratio the gated "
                    "encoder-decoder can show (its code size m <= d; a value set needing more shows as not stored)")


def robust_regime_metrics(table: pd.DataFrame, metrics: MetricsTable) -> None:
    """S0.others-robust for the encoder-decoder in the paper's regime (the robust_regime sweep,
    d = 128), each family of singular values: stored fraction, the cost ratio and its band
    (_cost_ratio_metrics) and the cost-law metrics (law_metrics); the code-size ceiling from
    kappa = 1, one value set in every family."""
    if table.empty:
        return
    d = int(table.d.iloc[0])
    facts = sorted(int(f) for f in table[table.method == "ed_gated"].F.unique())
    metrics.add("robust_regime_n_facts", len(facts), f"number of F at which the gated encoder-decoder ran the d = {d} sweep")
    present = families(table)
    isotropic = table[table.spectrum == present[0]] if present else table
    metrics.add("robust_regime_cost_ceiling_ed_gated", encoder_decoder_ceiling(isotropic),
                f"min over F of W(m = d = {d}) / W(kappa = 1): the largest cost ratio the gated encoder-decoder can show "
                "at this d before a value set shows as not stored (NaN: it did not store kappa = 1)")
    for family in present:
        rows = table[table.spectrum == family]
        setting = (f"{family} values, d = {d}, F in {facts}, target {rows.target.iloc[0]:g}, "
                   f"kappa in {[float(k) for k in sorted(rows.kappa.unique())]}")
        names = {}
        for method in sorted(rows.method.unique()):
            if (method, family) in ROBUST_REGIME_METRICS:
                names[method] = ROBUST_REGIME_METRICS[method, family]
            else:
                missing_names("robust_regime", (method, family))
        _cost_ratio_metrics(rows, names, setting, metrics)
        law_metrics(rows, family, metrics, int(rows.F.max()))


def _cost_ratio_metrics(table: pd.DataFrame, names: dict[str, tuple[str, str, str]], setting: str,
                        metrics: MetricsTable) -> None:
    """Per method of `names`: the fraction of (F, kappa, seed) stored, the largest cost ratio
    W(kappa) / W(kappa = 1) of the seed means over F and kappa (inf if some (F, kappa) failed), and
    that ratio over EARLIER_COST_BAND (at most 1 inside the band; S0.others-robust's alternative)."""
    means = seed_means(table, ["method", "F", "kappa"])
    for method, (fraction_name, cost_name, band_name) in names.items():
        rows = means[means.method == method]
        if rows.empty:
            continue
        metrics.add(fraction_name, table[table.method == method].stored.mean(), f"fraction of (F, kappa, seed) stored; {setting}")
        ratios = []
        for _, group in rows.groupby("F"):
            by = group.set_index("kappa").n_params
            ratios.append((by / by.get(1.0, math.nan)).max() if group.stored.all() else math.inf)
        metrics.add(cost_name, max(ratios), "max over F and kappa of mean W(kappa) / W(kappa = 1) at that F "
                                            f"(inf if some (F, kappa) failed in a seed); {setting}")
        metrics.add(band_name, max(ratios) / EARLIER_COST_BAND,
                    f"that ratio over the earlier fixed band {EARLIER_COST_BAND:g} (at most 1: within it)")


def encoder_decoder_ceiling(table: pd.DataFrame) -> float:
    """min over F of W(m = d) / W(kappa = 1) of the gated encoder-decoder: the code size m <= d caps
    its cost ratio W(kappa) / W(1) at this (NaN where kappa = 1 did not store)."""
    means = seed_means(table, ["method", "F", "kappa"])
    ed = means[(means.method == "ed_gated") & (means.kappa == 1.0) & means.stored]
    if ed.empty:
        return math.nan
    d = int(table.d.iloc[0])
    return min(gated_parameter_count(int(r.F), d, d, d) / r.n_params for r in ed.itertuples())
