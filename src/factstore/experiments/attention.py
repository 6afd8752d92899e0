"""Experiment steps of the multi-head attention memorisation study (SPEC S4).

Rules in workflow/rules/attention.smk call these through `python -m factstore attention.<step>`.
`capacity` measures one layer shape (one job per distinct shape: sweeps that meet share it),
`summary` gathers the sweeps and computes the metrics config/claims.yaml checks, and the figure
steps draw them with factstore.plots.attention.

Random streams come from `derived_generator(seed, stream, ...)`: the data pool depends only on
(context kind, d, n, C), so every layer of a sweep memorises prefixes of the same examples, and a
job's numbers do not depend on which other jobs ran.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from scipy.stats import spearmanr

from factstore import attention as att
from factstore.device import derived_generator
from factstore.io import read_table

CLAIM_CONTEXT = "shared"  # the context kind whose sweeps give the claim metrics (no name suffix)


def layer_shape(layer: dict, n_classes: int) -> att.AttentionShape:
    return att.AttentionShape(
        d=layer["d"], heads=layer["heads"], d_head=layer["d_head"], d_value=layer["d_value"], n_classes=n_classes
    )


def train_settings(training: dict) -> att.TrainSettings:
    return att.TrainSettings(
        lr=training["learning_rate"],
        max_steps=training["max_steps"],
        warmup_steps=training["warmup_steps"],
        target_accuracy=training["target_accuracy"],
        patience=training.get("patience"),
    )


def data_pool(seed: int, context: str, layer: dict, n_classes: int, size: int) -> att.MemorisationData:
    """The examples every search on (context, d, n, C) draws its prefixes from."""
    generator = derived_generator(seed, "attention-pool", context, layer["d"], layer["n_context"], n_classes)
    return att.make_dataset(size, layer["d"], layer["n_context"], n_classes, context, generator)


# ------------------------------------------------------------------------------ computing steps
def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Memorisation capacity of one layer shape on one context kind, and the paper's assumptions
    checked on the examples it was trained on.

    params: seed, context ('shared' | 'per_example'), layer {d, heads, d_head, d_value,
    n_context}, n_classes, training {learning_rate, max_steps, warmup_steps, target_accuracy,
    patience}, search {start, growth, probes_per_round, relative_resolution, max_size},
    assumption_subsets. Returns {"capacity": one row, "probes": one row per trained model}.
    """
    layer, n_classes = params["layer"], params["n_classes"]
    shape = layer_shape(layer, n_classes)
    search_params = params["search"]
    pool = data_pool(params["seed"], params["context"], layer, n_classes, search_params["max_size"])
    generator = derived_generator(params["seed"], "attention-init", params["context"], *sorted(layer.items()), n_classes)
    search, fits = att.attention_capacity(
        pool,
        shape,
        train_settings(params["training"]),
        generator,
        start=search_params["start"],
        probes_per_round=search_params["probes_per_round"],
        growth=search_params["growth"],
        relative_resolution=search_params["relative_resolution"],
        device=context.device,
    )
    largest_probe = max(fit.size for fit in fits)
    assumptions = att.check_assumptions(
        pool.prefix(largest_probe), params["assumption_subsets"], derived_generator(params["seed"], "attention-ranks")
    )
    description = {"context": params["context"], **layer, "n_classes": n_classes}
    n_params = shape.n_params()
    row = description | {
        "capacity": search.capacity,
        "smallest_failure": search.smallest_failure,
        "memorised_examples": search.memorised_examples,
        "n_params": n_params,
        "bits_per_parameter": search.capacity * math.log2(n_classes) / n_params,
        "theory_scale": layer["heads"] * min(layer["n_context"], layer["d_head"]),  # H min(n, d_h)
        "n_probes": len(fits),
        "training_steps": sum(fit.steps_run for fit in fits),
    } | assumptions
    probes = [
        description | {"probe_index": index, "size": fit.size, "best_accuracy": fit.best_accuracy,
                       "final_accuracy": fit.final_accuracy, "fitted": fit.fitted,
                       "fitted_at_step": fit.fitted_at_step, "steps_run": fit.steps_run}
        for index, fit in enumerate(fits)
    ]
    return {"capacity": pd.DataFrame([row]), "probes": pd.DataFrame(probes)}


def _sweep_tables(inputs: dict[str, Path], prefix: str) -> pd.DataFrame:
    """Concatenate inputs named '<prefix>__<sweep>__<context>__<value>', tagging rows with sweep
    and value (the tables hold the context kind already). One file may serve several sweeps."""
    tables = []
    for name, path in sorted(inputs.items()):
        kind, sweep, _context, value = name.split("__")
        if kind == prefix:
            tables.append(read_table(path).assign(sweep=sweep, value=int(value)))
    return pd.concat(tables, ignore_index=True)


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Gather the sweeps; compute the S4 metrics.

    inputs: capacity__<sweep>__<context>__<value>=... and probes__... for every sweep point. The
    claim metrics (unsuffixed names) come from the shared-context sweeps, the setting of the
    paper's d_h experiment; other context kinds get a suffix. Returns {"capacity", "probes",
    "metrics"} tables.
    """
    capacities = _sweep_tables(inputs, "capacity").sort_values(["sweep", "context", "value"], ignore_index=True)
    probes = _sweep_tables(inputs, "probes")
    metrics = []

    def metric(name: str, value: float, detail: str = "") -> None:
        metrics.append({"metric": name, "value": float(value), "detail": detail})

    for row in capacities.itertuples():
        metric(f"capacity_{row.sweep}{row.value}_{row.context}", row.capacity,
               f"max N x acc = {row.memorised_examples:.0f}, {row.n_params} parameters, H min(n, d_h) = {row.theory_scale}")

    for (sweep, kind), points in capacities.groupby(["sweep", "context"]):
        points = points.sort_values("value")
        x, y = points["value"].tolist(), points["capacity"].tolist()
        fixed = _fixed_sizes(points, sweep)
        suffix = "" if kind == CLAIM_CONTEXT else f"_{kind}"
        if sweep == "heads" and len(x) >= 2:
            fit = att.linear_fit(x, y)
            metric(f"heads_linear_slope{suffix}", fit["slope"], f"{kind} context, examples per head, {fixed}")
            metric(f"heads_linear_r2{suffix}", fit["r2"], f"linear fit of capacity on H = {x}")
            metric(f"heads_linear_intercept{suffix}", fit["intercept"], "examples at H = 0 from the fit")
            metric(f"heads_capacity_ratio{suffix}", y[-1] / max(y[0], 1), f"capacity at H = {x[-1]} over H = {x[0]} (H ratio {x[-1] / x[0]:g})")
        if sweep == "n_context" and len(x) >= 2:
            metric(f"context_spearman{suffix}", spearmanr(x, y).statistic, f"{kind} context, capacity vs n = {x}, {fixed}")
            metric(f"context_capacity_ratio{suffix}", y[-1] / max(y[0], 1), f"capacity at n = {x[-1]} over n = {x[0]}")
        if sweep == "d_head" and len(x) >= 2:
            knee = int(points["n_context"].iloc[0])
            try:
                slopes = att.slopes_around(x, y, knee)
            except ValueError:
                continue
            metric(f"head_dim_slope_below_n{suffix}", slopes["slope_below"], f"{kind} context, examples per unit of d_h for d_h <= n = {knee}, {fixed}")
            metric(f"head_dim_slope_above_n{suffix}", slopes["slope_above"], f"examples per unit of d_h for d_h >= n = {knee}")
            ratio = slopes["slope_above"] / slopes["slope_below"] if slopes["slope_below"] > 0 else math.nan
            metric(f"head_dim_slope_ratio{suffix}", ratio, "slope above n / slope below n (saturation: ~0)")
            knee_at = saturation_point(x, y, knee)
            metric(f"head_dim_saturation_ratio{suffix}", knee_at / knee,
                   f"smallest d_h within 10% of the plateau (mean capacity for d_h >= n) is {knee_at}; n = {knee}")

    metric("bits_per_parameter_max", capacities["bits_per_parameter"].max(), "capacity x log2(C) / parameters, best layer of all sweeps")
    metric("assumptions_context_full_rank_min", capacities["context_full_rank"].min(), "fraction of context matrices of rank n, worst layer")
    metric("assumptions_kruskal_subsets_full_rank_min", capacities["kruskal_subsets_full_rank"].min(), "fraction of random n-subsets of queries of rank n, worst layer")
    return {"capacity": capacities, "probes": probes, "metrics": pd.DataFrame(metrics)}


def saturation_point(x: list[int], y: list[float], knee: int, tolerance: float = 0.1) -> int:
    """The smallest x whose y is within `tolerance` of the plateau, the mean y over x >= knee.

    For the d_h sweep (knee = n) the paper puts it at n; earlier means another size binds first.
    """
    plateau = sum(b for a, b in zip(x, y) if a >= knee) / sum(1 for a in x if a >= knee)
    return min(a for a, b in zip(x, y) if b >= (1 - tolerance) * plateau)


def _fixed_sizes(points: pd.DataFrame, sweep: str) -> str:
    """The sizes a sweep holds fixed, as text for the metric details."""
    fixed = [name for name in ("d", "heads", "d_head", "d_value", "n_context", "n_classes") if name != sweep]
    return ", ".join(f"{name} = {points[name].iloc[0]}" for name in fixed)


# ---------------------------------------------------------------------------------- figure steps
# Figure steps import the plotting module lazily, so editing a figure reruns only figure rules.


def _sweep_figure(sweep: str, params: dict, inputs: dict[str, Path]):
    from factstore.plots import attention as plots, style

    return style.outputs(plots.capacity_sweep(read_table(inputs["capacity"]), sweep, params))


def figure_heads(params, inputs, context):
    """Capacity vs number of heads H, with a linear fit. params: training (for the caption)."""
    return _sweep_figure("heads", params, inputs)


def figure_context(params, inputs, context):
    """Capacity vs context size n. params: training (for the caption)."""
    return _sweep_figure("n_context", params, inputs)


def figure_head_dim(params, inputs, context):
    """Capacity vs head dimension d_h, with the knee at d_h = n. params: training (caption)."""
    return _sweep_figure("d_head", params, inputs)


def figure_assumptions(params, inputs, context):
    """Context ranks and the randomised Kruskal rank of the queries against what the theorem needs."""
    from factstore.plots import attention as plots, style

    return style.outputs(plots.assumptions(read_table(inputs["capacity"]), params))
