"""The capacity sweep's metrics: the fits W = C F (log2 F + b) per (method, target), bits and facts
per parameter at the largest F, the encoder-decoder's and GD's exponents (S0.ed-matches-gd-
asymptotics), GD's cost advantage (S0.gd-cheapest), the NTK's cost over the encoder-decoder
(S0.ntk-costlier) and the fraction the NTK stores per Hermite degree (S0.ntk-stores).

Tables in (the search tables of factstore.mlp.results, the best NTK degree per setting already
chosen where noted), metric rows out; every name is written out in the tables below.
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.results import seed_means
from factstore.mlp.scaling import fit_f_log_f, random_map_bits
from factstore.mlp.summary_common import missing_names

ASYMPTOTIC_F_OVER_D = 32
"""S0.ed-matches-gd-asymptotics compares exponents over F / d >= this (the paper's asymptotic regime)."""
# NTK Hermite degree -> name of the fraction of (F, seed) it stores at 100% within the width cap:
# in the paper's regime (the ntk_regime sweep, d = 128: S0.ntk-stores) and in the capacity sweep
# (its small d, reported).
NTK_STORES_METRICS = {1: "ntk_stores_fraction_degree1", 2: "ntk_stores_fraction_degree2"}
NTK_STORES_METRICS_CAPACITY_SWEEP = {1: "ntk_stores_fraction_degree1_capacity_sweep",
                                     2: "ntk_stores_fraction_degree2_capacity_sweep"}
# (method, target) -> names of C, b and the log-log exponent of the fit W = C F (log2 F + b).
FIT_METRICS = {
    ("ed_gated", 0.99): ("fit_C_ed_gated_t0.99", "fit_b_ed_gated_t0.99", "exponent_ed_gated_t0.99"),
    ("ed_gated", 1.0): ("fit_C_ed_gated_t1", "fit_b_ed_gated_t1", "exponent_ed_gated_t1"),
    ("ed_gated_v", 0.99): ("fit_C_ed_gated_v_t0.99", "fit_b_ed_gated_v_t0.99", "exponent_ed_gated_v_t0.99"),
    ("ed_gated_v", 1.0): ("fit_C_ed_gated_v_t1", "fit_b_ed_gated_v_t1", "exponent_ed_gated_v_t1"),
    ("ed_plain", 0.99): ("fit_C_ed_plain_t0.99", "fit_b_ed_plain_t0.99", "exponent_ed_plain_t0.99"),
    ("ed_plain", 1.0): ("fit_C_ed_plain_t1", "fit_b_ed_plain_t1", "exponent_ed_plain_t1"),
    ("gd_gated", 0.99): ("fit_C_gd_gated_t0.99", "fit_b_gd_gated_t0.99", "exponent_gd_gated_t0.99"),
    ("gd_gated", 1.0): ("fit_C_gd_gated_t1", "fit_b_gd_gated_t1", "exponent_gd_gated_t1"),
    ("gd_plain", 0.99): ("fit_C_gd_plain_t0.99", "fit_b_gd_plain_t0.99", "exponent_gd_plain_t0.99"),
    ("gd_plain", 1.0): ("fit_C_gd_plain_t1", "fit_b_gd_plain_t1", "exponent_gd_plain_t1"),
    ("ntk", 0.99): ("fit_C_ntk_t0.99", "fit_b_ntk_t0.99", "exponent_ntk_t0.99"),
    ("ntk", 1.0): ("fit_C_ntk_t1", "fit_b_ntk_t1", "exponent_ntk_t1"),
    ("ntk_ustar", 0.99): ("fit_C_ntk_ustar_t0.99", "fit_b_ntk_ustar_t0.99", "exponent_ntk_ustar_t0.99"),
    ("ntk_ustar", 1.0): ("fit_C_ntk_ustar_t1", "fit_b_ntk_ustar_t1", "exponent_ntk_ustar_t1"),
}
# method -> names of F log2 F / W and F / W at the largest F and the main target.
PER_PARAMETER_METRICS = {
    "ed_gated": ("bits_per_parameter_ed_gated", "facts_per_parameter_ed_gated"),
    "ed_gated_v": ("bits_per_parameter_ed_gated_v", "facts_per_parameter_ed_gated_v"),
    "ed_plain": ("bits_per_parameter_ed_plain", "facts_per_parameter_ed_plain"),
    "gd_gated": ("bits_per_parameter_gd_gated", "facts_per_parameter_gd_gated"),
    "gd_plain": ("bits_per_parameter_gd_plain", "facts_per_parameter_gd_plain"),
    "ntk": ("bits_per_parameter_ntk", "facts_per_parameter_ntk"),
    "ntk_ustar": ("bits_per_parameter_ntk_ustar", "facts_per_parameter_ntk_ustar"),
}


def fits_table(capacity_table: pd.DataFrame) -> pd.DataFrame:
    """One fit of W = C F (log2 F + b) per (method, target) over the seed-mean W of stored F."""
    rows = []
    means = seed_means(capacity_table, ["method", "target", "F"])
    for (method, target), group in means.groupby(["method", "target"]):
        stored = group[group.stored]
        fit = fit_f_log_f(stored.F, stored.n_params)
        rows.append({"method": method, "target": target, "n_points": len(stored), **fit})
    return pd.DataFrame(rows, columns=["method", "target", "n_points", "C", "b", "r2", "exponent"])


def capacity_metrics(table: pd.DataFrame, fits: pd.DataFrame, main_target: float, params: dict,
                      metrics: MetricsTable) -> None:
    if table.empty:
        return
    means = seed_means(table, ["method", "target", "F"])
    largest_f = int(table.F.max())
    detail = f"d = {int(table.d.iloc[0])}, spherical facts, mean over {table.replicate.nunique()} seeds"
    for row in fits.itertuples():
        if (row.method, row.target) not in FIT_METRICS:
            missing_names("fit", (row.method, row.target))
            continue
        c_name, b_name, exponent_name = FIT_METRICS[row.method, row.target]
        metrics.add(c_name, row.C, f"W = C F (log2 F + b), {row.n_points} F values, {detail}")
        metrics.add(b_name, row.b, f"r2 of W/F vs log2 F = {row.r2:.3g}")
        metrics.add(exponent_name, row.exponent, "log-log slope of W against F")
    at_largest = means[(means.F == largest_f) & (means.target == main_target)]
    for row in at_largest.itertuples():
        if row.method not in PER_PARAMETER_METRICS:
            missing_names("per-parameter", row.method)
            continue
        bits_name, facts_name = PER_PARAMETER_METRICS[row.method]
        bits = float(random_map_bits(largest_f)) / row.n_params if row.stored else 0.0
        metrics.add(bits_name, bits, f"F log2 F / W at F = {largest_f}, accuracy >= {main_target:g}, {detail}"
                    + ("" if row.stored else "; not stored within the cap"))
        metrics.add(facts_name, largest_f / row.n_params if row.stored else 0.0,
                    f"F / W at F = {largest_f}, accuracy >= {main_target:g}")
    # S0.ntk-stores, the best degree per setting (every degree: ntk_degree_metrics).
    ntk_full = table[(table.method == "ntk") & (table.target == 1.0)]
    if len(ntk_full):
        metrics.add("ntk_stores_fraction", ntk_full.stored.mean(),
                    f"fraction of (F, seed) where the best-degree NTK MLP stores 100% within "
                    f"{params['search']['ntk_max_width']} units; F <= {largest_f}, d = {int(ntk_full.d.iloc[0])}")
    # S0.ed-matches-gd-asymptotics: log-log exponents over all F (reported) and over F / d >= 32 (checked).
    gaps = []
    for _, group in fits.groupby("target"):
        exponents = dict(zip(group.method, group.exponent))
        if {"ed_gated", "gd_gated"} <= set(exponents):
            gaps.append(abs(exponents["ed_gated"] - exponents["gd_gated"]))
    if gaps:
        metrics.add("exponent_gap_ed_gd", max(gaps),
                    "max over targets of |exponent(ed_gated) - exponent(gd_gated)|, log-log slope of W vs F over all F")
    pair = means[means.method.isin(["ed_gated", "gd_gated"])]
    if set(pair.method) == {"ed_gated", "gd_gated"}:
        asymptotic = pair[pair.F >= ASYMPTOTIC_F_OVER_D * table.d.iloc[0]]
        window = sorted(int(f) for f in asymptotic.F.unique())
        exponents = {(m, t): fit_f_log_f(asymptotic[(asymptotic.method == m) & (asymptotic.target == t)].F,
                                         asymptotic[(asymptotic.method == m) & (asymptotic.target == t)].n_params)["exponent"]
                     for m in ("ed_gated", "gd_gated") for t in sorted(pair.target.unique())}
        note = f"over F / d >= {ASYMPTOTIC_F_OVER_D} (F in {window}, d = {int(table.d.iloc[0])}); NaN with fewer than two stored F there"
        metrics.add("exponent_asymptotic_ed_gated", exponents.get(("ed_gated", main_target), math.nan),
                    f"log-log slope of the seed-mean W of the gated encoder-decoder against F, target {main_target:g}, {note}")
        metrics.add("exponent_asymptotic_gd_gated", exponents.get(("gd_gated", main_target), math.nan),
                    f"log-log slope of the seed-mean W of gated GD against F, target {main_target:g}, {note}")
        gaps = [abs(exponents["ed_gated", t] - exponents["gd_gated", t]) for t in sorted(pair.target.unique())]
        metrics.add("exponent_gap_ed_gd_asymptotic", max(gaps) if all(map(math.isfinite, gaps)) else math.nan,
                    f"max over targets of |exponent(ed_gated) - exponent(gd_gated)| {note}")
        if ("ed_gated", 1.0) in exponents:  # S0.ed-matches-gd-asymptotics' alternative: target 1.0 only
            gap = abs(exponents["ed_gated", 1.0] - exponents["gd_gated", 1.0])
            metrics.add("exponent_gap_ed_gd_asymptotic_t1", gap if math.isfinite(gap) else math.nan,
                        f"|exponent(ed_gated) - exponent(gd_gated)| at target 1 only (not the max over targets) {note}")
    # S0.gd-cheapest: the cheapest trained MLP vs the cheapest construction at every (F, target).
    trained = [m for m in means.method.unique() if METHODS[m].search.trains]
    built = [m for m in means.method.unique() if not METHODS[m].search.trains]
    if trained and built:
        pivot = means.pivot_table(index=["target", "F"], columns="method", values="n_params")
        advantage = (pivot[built].min(axis=1) / pivot[trained].min(axis=1)).dropna()
        if len(advantage):
            target, n_facts = advantage.idxmin()
            metrics.add("gd_cost_advantage_min", advantage.min(),
                        f"min over (target, F) of min construction W / min GD W; {len(advantage)} points, worst at "
                        f"target {float(target):g}, F = {int(n_facts)}")
            _gd_cost_advantage_full_target(advantage, metrics)
    # S0.ntk-costlier: NTK vs the gated encoder-decoder at the largest F.
    ratios = ntk_over_ed_ratios(means, largest_f)
    if ratios:
        metrics.add("ntk_over_ed_largest_f", min(ratios), f"min over targets of W(ntk) / W(ed_gated) at F = {largest_f} "
                    "(NTK at its cap if it did not store: a lower bound)")


def _gd_cost_advantage_full_target(advantage: pd.Series, metrics: MetricsTable) -> None:
    """S0.gd-cheapest's alternative 'targets compared: 1.0 only': gd_cost_advantage_min's minimum
    (min construction W / min GD W, indexed by (target, F)) over the F at target 1.0 alone."""
    full = advantage[advantage.index.get_level_values("target") == 1.0]
    if len(full):
        metrics.add("gd_cost_advantage_min_t1", full.min(),
                    f"the same minimum over F at target 1 only; {len(full)} points, worst at F = {int(full.idxmin()[1])}")


def ntk_over_ed_ratios(means: pd.DataFrame, largest_f: int) -> list[float]:
    """Per target, W(ntk) / W(ed_gated) at F = largest_f from seed means (seed_means by method,
    target, F), the NTK at its width cap where it did not store (a lower bound); S0.ntk-costlier."""
    ratios = []
    for target in sorted(means.target.unique()):
        here = means[(means.F == largest_f) & (means.target == target)].set_index("method")
        if {"ntk", "ed_gated"} <= set(here.index):
            ntk_row = here.loc["ntk"]
            ntk_params = ntk_row.n_params if ntk_row.stored else ntk_row.params_at_cap  # a lower bound
            ratios.append(ntk_params / here.loc["ed_gated"].n_params)
    return ratios


def ntk_degree2_cost_metrics(capacity_all: pd.DataFrame, metrics: MetricsTable) -> None:
    """S0.ntk-costlier's alternative 'NTK Hermite degree: degree 2 only': ntk_over_ed_largest_f with
    the NTK's degree-2 rows in every setting instead of its best degree (every degree's rows are in
    the capacity tables); nothing when the sweep ran no degree 2."""
    table = capacity_all[(capacity_all.method != "ntk") | (capacity_all.degree == 2)]
    if not (table.method == "ntk").any():
        return
    largest_f = int(table.F.max())
    ratios = ntk_over_ed_ratios(seed_means(table, ["method", "target", "F"]), largest_f)
    if ratios:
        metrics.add("ntk_over_ed_largest_f_degree2", min(ratios),
                    f"min over targets of W(ntk, Hermite degree 2) / W(ed_gated) at F = {largest_f} (NTK at its cap if "
                    "it did not store: a lower bound); ntk_over_ed_largest_f reads the best degree per setting")


def ntk_degree_metrics(table: pd.DataFrame, params: dict, metrics: MetricsTable,
                        names: dict[int, str] = NTK_STORES_METRICS, note: str = "") -> None:
    """S0.ntk-stores per Hermite degree: which degree stores where (every degree's rows of one
    sweep); names: degree -> metric name (NTK_STORES_METRICS for the paper's regime)."""
    ntk = table[(table.method == "ntk") & (table.target == 1.0) & table.degree.notna()]
    for degree, rows in ntk.groupby("degree"):
        if int(degree) not in names:
            missing_names("NTK degree", degree)
            continue
        per_f = rows.groupby("F").stored.mean()
        metrics.add(names[int(degree)], rows.stored.mean(),
                    f"fraction of (F, seed) stored at 100% by the degree-{int(degree)} NTK MLP (ReLU gate) within "
                    f"{params['search']['ntk_max_width']} units, d = {int(rows.d.iloc[0])}{note}; per F: "
                    + ", ".join(f"{int(f)}: {v:.2g}" for f, v in per_f.items()))
