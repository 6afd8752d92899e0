"""Summary step of the fact-storing MLP study (S0): combined tables, fits and metrics.

The rule calls it as `mlp_summary.summary`. It stacks the tables of the search steps, fits
W = C F (log2 F + b) per (method, target), and writes every metric that config/claims.yaml
checks, plus the per-method numbers behind them. The metrics are computed in the study library,
one concept a module: factstore.mlp.capacity_metrics (fits, per-parameter costs, the methods
compared), information_bound_band (S0.info-bound), anisotropy_sweep (the kappa sweeps, composed
from ntk_anisotropy, anisotropy_robustness, anisotropy_cost_law and decodability_ranking) and
whitening_metrics.

Every metric name is written out literally in those modules (per-method names in literal tables
keyed by method, or by method and family of singular values), so `grep` leads from a claim to the
code that computes it; the exceptions are the d = 32 kappa sweep's metrics that the claims read
from a d = 128 sweep, reported as those names + ANISOTROPY_SWEEP_SUFFIX, and the NTK sweep's
earlier readings on its linspace rows, the geometric names + anisotropy_sweep.LINSPACE_SUFFIX. A
method or target missing from a table has no metric of that family; its numbers are still in
results and fits.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.anisotropy_robustness import robust_regime_metrics
from factstore.mlp.anisotropy_sweep import anisotropy_metrics, anisotropy_regime_metrics
from factstore.mlp.capacity_metrics import (
    NTK_STORES_METRICS_CAPACITY_SWEEP,
    capacity_metrics,
    fits_table,
    ntk_degree2_cost_metrics,
    ntk_degree_metrics,
)
from factstore.mlp.information_bound_band import information_bound_metrics
from factstore.mlp.results import best_degree_rows, read_tables
from factstore.mlp.summary_common import RenamedMetrics
from factstore.mlp.whitening_metrics import whitening_metrics, whitening_regime_metrics

ANISOTROPY_SWEEP_SUFFIX = "_anisotropy_sweep"
"""The d = 32 anisotropy sweep's metrics that the claims read from a d = 128 sweep (the NTK's break
and U* gain, every construction's cost-law metrics) carry this suffix: the checked names read the
sweeps at the paper's d = 128 (anisotropy_regime, robust_regime)."""


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
    capacity_metrics(capacity_table, fits, params["main_target"], params, metrics)
    ntk_degree2_cost_metrics(capacity_all, metrics)  # beside ntk_over_ed_largest_f, the last capacity metric
    ntk_degree_metrics(regime_table, params, metrics)
    ntk_degree_metrics(capacity_all, params, metrics, NTK_STORES_METRICS_CAPACITY_SWEEP, " (reported)")
    # S0.info-bound: every measured count (every experiment and NTK degree) against the 2-bits-per-
    # parameter line, an empirical ceiling (not the paper's theorem, which has no constant).
    measured = results[results.stored & results.n_params.notna()]
    if len(measured):
        information_bound_metrics(measured, bits_assumed, metrics, params["search"]["resolution"])
    # S0.ntk-anisotropy-breaks and S0.ntk-ustar-gain read the NTK's sweep at the paper's d = 128
    # (anisotropy_regime), S0.others-robust the encoder-decoder's (robust_regime), each family of
    # singular values; the same metrics of the anisotropy sweep (d = 32) are reported with a suffix
    # (GD's, which only that sweep measures, are read there).
    sweep_d = ", ".join(f"{d:g}" for d in sorted(anisotropy_table.d.unique()))
    anisotropy_metrics(best_degree_rows(anisotropy_table), params["anisotropy_facts"], metrics,
                       params["break_width_budget"],
                       regime_metrics=RenamedMetrics(metrics, ANISOTROPY_SWEEP_SUFFIX, f" (the d = {sweep_d} sweep; reported)"))
    anisotropy_regime_metrics(best_degree_rows(anisotropy_regime_table), metrics, params["break_width_budget"])
    robust_regime_metrics(robust_table, metrics)
    whitening_metrics(best_degree_rows(whitening_table), metrics)
    whitening_regime_metrics(best_degree_rows(whitening_regime_table), metrics)
    return {"results": results, "fits": fits, "metrics": metrics.frame()}
