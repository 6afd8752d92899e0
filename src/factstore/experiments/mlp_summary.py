"""Summary step of the fact-storing MLP study (SPEC S0): combined tables, fits and metrics.

The rule calls it as `mlp_summary.summary`. It stacks the tables of the
search steps, fits W = C F (log2 F + b) per (method, target), and writes every metric that
config/claims.yaml checks, plus the per-method numbers behind them.

Every metric name is written out literally where it is added (per-method names in literal tables
keyed by method), so `grep` leads from a claim to the code that computes it. A method or target
missing from a table has no metric of that family; its numbers are still in results and fits.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from factstore.io import concat_tables
from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.results import seed_means, tidy_table
from factstore.mlp.scaling import fit_f_log_f, information_bound, random_map_bits
from factstore.statistics import spearman

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
# method -> name of Spearman(rho(V), F / W) across the anisotropy sweep's value sets.
RHO_SPEARMAN_METRICS = {
    "ed_gated": "rho_spearman_ed_gated", "ed_gated_v": "rho_spearman_ed_gated_v", "ed_plain": "rho_spearman_ed_plain",
    "gd_gated": "rho_spearman_gd_gated", "gd_plain": "rho_spearman_gd_plain", "ntk": "rho_spearman_ntk",
    "ntk_ustar": "rho_spearman_ntk_ustar",
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
    metrics = MetricsTable()
    bits_assumed = params["bits_per_parameter_assumed"]
    _capacity_metrics(capacity_table, fits, params["main_target"], params, metrics)
    # Information bound over every measured count (all experiments).
    measured = results[results.stored & results.n_params.notna()]
    if len(measured):
        ratio = measured.n_params / information_bound(measured.F.to_numpy(), bits_assumed)
        worst = measured.loc[ratio.idxmin()]
        metrics.add("info_bound_min_ratio", ratio.min(),
                    f"min W / (log2(F!) / {bits_assumed:g}) over {len(measured)} measured counts; worst: {worst.method}, "
                    f"{worst.experiment}, F = {worst.F}, target {worst.target:g} ({worst.bits_per_parameter:.3g} bits/param as F log2 F / W)")
        metrics.add("max_bits_per_parameter", measured.bits_per_parameter.max(),
                    f"max F log2 F / W over all measured counts ({worst.method} is the extreme of the bound ratio)")
    _anisotropy_metrics(anisotropy_table, params["anisotropy_facts"], metrics)
    _whitening_metrics(whitening_table, metrics)
    return {"results": results, "fits": fits, "metrics": metrics.frame()}


def _missing_names(family: str, key) -> None:
    print(f"no {family} metric names for {key}: add them to the table in experiments/mlp_summary.py", flush=True)


def _capacity_metrics(table: pd.DataFrame, fits: pd.DataFrame, main_target: float, params: dict,
                      metrics: MetricsTable) -> None:
    if table.empty:
        return
    means = seed_means(table, ["method", "target", "F"])
    largest_f = int(table.F.max())
    detail = f"d = {int(table.d.iloc[0])}, spherical facts, mean over {table.replicate.nunique()} seeds"
    for row in fits.itertuples():
        if (row.method, row.target) not in FIT_METRICS:
            _missing_names("fit", (row.method, row.target))
            continue
        c_name, b_name, exponent_name = FIT_METRICS[row.method, row.target]
        metrics.add(c_name, row.C, f"W = C F (log2 F + b), {row.n_points} F values, {detail}")
        metrics.add(b_name, row.b, f"r2 of W/F vs log2 F = {row.r2:.3g}")
        metrics.add(exponent_name, row.exponent, "log-log slope of W against F")
    at_largest = means[(means.F == largest_f) & (means.target == main_target)]
    for row in at_largest.itertuples():
        if row.method not in PER_PARAMETER_METRICS:
            _missing_names("per-parameter", row.method)
            continue
        bits_name, facts_name = PER_PARAMETER_METRICS[row.method]
        bits = float(random_map_bits(largest_f)) / row.n_params if row.stored else 0.0
        metrics.add(bits_name, bits, f"F log2 F / W at F = {largest_f}, accuracy >= {main_target:g}, {detail}"
                    + ("" if row.stored else "; not stored within the cap"))
        metrics.add(facts_name, largest_f / row.n_params if row.stored else 0.0,
                    f"F / W at F = {largest_f}, accuracy >= {main_target:g}")
    # S0.ntk-stores: the NTK MLP reaches 100% at every F within the width cap.
    ntk_full = table[(table.method == "ntk") & (table.target == 1.0)]
    if len(ntk_full):
        metrics.add("ntk_stores_fraction", ntk_full.stored.mean(),
                    f"fraction of (F, seed) where the NTK MLP (Hermite degree {params['ntk_degree']}) stores 100% within "
                    f"{params['search']['ntk_max_width']} units; F <= {largest_f}, d = {int(ntk_full.d.iloc[0])}")
    # S0.ed-matches-gd-asymptotics
    gaps = []
    for _, group in fits.groupby("target"):
        exponents = dict(zip(group.method, group.exponent))
        if {"ed_gated", "gd_gated"} <= set(exponents):
            gaps.append(abs(exponents["ed_gated"] - exponents["gd_gated"]))
    if gaps:
        metrics.add("exponent_gap_ed_gd", max(gaps),
                    "max over targets of |exponent(ed_gated) - exponent(gd_gated)|, log-log slope of W vs F")
    # S0.gd-cheapest: the cheapest trained MLP vs the cheapest construction at every (F, target).
    trained = [m for m in means.method.unique() if METHODS[m].search == "trained"]
    built = [m for m in means.method.unique() if METHODS[m].search != "trained"]
    if trained and built:
        pivot = means.pivot_table(index=["target", "F"], columns="method", values="n_params")
        advantage = (pivot[built].min(axis=1) / pivot[trained].min(axis=1)).dropna()
        if len(advantage):
            target, n_facts = advantage.idxmin()
            metrics.add("gd_cost_advantage_min", advantage.min(),
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
        metrics.add("ntk_over_ed_largest_f", min(ratios), f"min over targets of W(ntk) / W(ed_gated) at F = {largest_f} "
                    "(NTK at its cap if it did not store: a lower bound)")


def _anisotropy_metrics(table: pd.DataFrame, main_facts: int, metrics: MetricsTable) -> None:
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
        metrics.add("ntk_break_kappa", failing.index.min() if len(failing) else math.nan,
                    f"smallest kappa where the NTK MLP fails to store in >= half the seeds (within its width cap); {setting}")
        metrics.add("ntk_stored_fraction_kappa1", per_kappa.get(1.0, math.nan),
                    f"fraction of seeds stored by the NTK at kappa = 1; {setting}")
        metrics.add("ntk_best_accuracy_max_kappa", by["ntk"].best_accuracy.iloc[-1],
                    f"mean best accuracy of the NTK within its width cap at kappa = {kappas[-1]:g}")
    # S0.ntk-ustar-gain: facts per parameter of NTK + U* over NTK, wherever both store (kappa > 1, every F).
    pair = seed_means(table[table.method.isin(["ntk", "ntk_ustar"])], ["method", "kappa", "F"])
    if {"ntk", "ntk_ustar"} <= set(pair.method):
        wide = pair.pivot_table(index=["kappa", "F"], columns="method", values="n_params")
        gain = (wide["ntk"] / wide["ntk_ustar"]).dropna()
        anisotropic = gain[gain.index.get_level_values("kappa") > 1]
        metrics.add("ustar_gain_median", anisotropic.median() if len(anisotropic) else math.nan,
                    f"median over (kappa > 1, F) where both store of W(ntk) / W(ntk_ustar) = the facts-per-parameter gain; "
                    f"{len(anisotropic)} points: " + ", ".join(f"kappa {k:g} F {f}: {g:.2f}" for (k, f), g in anisotropic.items()))
        isotropic = gain[gain.index.get_level_values("kappa") == 1]
        metrics.add("ustar_gain_kappa1", isotropic.median() if len(isotropic) else math.nan,
                    "the same ratio on spherical values (kappa = 1)")
        stored = pair.pivot_table(index=["kappa", "F"], columns="method", values="stored", aggfunc="all")
        only_ustar = stored["ntk_ustar"].astype(bool) & ~stored["ntk"].astype(bool)
        metrics.add("ustar_stores_where_ntk_fails", int(only_ustar.sum()),
                    f"(kappa, F) stored by NTK + U* but not by the NTK, of {len(stored)}")
    # S0.others-robust
    robust_metrics = {
        "gd_gated": ("robust_stored_fraction_gd_gated", "robust_cost_ratio_gd_gated"),
        "ed_gated": ("robust_stored_fraction_ed_gated", "robust_cost_ratio_ed_gated"),
        "ed_plain": ("robust_stored_fraction_ed_plain", "robust_cost_ratio_ed_plain"),
        "ed_gated_v": ("robust_stored_fraction_ed_gated_v", "robust_cost_ratio_ed_gated_v"),
    }
    for method, (fraction_name, cost_name) in robust_metrics.items():
        if method not in by:
            continue
        metrics.add(fraction_name, main[main.method == method].stored.mean(), f"fraction of (kappa, seed) stored; {setting}")
        base = by[method].n_params.get(1.0, math.nan)
        ratio = (by[method].n_params / base).max() if by[method].stored.all() else math.inf
        metrics.add(cost_name, ratio, "max over kappa of mean W(kappa) / W(kappa = 1) (inf if some kappa failed)")
    # S0.rho-predicts: rank correlation of rho(V) with facts per parameter across the value sets.
    for method in main.method.unique():
        rows = main[(main.method == method) & main.stored]
        if rows.rho.nunique() < 3:
            continue
        if method not in RHO_SPEARMAN_METRICS:
            _missing_names("rho Spearman", method)
            continue
        metrics.add(RHO_SPEARMAN_METRICS[method], spearman(rows.rho, rows.facts_per_parameter),
                    f"Spearman(rho(V), F / W) over {len(rows)} stored (kappa, seed) value sets; {setting}")
    rho = main.groupby("kappa").rho.mean()
    metrics.add("rho_kappa1", rho.get(1.0, math.nan), f"decodability rho(V) of spherical values, mean over seeds; {setting}")
    metrics.add("rho_max_kappa", rho.iloc[-1], f"rho(V) at kappa = {rho.index[-1]:g}")


def _whitening_metrics(table: pd.DataFrame, metrics: MetricsTable) -> None:
    if table.empty:
        return
    setting = (f"MiniLM Goodreads facts, F = {int(table.F.iloc[0])}, d = {int(table.d.iloc[0])}, "
               f"alpha in {[float(a) for a in sorted(table.alpha.unique())]}, mean over {table.replicate.nunique()} seeds")
    for method, group in table.groupby("method"):
        if method not in WHITENING_METRICS:
            _missing_names("whitening", method)
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
