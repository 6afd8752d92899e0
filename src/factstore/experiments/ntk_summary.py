"""Summary step of the NTK study (S2): the metrics the S2 claims are checked against, computed by
factstore.tangent_kernel_metrics. The rule ntk_summary in workflow/rules/ntk.smk calls it through
`python -m factstore ntk_summary.summary`.
"""

from __future__ import annotations

from pathlib import Path

from factstore import tangent_kernel_metrics
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The metrics the S2 claims are checked against (metric, value, detail).

    inputs: convergence=..., scaling=..., training_<width>=... (summaries of the training jobs).
    params: learning_rate (of the training jobs), fit_min_train_size: the scaling law is fitted
    over P >= this (the asymptotic regime, after the first steep drop in which the low-degree
    spherical harmonics are learnt); the fit over every P is reported too (suffix _all_sizes).
    """
    training_table = concat_tables(inputs, "training_")
    metrics = MetricsTable()
    tangent_kernel_metrics.convergence_metrics(metrics, read_table(inputs["convergence"]))
    tangent_kernel_metrics.lazy_training_metrics(metrics, training_table)
    tangent_kernel_metrics.linearised_metrics(metrics, training_table, params["learning_rate"])
    tangent_kernel_metrics.scaling_metrics(metrics, read_table(inputs["scaling"]), params["fit_min_train_size"])
    return {"metrics": metrics.frame()}
