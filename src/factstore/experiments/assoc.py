"""Experiment steps of the linear-associative-memory study (S1): the Hebbian and trained runs and
the rank check. Their summary is its own step, `assoc_summary.summary`.

Rules in workflow/rules/assoc.smk call these through `python -m factstore assoc.<step>`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from factstore.assoc import memory
from factstore.assoc.perfect_storage import window_loads
from factstore.device import derived_generator
from factstore.io import read_table


def hebbian(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Hebbian recall accuracy over a fine load grid for several d, many seeds (cheap: no training).

    params: d (list), alphas (list), seeds (int), seed (int), chunk_size (int).
    """
    rows = []
    jobs = [(d, alpha) for d in params["d"] for alpha in params["alphas"]]
    for d, alpha in tqdm(jobs, desc="hebbian", mininterval=5):
        p = memory.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], "hebbian", d, alpha)
        for seed in range(params["seeds"]):
            # One seed at a time keeps memory at O(p d) even for large d.
            x, y = memory.sample_problem(p, d, 1, generator)
            x, y = x.to(context.device), y.to(context.device)
            accuracy = memory.recall_accuracy(memory.hebbian_weights(x, y), x, y, params["chunk_size"]).item()
            rows.append({"d": d, "alpha": alpha, "p": p, "seed": seed, "accuracy": accuracy})
    return {"table": pd.DataFrame(rows)}


def trained(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Train W (full rank, or W = Q R^T of rank kappa d) at every load of the grid, seeds batched.

    Also records the Hebbian W on the same problem instances, and the normalised singular
    values of the trained W. params: d, problem ('original' | 'decoupled'), rank_fraction,
    alphas, seeds, seed, max_steps, learning_rate, patience, min_gain.
    """
    d, problem, kappa = params["d"], params["problem"], params.get("rank_fraction", 1.0)
    rank = None if kappa >= 1 else max(1, round(kappa * d))
    rows, spectra = [], []
    for alpha in tqdm(params["alphas"], desc=f"{problem} d={d} kappa={kappa}", mininterval=5):
        p = memory.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], problem, d, kappa, alpha)
        x, y = memory.sample_problem(p, d, params["seeds"], generator, decoupled=problem == "decoupled")
        x, y = x.to(context.device), y.to(context.device)
        result = memory.train_optimal(
            x,
            y,
            rank=rank,
            max_steps=params["max_steps"],
            learning_rate=params["learning_rate"],
            patience=params["patience"],
            min_gain=params["min_gain"],
            generator=generator,
        )
        hebbian_accuracy = memory.recall_accuracy(memory.hebbian_weights(x, y), x, y).cpu()
        # The trained W's spectrum, and for W = Q R^T the spectrum of its initialisation (a product
        # of two Gaussian factors), the reference S1.quarter-circle compares the trained one with,
        # and the top-m spectrum of the Hebbian W (a null that stores facts without optimising).
        stages = {"trained": memory.normalised_singular_values(result.weights, rank).cpu().numpy()}
        if result.initial_weights is not None:
            stages["initial"] = memory.normalised_singular_values(result.initial_weights, rank).cpu().numpy()
        if rank is not None:  # the null: the Hebbian W of the same facts, truncated to its top `rank` values
            stages["hebbian"] = memory.normalised_singular_values(memory.hebbian_weights(x, y), rank).cpu().numpy()
        for seed in range(params["seeds"]):
            common = {"d": d, "alpha": alpha, "p": p, "seed": seed, "problem": problem, "rank_fraction": kappa}
            rows.append(common | {"method": "trained", "accuracy": float(result.best_accuracy[seed]), "steps": result.steps})
            rows.append(common | {"method": "hebbian", "accuracy": float(hebbian_accuracy[seed]), "steps": 0})
            for stage, values in stages.items():
                spectra += [common | {"stage": stage, "index": i, "singular_value": s} for i, s in enumerate(values[seed])]
        del x, y, result  # freed before the next load's problem is drawn: one problem in memory at a time
    return {"table": pd.DataFrame(rows), "spectra": pd.DataFrame(spectra)}


# The variants of the rank-constrained training that S1.rank-capacity's optimisation check tries
# (name -> changes to the study's settings): more steps, a smaller and a larger learning rate,
# another initial draw, and a 10x larger initialisation. None may store more than the baseline.
RANK_CHECK_VARIANTS = {
    "steps x4": {"steps_factor": 4},
    "lr x0.2, steps x4": {"learning_rate_factor": 0.2, "steps_factor": 4},
    "lr x2": {"learning_rate_factor": 2.0},
    "other initial draw": {"new_init": True},
    "initial scale x10": {"init_scale": 1.0, "new_init": True},
}


def rank_check(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Is the rank-constrained W = Q R^T trained to its optimum? Retrain it, at one (d, kappa), with
    each of RANK_CHECK_VARIANTS on the loads around the baseline's capacity, on the SAME problem
    instances as the baseline run (same generator stream as `trained`).

    inputs: baseline (the `trained` table of this (d, kappa)). params: as `trained` (alphas: the
    rank grid), plus window: the number of grid loads tried, from the last load the baseline
    stores perfectly (in at least half the seeds) upward. Returns {"table": rows like
    `trained`'s, method 'trained', with a column variant}.
    """
    d, kappa = params["d"], params["rank_fraction"]
    rank = max(1, round(kappa * d))
    baseline = read_table(inputs["baseline"])
    baseline = baseline[baseline.method == "trained"]
    loads = window_loads(baseline, params["alphas"], params["window"])
    rows = []
    jobs = [(name, alpha) for name in RANK_CHECK_VARIANTS for alpha in loads]
    for name, alpha in tqdm(jobs, desc=f"rank check d={d} kappa={kappa}", mininterval=5):
        variant = RANK_CHECK_VARIANTS[name]
        p = memory.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], "original", d, kappa, alpha)  # the baseline's problems
        x, y = memory.sample_problem(p, d, params["seeds"], generator)
        if variant.get("new_init"):
            generator = derived_generator(params["seed"], "rank-check-init", d, kappa, alpha, name)
        factor = variant.get("steps_factor", 1)
        result = memory.train_optimal(
            x.to(context.device), y.to(context.device), rank=rank,
            max_steps=params["max_steps"] * factor, patience=params["patience"] * factor,
            learning_rate=params["learning_rate"] * variant.get("learning_rate_factor", 1.0),
            init_scale=variant.get("init_scale", 0.1), min_gain=params["min_gain"], generator=generator,
        )
        for seed in range(params["seeds"]):
            rows.append({"d": d, "alpha": alpha, "p": p, "seed": seed, "problem": "original", "rank_fraction": kappa,
                         "method": "trained", "variant": name, "accuracy": float(result.best_accuracy[seed]),
                         "steps": result.steps})
    return {"table": pd.DataFrame(rows)}
