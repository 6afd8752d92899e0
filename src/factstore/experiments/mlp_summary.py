"""Summary step of the fact-storing MLP study (S0): combined tables, fits and metrics.

The rule calls it as `mlp_summary.summary`. It stacks the tables of the
search steps, fits W = C F (log2 F + b) per (method, target), and writes every metric that
config/claims.yaml checks, plus the per-method numbers behind them.

Every metric name is written out literally where it is added (per-method names in literal tables
keyed by method, or by method and family of singular values), so `grep` leads from a claim to the
code that computes it; the exceptions are the d = 32 kappa sweep's metrics that the claims read
from a d = 128 sweep, reported as those names + ANISOTROPY_SWEEP_SUFFIX, and the NTK sweep's
earlier readings on its linspace rows, the geometric names + LINSPACE_SUFFIX. A method or target
missing from a table has no metric of that family; its numbers are still in results and fits.

The anisotropy claims read the paper's cost law W ~ F log F / rho(V)^2 (rho(V), the values'
decodability, column `rho`) on each family of singular values (column `spectrum`):
law_exponent_<method>_<family> (the exponent of W on 1/rho^2 at fixed F, scaling.rho_law_fit),
law_break_kappa_<method>_<family> (law_break_kappa) and law_cost_ratio_<method>_<family>.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from factstore.io import concat_tables
from factstore.metrics import MetricsTable
from factstore.mlp.encoder_decoder import gated_parameter_count
from factstore.mlp.methods import METHODS
from factstore.mlp.results import best_degree_rows, seed_means, tidy_table, ustar_capacity_ratios, ustar_gains
from factstore.mlp.scaling import fit_f_log_f, information_bound, permutation_bits, random_map_bits, rho_law_fit, target_bits
from factstore.statistics import spearman

ANISOTROPY_SWEEP_SUFFIX = "_anisotropy_sweep"
"""The d = 32 anisotropy sweep's metrics that the claims read from a d = 128 sweep (the NTK's break
and U* gain, every construction's cost-law metrics) carry this suffix: the checked names read the
sweeps at the paper's d = 128 (anisotropy_regime, robust_regime)."""
LINSPACE_SUFFIX = "_linspace"
"""The NTK sweep's readings written under one name per method (the break at the width cap and at
fixed budgets, the U* gain, ...) read its geometric rows; on its linspace rows they carry this
suffix. The cost-law metrics name their family in full (LAW_METRICS)."""
SPECTRA = ("geometric", "linspace")
"""The families of singular values of the conditioned values (facts.SPECTRA), in the order read."""
LAW_TOLERANCE_SD = 2.0
"""The law's budget in law_break_kappa is widened by this many standard deviations of the kappa = 1
seeds' log(W rho^2) (a prediction interval for one seed): the spread the law cannot tell from its
own scaling."""
EARLIER_COST_BAND = 2.0
"""The fixed band that S0.others-robust read before the cost law (W(kappa) / W(1) at most 2): its
band metrics are the cost ratio over it (at most 1 inside), a declared alternative."""
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
ASYMPTOTIC_F_OVER_D = 32
"""S0.ed-matches-gd-asymptotics compares exponents over F / d >= this (the paper's asymptotic regime)."""
# NTK Hermite degree -> name of the fraction of (F, seed) it stores at 100% within the width cap:
# in the paper's regime (the ntk_regime sweep, d = 128: S0.ntk-stores) and in the capacity sweep
# (its small d, reported).
NTK_STORES_METRICS = {1: "ntk_stores_fraction_degree1", 2: "ntk_stores_fraction_degree2"}
NTK_STORES_METRICS_CAPACITY_SWEEP = {1: "ntk_stores_fraction_degree1_capacity_sweep",
                                     2: "ntk_stores_fraction_degree2_capacity_sweep"}
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
# method -> name of max rho / min rho over the per-kappa means its rho Spearman ranks (S0.rho-predicts' gate).
RHO_RANGE_METRICS = {
    "ed_gated": "rho_range_ratio_ed_gated", "ed_gated_v": "rho_range_ratio_ed_gated_v", "ed_plain": "rho_range_ratio_ed_plain",
    "gd_gated": "rho_range_ratio_gd_gated", "gd_plain": "rho_range_ratio_gd_plain", "ntk": "rho_range_ratio_ntk",
    "ntk_ustar": "rho_range_ratio_ntk_ustar",
}
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

    inputs: capacity_<method>, regime_<method> (the NTK at the paper's d = 128), robust_regime (the
    encoder-decoder's kappa sweep at d = 128), anisotropy_regime (the NTK's kappa sweep at d = 128),
    anisotropy_k<kappa>, whitening_a<alpha>, whitening_regime (the whitening sweep at F >> d)
    tables. params: bits_per_parameter_assumed, main_target (the project's standalone storage
    target; the paper's 99% is fact-adaptive accuracy inside a Transformer), ntk_degrees, search, anisotropy_facts (the F every method runs at in the
    anisotropy sweep), break_width_budget. The d = 128 NTK sweep's break reads its largest F.
    Returns {"results": every row (every NTK degree), "fits": per (method, target), "metrics"}.
    Fits and metrics compare methods through the best NTK degree per setting
    (results.best_degree_rows); S0.ntk-stores and the information bound read every degree.
    """
    capacity_all = read_tables(inputs, "capacity_")
    regime_table = read_tables(inputs, "regime_")
    robust_table = read_tables(inputs, "robust_")
    anisotropy_table = read_tables(inputs, "anisotropy_k")
    anisotropy_regime_table = read_tables(inputs, "anisotropy_regime")
    whitening_table = read_tables(inputs, "whitening_a")
    whitening_regime_table = read_tables(inputs, "whitening_regime")
    results = pd.concat([capacity_all, regime_table, robust_table, anisotropy_table, anisotropy_regime_table,
                         whitening_table, whitening_regime_table], ignore_index=True)
    capacity_table = best_degree_rows(capacity_all)
    fits = fits_table(capacity_table)
    metrics = MetricsTable()
    bits_assumed = params["bits_per_parameter_assumed"]
    _capacity_metrics(capacity_table, fits, params["main_target"], params, metrics)
    _ntk_degree2_cost_metrics(capacity_all, metrics)  # beside ntk_over_ed_largest_f, the last capacity metric
    _ntk_degree_metrics(regime_table, params, metrics)
    _ntk_degree_metrics(capacity_all, params, metrics, NTK_STORES_METRICS_CAPACITY_SWEEP, " (reported)")
    # S0.info-bound: every measured count (every experiment and NTK degree) against the 2-bits-per-
    # parameter line, an empirical ceiling (not the paper's theorem, which has no constant).
    measured = results[results.stored & results.n_params.notna()]
    if len(measured):
        _information_bound_metrics(measured, bits_assumed, metrics, params["search"]["resolution"])
    # S0.ntk-anisotropy-breaks and S0.ntk-ustar-gain read the NTK's sweep at the paper's d = 128
    # (anisotropy_regime), S0.others-robust the encoder-decoder's (robust_regime), each family of
    # singular values; the same metrics of the anisotropy sweep (d = 32) are reported with a suffix
    # (GD's, which only that sweep measures, are read there).
    sweep_d = ", ".join(f"{d:g}" for d in sorted(anisotropy_table.d.unique()))
    anisotropy_metrics(best_degree_rows(anisotropy_table), params["anisotropy_facts"], metrics,
                       params["break_width_budget"],
                       regime_metrics=RenamedMetrics(metrics, ANISOTROPY_SWEEP_SUFFIX, f" (the d = {sweep_d} sweep; reported)"))
    anisotropy_regime_metrics(best_degree_rows(anisotropy_regime_table), metrics, params["break_width_budget"])
    _robust_regime_metrics(robust_table, metrics)
    _whitening_metrics(best_degree_rows(whitening_table), metrics)
    whitening_regime_metrics(best_degree_rows(whitening_regime_table), metrics)
    return {"results": results, "fits": fits, "metrics": metrics.frame()}


def read_tables(inputs: dict[str, Path], prefix: str) -> pd.DataFrame:
    """The search tables of every input whose name starts with `prefix`, stacked (io.concat_tables;
    tidy_table's columns when there is none), `spectrum` empty where it reads back empty (NaN)."""
    table = concat_tables(inputs, prefix, tidy_table([]))
    spectrum = table.spectrum if "spectrum" in table else pd.Series("", index=table.index)
    return table.assign(spectrum=spectrum.astype(object).fillna("").astype(str))


def families(table: pd.DataFrame) -> list[str]:
    """The families of singular values in a kappa sweep's rows (`spectrum`), in SPECTRA's order."""
    present = set(table.spectrum) if "spectrum" in table else set()
    return [family for family in SPECTRA if family in present]


def failing_parameters(measured: pd.DataFrame) -> np.ndarray:
    """(rows,) a lower bound on the parameter count at the largest width that missed the target,
    the open end of each row's search interval (W_failing, W]. GD's bisection stops within its
    resolution: its W is linear in the width (bias-free, parameters_per_unit x width), so
    W_failing = W x width_failing / width (0 where no narrower probe failed: the interval then
    reaches down to nothing). The NTK's and the encoder-decoder's searches are exact to one unit
    (one-pass prefix, nested codes): their W is taken as exact."""
    trained = measured.method.map(lambda method: METHODS[method].search == "trained").to_numpy(bool)
    ratio = (measured.width_failing / measured.width).fillna(0.0).to_numpy()
    return np.where(trained, measured.n_params.to_numpy() * ratio, measured.n_params.to_numpy())


def band_edge(bits_assumed: float, resolution: float) -> float:
    """The most bits per parameter that 'about b bits' admits, b / (1 - r): a count read at
    exactly b bits by a width search that stops within relative resolution r of the width
    (failing_parameters: the true smallest count lies in (W (1 - r), W]) may hold up to
    b / (1 - r) bits per parameter; the search cannot tell those counts from b."""
    return bits_assumed / (1.0 - resolution)


def bits_per_parameter_both_ends(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows,) bits / W at the smallest storing count W and at the open end of each row's width
    search interval, bits / W_failing (failing_parameters; inf where no narrower probe failed)."""
    with np.errstate(divide="ignore"):
        upper = np.where(failing > 0, bits / np.where(failing > 0, failing, 1.0), math.inf)
    return bits / measured.n_params.to_numpy(), upper


def band_metrics(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray, edge: float,
                 names: tuple[str, str, str], setting: str, metrics: MetricsTable) -> None:
    """The band reading of one bit count per row: max (bits / W) / edge (the check: at most 1),
    the same at each interval's open end (bits / W_failing, inf where no narrower probe failed)
    and whether the intervals decide it: every interval's open end within the band (inside for
    certain) or some count's W past it (outside for certain); 0 when the extreme interval straddles
    the edge. names: (ratio, ratio at the open end, decided)."""
    ratio_name, upper_name, decided_name = names
    per_parameter, per_parameter_upper = bits_per_parameter_both_ends(bits, measured, failing)
    worst = measured.iloc[int(np.argmax(per_parameter))]
    ratio, upper = per_parameter.max() / edge, per_parameter_upper.max() / edge
    metrics.add(ratio_name, ratio,
                f"max over {len(measured)} measured counts of ({setting}) / W = {per_parameter.max():.4g} bits per "
                f"parameter, over the band edge {edge:.4g}; worst: {worst.method}, {worst.experiment}, F = {worst.F}, "
                f"target {worst.target:g}, W = {worst.n_params:g}")
    metrics.add(upper_name, upper,
                "the same with each count at the open end of its search interval (the largest width that failed; inf "
                f"where none did): the true maximum lies in [{ratio:.4g}, {upper:.4g})")
    metrics.add(decided_name, float(upper <= 1.0 or ratio > 1.0),
                f"1 when the search intervals decide the band ({setting}): every interval within it, or some count "
                f"past it; 0 when the extreme interval [{ratio:.4g}, {upper:.4g}) straddles 1")


SETTING_KEYS = ["experiment", "method", "degree", "d", "F", "kappa", "spectrum", "alpha", "target"]
"""One measured setting of the mlp study: its seeds are repeated measurements of one count."""


def seed_excess_metrics(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray, bits_assumed: float,
                        names: tuple[str, str], setting: str, metrics: MetricsTable) -> None:
    """'No method stores more than about b bits per parameter' as a statistic over seeds: per
    setting (SETTING_KEYS) the mean over its seeds of bits / W minus 2 standard errors of that
    mean (0 with one seed), the largest over settings, over b (the check: at most 1, i.e. no
    setting exceeds b by more than 2 standard errors). The same read at the open ends of the
    width searches' intervals (bits / W_failing, inf where no narrower probe failed) says whether
    the search resolution decides it: 1 when both readings agree. names: (statistic, statistic at
    the open ends, decided)."""
    statistic_name, open_end_name, decided_name = names
    per_parameter, upper = bits_per_parameter_both_ends(bits, measured, failing)
    def largest(values: np.ndarray) -> tuple[float, tuple, int]:
        grouped = measured[SETTING_KEYS].assign(value=values).groupby(SETTING_KEYS, dropna=False).value
        mean, count = grouped.mean(), grouped.size()
        spread = grouped.std(ddof=1).fillna(0.0) / np.sqrt(count)
        lower = (mean - 2 * spread).fillna(math.inf).to_numpy()
        worst = int(np.argmax(lower))
        return float(lower[worst]), dict(zip(SETTING_KEYS, mean.index[worst])), int(count.iloc[worst])

    value, worst, seeds = largest(per_parameter)
    value_upper, _, _ = largest(upper)
    metrics.add(statistic_name, value / bits_assumed,
                f"max over settings of (mean over seeds of ({setting}) / W - 2 SE) = {value:.4g} bits per parameter, over "
                f"{bits_assumed:g}; worst: {worst['method']}, {worst['experiment']}, F = {worst['F']}, "
                f"target {worst['target']}, {seeds} seeds")
    metrics.add(open_end_name, value_upper / bits_assumed,
                "the same with each count at the open end of its width search's interval (the largest width that "
                "failed; inf where none did)")
    metrics.add(decided_name, float(value_upper <= bits_assumed or value > bits_assumed),
                f"1 when the width searches' resolution decides it: the statistic at the smallest storing W "
                f"({value / bits_assumed:.4g}) and at each interval's open end ({value_upper / bits_assumed:.4g}) lie "
                "on the same side of 1; 0 when they straddle it")


def _information_bound_metrics(measured: pd.DataFrame, bits_assumed: float, metrics: MetricsTable,
                               resolution: float = 0.0) -> None:
    """S0.info-bound: every measured count (every experiment and NTK degree) against the 2-bits-
    per-parameter line, an empirical ceiling (not the paper's theorem, which has no constant), as
    an interval: the true smallest count lies in (W_failing, W] (failing_parameters). The bound
    holds for certain when every W_failing is above it, fails for certain when some W is below
    it, and the width search cannot decide when the interval straddles it (the claim's gate).

    The check reads the band: the bits each count must hold at the target it was searched to
    (scaling.target_bits: the covering count with floor((1 - target) F) errors allowed, log2 F!
    at target 1), per parameter, over band_edge(b, resolution) (info_bits_band_ratio, at most 1;
    gate info_bits_band_decided). Reported beside it: the same with log2 F! for every target
    (_permutation), with the hard line b (_hard), over seed means (_seed_mean), and the minimum
    ratios W / (bits / b) of the hard line (info_bound_min_ratio: log2 F! for every target;
    info_bound_min_ratio_target: the target's bits).
    resolution: GD's width-search resolution (mlp.search.resolution)."""
    failing = failing_parameters(measured)
    bits = target_bits(measured.F.to_numpy(), measured.target.to_numpy())
    permutation = permutation_bits(measured.F.to_numpy())
    edge = band_edge(bits_assumed, resolution)
    metrics.add("info_bits_band_edge", edge,
                f"the band 'about {bits_assumed:g} bits per parameter' admits: {bits_assumed:g} / (1 - {resolution:g}), "
                f"the most a count read at {bits_assumed:g} bits holds within GD's width-search resolution {resolution:g}")
    target_bound = "target bits (log2 F! at target 1; the covering count with floor((1 - target) F) errors below 1)"
    band_metrics(bits, measured, failing, edge, ("info_bits_band_ratio", "info_bits_band_ratio_upper", "info_bits_band_decided"),
                 target_bound, metrics)
    band_metrics(permutation, measured, failing, edge,
                 ("info_bits_band_ratio_permutation", "info_bits_band_ratio_upper_permutation",
                  "info_bits_band_decided_permutation"), "log2 F! for every target", metrics)
    band_metrics(bits, measured, failing, bits_assumed,
                 ("info_bits_band_ratio_hard", "info_bits_band_ratio_upper_hard", "info_bits_band_decided_hard"),
                 target_bound + f", against the hard line {bits_assumed:g}", metrics)
    seed_excess_metrics(bits, measured, failing, bits_assumed,
                        ("info_bits_seed_ratio", "info_bits_seed_ratio_open_end", "info_bits_seed_decided"),
                        target_bound, metrics)
    seed_excess_metrics(permutation, measured, failing, bits_assumed,
                        ("info_bits_seed_ratio_permutation", "info_bits_seed_ratio_open_end_permutation",
                         "info_bits_seed_decided_permutation"),
                        "log2 F! for every target", metrics)
    metrics.add("info_bits_per_parameter_max", (bits / measured.n_params.to_numpy()).max(),
                f"max {target_bound} / W over every measured count")
    # the same band over seed means of W (the seeds that stored), where several seeds ran a setting
    means = measured.groupby(SETTING_KEYS, dropna=False).n_params.agg(["mean", "size"]).reset_index()
    mean_bits = target_bits(means.F.to_numpy(), means.target.to_numpy()) / means["mean"].to_numpy()
    metrics.add("info_bits_band_ratio_seed_mean", mean_bits.max() / edge,
                f"the band ratio over {len(means)} settings' seed-mean W (the seeds that stored; "
                f"{int((means['size'] > 1).sum())} settings with more than one): a single seed's extreme count "
                "against the average over seeds")
    bound_target = measured.n_params.to_numpy() / (bits / bits_assumed)
    worst_target = measured.iloc[int(np.argmin(bound_target))]
    metrics.add("info_bound_min_ratio_target", bound_target.min(),
                f"min W / (target bits / {bits_assumed:g}) over {len(measured)} measured counts (the hard line, each count's "
                f"own target); worst: {worst_target.method}, {worst_target.experiment}, F = {worst_target.F}, "
                f"target {worst_target.target:g}")
    bound = information_bound(measured.F.to_numpy(), bits_assumed)
    ratio = measured.n_params.to_numpy() / bound
    lower = failing_parameters(measured) / bound
    worst = measured.iloc[int(np.argmin(ratio))]
    worst_lower = measured.iloc[int(np.argmin(lower))]
    metrics.add("info_bound_min_ratio", ratio.min(),
                f"min W / (log2(F!) / {bits_assumed:g}) over {len(measured)} measured counts, i.e. at most {bits_assumed:g} "
                f"bits per parameter (an empirical ceiling); worst: {worst.method}, {worst.experiment}, F = {worst.F}, "
                f"target {worst.target:g} ({worst.bits_per_parameter:.3g} bits/param as F log2 F / W)")
    metrics.add("info_bound_min_ratio_lower", lower.min(),
                f"the same with each count at the open end of its search interval (the largest width that failed): "
                f"the true minimum ratio lies in ({lower.min():.4g}, {ratio.min():.4g}]; worst: {worst_lower.method}, "
                f"{worst_lower.experiment}, F = {worst_lower.F}, target {worst_lower.target:g}")
    decided = bool(lower.min() >= 1.0 or ratio.min() < 1.0)
    metrics.add("info_bound_decided", float(decided),
                "1 when the search intervals decide the bound (every interval above it, or some count below it); 0 when "
                f"the interval of the minimum ({lower.min():.4g}, {ratio.min():.4g}] straddles 1")
    metrics.add("max_bits_per_parameter", measured.bits_per_parameter.max(),
                f"max F log2 F / W over all measured counts ({worst.method} is the extreme of the bound ratio)")


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
    # S0.ntk-stores, the best degree per setting (every degree: _ntk_degree_metrics).
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


def _ntk_degree2_cost_metrics(capacity_all: pd.DataFrame, metrics: MetricsTable) -> None:
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


def _ntk_degree_metrics(table: pd.DataFrame, params: dict, metrics: MetricsTable,
                        names: dict[int, str] = NTK_STORES_METRICS, note: str = "") -> None:
    """S0.ntk-stores per Hermite degree: which degree stores where (every degree's rows of one
    sweep); names: degree -> metric name (NTK_STORES_METRICS for the paper's regime)."""
    ntk = table[(table.method == "ntk") & (table.target == 1.0) & table.degree.notna()]
    for degree, rows in ntk.groupby("degree"):
        if int(degree) not in names:
            _missing_names("NTK degree", degree)
            continue
        per_f = rows.groupby("F").stored.mean()
        metrics.add(names[int(degree)], rows.stored.mean(),
                    f"fraction of (F, seed) stored at 100% by the degree-{int(degree)} NTK MLP (ReLU gate) within "
                    f"{params['search']['ntk_max_width']} units, d = {int(rows.d.iloc[0])}{note}; per F: "
                    + ", ".join(f"{int(f)}: {v:.2g}" for f, v in per_f.items()))


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


def anisotropy_metrics(table: pd.DataFrame, main_facts: list[int], metrics: MetricsTable,
                       budget_multiple: float = 2.0, regime_metrics: MetricsTable | RenamedMetrics | None = None) -> None:
    """Every metric of the kappa sweep (the best NTK degree per setting already chosen).

    main_facts: the F at which every method runs (the others are NTK-only sizes). The break and
    the rho Spearman read the largest of them; robustness reads all of them. budget_multiple: the
    fixed parameter budget of the break, a multiple of the kappa = 1 cost (budget_break_kappa).
    regime_metrics: where the metrics that the claims read from a d = 128 sweep go (the NTK's
    break and U* gain, the constructions' cost-law metrics; default: `metrics`; the summary passes
    a RenamedMetrics). GD's cost-law metrics, which only this sweep measures, go to `metrics`.
    """
    if table.empty:
        return
    main_facts = sorted(int(f) for f in main_facts)
    break_facts = main_facts[-1]
    main = table[table.F.isin(main_facts)]
    at_break = main[main.F == break_facts]
    kappas = sorted(main.kappa.unique())
    d = int(main.d.iloc[0])
    setting = f"d = {d}, F in {main_facts}, target {main.target.iloc[0]:g}, kappa in {[float(k) for k in kappas]}"
    regime = metrics if regime_metrics is None else regime_metrics
    ntk_anisotropy_metrics(table, break_facts, regime, budget_multiple)
    _robust_metrics(main, main_facts, setting, metrics)
    for family in families(table):
        rows = table[table.spectrum == family]
        trained = rows.method.map(lambda method: METHODS[method].search == "trained").astype(bool)
        law_metrics(rows[trained], family, metrics, break_facts)
        law_metrics(rows[~trained], family, regime, break_facts)
    _rho_metrics(at_break, d, f"F = {break_facts}, {setting}", metrics)
    rho = main.groupby("kappa").rho.mean()
    metrics.add("rho_kappa1", rho.get(1.0, math.nan), f"decodability rho(V) of spherical values, mean over seeds; {setting}")
    metrics.add("rho_max_kappa", rho.iloc[-1], f"rho(V) at kappa = {rho.index[-1]:g}")


def anisotropy_regime_metrics(table: pd.DataFrame, metrics: MetricsTable, budget_multiple: float = 2.0) -> None:
    """S0.ntk-anisotropy-breaks and S0.ntk-ustar-gain on the NTK's sweep at the paper's d = 128 (the
    best NTK degree per setting already chosen), each family of singular values, the break at the
    sweep's largest F (every method runs every F there): the cost-law metrics (law_metrics, names
    with the family) and the earlier readings (ntk_anisotropy_metrics: the break at the width cap and
    at fixed budgets, the U* gain), their names as they were on geometric rows and with
    LINSPACE_SUFFIX on linspace rows."""
    for family in families(table):
        rows = table[table.spectrum == family]
        readings = metrics if family == "geometric" else RenamedMetrics(metrics, LINSPACE_SUFFIX, "")  # the family: in the name
        ntk_anisotropy_metrics(rows, int(rows.F.max()), readings, budget_multiple, alternatives=True)
        law_metrics(rows, family, metrics, int(rows.F.max()), alternatives=True)


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


class RenamedMetrics:
    """A view of a MetricsTable that appends `suffix` to every name and `note` to every detail:
    the same family of metrics from a second sweep, reported beside the checked one."""

    def __init__(self, metrics: MetricsTable, suffix: str, note: str) -> None:
        self.metrics, self.suffix, self.note = metrics, suffix, note

    def add(self, name: str, value: float, detail: str = "", standard_error: float | None = None) -> None:
        self.metrics.add(name + self.suffix, value, detail + self.note, standard_error)


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


def _robust_metrics(main: pd.DataFrame, main_facts: list[int], setting: str, metrics: MetricsTable) -> None:
    """S0.others-robust at the anisotropy sweep's d: stored fraction and cost ratio W(kappa) / W(1)
    at every F of main_facts (GD's are checked; the encoder-decoder's are checked at d = 128,
    _robust_regime_metrics, and reported here)."""
    ran = [f for f in main_facts if {"gd_gated", "ed_gated"} <= set(main[main.F == f].method)]
    metrics.add("robust_n_facts", len(ran), f"number of F at which both GD and the encoder-decoder ran the sweep: {ran}")
    _cost_ratio_metrics(main, ROBUST_METRICS, setting, metrics)
    ceiling = encoder_decoder_ceiling(main)
    if not math.isnan(ceiling):
        metrics.add("robust_cost_ceiling_ed_gated", ceiling,
                    f"min over F of W(m = d = {int(main.d.iloc[0])}) / W(kappa = 1): the largest cost ratio the gated "
                    "encoder-decoder can show (its code size m <= d; a value set needing more shows as not stored)")


def _robust_regime_metrics(table: pd.DataFrame, metrics: MetricsTable) -> None:
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
                _missing_names("robust_regime", (method, family))
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
            _missing_names("cost-law", (method, family))
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


def encoder_decoder_ceiling(table: pd.DataFrame) -> float:
    """min over F of W(m = d) / W(kappa = 1) of the gated encoder-decoder: the code size m <= d caps
    its cost ratio W(kappa) / W(1) at this (NaN where kappa = 1 did not store)."""
    means = seed_means(table, ["method", "F", "kappa"])
    ed = means[(means.method == "ed_gated") & (means.kappa == 1.0) & means.stored]
    if ed.empty:
        return math.nan
    d = int(table.d.iloc[0])
    return min(gated_parameter_count(int(r.F), d, d, d) / r.n_params for r in ed.itertuples())


def rho_range_ratio(rho: pd.Series) -> float:
    """max rho / min rho over the value sets a rho Spearman ranks (NaN with none, or a rho <= 0).

    Under the construction's cost law W ~ F log F / rho^2, the value sets' F / W spread over this
    ratio squared: the width of the range that the Spearman has to rank against measurement noise."""
    rho = pd.Series(rho, dtype=float).dropna()
    if rho.empty or rho.min() <= 0:
        return math.nan
    return float(rho.max() / rho.min())


def _rho_metrics(table: pd.DataFrame, d: int, setting: str, metrics: MetricsTable) -> None:
    """S0.rho-predicts: Spearman(rho(V), F / W) over per-kappa means (seeds averaged first), leaving
    out the value sets where a seed did not store or (encoder-decoder) sat at its code-size cap m = d."""
    for method, rows in table.groupby("method"):
        if method not in RHO_SPEARMAN_METRICS:
            _missing_names("rho Spearman", method)
            continue
        encoder_decoder = METHODS[method].search == "code_size"
        capped = ~rows.stored | ((rows.width >= d) if encoder_decoder else False)
        per_kappa = rows.assign(capped=capped).groupby("kappa").agg(
            rho=("rho", "mean"), facts_per_parameter=("facts_per_parameter", "mean"), capped=("capped", "any"))
        kept = per_kappa[~per_kappa.capped]
        metrics.add(RHO_SPEARMAN_METRICS[method], spearman(kept.rho, kept.facts_per_parameter) if len(kept) >= 3 else math.nan,
                    f"Spearman(rho(V), F / W) over {len(kept)} per-kappa means (seeds averaged first), leaving out "
                    f"{int(per_kappa.capped.sum())} kappa where a seed did not store"
                    + (" or sat at the code-size cap m = d" if encoder_decoder else "") + f" (NaN below 3); {setting}")
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
            _missing_names("whitening_regime", method)
            continue
        capacity_name, stored_name = WHITENING_REGIME_METRICS[method]
        reading, read_as = capacity_within_budget(group)
        metrics.add(capacity_name, spearman(reading.index.to_series(), reading),
                    f"Spearman(alpha, capacity) with capacity read as {read_as}; per alpha "
                    + ", ".join(f"{alpha:g}: {value:.4g}" for alpha, value in reading.items()) + f"; {setting}")
        metrics.add(stored_name, float(group.stored.mean()),
                    f"fraction of (alpha, seed) stored within the width cap; {setting}")


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
        if method in RHO_RANGE_WHITENING_METRICS and len(stored):
            metrics.add(RHO_RANGE_WHITENING_METRICS[method], rho_range_ratio(stored.rho),
                        f"max rho(V) / min rho(V) over the {len(stored)} per-alpha means that Spearman ranks "
                        f"(rho {stored.rho.min():.3g} to {stored.rho.max():.3g}); {setting}")
