"""Summary step of the usability study (S0 "Usability inside a Transformer"): the rule calls
it as `usability_summary.summary`. Its own module, so that the capacity and whitening steps
(experiments/usability.py) do not depend on the metrics' code: editing a metric reruns only this
step and what reads its tables.

Beside the claims' metrics (factstore.usability.summary) it writes the value a check would read
under each declared alternative of config/claims.yaml that the same tables answer
(factstore.usability.alternatives), each right after the metric it is the alternative of."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore.io import concat_tables
from factstore.metrics import MetricsTable
from factstore.mlp.results import of_degree
from factstore.usability import alternatives
from factstore.usability import summary as measures


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Tables and metrics of the three claims (factstore.usability.summary).

    inputs: capacity_<method>, probes_<method> (capacity step), whitening_<kind> (whitening step),
    standalone_<method> (the fact-storing-MLP study's capacity tables). params: target (the
    usability criterion), ntk_degree, lipschitz_on ('lipschitz_relative' | 'lipschitz'). Returns
    {"usable": usable vs standalone per (method, F), "mlps": every MLP evaluated, "metrics"}.
    """
    target = params["target"]
    capacity_table, probes = concat_tables(inputs, "capacity_"), concat_tables(inputs, "probes_")
    whitening_table, standalone = concat_tables(inputs, "whitening_"), concat_tables(inputs, "standalone_")
    usable = measures.usable_table(capacity_table, standalone[of_degree(standalone, params["ntk_degree"])], target)
    mlps = pd.concat([probes, whitening_table], ignore_index=True)
    metrics = MetricsTable()
    computed = (measures.usable_metrics(capacity_table, usable, probes, target)
                + measures.whitening_metrics(whitening_table)
                + measures.lipschitz_metrics(whitening_table, target, params["lipschitz_on"]))
    alternative_metrics = (alternatives.capacity_gain_alternatives(whitening_table)
                           + alternatives.trade_off_alternatives(whitening_table)
                           + alternatives.lipschitz_alternatives(whitening_table, mlps, target, params["lipschitz_on"]))
    for name, value, detail, error in alternatives.beside(computed, alternative_metrics):
        metrics.add(name, value, detail, standard_error=error)
    return {"usable": usable, "mlps": mlps, "metrics": metrics.frame()}
