"""Summary step of the fact-storing MLP study (SPEC S0): combined tables, fits and metrics.

The rule calls it as `mlp.summary` (experiments/mlp.py imports it). It stacks the tables of the
search steps, fits W = C F (log2 F + b) per (method, target), and writes every metric that
config/claims.yaml checks, plus the per-method numbers behind them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from factstore.io import concat_tables
from factstore.mlp.methods import METHODS
from factstore.mlp.results import seed_means, tidy_table
from factstore.mlp.scaling import fit_f_log_f, information_bound, random_map_bits
from factstore.statistics import spearman


def fits_table(capacity_table: pd.DataFrame) -> pd.DataFrame:
    """One fit of W = C F (log2 F + b) per (method, target) over the seed-mean W of stored F."""
    rows = []
    means = seed_means(capacity_table, ["method", "target", "F"])
    for (method, target), group in means.groupby(["method", "target"]):
        stored = group[group.stored]
        fit = fit_f_log_f(stored.F, stored.n_params)
        rows.append({"method": method, "target": target, "n_points": len(stored), **fit})
    return pd.DataFrame(rows, columns=["method", "target", "n_points", "C", "b", "r2", "exponent"])


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Combined tables, fits and the metrics config/claims.yaml checks.

    inputs: capacity_<method>, anisotropy_k<kappa>, whitening_a<alpha> tables. params:
    bits_per_parameter_assumed, main_target (the seed's 99% criterion), ntk_degree, search,
    anisotropy_facts (the F every method runs at in the anisotropy sweep).
    Returns {"results": every row, "fits": per (method, target), "metrics": metric, value, detail}.
    """
    capacity_table = concat_tables(inputs, "capacity_", tidy_table([]))
    anisotropy_table = concat_tables(inputs, "anisotropy_", tidy_table([]))
    whitening_table = concat_tables(inputs, "whitening_", tidy_table([]))
    results = pd.concat([capacity_table, anisotropy_table, whitening_table], ignore_index=True)
    fits = fits_table(capacity_table)
    metrics: list[dict] = []

    def metric(name: str, value: float, detail: str = "") -> None:
        metrics.append({"metric": name, "value": float(value), "detail": detail})

    bits_assumed = params["bits_per_parameter_assumed"]
    main_target = params["main_target"]
    _capacity_metrics(capacity_table, fits, main_target, params, metric)
    # Information bound over every measured count (all experiments).
    measured = results[results.stored & results.n_params.notna()]
    if len(measured):
        ratio = measured.n_params / information_bound(measured.F.to_numpy(), bits_assumed)
        worst = measured.loc[ratio.idxmin()]
        metric("info_bound_min_ratio", ratio.min(),
               f"min W / (log2(F!) / {bits_assumed:g}) over {len(measured)} measured counts; worst: {worst.method}, "
               f"{worst.experiment}, F = {worst.F}, target {worst.target:g} ({worst.bits_per_parameter:.3g} bits/param as F log2 F / W)")
        metric("max_bits_per_parameter", measured.bits_per_parameter.max(),
               f"max F log2 F / W over all measured counts ({worst.method} is the extreme of the bound ratio)")
    _anisotropy_metrics(anisotropy_table, params["anisotropy_facts"], metric)
    _whitening_metrics(whitening_table, metric)
    return {"results": results, "fits": fits, "metrics": pd.DataFrame(metrics, columns=["metric", "value", "detail"])}


def _capacity_metrics(table: pd.DataFrame, fits: pd.DataFrame, main_target: float, params: dict, metric) -> None:
    if table.empty:
        return
    means = seed_means(table, ["method", "target", "F"])
    largest_f = int(table.F.max())
    detail = f"d = {int(table.d.iloc[0])}, spherical facts, mean over {table.replicate.nunique()} seeds"
    for row in fits.itertuples():
        metric(f"fit_C_{row.method}_t{row.target:g}", row.C, f"W = C F (log2 F + b), {row.n_points} F values, {detail}")
        metric(f"fit_b_{row.method}_t{row.target:g}", row.b, f"r2 of W/F vs log2 F = {row.r2:.3g}")
        metric(f"exponent_{row.method}_t{row.target:g}", row.exponent, "log-log slope of W against F")
    at_largest = means[(means.F == largest_f) & (means.target == main_target)]
    for row in at_largest.itertuples():
        bits = float(random_map_bits(largest_f)) / row.n_params if row.stored else 0.0
        metric(f"bits_per_parameter_{row.method}", bits,
               f"F log2 F / W at F = {largest_f}, accuracy >= {main_target:g}, {detail}" + ("" if row.stored else "; not stored within the cap"))
        metric(f"facts_per_parameter_{row.method}", largest_f / row.n_params if row.stored else 0.0,
               f"F / W at F = {largest_f}, accuracy >= {main_target:g}")
    # S0.ntk-stores: the NTK MLP reaches 100% at every F within the width cap.
    ntk_full = table[(table.method == "ntk") & (table.target == 1.0)]
    if len(ntk_full):
        metric("ntk_stores_fraction", ntk_full.stored.mean(),
               f"fraction of (F, seed) where the NTK MLP (Hermite degree {params['ntk_degree']}) stores 100% within "
               f"{params['search']['ntk_max_width']} units; F <= {largest_f}, d = {int(ntk_full.d.iloc[0])}")
    # S0.ed-matches-gd-asymptotics
    gaps = []
    for target, group in fits.groupby("target"):
        exponents = dict(zip(group.method, group.exponent))
        if {"ed_gated", "gd_gated"} <= set(exponents):
            gaps.append(abs(exponents["ed_gated"] - exponents["gd_gated"]))
    if gaps:
        metric("exponent_gap_ed_gd", max(gaps), "max over targets of |exponent(ed_gated) - exponent(gd_gated)|, log-log slope of W vs F")
    # S0.gd-cheapest: the cheapest GD MLP vs the cheapest construction at every (F, target).
    gd_methods = [m for m in means.method.unique() if METHODS[m].search == "trained"]
    built = [m for m in means.method.unique() if METHODS[m].search != "trained"]
    if gd_methods and built:
        pivot = means.pivot_table(index=["target", "F"], columns="method", values="n_params")
        cheapest_gd = pivot[gd_methods].min(axis=1)
        cheapest_built = pivot[built].min(axis=1)
        advantage = (cheapest_built / cheapest_gd).dropna()
        if len(advantage):
            target, n_facts = advantage.idxmin()
            metric("gd_cost_advantage_min", advantage.min(),
                   f"min over (target, F) of min construction W / min GD W; {len(advantage)} points, worst at "
                   f"target {float(target):g}, F = {int(n_facts)}")
    # S0.ntk-costlier: NTK vs the gated encoder-decoder at the largest F.
    ratios = []
    for target in sorted(means.target.unique()):
        here = means[(means.F == largest_f) & (means.target == target)].set_index("method")
        if {"ntk", "ed_gated"} <= set(here.index):
            ntk_row = here.loc["ntk"]
            ntk_params = ntk_row.n_params if ntk_row.stored else ntk_row.params_at_cap  # a lower bound
            ratios.append(ntk_params / here.loc["ed_gated"].n_params)
    if ratios:
        metric("ntk_over_ed_largest_f", min(ratios), f"min over targets of W(ntk) / W(ed_gated) at F = {largest_f} (NTK at its cap if it did not store: a lower bound)")


def _anisotropy_metrics(table: pd.DataFrame, main_facts: int, metric) -> None:
    if table.empty:
        return
    main = table[table.F == main_facts]
    means = seed_means(main, ["method", "kappa"])
    by = {method: group.set_index("kappa").sort_index() for method, group in means.groupby("method")}
    kappas = sorted(main.kappa.unique())
    setting = f"d = {int(main.d.iloc[0])}, F = {main_facts}, target {main.target.iloc[0]:g}, kappa in {[float(k) for k in kappas]}"
    # S0.ntk-anisotropy-breaks: smallest kappa where the NTK fails in at least half of the seeds.
    if "ntk" in by:
        per_kappa = main[main.method == "ntk"].groupby("kappa").stored.mean()
        failing = per_kappa[per_kappa <= 0.5]
        metric("ntk_break_kappa", failing.index.min() if len(failing) else math.nan,
               f"smallest kappa where the NTK MLP fails to store in >= half the seeds (within its width cap); {setting}")
        metric("ntk_stored_fraction_kappa1", per_kappa.get(1.0, math.nan), f"fraction of seeds stored by the NTK at kappa = 1; {setting}")
        metric("ntk_best_accuracy_max_kappa", by["ntk"].best_accuracy.iloc[-1],
               f"mean best accuracy of the NTK within its width cap at kappa = {kappas[-1]:g}")
    # S0.ntk-ustar-gain: facts per parameter of NTK + U* over NTK, wherever both store (kappa > 1, every F).
    pair = seed_means(table[table.method.isin(["ntk", "ntk_ustar"])], ["method", "kappa", "F"])
    if {"ntk", "ntk_ustar"} <= set(pair.method):
        wide = pair.pivot_table(index=["kappa", "F"], columns="method", values="n_params")
        gain = (wide["ntk"] / wide["ntk_ustar"]).dropna()
        anisotropic = gain[gain.index.get_level_values("kappa") > 1]
        metric("ustar_gain_median", anisotropic.median() if len(anisotropic) else math.nan,
               f"median over (kappa > 1, F) where both store of W(ntk) / W(ntk_ustar) = the facts-per-parameter gain; "
               f"{len(anisotropic)} points: " + ", ".join(f"kappa {k:g} F {f}: {g:.2f}" for (k, f), g in anisotropic.items()))
        isotropic = gain[gain.index.get_level_values("kappa") == 1]
        metric("ustar_gain_kappa1", isotropic.median() if len(isotropic) else math.nan, "the same ratio on spherical values (kappa = 1)")
        stored = pair.pivot_table(index=["kappa", "F"], columns="method", values="stored", aggfunc="all")
        only_ustar = stored["ntk_ustar"].astype(bool) & ~stored["ntk"].astype(bool)
        metric("ustar_stores_where_ntk_fails", int(only_ustar.sum()),
               f"(kappa, F) stored by NTK + U* but not by the NTK, of {len(stored)}")
    # S0.others-robust
    for method in ("gd_gated", "ed_gated", "ed_plain", "ed_gated_v"):
        if method not in by:
            continue
        stored = main[main.method == method].stored.mean()
        metric(f"robust_stored_fraction_{method}", stored, f"fraction of (kappa, seed) stored; {setting}")
        base = by[method].n_params.get(1.0, math.nan)
        ratio = (by[method].n_params / base).max() if by[method].stored.all() else math.inf
        metric(f"robust_cost_ratio_{method}", ratio, "max over kappa of mean W(kappa) / W(kappa = 1) (inf if some kappa failed)")
    # S0.rho-predicts: rank correlation of rho(V) with facts per parameter across the value sets.
    for method in main.method.unique():
        rows = main[(main.method == method) & main.stored]
        if rows.rho.nunique() >= 3:
            statistic = spearman(rows.rho, rows.facts_per_parameter)
            metric(f"rho_spearman_{method}", statistic, f"Spearman(rho(V), F / W) over {len(rows)} stored (kappa, seed) value sets; {setting}")
    rho = main.groupby("kappa").rho.mean()
    metric("rho_kappa1", rho.get(1.0, math.nan), f"decodability rho(V) of spherical values, mean over seeds; {setting}")
    metric("rho_max_kappa", rho.iloc[-1], f"rho(V) at kappa = {rho.index[-1]:g}")


def _whitening_metrics(table: pd.DataFrame, metric) -> None:
    if table.empty:
        return
    setting = (f"MiniLM Goodreads facts, F = {int(table.F.iloc[0])}, d = {int(table.d.iloc[0])}, "
               f"alpha in {[float(a) for a in sorted(table.alpha.unique())]}, mean over {table.replicate.nunique()} seeds")
    for method, group in table.groupby("method"):
        # per alpha: mean facts per parameter (0 where a seed did not store) and mean Lipschitz constants
        means = group.groupby("alpha")[["facts_per_parameter", "lipschitz", "lipschitz_relative", "rho"]].mean().reset_index()
        metric(f"whitening_capacity_spearman_{method}", spearman(means.alpha, means.facts_per_parameter),
               f"Spearman(alpha, F / W) with F / W = 0 where not stored; {setting}")
        lip = means.dropna(subset=["lipschitz_relative"])
        if len(lip) >= 3:
            metric(f"whitening_lipschitz_spearman_{method}", spearman(lip.alpha, lip.lipschitz_relative),
                   "Spearman(alpha, Lip / RMS output) of the folded MLP at its smallest storing width (the cap if none)")
            metric(f"whitening_lipschitz_raw_spearman_{method}", spearman(lip.alpha, lip.lipschitz),
                   "Spearman(alpha, Lip) without the output-scale normalisation")
        first, last = means.iloc[0], means.iloc[-1]
        metric(f"whitening_capacity_gain_{method}",
               last.facts_per_parameter / first.facts_per_parameter if first.facts_per_parameter > 0 else math.inf,
               f"F / W at alpha = {last.alpha:g} over alpha = {first.alpha:g} (inf: not stored at alpha = {first.alpha:g})")
        stored = means[means.facts_per_parameter > 0]
        if stored.rho.nunique() >= 3:
            metric(f"rho_spearman_whitening_{method}", spearman(stored.rho, stored.facts_per_parameter),
                   f"Spearman(rho(V), F / W) over the whitening strengths; {setting}")
