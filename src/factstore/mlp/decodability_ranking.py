"""S0.rho-predicts: whether the values' decodability rho(V) ranks capacity across a kappa sweep,
Spearman(rho(V), F / W) per method, and the range of rho it ranks (rho_range_ratio).
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.summary_common import missing_names
from factstore.statistics import spearman

# method -> name of Spearman(rho(V), F / W) across the anisotropy sweep's value sets.
RHO_SPEARMAN_METRICS = {
    "ed_gated": "rho_spearman_ed_gated", "ed_gated_v": "rho_spearman_ed_gated_v", "ed_plain": "rho_spearman_ed_plain",
    "gd_gated": "rho_spearman_gd_gated", "gd_plain": "rho_spearman_gd_plain", "ntk": "rho_spearman_ntk",
    "ntk_ustar": "rho_spearman_ntk_ustar",
}
# method -> name of max rho / min rho over the per-kappa means its rho Spearman ranks (S0.rho-predicts' gate).
RHO_RANGE_METRICS = {
    "ed_gated": "rho_range_ratio_ed_gated", "ed_gated_v": "rho_range_ratio_ed_gated_v", "ed_plain": "rho_range_ratio_ed_plain",
    "gd_gated": "rho_range_ratio_gd_gated", "gd_plain": "rho_range_ratio_gd_plain", "ntk": "rho_range_ratio_ntk",
    "ntk_ustar": "rho_range_ratio_ntk_ustar",
}


def rho_range_ratio(rho: pd.Series) -> float:
    """max rho / min rho over the value sets a rho Spearman ranks (NaN with none, or a rho <= 0).

    Under the construction's cost law W ~ F log F / rho^2, the value sets' F / W spread over this
    ratio squared: the width of the range that the Spearman has to rank against measurement noise."""
    rho = pd.Series(rho, dtype=float).dropna()
    if rho.empty or rho.min() <= 0:
        return math.nan
    return float(rho.max() / rho.min())


def rho_metrics(table: pd.DataFrame, d: int, setting: str, metrics: MetricsTable) -> None:
    """S0.rho-predicts: Spearman(rho(V), F / W) over per-kappa means (seeds averaged first), leaving
    out the value sets where a seed did not store or (encoder-decoder) sat at its code-size cap m = d."""
    for method, rows in table.groupby("method"):
        if method not in RHO_SPEARMAN_METRICS:
            missing_names("rho Spearman", method)
            continue
        capped_by_output_dim = METHODS[method].search.capped_by_output_dim
        capped = ~rows.stored | ((rows.width >= d) if capped_by_output_dim else False)
        per_kappa = rows.assign(capped=capped).groupby("kappa").agg(
            rho=("rho", "mean"), facts_per_parameter=("facts_per_parameter", "mean"), capped=("capped", "any"))
        kept = per_kappa[~per_kappa.capped]
        metrics.add(RHO_SPEARMAN_METRICS[method], spearman(kept.rho, kept.facts_per_parameter) if len(kept) >= 3 else math.nan,
                    f"Spearman(rho(V), F / W) over {len(kept)} per-kappa means (seeds averaged first), leaving out "
                    f"{int(per_kappa.capped.sum())} kappa where a seed did not store"
                    + (" or sat at the code-size cap m = d" if capped_by_output_dim else "") + f" (NaN below 3); {setting}")
        if method in RHO_RANGE_METRICS:
            # below 3 kept value sets the Spearman is NaN, a FAIL of the method (too few value sets
            # stored below the cap), not of the range: the range then reads every value set of the sweep
            ranked = kept if len(kept) >= 3 else per_kappa
            metrics.add(RHO_RANGE_METRICS[method], rho_range_ratio(ranked.rho),
                        f"max rho(V) / min rho(V) over the {len(ranked)} per-kappa means "
                        + ("that Spearman ranks" if len(kept) >= 3 else "of the sweep (fewer than 3 ranked)")
                        + f" (rho {ranked.rho.min():.3g} to {ranked.rho.max():.3g}); {setting}")
        if method == "ed_gated":
            metrics.add("ed_code_cap_fraction_ed_gated", capped.mean(),
                        f"fraction of (kappa, seed) where the gated encoder-decoder sits at its code-size cap m = d = {d} "
                        f"or does not store; {setting}")
            metrics.add("rho_spearman_ed_gated_with_capped", spearman(per_kappa.rho, per_kappa.facts_per_parameter),
                        "the same Spearman over every kappa, capped ones included (F / W = 0 where not stored): "
                        "whether the capped points drive it")
            metrics.add("rho_range_ratio_ed_gated_with_capped", rho_range_ratio(per_kappa.rho),
                        "max rho(V) / min rho(V) over every kappa, capped ones included")
