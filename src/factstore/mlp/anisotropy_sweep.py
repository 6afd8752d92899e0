"""Every metric of a kappa sweep (anisotropic values), composed from the concept modules: the NTK's
break and U* gain (ntk_anisotropy), robustness (anisotropy_robustness), the cost law
(anisotropy_cost_law) and the rho ranking (decodability_ranking); on the anisotropy sweep and on
the NTK's sweep at the paper's d = 128 (anisotropy_regime).
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.anisotropy_cost_law import law_metrics
from factstore.mlp.anisotropy_robustness import robust_metrics
from factstore.mlp.decodability_ranking import rho_metrics
from factstore.mlp.methods import METHODS
from factstore.mlp.ntk_anisotropy import ntk_anisotropy_metrics
from factstore.mlp.summary_common import RenamedMetrics, families

LINSPACE_SUFFIX = "_linspace"
"""The NTK sweep's readings written under one name per method (the break at the width cap and at
fixed budgets, the U* gain, ...) read its geometric rows; on its linspace rows they carry this
suffix. The cost-law metrics name their family in full (LAW_METRICS)."""


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
    robust_metrics(main, main_facts, setting, metrics)
    for family in families(table):
        rows = table[table.spectrum == family]
        trained = rows.method.map(lambda method: METHODS[method].search.trains).astype(bool)
        law_metrics(rows[trained], family, metrics, break_facts)
        law_metrics(rows[~trained], family, regime, break_facts)
    rho_metrics(at_break, d, f"F = {break_facts}, {setting}", metrics)
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
