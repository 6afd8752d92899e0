"""The paper's anisotropy cost law W ~ F log F / rho(V)^2 on a kappa sweep, and its break kappa.

rho(V) is the values' decodability (column `rho`); the law is read on each family of singular
values (column `spectrum`): law_exponent_<method>_<family> (the exponent of W on 1/rho^2 at
fixed F, scaling.rho_law_fit), law_break_kappa_<method>_<family> (law_break_kappa) and
law_cost_ratio_<method>_<family> (law_cost_ratio), every name written out in LAW_METRICS.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.scaling import rho_law_fit
from factstore.mlp.summary_common import RenamedMetrics, missing_names

LAW_TOLERANCE_SD = 2.0
"""The law's budget in law_break_kappa is widened by this many standard deviations of the kappa = 1
seeds' log(W rho^2) (a prediction interval for one seed): the spread the law cannot tell from its
own scaling."""
# (method, family) -> names of the cost-law metrics: the exponent of W on 1/rho(V)^2 at fixed F
# (scaling.rho_law_fit), the break of law_break_kappa, and law_cost_ratio.
LAW_METRICS = {
    ("ntk", "geometric"): ("law_exponent_ntk_geometric", "law_break_kappa_ntk_geometric", "law_cost_ratio_ntk_geometric"),
    ("ntk", "linspace"): ("law_exponent_ntk_linspace", "law_break_kappa_ntk_linspace", "law_cost_ratio_ntk_linspace"),
    ("ntk_ustar", "geometric"): ("law_exponent_ntk_ustar_geometric", "law_break_kappa_ntk_ustar_geometric",
                                 "law_cost_ratio_ntk_ustar_geometric"),
    ("ntk_ustar", "linspace"): ("law_exponent_ntk_ustar_linspace", "law_break_kappa_ntk_ustar_linspace",
                                "law_cost_ratio_ntk_ustar_linspace"),
    ("ed_gated", "geometric"): ("law_exponent_ed_gated_geometric", "law_break_kappa_ed_gated_geometric",
                                "law_cost_ratio_ed_gated_geometric"),
    ("ed_gated", "linspace"): ("law_exponent_ed_gated_linspace", "law_break_kappa_ed_gated_linspace",
                               "law_cost_ratio_ed_gated_linspace"),
    ("ed_gated_v", "geometric"): ("law_exponent_ed_gated_v_geometric", "law_break_kappa_ed_gated_v_geometric",
                                  "law_cost_ratio_ed_gated_v_geometric"),
    ("ed_gated_v", "linspace"): ("law_exponent_ed_gated_v_linspace", "law_break_kappa_ed_gated_v_linspace",
                                 "law_cost_ratio_ed_gated_v_linspace"),
    ("ed_plain", "geometric"): ("law_exponent_ed_plain_geometric", "law_break_kappa_ed_plain_geometric",
                                "law_cost_ratio_ed_plain_geometric"),
    ("ed_plain", "linspace"): ("law_exponent_ed_plain_linspace", "law_break_kappa_ed_plain_linspace",
                               "law_cost_ratio_ed_plain_linspace"),
    ("gd_gated", "geometric"): ("law_exponent_gd_gated_geometric", "law_break_kappa_gd_gated_geometric",
                                "law_cost_ratio_gd_gated_geometric"),
    ("gd_gated", "linspace"): ("law_exponent_gd_gated_linspace", "law_break_kappa_gd_gated_linspace",
                               "law_cost_ratio_gd_gated_linspace"),
    ("gd_plain", "geometric"): ("law_exponent_gd_plain_geometric", "law_break_kappa_gd_plain_geometric",
                                "law_cost_ratio_gd_plain_geometric"),
    ("gd_plain", "linspace"): ("law_exponent_gd_plain_linspace", "law_break_kappa_gd_plain_linspace",
                               "law_cost_ratio_gd_plain_linspace"),
}
# (NTK method, family) -> names of the law break's declared alternatives: without the seeds'
# spread (the law's prediction itself), and at the sweep's next smaller F.
LAW_BREAK_ALTERNATIVE_METRICS = {
    ("ntk", "geometric"): ("law_break_kappa_ntk_geometric_no_tolerance", "law_break_kappa_ntk_geometric_smaller_f"),
    ("ntk", "linspace"): ("law_break_kappa_ntk_linspace_no_tolerance", "law_break_kappa_ntk_linspace_smaller_f"),
    ("ntk_ustar", "geometric"): ("law_break_kappa_ntk_ustar_geometric_no_tolerance",
                                 "law_break_kappa_ntk_ustar_geometric_smaller_f"),
    ("ntk_ustar", "linspace"): ("law_break_kappa_ntk_ustar_linspace_no_tolerance",
                                "law_break_kappa_ntk_ustar_linspace_smaller_f"),
}


def law_normalised_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (F, kappa) of one method's kappa sweep (one family): the seed mean of W rho(V)^2 over the
    same at kappa = 1 and that F (the cost normalised by the paper's law W ~ F log F / rho^2, which
    keeps it at 1), over the seeds that stored; `stored` where every seed did (the ratio of the
    seeds that stored otherwise, NaN where none did or kappa = 1 did not store in every seed);
    rho the seed mean of rho(V). Columns F, kappa, ratio, stored, rho."""
    cost = rows.n_params * rows.rho**2
    grouped = rows.assign(cost=cost).groupby(["F", "kappa"])
    per = grouped.agg(cost=("cost", "mean"), stored=("stored", "all"), rho=("rho", "mean")).reset_index()
    reference = per[per.kappa == 1.0].set_index("F")
    valid = reference.cost.where(reference.stored)
    per["ratio"] = per.cost / per.F.map(valid)
    return per[["F", "kappa", "ratio", "stored", "rho"]]


def law_cost_ratio(rows: pd.DataFrame) -> float:
    """max over (F, kappa) of law_normalised_costs' ratio: at most 1 where the cost never grows past
    the law's prediction from kappa = 1; inf where some (F, kappa) did not store in every seed, NaN
    where kappa = 1 did not."""
    per = law_normalised_costs(rows)
    if per[per.kappa == 1.0].empty or not per[per.kappa == 1.0].stored.all():
        return math.nan
    return float(per.ratio.max()) if per.stored.all() else math.inf


def law_break_kappa(rows: pd.DataFrame, tolerance_sd: float = LAW_TOLERANCE_SD) -> tuple[float, float, float]:
    """(break kappa, the budget's tolerance factor, the seed-mean rho(V) at the break) of one method
    at one F on one family: the smallest kappa above 1 where at most half the seeds store within the paper's
    cost law from the method's own kappa = 1 cost, W rho(V)^2 <= exp(m + tolerance_sd s sqrt(1 + 1/n))
    with m and s the mean and standard deviation over the n kappa = 1 seeds of log(W rho^2) (each
    value set's own rho(V); s = 0 with one seed): a prediction interval for one seed's cost under
    the law, so a seed leaves it when its cost grows faster than 1/rho^2 by more than the spread of
    the kappa = 1 seeds, or when it does not store within the width cap. NaN break when every kappa
    stays within, all NaN when kappa = 1 does not store in every seed."""
    isotropic = rows[rows.kappa == 1.0]
    if isotropic.empty or not isotropic.stored.all():
        return math.nan, math.nan, math.nan
    log_cost = np.log(isotropic.n_params.to_numpy(float) * isotropic.rho.to_numpy(float) ** 2)
    n = len(log_cost)
    spread = float(np.std(log_cost, ddof=1)) * math.sqrt(1 + 1 / n) if n >= 2 else 0.0
    ceiling = float(log_cost.mean()) + tolerance_sd * spread
    with np.errstate(invalid="ignore", divide="ignore"):
        log_rows = np.log(rows.n_params.to_numpy(float) * rows.rho.to_numpy(float) ** 2)
    within = pd.Series(rows.stored.to_numpy(bool) & (log_rows <= ceiling), index=rows.index)
    per_kappa = within.groupby(rows.kappa).mean()
    failing = per_kappa[(per_kappa <= 0.5) & (per_kappa.index > 1.0)]  # kappa = 1 is the law's reference, not a test
    if failing.empty:
        return math.nan, math.exp(tolerance_sd * spread), math.nan
    kappa = float(failing.index.min())
    return kappa, math.exp(tolerance_sd * spread), float(rows[rows.kappa == kappa].rho.mean())


def law_metrics(table: pd.DataFrame, family: str, metrics: MetricsTable | RenamedMetrics, break_facts: int,
                alternatives: bool = False) -> None:
    """The paper's cost law W ~ F log F / rho(V)^2 on one family's kappa sweep (the best NTK degree per
    setting already chosen), per method (names: LAW_METRICS): the exponent of W on 1/rho^2 at fixed
    F over every stored (F, kappa, seed) with its standard error (scaling.rho_law_fit; S0.others-
    robust reads it: at most 1), the break at F = break_facts (law_break_kappa; S0.ntk-anisotropy-
    breaks reads it) and law_cost_ratio. alternatives: also the break without the seeds' spread and
    at the next smaller F (LAW_BREAK_ALTERNATIVE_METRICS, the NTK methods)."""
    if table.empty:
        return
    setting = (f"{family} values, d = {int(table.d.iloc[0])}, F in {sorted(int(f) for f in table.F.unique())}, "
               f"target {table.target.iloc[0]:g}, kappa in {[float(k) for k in sorted(table.kappa.unique())]}")
    for method, rows in table.groupby("method"):
        if (method, family) not in LAW_METRICS:
            missing_names("cost-law", (method, family))
            continue
        exponent_name, break_name, cost_name = LAW_METRICS[method, family]
        stored = rows[rows.stored]
        fit = rho_law_fit(stored.F, stored.n_params, stored.rho)
        metrics.add(exponent_name, fit.exponent,
                    f"exponent g of W on 1/rho(V)^2 at fixed F (log W = a_F + g log(1/rho^2), one intercept per F) over "
                    f"{fit.n_points} stored (F, kappa, seed) of {len(rows)}, standard error from the fit; the law W ~ F log F "
                    f"/ rho^2 has g = 1; rho(V) spans up to {fit.rho_span:.3g}x within an F; the single-regressor slope of "
                    f"log W on log(F log2 F / rho^2): {fit.slope:.3g} (SE {fit.slope_se:.2g}); {setting}",
                    fit.exponent_se)
        at_break = rows[rows.F == break_facts]
        kappa, factor, rho_at = law_break_kappa(at_break)
        costs = law_normalised_costs(at_break)
        listing = ", ".join(f"{r.kappa:g}: {r.ratio:.3g}" + ("" if r.stored else " (not every seed stored)")
                            for r in costs.itertuples())
        metrics.add(break_name, kappa,
                    f"smallest kappa where {METHODS[method].label} stores within the law's budget W rho(V)^2 <= its kappa "
                    f"= 1 seed mean x {factor:.4g} ({LAW_TOLERANCE_SD:g} SD of the kappa = 1 seeds' log(W rho^2)) in at most "
                    f"half the seeds, F = {break_facts} (NaN: within the law up to the top of the sweep, or kappa = 1 not "
                    f"stored); rho(V) there {rho_at:.3g}; seed-mean W rho^2 over its kappa = 1 value per kappa: {listing}; {setting}")
        metrics.add(cost_name, law_cost_ratio(rows),
                    "max over (F, kappa) of the seed mean of W rho(V)^2 over its kappa = 1 value at that F (at most 1: never "
                    f"above the law's prediction; inf if some (F, kappa) failed in a seed); {setting}")
        if alternatives and (method, family) in LAW_BREAK_ALTERNATIVE_METRICS:
            exact_name, smaller_name = LAW_BREAK_ALTERNATIVE_METRICS[method, family]
            metrics.add(exact_name, law_break_kappa(at_break, 0.0)[0],
                        f"the break of {break_name} within the law's prediction itself (no tolerance), F = {break_facts}")
            smaller = sorted(int(f) for f in rows.F.unique() if f < break_facts)
            if smaller:
                metrics.add(smaller_name, law_break_kappa(rows[rows.F == smaller[-1]])[0],
                            f"the break of {break_name} read at the next smaller F = {smaller[-1]} (not {break_facts})")
