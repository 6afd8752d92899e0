"""Summary step of the committee-machine study: `committee_summary.summary` (fractions,
capacities, extrapolations and the metrics of the S3 claims, computed by
factstore.committee.capacity_metrics and factstore.committee.multi_output_metrics). Its own
module, so that the embedding steps do not depend on the metrics' code: editing a metric reruns
only this step and what reads its tables."""

from __future__ import annotations

from pathlib import Path

from factstore.committee import capacity_metrics, multi_output_metrics
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Fractions, capacities, extrapolations and the metrics of the S3 claims.

    inputs: embedding_<run>=... for every run (tree runs named tree_k<K>_<solver>), multi_output=...;
    params: solvers {k1, k3, k5: [solver, ...]} (the tree runs), depth {tree_run, reference_run}
    (two-layer tree vs one-layer K = 3 tree, same solver, both at their largest N), fc_runs (the fully connected runs, fc_l<layers>_<solver>; per depth the best solver's CpW is read), epoch_sweep {n, runs: [[run, epochs], ...]} (K = 3
    back-propagation on identical instances with different epoch budgets), reference {k3, k5:
    {milp, least_action}} (optional: the exact references at small N).
    """
    runs = capacity_metrics.split_search(concat_tables(inputs, "embedding_"))
    fractions = capacity_metrics.embedded_fractions(runs)
    capacity_table = capacity_metrics.capacities(runs)
    lines = capacity_metrics.extrapolations(capacity_table)
    metrics = MetricsTable()
    capacity_metrics.capacity_metrics(runs, capacity_table, lines, params, metrics)
    per_o = multi_output_metrics.per_output_means(read_table(inputs["multi_output"]))
    multi_output_metrics.add_multi_output_metrics(per_o, metrics)
    return {
        "fractions": fractions, "capacity": capacity_table, "extrapolation": lines,
        "outputs": per_o, "metrics": metrics.frame(),
    }
