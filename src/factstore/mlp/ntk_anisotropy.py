"""The NTK's break under anisotropic values and the U* gain (S0.ntk-anisotropy-breaks' earlier
readings and declared alternatives, S0.ntk-ustar-gain) on one kappa sweep: the smallest kappa where
the NTK (or NTK + U*) stops storing within its width cap or within a fixed parameter budget, and
W(ntk) / W(ntk_ustar) over the sweep. The checked break reads the cost law (anisotropy_cost_law).
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.results import ustar_capacity_ratios, ustar_gains
from factstore.mlp.summary_common import RenamedMetrics, families

# NTK method -> names of its break kappa and of its stored fraction at kappa = 1.
BREAK_METRICS = {"ntk": ("ntk_break_kappa", "ntk_stored_fraction_kappa1"),
                 "ntk_ustar": ("ntk_ustar_break_kappa", "ntk_ustar_stored_fraction_kappa1")}
# NTK method -> name of its break kappa at a fixed parameter budget (a multiple of its kappa = 1 cost).
BUDGET_BREAK_METRICS = {"ntk": "ntk_break_kappa_budget", "ntk_ustar": "ntk_ustar_break_kappa_budget"}
ALTERNATIVE_BREAK_WIDTH_BUDGET = 3.0
"""S0.ntk-anisotropy-breaks' declared alternative budget: the break within 3x (not 2x) the kappa = 1 cost."""
# NTK method -> names of S0.ntk-anisotropy-breaks' alternatives that the d = 128 sweep's rows answer
# (_break_alternative_metrics): its break within ALTERNATIVE_BREAK_WIDTH_BUDGET x its kappa = 1 cost at
# the break F, and its stored fraction at kappa = 1 and its break (the main budget) at the next smaller F.
BREAK_ALTERNATIVE_METRICS = {
    "ntk": ("ntk_break_kappa_budget_3x", "ntk_stored_fraction_kappa1_smaller_f", "ntk_break_kappa_budget_smaller_f"),
    "ntk_ustar": ("ntk_ustar_break_kappa_budget_3x", "ntk_ustar_stored_fraction_kappa1_smaller_f",
                  "ntk_ustar_break_kappa_budget_smaller_f"),
}


def budget_break_kappa(rows: pd.DataFrame, budget_multiple: float) -> tuple[float, float]:
    """(break kappa, budget W) of one method at one F: the smallest kappa where at most half the
    seeds store within budget_multiple x the seed-mean W at kappa = 1 (a fixed parameter budget,
    so a cost that grows 3x over the sweep shows as a break, which a generous width cap hides);
    NaN break when it stays within budget up to the top of the sweep, NaN budget (and break) when
    kappa = 1 does not store in every seed."""
    isotropic = rows[rows.kappa == 1.0]
    if isotropic.empty or not isotropic.stored.all():
        return math.nan, math.nan
    budget = budget_multiple * float(isotropic.n_params.mean())
    within = (rows.stored & (rows.n_params <= budget)).groupby(rows.kappa).mean()
    failing = within[within <= 0.5]
    return (float(failing.index.min()) if len(failing) else math.nan), budget


def ntk_anisotropy_metrics(table: pd.DataFrame, break_facts: int, metrics: MetricsTable | RenamedMetrics,
                           budget_multiple: float = 2.0, alternatives: bool = False) -> None:
    """S0.ntk-anisotropy-breaks and S0.ntk-ustar-gain of one kappa sweep (the best NTK degree per
    setting already chosen): the NTK's and NTK + U*'s break at F = break_facts (at the width cap and
    at a fixed budget, budget_break_kappa) and the U* gain over every (kappa > 1, F). alternatives:
    also the break's declared alternatives (_break_alternative_metrics; the checked sweep only)."""
    at_break = table[(table.F == break_facts) & table.method.isin(list(BREAK_METRICS))]
    if at_break.empty:
        return
    setting = (f"d = {int(at_break.d.iloc[0])}, target {at_break.target.iloc[0]:g}, "
               f"kappa in {[float(k) for k in sorted(at_break.kappa.unique())]}"
               + "".join(f", {family} values" for family in families(at_break)))
    # The NTK's (and NTK + U*'s) earlier breaks: smallest kappa where it fails in at least half the
    # seeds (within the width cap, within a fixed budget); S0.ntk-anisotropy-breaks reads law_metrics.
    for method, (break_name, kappa1_name) in BREAK_METRICS.items():
        rows = at_break[at_break.method == method]
        if rows.empty:
            continue
        per_kappa = rows.groupby("kappa").stored.mean()
        failing = per_kappa[per_kappa <= 0.5]
        metrics.add(break_name, failing.index.min() if len(failing) else math.nan,
                    f"smallest kappa where {METHODS[method].label} fails to store in >= half the seeds (within its width cap; "
                    f"NaN: stores up to the top of the sweep); F = {break_facts}, {setting}")
        metrics.add(kappa1_name, per_kappa.get(1.0, math.nan),
                    f"fraction of seeds stored by {METHODS[method].label} at kappa = 1; F = {break_facts}")
        kappa, budget = budget_break_kappa(rows, budget_multiple)
        metrics.add(BUDGET_BREAK_METRICS[method], kappa,
                    f"smallest kappa where {METHODS[method].label} stores within a fixed budget of {budget_multiple:g} x its "
                    f"kappa = 1 cost (W <= {budget:.4g}) in at most half the seeds (NaN: within budget up to the top of the "
                    f"sweep, or kappa = 1 not stored); F = {break_facts}, {setting}")
        if alternatives:
            _break_alternative_metrics(table[table.method == method], method, break_facts, metrics, budget_multiple)
    if "ntk" in set(at_break.method):
        best = at_break[at_break.method == "ntk"].groupby("kappa").best_accuracy.mean()
        metrics.add("ntk_best_accuracy_max_kappa", best.iloc[-1],
                    f"mean best accuracy of the NTK within its width cap at kappa = {best.index[-1]:g}, F = {break_facts}")
    _ustar_gain_metrics(table, metrics)


def _break_alternative_metrics(rows: pd.DataFrame, method: str, break_facts: int, metrics: MetricsTable,
                               budget_multiple: float) -> None:
    """S0.ntk-anisotropy-breaks' declared alternatives that one NTK method's rows of the sweep answer
    (names: BREAK_ALTERNATIVE_METRICS), each read as its check reads the main sweep: the break at
    F = break_facts within ALTERNATIVE_BREAK_WIDTH_BUDGET x the kappa = 1 cost, and the fraction of
    seeds stored at kappa = 1 and the break within budget_multiple x at the sweep's next smaller F
    (none when the sweep has no smaller F)."""
    budget_name, kappa1_name, smaller_name = BREAK_ALTERNATIVE_METRICS[method]
    label = METHODS[method].label
    kappa, budget = budget_break_kappa(rows[rows.F == break_facts], ALTERNATIVE_BREAK_WIDTH_BUDGET)
    metrics.add(budget_name, kappa,
                f"the break of {BUDGET_BREAK_METRICS[method]} within {ALTERNATIVE_BREAK_WIDTH_BUDGET:g} x (not "
                f"{budget_multiple:g} x) {label}'s kappa = 1 cost (W <= {budget:.4g}); F = {break_facts}")
    smaller = sorted(int(f) for f in rows.F.unique() if f < break_facts)
    if not smaller:
        return
    at_smaller = rows[rows.F == smaller[-1]]
    metrics.add(kappa1_name, at_smaller.groupby("kappa").stored.mean().get(1.0, math.nan),
                f"fraction of seeds stored by {label} at kappa = 1 at the next smaller F = {smaller[-1]} (not {break_facts})")
    kappa, budget = budget_break_kappa(at_smaller, budget_multiple)
    metrics.add(smaller_name, kappa,
                f"the break of {BUDGET_BREAK_METRICS[method]} (within {budget_multiple:g} x the kappa = 1 cost, W <= "
                f"{budget:.4g}) read at the next smaller F = {smaller[-1]} (not {break_facts})")


def _ustar_gain_metrics(table: pd.DataFrame, metrics: MetricsTable | RenamedMetrics) -> None:
    """S0.ntk-ustar-gain over every (kappa > 1, F) of the sweep, U*-only settings as lower bounds."""
    gains = ustar_gains(table)
    if gains.empty:
        return
    anisotropic = gains[gains.kappa > 1]
    kinds = anisotropic.kind.value_counts()
    listing = ", ".join(f"kappa {r.kappa:g} F {r.F}: {r.gain:.2f}{'' if r.kind == 'exact' else ' (' + r.kind + ')'}"
                        for r in anisotropic.itertuples())
    counts = (f"{kinds.get('exact', 0)} settings where both store, {kinds.get('lower', 0)} where only NTK + U* stores "
              f"(lower bounds W_cap(ntk) / W(ntk_ustar)), {kinds.get('upper', 0)} where only the NTK stores (upper bounds, <= 1)")
    metrics.add("ustar_gain_median", anisotropic.gain.median() if len(anisotropic) else math.nan,
                f"median over (kappa > 1, F) of W(ntk) / W(ntk_ustar), bounds at their values: a lower bound on the median "
                f"gain; {counts}: {listing}")
    upper = anisotropic.gain.where(anisotropic.kind != "lower", math.inf)
    metrics.add("ustar_gain_median_upper", upper.median() if len(upper) else math.nan,
                "the same median with every U*-only setting at +inf: an upper bound on the median gain (inf when half "
                "or more of the settings are U*-only: the width cap cannot bound it)")
    exact = anisotropic[anisotropic.kind == "exact"]
    metrics.add("ustar_gain_median_both_store", exact.gain.median() if len(exact) else math.nan,
                "the median over the settings where both store only (U*-only settings left out)")
    isotropic = gains[(gains.kappa == 1) & (gains.kind == "exact")]
    metrics.add("ustar_gain_kappa1", isotropic.gain.median() if len(isotropic) else math.nan,
                "the same ratio on spherical values (kappa = 1), where both store")
    metrics.add("ustar_stores_where_ntk_fails", int(kinds.get("lower", 0)),
                f"(kappa > 1, F) stored by NTK + U* but not by the NTK, of {len(anisotropic)} with a gain")
    ratios = ustar_capacity_ratios(table)
    anisotropic_ratios = ratios[ratios.kappa > 1]
    if len(anisotropic_ratios):
        listing = ", ".join(f"kappa {r.kappa:g}: F {r.F_ustar:.0f} / {r.F_ntk} at W = {r.W:.3g} ({r.kind})"
                            for r in anisotropic_ratios.itertuples())
        metrics.add("ustar_capacity_ratio_median", anisotropic_ratios.ratio.median(),
                    "median over kappa > 1 of the U* gain as a capacity ratio at fixed W: F(ntk_ustar) / F(ntk) at the "
                    "NTK's W for the largest F it stores, F(ntk_ustar) on its log-log W(F) line (reported beside "
                    f"ustar_gain_median, a parameter ratio at fixed F): {listing}")
