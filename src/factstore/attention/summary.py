"""The S4 summary's metrics: the sweeps' capacity and probe tables in, the metrics table out.

Each layer's capacity gets a metric (capacity_<sweep><value>_<context>); each sweep, per context
kind, gets its budget check (the spread of the budget ratios, the rise of the 100% capacity) and
its law: the heads law's fits (linear, log-log, sqrt(H) residuals; and the declared alternative
with the smallest fitted H left out too), the context sweep's order, the head-dimension slopes
below and above n. The claims (config/claims.yaml) read the shared-context names (the setting of
the paper's d_h experiment); the per-example context's carry the suffix _per_example. Every
name is written out in full in the maps below, never assembled, so a search for a claim's
metric finds the code behind it.

Tables: a capacity table has one row per (sweep, context, value) layer, with the columns of
factstore.experiments.attention's `capacity` step plus `sweep` and `value`; a probes table one
row per trained model, with `sweep`, `value`, `context`, `budget`, `size` and `best_accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from factstore.metrics import MetricsTable
from factstore.statistics import (
    linear_fit,
    power_law_fit,
    residual_sum_of_squares,
    spearman,
)

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
# Each sweep also gets its budget check: the spread, over the fitted layers, of count(4x steps) /
# count(1x) (the claims' testability gate), and the largest rise of a 100% capacity in grid steps.
HEADS_METRICS = {
    "shared": {"slope": "heads_linear_slope", "r2": "heads_linear_r2", "exponent": "heads_loglog_exponent",
               "intercept": "heads_linear_intercept", "ratio": "heads_capacity_ratio",
               "residuals_linear": "heads_linear_residual_ss", "residuals_sqrt": "heads_sqrt_residual_ss",
               "residual_ratio": "heads_sqrt_over_linear_residual_ratio",
               "budget": "heads_budget_rise_steps_max",
               "unconverged": "heads_budget_unconverged_layers", "spread": "heads_budget_ratio_spread",
               "spread_same_sizes": "heads_budget_ratio_spread_same_sizes"},
    "per_example": {"slope": "heads_linear_slope_per_example", "r2": "heads_linear_r2_per_example",
                    "exponent": "heads_loglog_exponent_per_example",
                    "intercept": "heads_linear_intercept_per_example", "ratio": "heads_capacity_ratio_per_example",
                    "residuals_linear": "heads_linear_residual_ss_per_example",
                    "residuals_sqrt": "heads_sqrt_residual_ss_per_example",
                    "residual_ratio": "heads_sqrt_over_linear_residual_ratio_per_example",
                    "budget": "heads_budget_rise_steps_max_per_example",
                    "unconverged": "heads_budget_unconverged_layers_per_example",
                    "spread": "heads_budget_ratio_spread_per_example",
                    "spread_same_sizes": "heads_budget_ratio_spread_same_sizes_per_example"},
}
# The declared alternative of the heads fits: H = 2 left out too (the fits over H = 4, 8, 16).
HEADS_DROP_SMALLEST_METRICS = {
    "shared": {"slope": "heads_linear_slope_drop_h2", "r2": "heads_linear_r2_drop_h2",
               "exponent": "heads_loglog_exponent_drop_h2", "intercept": "heads_linear_intercept_drop_h2",
               "ratio": "heads_capacity_ratio_drop_h2", "residuals_linear": "heads_linear_residual_ss_drop_h2",
               "residuals_sqrt": "heads_sqrt_residual_ss_drop_h2",
               "residual_ratio": "heads_sqrt_over_linear_residual_ratio_drop_h2",
               "spread": "heads_budget_ratio_spread_drop_h2"},
    "per_example": {"slope": "heads_linear_slope_drop_h2_per_example", "r2": "heads_linear_r2_drop_h2_per_example",
                    "exponent": "heads_loglog_exponent_drop_h2_per_example",
                    "intercept": "heads_linear_intercept_drop_h2_per_example",
                    "ratio": "heads_capacity_ratio_drop_h2_per_example",
                    "residuals_linear": "heads_linear_residual_ss_drop_h2_per_example",
                    "residuals_sqrt": "heads_sqrt_residual_ss_drop_h2_per_example",
                    "residual_ratio": "heads_sqrt_over_linear_residual_ratio_drop_h2_per_example",
                    "spread": "heads_budget_ratio_spread_drop_h2_per_example"},
}
CONTEXT_METRICS = {
    "shared": {"spearman": "context_spearman", "ratio": "context_capacity_ratio",
               "violations": "context_nondecreasing_violations",
               "budget": "context_budget_rise_steps_max",
               "unconverged": "context_budget_unconverged_layers", "spread": "context_budget_ratio_spread",
               "spread_same_sizes": "context_budget_ratio_spread_same_sizes"},
    "per_example": {"spearman": "context_spearman_per_example", "ratio": "context_capacity_ratio_per_example",
                    "violations": "context_nondecreasing_violations_per_example",
                    "budget": "context_budget_rise_steps_max_per_example",
                    "unconverged": "context_budget_unconverged_layers_per_example",
                    "spread": "context_budget_ratio_spread_per_example",
                    "spread_same_sizes": "context_budget_ratio_spread_same_sizes_per_example"},
}
HEAD_DIM_METRICS = {
    "shared": {"slope_below": "head_dim_slope_below_n", "slope_above": "head_dim_slope_above_n",
               "slope_ratio": "head_dim_slope_ratio", "budget": "head_dim_budget_rise_steps_max",
               "unconverged": "head_dim_budget_unconverged_layers", "spread": "head_dim_budget_ratio_spread",
               "spread_same_sizes": "head_dim_budget_ratio_spread_same_sizes"},
    "per_example": {"slope_below": "head_dim_slope_below_n_per_example",
                    "slope_above": "head_dim_slope_above_n_per_example",
                    "slope_ratio": "head_dim_slope_ratio_per_example",
                    "budget": "head_dim_budget_rise_steps_max_per_example",
                    "unconverged": "head_dim_budget_unconverged_layers_per_example",
                    "spread": "head_dim_budget_ratio_spread_per_example",
                    "spread_same_sizes": "head_dim_budget_ratio_spread_same_sizes_per_example"},
}
SWEEP_METRICS = {"heads": HEADS_METRICS, "n_context": CONTEXT_METRICS, "d_head": HEAD_DIM_METRICS,
                 "heads_drop_smallest": HEADS_DROP_SMALLEST_METRICS}


def budget_unconverged(capacities: pd.DataFrame) -> pd.Series:
    """Per layer (a row of the capacity table): 1 when 4x the steps raised its 100% capacity by
    more than one grid step (budget-limited), 0 when not, nan when no failing size bounds it.
    The S4 gates' rule before the budget-ratio spread (reported, an alternative of the claims)."""
    limited = capacities["budget_limited"].astype(bool).astype(float)
    return limited.where(capacities["budget_rise_steps"].notna(), math.nan)


def budget_ratio_spread(ratios: Sequence[float]) -> float:
    """max r / min r of the layers' count(larger budget) / count(search budget); 1 when the
    budget scales every layer's count alike. nan when a ratio is missing or not positive.

    Across a sweep spanning a factor S in the swept size, a spread s moves a log-log exponent
    by at most log s / log S, so a small spread makes the fitted law budget-invariant."""
    ratios = np.asarray(ratios, float)
    if ratios.size == 0 or not np.all(np.isfinite(ratios)) or ratios.min() <= 0:
        return math.nan
    return float(ratios.max() / ratios.min())


def same_size_ratios(capacities: pd.DataFrame, probes: pd.DataFrame) -> list[float]:
    """Per layer (a row of `capacities`), count(larger budget) / count(search budget) read over
    the same sizes: those trained at both budgets (the bracket of the 100% capacity), so that the
    ratio holds the sizes fixed and moves only the budget. nan where the probes lack them."""
    if not {"budget", "best_accuracy", "sweep", "value"} <= set(probes.columns):
        return [math.nan] * len(capacities)
    ratios = []
    for row in capacities.itertuples():
        layer = probes[(probes["sweep"] == row.sweep) & (probes["value"] == row.value) & (probes["context"] == row.context)]
        searched, larger = layer[layer["budget"] == "search"], layer[layer["budget"] != "search"]
        common = set(searched["size"]) & set(larger["size"])
        count = {name: (part[part["size"].isin(common)]["size"] * part[part["size"].isin(common)]["best_accuracy"]).max()
                 for name, part in (("search", searched), ("larger", larger))}
        ratios.append(count["larger"] / count["search"] if common and count["search"] > 0 else math.nan)
    return ratios


def nondecreasing_violations(counts: Sequence[float], relative_resolution: float) -> int:
    """How many consecutive pairs fall by more than one grid step: count[i + 1] <
    count[i] / (1 + relative_resolution). 0 for a sequence non-decreasing within the search's
    resolution (counts in the order of the swept size)."""
    counts = np.asarray(counts, float)
    return int(np.sum(counts[1:] < counts[:-1] / (1.0 + relative_resolution)))


def capacity_table(capacities: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """The sweeps' capacity rows sorted by (sweep, context, value), each with its
    budget_count_ratio_same_sizes (`same_size_ratios` read from the probes)."""
    capacities = capacities.sort_values(["sweep", "context", "value"], ignore_index=True)
    capacities["budget_count_ratio_same_sizes"] = same_size_ratios(capacities, probes)
    return capacities


def metrics_table(capacities: pd.DataFrame, relative_resolution: float) -> pd.DataFrame:
    """The S4 metrics of a `capacity_table`: per layer its capacity, per sweep and context kind the
    budget check and the sweep's law (names in LAYER_CAPACITY_METRICS and SWEEP_METRICS), and three
    over all layers. relative_resolution: the capacity search's grid step (a count falls when it
    drops by more than one step). Returns the MetricsTable frame (metric, value, detail, ...)."""
    metrics = MetricsTable()

    for row in capacities.itertuples():
        metrics.add(LAYER_CAPACITY_METRICS[row.sweep][row.context].format(value=row.value), row.memorised_examples,
                    f"max over probed N of N x training accuracy at {row.budget_steps} steps (the search's budget); "
                    f"{layer_budget_text(row)}; largest N fitted to 100%: {row.capacity}; {row.n_params} parameters, "
                    f"H min(n, d_h) = {row.theory_scale}")

    resolution = relative_resolution
    for (sweep, kind), points in capacities.groupby(["sweep", "context"]):
        points = points.sort_values("value")
        names = SWEEP_METRICS[sweep][kind]
        fixed = _fixed_sizes(points, sweep)
        limited = points[points["budget_limited"].astype(bool)]
        limited_text = ", ".join(f"{sweep} = {r.value}: {r.capacity} -> {r.budget_capacity}" for r in limited.itertuples()) or "none"
        metrics.add(names["budget"], points["budget_rise_steps"].max(skipna=False),
                    "largest rise of a search's 100% capacity, in search grid steps, when the sizes bracketing it (and grid steps above) "
                    f"are retrained with more steps (reported); above 1 at: {limited_text}")
        metrics.add(names["unconverged"], budget_unconverged(points).sum(skipna=False),
                    f"layers whose 100% capacity 4x the steps raised by more than one grid step (the earlier gate's rule, reported): {limited_text}")
        # The heads fits leave out layers with H d_v < 2: their label logits are one scalar times a
        # fixed vector, so argmax reaches 2 of the C classes and the capacity is the longest prefix
        # of labels with 2 distinct values, a property of the labels, not of the layer's memory
        # (docs/methods/attention.md). Their capacities stay in the table and the metrics.
        excluded = points[points["heads"] * points["d_value"] < 2]["value"].tolist() if sweep == "heads" else []
        points = points[~points["value"].isin(excluded)] if excluded else points
        x, y = points["value"].tolist(), points["memorised_examples"].tolist()
        ratios, same_sizes = points["budget_count_ratio"].tolist(), points["budget_count_ratio_same_sizes"].tolist()
        if sweep == "d_head":  # the checked slope reads d_h <= n; so does its gate
            knee = int(points["n_context"].iloc[0])
            ratios = points.loc[points["value"] <= knee, "budget_count_ratio"].tolist()
            same_sizes = points.loc[points["value"] <= knee, "budget_count_ratio_same_sizes"].tolist()
        metrics.add(names["spread_same_sizes"], budget_ratio_spread(same_sizes),
                    "as the budget-ratio spread, each ratio read over the sizes trained at both budgets (the bracket of the 100% "
                    "capacity): the sizes held fixed; ratios " + ", ".join(f"{v}: {r:.3g}" for v, r in zip(points["value"], points["budget_count_ratio_same_sizes"])))
        metrics.add(names["spread"], budget_ratio_spread(ratios),
                    f"max / min over the fitted layers of count({int(points['budget_steps_larger'].iloc[0])} steps) / "
                    f"count({int(points['budget_steps'].iloc[0])} steps), counts = max N x accuracy; ratios "
                    + ", ".join(f"{v}: {r:.3g}" for v, r in zip(points["value"], points["budget_count_ratio"])))
        if sweep == "heads" and len(x) >= 2:
            note = f"; H = {excluded} left out (H d_v < 2: two reachable classes)" if excluded else ""
            _heads_law_metrics(metrics, names, x, y, f"{kind} context, {fixed}{note}")
            if len(x) >= 3:  # the alternative: the smallest fitted H left out too
                drop = SWEEP_METRICS["heads_drop_smallest"][kind]
                _heads_law_metrics(metrics, drop, x[1:], y[1:], f"{kind} context, H = {x[0]} left out too")
                metrics.add(drop["spread"], budget_ratio_spread(ratios[1:]), f"budget-ratio spread over H = {x[1:]}")
        if sweep == "n_context" and len(x) >= 2:
            metrics.add(names["violations"], nondecreasing_violations(y, resolution),
                        f"{kind} context, steps n -> next n whose count falls below the previous / {1 + resolution:g}; counts {y} at n = {x}, {fixed}")
            metrics.add(names["spearman"], spearman(x, y), f"{kind} context, count vs n = {x} (reported)")
            metrics.add(names["ratio"], y[-1] / max(y[0], 1), f"count at n = {x[-1]} over n = {x[0]}")
        if sweep == "d_head" and len(x) >= 2:
            # The theorem's bound H min(n, d_h) grows while d_h <= n (checked: the slope there) and
            # says nothing beyond n (the slope there is reported, not checked).
            try:
                slopes = slopes_around(x, y, knee)
            except ValueError:
                continue
            metrics.add(names["slope_below"], slopes.below, f"{kind} context, examples per unit of d_h for d_h <= n = {knee}, {fixed}",
                        standard_error=slopes.below_error)
            metrics.add(names["slope_above"], slopes.above, f"examples per unit of d_h for d_h >= n = {knee} (reported: the lower bound is silent there)",
                        standard_error=slopes.above_error)
            ratio = slopes.above / slopes.below if slopes.below > 0 else math.nan
            metrics.add(names["slope_ratio"], ratio, "slope above n / slope below n (reported)")

    metrics.add("bits_per_parameter_max", capacities["bits_per_parameter"].max(), "capacity x log2(C) / parameters, best layer of all sweeps")
    metrics.add("assumptions_context_full_rank_min", capacities["context_full_rank"].min(), "fraction of context matrices of rank n, worst layer")
    metrics.add("assumptions_kruskal_subsets_full_rank_min", capacities["kruskal_subsets_full_rank"].min(), "fraction of random n-subsets of queries of rank n, worst layer")
    return metrics.frame()


def layer_budget_text(row) -> str:
    """The layer's count at the budget check's larger budget, for its metric's detail."""
    return (f"{row.memorised_examples_larger_budget:.0f} at {row.budget_steps_larger} steps over the budget check's sizes "
            f"(ratio {row.budget_count_ratio:.3g})")


def _heads_law_metrics(metrics: MetricsTable, names: dict, x: list, y: list, where: str) -> None:
    """The heads law's fits over counts y at H = x: slope, R^2, log-log exponent, intercept,
    end ratio and the residuals of c = a + bH against c = a + b sqrt(H)."""
    fit = linear_fit(x, y)
    metrics.add(names["slope"], fit.slope, f"examples per head, {where}", standard_error=fit.slope_se)
    metrics.add(names["r2"], fit.r2, f"linear fit of the count on H = {x}")
    exponent, exponent_error, how = heads_exponent(x, y)
    metrics.add(names["exponent"], exponent, f"{where}; {how}", standard_error=exponent_error)
    metrics.add(names["intercept"], fit.intercept, "examples at H = 0 from the fit", standard_error=fit.intercept_se)
    metrics.add(names["ratio"], y[-1] / max(y[0], 1), f"count at H = {x[-1]} over H = {x[0]} (H ratio {x[-1] / x[0]:g})")
    linear_ss, sqrt_ss = heads_law_residuals(x, y)
    metrics.add(names["residuals_linear"], linear_ss, f"residual sum of squares of c = a + b H over H = {x}")
    metrics.add(names["residuals_sqrt"], sqrt_ss, f"residual sum of squares of c = a + b sqrt(H) over H = {x}")
    metrics.add(names["residual_ratio"], sqrt_ss / linear_ss if linear_ss > 0 else (math.inf if sqrt_ss > 0 else math.nan),
                "residuals of a + b sqrt(H) over those of a + b H (above 1: the linear law fits better)")


class KneeSlopes(NamedTuple):
    """Slopes of the line fits below and above a knee (examples per unit of x), with their
    standard errors (nan for a side of two points)."""

    below: float
    above: float
    below_error: float = math.nan
    above_error: float = math.nan


def slopes_around(x: Sequence[float], y: Sequence[float], knee: float) -> KneeSlopes:
    """Slopes of least-squares lines on the points with x <= knee and with x >= knee (the knee
    point is in both). x, y: 1-D of equal length, at least two points on each side.

    With d_h as x and knee = n, the paper's lower bound H min(n, d_h) grows below the knee and is
    flat above it (a lower bound: capacity may still grow there).
    """
    below = [(a, b) for a, b in zip(x, y) if a <= knee]
    above = [(a, b) for a, b in zip(x, y) if a >= knee]
    if len(below) < 2 or len(above) < 2:
        raise ValueError(f"need two points on each side of the knee {knee}, got x = {list(x)}")
    below_fit, above_fit = linear_fit(*zip(*below)), linear_fit(*zip(*above))
    return KneeSlopes(below=below_fit.slope, above=above_fit.slope,
                      below_error=below_fit.slope_se, above_error=above_fit.slope_se)


def heads_exponent(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, str]:
    """The log-log exponent of capacity against H (1 for linear growth, 1/2 for sqrt(H)), its
    standard error and how it was fitted; nan when a capacity is not positive (a power law cannot
    be fitted through 0)."""
    if min(y) <= 0:
        return math.nan, math.nan, f"capacity {list(y)} at H = {list(x)} is not positive everywhere: no log-log fit"
    fit = power_law_fit(x, y)
    return fit.exponent, fit.exponent_se, f"log-log slope of capacity on H = {list(x)} (linear: 1, sqrt(H): 0.5), R^2 = {fit.r2:.3f}"


def heads_law_residuals(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Residual sums of squares of the two laws fitted by least squares, each with an intercept:
    c = a + b H and c = a + b sqrt(H). A linear law with an intercept has a log-log slope below 1
    (0.72 over H = 1-8 for a = b), so the exponent alone can reject it; the residuals cannot."""
    return residual_sum_of_squares(x, y), residual_sum_of_squares(np.sqrt(np.asarray(x, float)), y)


def _fixed_sizes(points: pd.DataFrame, sweep: str) -> str:
    """The sizes a sweep holds fixed, as text for the metric details."""
    fixed = [name for name in ("d", "heads", "d_head", "d_value", "n_context", "n_classes") if name != sweep]
    return ", ".join(f"{name} = {points[name].iloc[0]}" for name in fixed)
