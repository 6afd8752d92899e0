"""Experiment steps of the NTK study (S2).

Rules in workflow/rules/ntk.smk call these through `python -m factstore ntk.<step>`. The computing
steps return tidy tables: `convergence` (empirical vs analytic NTK at init, all widths), `training`
(one width per job: GD training, NTK change, linearised dynamics) and `scaling` (kernel regression
learning curve, measured and predicted by the spectral theory). The summary step
(experiments/ntk_summary.py) condenses them into the metrics config/claims.yaml checks; the figure
steps draw them with factstore.plots.ntk.

Random streams come from `derived_generator(seed, stream, ...)`: the training data of a seed
index is the same at every width, and a job's numbers do not depend on which other jobs ran.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from factstore import tangent_kernel
from factstore.device import derived_generator

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
