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
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from factstore.attention.assumptions import check_assumptions
from factstore.attention.capacity import TrainSettings, attention_capacity
from factstore.attention.model import AttentionShape, MemorisationData, make_dataset
from factstore.device import derived_generator
from factstore.io import read_table
from factstore.metrics import MetricsTable
from factstore.statistics import linear_fit, spearman

# One capacity per trained layer, named by the sweep, the swept value and the context kind (e.g.
# capacity_heads2_shared). The value comes from the config's sweep, so only it is filled in.
LAYER_CAPACITY_METRICS = {
    "heads": {"shared": "capacity_heads{value}_shared", "per_example": "capacity_heads{value}_per_example"},
    "n_context": {"shared": "capacity_n_context{value}_shared", "per_example": "capacity_n_context{value}_per_example"},
    "d_head": {"shared": "capacity_d_head{value}_shared", "per_example": "capacity_d_head{value}_per_example"},
}

# The metric names of each sweep's fits, per context kind. The claims read the shared-context names
# (the setting of the paper's d_h experiment); the per-example ones carry the suffix _per_example.
# Written out in full, never assembled, so a search for a claim's metric finds the code behind it.
HEADS_METRICS = {
    "shared": {"slope": "heads_linear_slope", "r2": "heads_linear_r2",
               "intercept": "heads_linear_intercept", "ratio": "heads_capacity_ratio"},
    "per_example": {"slope": "heads_linear_slope_per_example", "r2": "heads_linear_r2_per_example",
                    "intercept": "heads_linear_intercept_per_example", "ratio": "heads_capacity_ratio_per_example"},
}
CONTEXT_METRICS = {
    "shared": {"spearman": "context_spearman", "ratio": "context_capacity_ratio"},
    "per_example": {"spearman": "context_spearman_per_example", "ratio": "context_capacity_ratio_per_example"},
}
HEAD_DIM_METRICS = {
    "shared": {"slope_below": "head_dim_slope_below_n", "slope_above": "head_dim_slope_above_n",
               "slope_ratio": "head_dim_slope_ratio", "saturation_ratio": "head_dim_saturation_ratio"},
    "per_example": {"slope_below": "head_dim_slope_below_n_per_example",
                    "slope_above": "head_dim_slope_above_n_per_example",
                    "slope_ratio": "head_dim_slope_ratio_per_example",
                    "saturation_ratio": "head_dim_saturation_ratio_per_example"},
}


def layer_shape(layer: dict, n_classes: int) -> AttentionShape:
    """The config's layer sizes {d, heads, d_head, d_value} (n_context is the data's) as a shape."""
    return AttentionShape(
        d=layer["d"], heads=layer["heads"], d_head=layer["d_head"], d_value=layer["d_value"], n_classes=n_classes
    )


def train_settings(training: dict) -> TrainSettings:
    """The config's training section as TrainSettings (final_lr_fraction keeps its default 0)."""
    return TrainSettings(
        lr=training["learning_rate"],
        max_steps=training["max_steps"],
        warmup_steps=training["warmup_steps"],
        target_accuracy=training["target_accuracy"],
        patience=training.get("patience"),
    )


def data_pool(seed: int, context: str, layer: dict, n_classes: int, size: int) -> MemorisationData:
    """The examples every search on (context, d, n, C) draws its prefixes from."""
    generator = derived_generator(seed, "attention-pool", context, layer["d"], layer["n_context"], n_classes)
    return make_dataset(size, layer["d"], layer["n_context"], n_classes, context, generator)


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
    search, fits = attention_capacity(
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
    assumptions = check_assumptions(
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
    paper's d_h experiment; the per-example context gets the suffix _per_example (the names of
    both are in HEADS_METRICS, CONTEXT_METRICS, HEAD_DIM_METRICS). Returns {"capacity",
    "probes", "metrics"} tables.
    """
    capacities = _sweep_tables(inputs, "capacity").sort_values(["sweep", "context", "value"], ignore_index=True)
    probes = _sweep_tables(inputs, "probes")
    metrics = MetricsTable()

    for row in capacities.itertuples():
        metrics.add(LAYER_CAPACITY_METRICS[row.sweep][row.context].format(value=row.value), row.capacity,
                    f"max N x acc = {row.memorised_examples:.0f}, {row.n_params} parameters, H min(n, d_h) = {row.theory_scale}")

    for (sweep, kind), points in capacities.groupby(["sweep", "context"]):
        points = points.sort_values("value")
        x, y = points["value"].tolist(), points["capacity"].tolist()
        fixed = _fixed_sizes(points, sweep)
        if sweep == "heads" and len(x) >= 2:
            names, fit = HEADS_METRICS[kind], linear_fit(x, y)
            metrics.add(names["slope"], fit.slope, f"{kind} context, examples per head, {fixed}")
            metrics.add(names["r2"], fit.r2, f"linear fit of capacity on H = {x}")
            metrics.add(names["intercept"], fit.intercept, "examples at H = 0 from the fit")
            metrics.add(names["ratio"], y[-1] / max(y[0], 1), f"capacity at H = {x[-1]} over H = {x[0]} (H ratio {x[-1] / x[0]:g})")
        if sweep == "n_context" and len(x) >= 2:
            names = CONTEXT_METRICS[kind]
            metrics.add(names["spearman"], spearman(x, y), f"{kind} context, capacity vs n = {x}, {fixed}")
            metrics.add(names["ratio"], y[-1] / max(y[0], 1), f"capacity at n = {x[-1]} over n = {x[0]}")
        if sweep == "d_head" and len(x) >= 2:
            names, knee = HEAD_DIM_METRICS[kind], int(points["n_context"].iloc[0])
            try:
                slopes = slopes_around(x, y, knee)
            except ValueError:
                continue
            metrics.add(names["slope_below"], slopes.below, f"{kind} context, examples per unit of d_h for d_h <= n = {knee}, {fixed}")
            metrics.add(names["slope_above"], slopes.above, f"examples per unit of d_h for d_h >= n = {knee}")
            ratio = slopes.above / slopes.below if slopes.below > 0 else math.nan
            metrics.add(names["slope_ratio"], ratio, "slope above n / slope below n (saturation: ~0)")
            knee_at = saturation_point(x, y, knee)
            metrics.add(names["saturation_ratio"], knee_at / knee,
                        f"smallest d_h within 10% of the plateau (mean capacity for d_h >= n) is {knee_at}; n = {knee}")

    metrics.add("bits_per_parameter_max", capacities["bits_per_parameter"].max(), "capacity x log2(C) / parameters, best layer of all sweeps")
    metrics.add("assumptions_context_full_rank_min", capacities["context_full_rank"].min(), "fraction of context matrices of rank n, worst layer")
    metrics.add("assumptions_kruskal_subsets_full_rank_min", capacities["kruskal_subsets_full_rank"].min(), "fraction of random n-subsets of queries of rank n, worst layer")
    return {"capacity": capacities, "probes": probes, "metrics": metrics.frame()}


class KneeSlopes(NamedTuple):
    """Slopes of the line fits below and above a knee (examples per unit of x)."""

    below: float
    above: float


def slopes_around(x: Sequence[float], y: Sequence[float], knee: float) -> KneeSlopes:
    """Slopes of least-squares lines on the points with x <= knee and with x >= knee (the knee
    point is in both). x, y: 1-D of equal length, at least two points on each side.

    With d_h as x and knee = n, the paper predicts growth below the knee and a plateau above it.
    """
    below = [(a, b) for a, b in zip(x, y) if a <= knee]
    above = [(a, b) for a, b in zip(x, y) if a >= knee]
    if len(below) < 2 or len(above) < 2:
        raise ValueError(f"need two points on each side of the knee {knee}, got x = {list(x)}")
    return KneeSlopes(below=linear_fit(*zip(*below)).slope, above=linear_fit(*zip(*above)).slope)


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
