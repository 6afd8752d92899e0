"""The S2 summary's metrics: the NTK study's tables in, metrics added to a MetricsTable.

Four claim families, one function each, every metric name written out where it is added (a search
for a claim's metric finds the code behind it): the empirical NTK's convergence to the analytic
one with width (`convergence_metrics`), lazy training (`lazy_training_metrics`: how far the kernel
moves in training, against the O(width^-1/2) bound), the linearised dynamics
(`linearised_metrics`: network vs linearised outputs, above GD's discretisation floor) and the
kernel-regression scaling law (`scaling_metrics`: the fitted exponent and the one the spectral
theory predicts on the same inputs). Tables are the ntk steps' (factstore.experiments.ntk):
convergence (width, seed, rel_error), training (width, seed, kernel_change, linearised_error,
discretisation_floor, ...), scaling (train_size, seed, test_error, predicted_error).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.metrics import MetricsTable
from factstore.statistics import linear_fit, power_law_fit


def mean_curve(table: pd.DataFrame, key: str, value: str) -> pd.Series:
    """Mean over seeds of `value` at each `key`, sorted by key."""
    return table.groupby(key)[value].mean().sort_index()


def log_log_slope_error(curve: pd.Series) -> float:
    """Standard error of the log-log slope of a positive curve (index x, values y)."""
    return linear_fit(np.log(curve.index.to_numpy(float)), np.log(curve.to_numpy(float))).slope_se


def rate_bound(curve: pd.Series, rate: float = -0.5, floor: float = 0.0) -> float:
    """The value at the widest width of a power law width^rate whose constant is set at the
    narrowest width, plus a floor: curve[w_min] (w_max / w_min)^rate + floor. curve: a positive
    quantity indexed by width (sorted). The O(width^-1/2) theorems (Lee et al. 2019, Thm 2.1 and
    its corollary for the outputs) fix the rate, not the constant; the narrowest width, the least
    lazy network of the sweep, sets it."""
    return float(curve.iloc[0] * (curve.index[-1] / curve.index[0]) ** rate + floor)


def _seeds_note(table: pd.DataFrame) -> str:
    return f"mean over {table['seed'].nunique()} seeds"


def _width_power_law(metrics: MetricsTable, slope_name: str, r2_name: str, curve: pd.Series, what: str,
                     table: pd.DataFrame) -> None:
    """Add the log-log slope (with its standard error) and R^2 of `curve` vs width as two metrics."""
    fit, error = power_law_fit(curve.index.to_numpy(float), curve.to_numpy(float)), log_log_slope_error(curve)
    span = f"{curve.index.min()}..{curve.index.max()} ({len(curve)} points, {_seeds_note(table)})"
    metrics.add(slope_name, fit.exponent, f"log-log slope of {what} over {span}; prefactor {fit.prefactor:.4g}",
                standard_error=error)
    metrics.add(r2_name, fit.r2, f"R^2 of the log-log fit of {what}")


def convergence_metrics(metrics: MetricsTable, convergence_table: pd.DataFrame) -> None:
    """The empirical NTK's relative error at initialisation vs width: slope, R^2, error at the widest."""
    kernel_error = mean_curve(convergence_table, "width", "rel_error")
    _width_power_law(metrics, "ntk_convergence_slope", "ntk_convergence_r2", kernel_error,
                     "||Theta_emp - Theta||_F / ||Theta||_F vs width", convergence_table)
    metrics.add("ntk_convergence_error_max_width", kernel_error.iloc[-1],
                f"relative Frobenius error at width {kernel_error.index[-1]}, {_seeds_note(convergence_table)}")


def lazy_training_metrics(metrics: MetricsTable, training_table: pd.DataFrame) -> None:
    """How far the NTK moves over training vs width: slope, R^2, change at the widest width and
    against the O(width^-1/2) bound."""
    kernel_change = mean_curve(training_table, "width", "kernel_change")
    _width_power_law(metrics, "lazy_training_slope", "lazy_training_r2", kernel_change,
                     "||Theta_T - Theta_0||_F / ||Theta_0||_F vs width", training_table)
    metrics.add("lazy_training_change_max_width", kernel_change.iloc[-1],
                f"relative NTK change over training at width {kernel_change.index[-1]}, {_seeds_note(training_table)}")
    bound = rate_bound(kernel_change)
    metrics.add("lazy_training_change_rate_bound", bound,
                f"the O(width^-1/2) bound at width {kernel_change.index[-1]}, its constant set at the narrowest "
                f"width {kernel_change.index[0]} (change there {kernel_change.iloc[0]:.4g})")
    metrics.add("lazy_training_change_over_rate_bound", kernel_change.iloc[-1] / bound,
                "relative NTK change at the widest width over that bound (<= 1: it falls at least like width^-1/2)")


def linearised_metrics(metrics: MetricsTable, training_table: pd.DataFrame, learning_rate: float) -> None:
    """Network vs linearised outputs vs width: the slope over the widths above twice GD's
    discretisation floor (and over every width, reported), the error at the widest width, the floor
    at `learning_rate`, and the error against the O(width^-1/2) bound down to the floor."""
    linearised = mean_curve(training_table, "width", "linearised_error")
    floor = training_table["discretisation_floor"].mean()
    above_floor = linearised[linearised > 2 * floor]
    metrics.add("linearised_fit_widths", len(above_floor),
                f"widths whose linearised error exceeds twice the GD discretisation floor ({2 * floor:.3g}): "
                f"{above_floor.index.tolist()}, the widths the slope is fitted over")
    if len(above_floor) >= 2:
        _width_power_law(metrics, "linearised_error_slope", "linearised_error_r2", above_floor,
                         "||f_net - f_lin||_F / ||f_lin - f_0||_F vs width, widths above twice the discretisation floor",
                         training_table)
    else:  # nothing to fit: the check reads nan, and the gate linearised_fit_widths says why
        metrics.add("linearised_error_slope", math.nan, "fewer than two widths above twice the discretisation floor")
        metrics.add("linearised_error_r2", math.nan, "no fit")
    _width_power_law(metrics, "linearised_error_slope_all_widths", "linearised_error_r2_all_widths", linearised,
                     "||f_net - f_lin||_F / ||f_lin - f_0||_F vs width, every width (reported)", training_table)
    metrics.add("linearised_error_max_width", linearised.iloc[-1],
                f"network vs linearised (exp formula) outputs at width {linearised.index[-1]}, "
                f"{_seeds_note(training_table)}")
    metrics.add("linearised_discretisation_floor", floor,
                f"discrete-GD vs gradient-flow linear model at lr {learning_rate}: a floor no width removes")
    bound = rate_bound(linearised, floor=floor)
    metrics.add("linearised_error_rate_bound", bound,
                f"the O(width^-1/2) bound at width {linearised.index[-1]}, its constant set at the narrowest width "
                f"{linearised.index[0]} (error there {linearised.iloc[0]:.4g}), plus the discretisation floor {floor:.3g}")
    metrics.add("linearised_error_over_rate_bound", linearised.iloc[-1] / bound,
                "linearised error at the widest width over that bound (<= 1: it falls at least like width^-1/2 down to the floor)")


def scaling_metrics(metrics: MetricsTable, scaling_table: pd.DataFrame, fit_min_train_size: int) -> None:
    """The kernel-regression learning curve's power law over P >= fit_min_train_size (and over
    every P, suffix _all_sizes), and the exponent the spectral theory predicts over the same window."""
    test_error = mean_curve(scaling_table, "train_size", "test_error")
    asymptotic = test_error[test_error.index >= fit_min_train_size]
    if len(asymptotic) < 2:
        raise ValueError(f"ntk.scaling.fit_min_train_size = {fit_min_train_size} leaves fewer than two "
                         f"train_sizes ({test_error.index.tolist()}) to fit the power law over")
    scaling_fits = (  # (exponent, r2, prefactor) names, the learning curve they fit
        (("kernel_scaling_exponent", "kernel_scaling_r2", "kernel_scaling_prefactor"), asymptotic),
        (("kernel_scaling_exponent_all_sizes", "kernel_scaling_r2_all_sizes", "kernel_scaling_prefactor_all_sizes"),
         test_error),
    )
    for (exponent_name, r2_name, prefactor_name), curve in scaling_fits:
        fit = power_law_fit(curve.index.to_numpy(float), curve.to_numpy(float))
        span = f"P = {curve.index.min()}..{curve.index.max()} ({len(curve)} sizes), {_seeds_note(scaling_table)}"
        metrics.add(exponent_name, fit.exponent, f"relative test error ~ prefactor * P^exponent, {span}",
                    standard_error=log_log_slope_error(curve))
        metrics.add(r2_name, fit.r2, f"R^2 of the log-log fit of test error vs P, {span}")
        metrics.add(prefactor_name, fit.prefactor, f"prefactor of that fit, {span}")
    _predicted_exponent(metrics, scaling_table, asymptotic.index)


def _window_exponent(table: pd.DataFrame, value: str, window) -> float:
    """Log-log slope of the mean over `table`'s rows of `value` vs train_size, over the sizes in `window`."""
    curve = mean_curve(table, "train_size", value)
    curve = curve[curve.index.isin(window)]
    return power_law_fit(curve.index.to_numpy(float), curve.to_numpy(float)).exponent


def _seed_standard_error(values: np.ndarray) -> float:
    """Standard error of the mean of per-seed values (NaN with one seed)."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan


def _predicted_exponent(metrics: MetricsTable, scaling_table: pd.DataFrame, window) -> None:
    """The exponent the spectral theory predicts over the fit window, and fitted minus predicted.

    Both are slopes of the seed-mean curves over the same P window; their standard errors come from
    the spread over seeds of the same slopes fitted seed by seed (each seed has its own teacher)."""
    predicted = _window_exponent(scaling_table, "predicted_error", window)
    fitted = _window_exponent(scaling_table, "test_error", window)
    per_seed = [(_window_exponent(rows, "test_error", window), _window_exponent(rows, "predicted_error", window))
                for _, rows in scaling_table.groupby("seed")]
    fitted_by_seed, predicted_by_seed = np.array(per_seed).T
    span = f"P = {min(window)}..{max(window)} ({len(window)} sizes), {_seeds_note(scaling_table)}"
    metrics.add("kernel_scaling_exponent_predicted", predicted,
                f"log-log slope of the predicted relative test error (spectral theory of kernel regression from the "
                f"NTK's spherical-harmonic spectrum and each teacher's weights in it), {span}",
                standard_error=_seed_standard_error(predicted_by_seed))
    metrics.add("kernel_scaling_exponent_minus_predicted", fitted - predicted,
                f"fitted exponent (kernel_scaling_exponent) minus predicted exponent, {span}; standard error from "
                f"the per-seed differences", standard_error=_seed_standard_error(fitted_by_seed - predicted_by_seed))
