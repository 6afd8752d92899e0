"""Runs of the embedding experiment of the committee-machine study (S3, first half: capacity
per weight): one architecture and solver over several N and loads, all instances of one N in one
batch, as a table. The solver is passed in, so that each solver family's step module
(experiments/committee_backprop.py, committee_least_action.py, committee_lp.py, committee_milp.py) imports its own
solver only: a rule's code inputs are the files its step module imports
(factstore.code_dependencies), so editing back-propagation reruns only its runs.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch
from tqdm import tqdm

from factstore.committee import architectures, patterns
from factstore.device import derived_generator

SOLVERS = ("backprop", "least_action", "function_search", "lp", "milp")

Solve = Callable[..., dict]
"""solve(architecture, weights, x, y, mask, params, generator) -> {embedded (B,) bool, epochs (B,),
embedded_online (B,) bool, lp_solves (an int), and optionally embedded_in_attempt (B,),
embedded_by_search (B,) bool, upper_function (B names), outcome (B names: the MILP's embedded,
not embeddable or undecided)} of one batch. embedded_online: what the iterative solver reached on its
own (for least action, before the LP polish); lp_solves: the LPs solved (0 for back-propagation)."""


def architecture_of(spec: dict, n_inputs: int) -> architectures.Architecture:
    """The machine a run's `architecture` params {kind, hidden, groups, layers} describe, at N inputs."""
    return architectures.Architecture(
        kind=spec["kind"], n_inputs=n_inputs, hidden=spec["hidden"],
        groups=tuple(spec.get("groups", ())), layers=spec.get("layers", 1),
    )


def check_solver(params: dict, solvers: tuple[str, ...], module: str) -> None:
    """Raise unless the run's solver is one of `solvers` (those the step module `module` runs)."""
    if params["solver"] not in solvers:
        raise ValueError(f"{module}.embedding runs the solvers {list(solvers)}, not {params['solver']!r} "
                         f"(solvers: {list(SOLVERS)})")


def embedding_table(params: dict, context, solve: Solve) -> dict[str, object]:
    """Whether each random instance is embedded with zero training error, over N and alpha: the
    body of every solver's `embedding` step, `solve` its solver (the signature of `Solve`).

    params: run (a name), architecture {kind, hidden, groups, layers}, solver, n (list), alphas,
    instances, seed, and the solver's settings (backprop {...} or least_action {...}); optional
    instance_key: draw the instances of another run (same key, same N: same patterns and initial
    weights), to compare solver settings on identical problems. All loads of one N form one batch
    of len(alphas) x instances instances (patterns padded to the largest P).
    """
    rows = []
    for n in tqdm(params["n"], desc=params["run"], mininterval=5):
        architecture = architecture_of(params["architecture"], n)
        generator = derived_generator(params["seed"], params.get("instance_key", params["run"]), n)
        counts = [patterns.patterns_for_load(alpha, architecture.weight_count) for alpha in params["alphas"]]
        batch_counts = [c for c in counts for _ in range(params["instances"])]
        x, y, mask = patterns.load_batch(batch_counts, n, generator, device=context.device)
        weights = architectures.initial_weights(architecture, len(batch_counts), generator, context.device)
        solved = solve(architecture, weights, x, y, mask, params, generator)
        embedded, epochs, online = solved["embedded"], solved["epochs"], solved["embedded_online"]
        attempts = solved.get("embedded_in_attempt", torch.where(embedded, 0, -1))
        upper_function = solved.get("upper_function", [""] * len(batch_counts))
        by_search = solved.get("embedded_by_search", torch.zeros(len(batch_counts), dtype=torch.bool))
        outcome = solved.get("outcome", [""] * len(batch_counts))
        for b, count in enumerate(batch_counts):
            alpha = params["alphas"][b // params["instances"]]
            rows.append({
                "run": params["run"], "architecture": architecture.describe(), "kind": architecture.kind,
                "hidden": architecture.hidden, "hidden_layers": architecture.hidden_layers, "n": n,
                "weights": architecture.weight_count, "solver": params["solver"], "alpha": alpha,
                "patterns": count, "instance": b % params["instances"], "embedded": bool(embedded[b]),
                "embedded_online": bool(online[b]), "epochs": int(epochs[b]),
                "embedded_in_attempt": int(attempts[b]), "embedded_by_search": bool(by_search[b]),
                "upper_function": upper_function[b], "outcome": outcome[b],
            })
    return {"table": pd.DataFrame(rows)}
