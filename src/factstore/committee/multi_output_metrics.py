"""The many-outputs metrics (S3, second half): the multi-output runs' table in, the per-O means and
the metric rows out. Three readings of the power law in O (the check is on acc - 1/2, the reading
the claim names), fitted where acc - 1/2 stands clear of the random-hidden-layer floor
(`multi_output.fit_window`), with the floor, the saturation and the capacity at the largest O.

Tables: the runs' table has one row per (O, instance) with the columns of the multi-output step
(outputs, above_chance, floor_above_chance, accuracy, label_accuracy, bits_per_weight, epochs,
saturated_at, saturated). Every metric name is written out in full.
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.committee import multi_output as many
from factstore.metrics import MetricsTable
from factstore.statistics import power_law_fit


def per_output_means(outputs_table: pd.DataFrame) -> pd.DataFrame:
    """One row per O: the means over instances (the largest epochs and saturation epoch; saturated
    when every instance is)."""
    return outputs_table.groupby("outputs", as_index=False).agg(
        above_chance=("above_chance", "mean"), floor_above_chance=("floor_above_chance", "mean"),
        accuracy=("accuracy", "mean"), label_accuracy=("label_accuracy", "mean"),
        bits_per_weight=("bits_per_weight", "mean"), epochs=("epochs", "max"), saturated_at=("saturated_at", "max"),
        saturated=("saturated", "all"),
    )


def add_multi_output_metrics(per_o: pd.DataFrame, metrics: MetricsTable) -> None:
    """Adds the many-outputs metrics of the per-O means `per_o` (`per_output_means`) to `metrics`:
    the readings (`multi_output_metrics`), the capacity at the largest O and the saturation epoch."""
    window = many.fit_window(per_o)
    for metric in multi_output_metrics(per_o, window):
        metrics.add(*metric[:3], standard_error=metric[3])
    largest = per_o.iloc[-1]
    metrics.add("multi_output_cpw_largest_o", largest.bits_per_weight, f"P O (1 - H2(error)) / W at O = {int(largest.outputs)}")
    metrics.add("multi_output_saturation_epochs", per_o.saturated_at.max(),
                f"the last epoch any instance's accuracy improved, over every O (runs of at most {int(per_o.epochs.max())} epochs)")


def _power_law_metrics(frame: pd.DataFrame, column: str, exponent_name: str, r2_name: str, meaning: str
                       ) -> list[tuple[str, float, str, float]]:
    """(exponent, R^2) of column ~ O^exponent over the rows of frame; NaN with fewer than 3 rows
    or a value <= 0."""
    o_values = frame.outputs.tolist()
    if len(frame) < 3 or not (frame[column] > 0).all():
        return [(exponent_name, math.nan, f"{meaning}: not positive at every O of {o_values} (or < 3 O): no power "
                 "law fitted", math.nan), (r2_name, math.nan, "no fit", math.nan)]
    fit = power_law_fit(frame.outputs, frame[column])
    return [(exponent_name, fit.exponent, f"{meaning} ~ O^exponent over O = {o_values}, prefactor {fit.prefactor:.3g}",
             fit.exponent_se), (r2_name, fit.r2, f"R^2 of the line in (log O, log {column})", math.nan)]


def multi_output_metrics(per_o: pd.DataFrame, window: pd.DataFrame) -> list[tuple[str, float, str, float]]:
    """The many-outputs readings: per_o holds the per-O means (outputs, above_chance,
    floor_above_chance, bits_per_weight, label_accuracy, saturated, saturated_at, epochs); window
    the O whose acc - 1/2 is >= FLOOR_MARGIN x its floor (the checked exponent's fit window)."""
    o_values = per_o.outputs.tolist()
    readings = {  # column: (exponent metric, its R^2 metric, what it is)
        "above_chance": ("multi_output_exponent_all_o", "multi_output_exponent_all_o_r2",
                         "bit accuracy above chance, acc - 1/2, every O (reported)"),
        "bits_per_weight": ("multi_output_cpw_exponent", "multi_output_cpw_exponent_r2",
                            "finite-error CpW, P O (1 - H2(1 - acc)) / W bits per weight (reported)"),
        "label_accuracy": ("multi_output_label_exponent", "multi_output_label_exponent_r2",
                           "O-bit label accuracy, the fraction of patterns with every bit right (reported)"),
    }
    metrics = [("multi_output_above_chance_min", per_o.above_chance.min(), f"mean over instances, O = {o_values}",
                math.nan)]
    metrics += _power_law_metrics(window, "above_chance", "multi_output_exponent", "multi_output_exponent_r2",
                                  f"bit accuracy above chance, acc - 1/2 (checked), where it is >= {many.FLOOR_MARGIN:g}x "
                                  "the random-hidden-layer floor")
    for column, (exponent_name, r2_name, meaning) in readings.items():
        metrics += _power_law_metrics(per_o, column, exponent_name, r2_name, meaning)
    upper = per_o[per_o.outputs >= per_o.outputs.median()]
    metrics += _power_law_metrics(upper, "above_chance", "multi_output_exponent_upper_half", "multi_output_exponent_upper_half_r2",
                                  "acc - 1/2 over the larger half of O (reported)")
    floors = ", ".join(f"O {int(row.outputs)}: {row.floor_above_chance:.3f}" for row in per_o.itertuples())
    metrics += [
        ("multi_output_window_points", float(len(window)), f"O whose acc - 1/2 is >= {many.FLOOR_MARGIN:g}x the floor: "
         f"{window.outputs.tolist()} (floor, acc - 1/2 of a random hidden layer with fitted output perceptrons: {floors})",
         math.nan),
        ("multi_output_floor_median", per_o.floor_above_chance.median(), "median over O of the floor's acc - 1/2",
         math.nan),
        ("multi_output_saturated_fraction", per_o.saturated.mean(), "fraction of O whose run, trained through the "
         "whole anneal, ended saturated (no gain > 0.001 over its last `patience` epochs); unsaturated: "
         f"{per_o.outputs[~per_o.saturated].tolist()}", math.nan),
    ]
    return metrics
