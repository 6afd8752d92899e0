"""Experiment steps of the multi-head attention memorisation study (S4).

Rules in workflow/rules/attention.smk call these through `python -m factstore attention.<step>`.
`capacity` measures one layer shape (one job per distinct shape: sweeps that meet share it);
the summary step (experiments/attention_summary.py) gathers the sweeps and computes the metrics
config/claims.yaml checks, and the figure steps draw them with factstore.plots.attention.

Random streams come from `derived_generator(seed, stream, ...)`: the data pool depends only on
(context kind, d, n, C), so every layer of a sweep memorises prefixes of the same examples, and a
job's numbers do not depend on which other jobs ran.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from factstore.attention.assumptions import check_assumptions
from factstore.attention.capacity import (
    TrainingSettings,
    attention_capacity,
    budget_check_fits,
    budget_rise,
    grid_step,
    memorised_count,
)
from factstore.attention.model import AttentionShape, MemorisationData, make_dataset
from factstore.device import derived_generator


def _data_pool(seed: int, context: str, layer: dict, n_classes: int, size: int) -> MemorisationData:
    """The examples every search on (context, d, n, C) draws its prefixes from."""
    generator = derived_generator(seed, "attention-pool", context, layer["d"], layer["n_context"], n_classes)
    return make_dataset(size, layer["d"], layer["n_context"], n_classes, context, generator)


# ------------------------------------------------------------------------------ computing steps
def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Memorisation capacity of one layer shape on one context kind, whether it is a training-
    budget limit, and the paper's assumptions checked on the examples it was trained on.

    params: seed, context ('shared' | 'per_example'), layer {d, heads, d_head, d_value,
    n_context}, n_classes, training {learning_rate, max_steps, warmup_steps, target_accuracy,
    patience}, search {start, growth, probes_per_round, relative_resolution, max_size},
    budget_check {steps_factor, learning_rates, steps_above}, assumption_subsets, score_scale
    ('model_dim' | 'head_dim', optional: model_dim), biases (optional: true). Returns {"capacity": one row, "probes": one
    row per trained model, the budget check's with budget = 'x<factor> lr <lr>'}. Every count is
    read at a stated budget, the same for every layer: `memorised_examples` (the paper's count,
    max over the search's probed N of N x training accuracy, at training.max_steps) and
    `memorised_examples_larger_budget` (the same count over the sizes the budget check retrains
    at steps_factor x the steps); `capacity` is the largest N fitted to target_accuracy at 1x.
    """
    layer, n_classes = params["layer"], params["n_classes"]
    shape = AttentionShape.from_layer(layer, n_classes, params.get("score_scale", "model_dim"), params.get("biases", True))
    search_params, check = params["search"], params["budget_check"]
    settings = TrainingSettings.from_config(params["training"])
    pool = _data_pool(params["seed"], params["context"], layer, n_classes, search_params["max_size"])
    generator = derived_generator(params["seed"], "attention-init", params["context"], *sorted(layer.items()), n_classes)
    search, fits = attention_capacity(
        pool,
        shape,
        settings,
        generator,
        start=search_params["start"],
        probes_per_round=search_params["probes_per_round"],
        growth=search_params["growth"],
        relative_resolution=search_params["relative_resolution"],
        device=context.device,
    )
    budget_fits = budget_check_fits(
        pool, shape, settings, search, search_params["relative_resolution"], check["steps_factor"],
        check["learning_rates"], check["steps_above"],
        lambda lr: derived_generator(params["seed"], "attention-budget", params["context"], *sorted(layer.items()), lr),
        context.device,
    )
    step = grid_step(search.smallest_failure, search_params["relative_resolution"]) if search.smallest_failure else math.nan
    retrained = [fit for budget_runs in budget_fits.values() for fit in budget_runs]
    rise = budget_rise(search.capacity, step, retrained) if retrained else math.nan
    count_larger = memorised_count(retrained)
    all_fits = [("search", fit) for fit in fits] + [(name, fit) for name, runs in budget_fits.items() for fit in runs]
    largest_probe = max(fit.size for _, fit in all_fits)
    assumptions = check_assumptions(
        pool.prefix(largest_probe), params["assumption_subsets"], derived_generator(params["seed"], "attention-ranks")
    )
    description = {"context": params["context"], **layer, "n_classes": n_classes}
    n_params = shape.n_params()
    row = description | {
        "capacity": search.capacity,  # largest N fitted to target_accuracy at the search's budget (1x)
        "smallest_failure": search.smallest_failure,
        "memorised_examples": search.memorised_examples,  # the paper's count at 1x: max over probed N of N x accuracy
        "memorised_examples_larger_budget": count_larger,  # the same count over the budget check's retrained sizes
        "budget_count_ratio": count_larger / search.memorised_examples if search.memorised_examples > 0 else math.nan,
        "budget_steps": settings.max_steps,
        "budget_steps_larger": check["steps_factor"] * settings.max_steps,
        "budget_limited": bool(rise > 1.0),  # diagnostic: 4x the steps raised the 100% capacity by > 1 grid step
        "n_params": n_params,
        "bits_per_parameter": search.memorised_examples * math.log2(n_classes) / n_params,
        "theory_scale": layer["heads"] * min(layer["n_context"], layer["d_head"]),  # H min(n, d_h)
        "n_probes": len(fits),
        "training_steps": sum(fit.steps_run for fit in fits),
        "budget_grid_step": step,
        "budget_capacity": max([search.capacity] + [fit.size for fit in retrained if fit.fitted]),
        "budget_rise_steps": rise,
        "budget_training_steps": sum(max(fit.steps_run for fit in runs) for runs in budget_fits.values() if runs),
    } | assumptions
    probes = [
        description | {"probe_index": index, "budget": budget, "size": fit.size, "best_accuracy": fit.best_accuracy,
                       "final_accuracy": fit.final_accuracy, "fitted": fit.fitted,
                       "fitted_at_step": fit.fitted_at_step, "last_gain_step": fit.last_gain_step,
                       "steps_run": fit.steps_run}
        for index, (budget, fit) in enumerate(all_fits)
    ]
    return {"capacity": pd.DataFrame([row]), "probes": pd.DataFrame(probes)}
