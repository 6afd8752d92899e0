"""Summary step of the linear-associative-memory study (S1): `assoc_summary.summary` (the capacity
table and the metrics of the S1 claims). The readings live in the study library, one claim family
a module: factstore.assoc.capacity (the capacity table, the full-rank capacities per d),
optimal_capacity, hebbian_capacity, decoupled_gaps, spectrum_metrics and rank_capacity. Its own
module, so that the training steps do not depend on the metrics' code: editing a metric reruns
only this step and what reads its tables."""

from __future__ import annotations

from pathlib import Path

from factstore.assoc import capacity, decoupled_gaps, hebbian_capacity, optimal_capacity, rank_capacity, spectrum_metrics
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Capacities, spectra statistics and the metrics the S1 claims are checked against.

    inputs: hebbian=..., trained_*=..., spectra_*=..., rank_check=... ; params: seed (the
    bootstrap's), capacity_accuracy, spectrum_d, rank_d, rank_alphas. The capacity is the paper's
    (criterion 'all': at least half of the seeds store every fact); the apparent capacity at mean
    accuracy >= capacity_accuracy (criterion 'mean') is reported beside it.
    """
    threshold = params["capacity_accuracy"]
    curves = concat_tables(inputs, "trained_")
    spectra = concat_tables(inputs, "spectra_")
    hebbian_curves = read_table(inputs["hebbian"])
    capacity_table = capacity.capacity_table(curves, hebbian_curves, threshold)
    trained = capacity_table[capacity_table.method == "trained"]
    original_curves = curves[(curves.method == "trained") & (curves.problem == "original") & (curves.rank_fraction == 1.0)]

    rows = capacity.full_rank_capacity_metrics(trained, threshold)
    rows += optimal_capacity.optimal_capacity_metrics_with_errors(trained, original_curves, threshold, params["seed"])
    rows += hebbian_capacity.hebbian_metrics(capacity_table[capacity_table.method == "hebbian-all"], hebbian_curves)
    rows += decoupled_gaps.decoupled_metrics(curves, trained, threshold)
    rows += spectrum_metrics.spectrum_statistics(spectra, capacity_table, params["spectrum_d"])
    rows += rank_capacity.rank_capacity_metrics(trained, curves, params["rank_d"])
    if "rank_check" in inputs:
        rows += rank_capacity.rank_optimisation_metrics(curves, read_table(inputs["rank_check"]), params["rank_d"],
                                                        params["rank_alphas"])
    metrics = MetricsTable()
    for row in rows:
        metrics.add(*row)
    return {"capacity": capacity_table, "metrics": metrics.frame()}
