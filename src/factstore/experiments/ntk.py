"""Experiment steps of the NTK study (S2).

Rules in workflow/rules/ntk.smk call these through `python -m factstore ntk.<step>`. The computing
steps return tidy tables: `convergence` (empirical vs analytic NTK at init, all widths), `training`
(one width per job: GD training, NTK change, linearised dynamics) and `scaling` (kernel regression
learning curve, measured and predicted by the spectral theory); `summary` condenses them into the metrics config/claims.yaml checks; the figure
steps draw them with factstore.plots.ntk.

Random streams come from `derived_generator(seed, stream, ...)`: the training data of a seed
index is the same at every width, and a job's numbers do not depend on which other jobs ran.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from factstore import tangent_kernel
from factstore.device import derived_generator
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable
from factstore.statistics import linear_fit, power_law_fit

DTYPE = torch.float64  # kernels are compared at the 1e-3 level; float64 keeps rounding out of it


def _network(input_dim: int, width: int, generator: torch.Generator,
             device) -> tuple[tangent_kernel.TwoLayerReLU, tangent_kernel.Params]:
    model = tangent_kernel.TwoLayerReLU(input_dim, width, generator, dtype=DTYPE).to(device)
    return model, tangent_kernel.network_params(model)


def _teacher(params: dict, seed: int) -> tangent_kernel.Params:
    """The random two-layer ReLU teacher of `seed` (params: seed, input_dim, teacher_width)."""
    return tangent_kernel.random_teacher(params["input_dim"], params["teacher_width"],
                                         derived_generator(params["seed"], "ntk-teacher", seed), DTYPE)


def _teacher_task(params: dict, seed: int, count: int, stream: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` inputs on the sphere of radius sqrt(d) and the outputs of the random two-layer
    ReLU teacher drawn from `seed` (params: seed, input_dim, teacher_width). The teacher depends
    on the seed only; `stream` names the input sample (training set of some size, test set)."""
    teacher = _teacher(params, seed)
    x = tangent_kernel.sphere_inputs(count, params["input_dim"],
                                     derived_generator(params["seed"], stream, seed, count), DTYPE)
    return x.to(device), tangent_kernel.teacher_outputs(teacher, x).to(device)


# ------------------------------------------------------------------------------ computing steps
def convergence(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Relative Frobenius error of the empirical NTK at initialisation against the analytic one.

    params: seed, input_dim, n_inputs, widths (list), seeds (int), chunk_size (examples per vmap
    chunk, bounds the Jacobian's memory). The inputs are shared by all widths and seeds.
    Returns {"table": rows (width, seed, rel_error)}.
    """
    device = context.device
    x = tangent_kernel.sphere_inputs(params["n_inputs"], params["input_dim"],
                                     derived_generator(params["seed"], "ntk-convergence-inputs"), DTYPE).to(device)
    theta = tangent_kernel.analytic_ntk(x)
    rows = []
    for seed in tqdm(range(params["seeds"]), desc="convergence: seeds", mininterval=5):
        for width in params["widths"]:
            generator = derived_generator(params["seed"], "ntk-convergence-network", seed, width)
            model, weights = _network(params["input_dim"], width, generator, device)
            empirical = tangent_kernel.empirical_ntk(model, weights, x, chunk_size=params["chunk_size"])
            error = tangent_kernel.relative_frobenius_error(empirical, theta)
            rows.append({"width": width, "seed": seed, "rel_error": error})
    return {"table": pd.DataFrame(rows)}


def training(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Full-batch GD on L = ||f - y||^2 / (2N) at one width, every seed (a teacher task per seed).

    params: seed, width, seeds (int), input_dim, n_train, teacher_width, learning_rate, steps,
    n_records (evenly spaced times recorded), n_trajectories (training points whose outputs
    are kept for the figure), chunk_size.
    Returns {"summary": one row per seed with
        kernel_change = ||Theta_T - Theta_0||_F / ||Theta_0||_F (empirical NTKs, training inputs);
        linearised_error = ||f_net - f_lin||_F / ||f_lin - f_0||_F over all recorded times and
            training points, f_lin = f_0 + (I - exp(-eta Theta_0 t / N))(y - f_0) with the
            empirical NTK at init (the loss's 1/2N makes GD follow exactly this flow as eta -> 0);
        discretisation_floor = the same distance between the discrete-GD and the gradient-flow
            linear model, the part of linearised_error no width removes;
        train_error = ||f_T - y|| / ||y||},
    {"trajectories": rows (width, seed, sample, step, target, network, linearised)}.
    """
    device, width, steps, rate = context.device, params["width"], params["steps"], params["learning_rate"]
    record_at = torch.linspace(0, steps, params["n_records"]).round().long().unique().tolist()
    times = torch.tensor(record_at, device=device)
    summary, trajectories = [], []
    for seed in tqdm(range(params["seeds"]), desc=f"training width {width}: seeds", mininterval=5):
        x, y = _teacher_task(params, seed, params["n_train"], "ntk-train-inputs", device)
        y = y / y.std()  # unit-variance targets: errors and learning rates mean the same at every d
        generator = derived_generator(params["seed"], "ntk-training-network", seed, width)
        model, initial = _network(params["input_dim"], width, generator, device)
        final, outputs = tangent_kernel.train_full_batch_gd(model, initial, x, y, rate, steps, record_at)
        theta_init = tangent_kernel.empirical_ntk(model, initial, x, chunk_size=params["chunk_size"])
        theta_end = tangent_kernel.empirical_ntk(model, final, x, chunk_size=params["chunk_size"])
        f0 = outputs[0]
        flow = tangent_kernel.linearised_outputs(theta_init, f0, y, rate, times)
        discrete = tangent_kernel.discrete_linearised_outputs(theta_init, f0, y, rate, times)
        movement = (flow - f0).norm()
        summary.append({
            "width": width,
            "seed": seed,
            "kernel_change": tangent_kernel.relative_frobenius_error(theta_end, theta_init),
            "linearised_error": float((outputs - flow).norm() / movement),
            "discretisation_floor": float((discrete - flow).norm() / movement),
            "train_error": float((outputs[-1] - y).norm() / y.norm()),
        })
        for sample in range(min(params["n_trajectories"], len(y))):
            for index, step in enumerate(record_at):
                trajectories.append({
                    "width": width, "seed": seed, "sample": sample, "step": step, "target": float(y[sample]),
                    "network": float(outputs[index, sample]), "linearised": float(flow[index, sample]),
                })
    return {"summary": pd.DataFrame(summary), "trajectories": pd.DataFrame(trajectories)}


def scaling(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Ridgeless kernel regression with the analytic NTK on a two-layer ReLU teacher task.

    params: seed, input_dim, teacher_width, train_sizes (list), n_test, seeds (int), ridge (a
    jitter relative to the kernel's mean diagonal, for a stable solve; ~0 keeps it ridgeless),
    theory_degrees (spherical-harmonic degrees of the kernel resolved by the theory).
    Returns {"table": rows (train_size, seed, test_error, predicted_error)}, test_error = test mean
    squared error over the target's mean square (1 = predicting zero); predicted_error = the same
    quantity predicted by the spectral theory of kernel regression from the kernel's eigenvalues on
    the sphere and the teacher's weights in its eigenbasis (`tangent_kernel.predicted_teacher_error`).
    Each seed has its own teacher.
    """
    device = context.device
    rows = []
    diagonal = float(tangent_kernel.ntk_on_sphere(1.0))  # every input's kernel diagonal on the sphere
    for seed in tqdm(range(params["seeds"]), desc="kernel regression: seeds", mininterval=5):
        x_test, y_test = _teacher_task(params, seed, params["n_test"], "ntk-test-inputs", device)
        predicted = tangent_kernel.predicted_teacher_error(_teacher(params, seed), params["train_sizes"],
                                                           params["ridge"] * diagonal, params["theory_degrees"])
        for size, predicted_error in zip(params["train_sizes"], predicted):
            x, y = _teacher_task(params, seed, size, "ntk-train-inputs", device)
            k_train = tangent_kernel.analytic_ntk(x)
            ridge = params["ridge"] * float(k_train.diagonal().mean())
            k_test_train = tangent_kernel.analytic_ntk(x_test, x)
            prediction = tangent_kernel.kernel_regression(k_train, k_test_train, y, ridge=ridge)
            error = float((prediction - y_test).pow(2).mean() / y_test.pow(2).mean())
            rows.append({"train_size": size, "seed": seed, "test_error": error,
                         "predicted_error": float(predicted_error)})
    return {"table": pd.DataFrame(rows)}


# ------------------------------------------------------------------------------ summary
def _mean_curve(table: pd.DataFrame, key: str, value: str) -> pd.Series:
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


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The metrics the S2 claims are checked against (metric, value, detail).

    inputs: convergence=..., scaling=..., training_<width>=... (summaries of the training jobs).
    params: learning_rate (of the training jobs), fit_min_train_size: the scaling law is fitted
    over P >= this (the asymptotic regime, after the first steep drop in which the low-degree
    spherical harmonics are learnt); the fit over every P is reported too (suffix _all_sizes).
    Every metric name is written out where it is added, so grep finds the code behind a claim.
    """
    convergence_table = read_table(inputs["convergence"])
    training_table = concat_tables(inputs, "training_")
    scaling_table = read_table(inputs["scaling"])
    metrics = MetricsTable()

    def width_power_law(slope_name: str, r2_name: str, curve: pd.Series, what: str, table: pd.DataFrame) -> None:
        fit, error = power_law_fit(curve.index.to_numpy(float), curve.to_numpy(float)), log_log_slope_error(curve)
        span = f"{curve.index.min()}..{curve.index.max()} ({len(curve)} points, {_seeds_note(table)})"
        metrics.add(slope_name, fit.exponent, f"log-log slope of {what} over {span}; prefactor {fit.prefactor:.4g}",
                    standard_error=error)
        metrics.add(r2_name, fit.r2, f"R^2 of the log-log fit of {what}")

    kernel_error = _mean_curve(convergence_table, "width", "rel_error")
    width_power_law("ntk_convergence_slope", "ntk_convergence_r2", kernel_error,
                    "||Theta_emp - Theta||_F / ||Theta||_F vs width", convergence_table)
    metrics.add("ntk_convergence_error_max_width", kernel_error.iloc[-1],
                f"relative Frobenius error at width {kernel_error.index[-1]}, {_seeds_note(convergence_table)}")

    kernel_change = _mean_curve(training_table, "width", "kernel_change")
    width_power_law("lazy_training_slope", "lazy_training_r2", kernel_change,
                    "||Theta_T - Theta_0||_F / ||Theta_0||_F vs width", training_table)
    metrics.add("lazy_training_change_max_width", kernel_change.iloc[-1],
                f"relative NTK change over training at width {kernel_change.index[-1]}, {_seeds_note(training_table)}")
    bound = rate_bound(kernel_change)
    metrics.add("lazy_training_change_rate_bound", bound,
                f"the O(width^-1/2) bound at width {kernel_change.index[-1]}, its constant set at the narrowest "
                f"width {kernel_change.index[0]} (change there {kernel_change.iloc[0]:.4g})")
    metrics.add("lazy_training_change_over_rate_bound", kernel_change.iloc[-1] / bound,
                "relative NTK change at the widest width over that bound (<= 1: it falls at least like width^-1/2)")

    linearised = _mean_curve(training_table, "width", "linearised_error")
    floor = training_table["discretisation_floor"].mean()
    above_floor = linearised[linearised > 2 * floor]
    metrics.add("linearised_fit_widths", len(above_floor),
                f"widths whose linearised error exceeds twice the GD discretisation floor ({2 * floor:.3g}): "
                f"{above_floor.index.tolist()}, the widths the slope is fitted over")
    if len(above_floor) >= 2:
        width_power_law("linearised_error_slope", "linearised_error_r2", above_floor,
                        "||f_net - f_lin||_F / ||f_lin - f_0||_F vs width, widths above twice the discretisation floor",
                        training_table)
    else:  # nothing to fit: the check reads nan, and the gate linearised_fit_widths says why
        metrics.add("linearised_error_slope", math.nan, "fewer than two widths above twice the discretisation floor")
        metrics.add("linearised_error_r2", math.nan, "no fit")
    width_power_law("linearised_error_slope_all_widths", "linearised_error_r2_all_widths", linearised,
                    "||f_net - f_lin||_F / ||f_lin - f_0||_F vs width, every width (reported)", training_table)
    metrics.add("linearised_error_max_width", linearised.iloc[-1],
                f"network vs linearised (exp formula) outputs at width {linearised.index[-1]}, "
                f"{_seeds_note(training_table)}")
    metrics.add("linearised_discretisation_floor", floor,
                f"discrete-GD vs gradient-flow linear model at lr {params['learning_rate']}: a floor no width removes")
    bound = rate_bound(linearised, floor=floor)
    metrics.add("linearised_error_rate_bound", bound,
                f"the O(width^-1/2) bound at width {linearised.index[-1]}, its constant set at the narrowest width "
                f"{linearised.index[0]} (error there {linearised.iloc[0]:.4g}), plus the discretisation floor {floor:.3g}")
    metrics.add("linearised_error_over_rate_bound", linearised.iloc[-1] / bound,
                "linearised error at the widest width over that bound (<= 1: it falls at least like width^-1/2 down to the floor)")

    test_error = _mean_curve(scaling_table, "train_size", "test_error")
    asymptotic = test_error[test_error.index >= params["fit_min_train_size"]]
    if len(asymptotic) < 2:
        raise ValueError(f"ntk.scaling.fit_min_train_size = {params['fit_min_train_size']} leaves fewer than two "
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
    return {"metrics": metrics.frame()}


def _window_exponent(table: pd.DataFrame, value: str, window) -> float:
    """Log-log slope of the mean over `table`'s rows of `value` vs train_size, over the sizes in `window`."""
    curve = _mean_curve(table, "train_size", value)
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
