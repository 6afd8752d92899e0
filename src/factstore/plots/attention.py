"""Figures of the multi-head attention memorisation study (S4): `name(tables, params) ->
Figure`, listed in FIGURES; tables: capacity (attention.summary); params: training (for captions)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.plots import style
from factstore.statistics import linear_fit

AXIS_LABELS = {
    "heads": "number of heads H",
    "n_context": "context size n (tokens)",
    "d_head": r"head dimension $d_h$ (query/key, per head)",
}
CONTEXT_LABELS = {"shared": "shared context", "per_example": "per-example context"}


def capacity_sweep(capacity: pd.DataFrame, sweep: str, params: dict):
    """Memorised examples against the size one sweep varies, for each context kind.

    Filled markers: the paper's count, max N x training accuracy over the probed N at the
    search's budget (what the claims read); open markers: the largest N fitted to the target
    accuracy; crosses: the count at the budget check's larger budget. Dashed: the theorem's LOWER bound Omega(H min(n, d_h)) drawn as
    c H min(n, d_h) with the largest c that keeps it below every measured capacity the summary
    reads (c = min of N* / (H min(n, d_h)); the heads sweep leaves out H d_v < 2, where argmax
    reaches two classes and the capacity is the labels', as the summary's fits do): the measured
    capacities are compared with it as a lower bound, which says nothing about saturation.
    Grey squares, right axis: trainable parameters. The legend sits outside, right of the axes.
    """
    points = capacity[capacity.sweep == sweep].sort_values("value")
    if points.empty:
        raise ValueError(f"the capacity table has no '{sweep}' sweep: add it to attention.sweeps in the config")
    kinds = [kind for kind in CONTEXT_LABELS if kind in set(points.context)]
    colours = style.palette([CONTEXT_LABELS[kind] for kind in kinds])
    fig, axes = style.figure(width=9.0, height=4.2)  # the legend takes the right ~40%
    ax = axes[0][0]
    for kind in kinds:
        here = points[points.context == kind]
        colour = colours[CONTEXT_LABELS[kind]]
        x, y = here["value"].to_numpy(float), here["memorised_examples"].to_numpy(float)
        ax.plot(x, y, "o-", color=colour, label=f"{CONTEXT_LABELS[kind]}: max N x accuracy (the claims' count)")
        ax.plot(x, here["capacity"], "o", mfc="none", color=colour, label=f"{CONTEXT_LABELS[kind]}: largest N fitted to the target")
        if "memorised_examples_larger_budget" in here:
            ax.plot(x, here["memorised_examples_larger_budget"], "x", color=colour,
                    label=f"{CONTEXT_LABELS[kind]}: max N x accuracy at {params['budget_check']['steps_factor']}x the steps")
        # The heads fit and bound leave out H d_v < 2 (two reachable classes), as the summary does.
        fitted = (here["heads"] * here["d_value"] >= 2).to_numpy() if sweep == "heads" else np.ones(len(x), bool)
        bound = here["theory_scale"].to_numpy(float)
        scale = lower_bound_constant(bound[fitted], y[fitted])
        over = " over H d_v >= 2" if not fitted.all() else ""
        ax.plot(x[fitted], scale * bound[fitted], color=colour, linestyle="--", linewidth=1.1,
                label=rf"{CONTEXT_LABELS[kind]}: lower bound $c\,H\min(n, d_h)$, $c$ = {scale:.2g}" + "\n"
                      + f"(the largest below the points{over})")
        x, y = x[fitted], y[fitted]
        if sweep == "heads" and len(x) >= 2:
            fit = linear_fit(x, y)
            grid = np.linspace(0, x.max(), 50)
            ax.plot(grid, fit.slope * grid + fit.intercept, color=colour, linestyle=":", linewidth=1.1,
                    label=f"{CONTEXT_LABELS[kind]}: linear fit over H d_v >= 2, {fit.slope:.0f} per head, $R^2$ = {fit.r2:.3f}")
    if sweep == "d_head":
        style.theory_vline(ax, float(points["n_context"].iloc[0]), r"$d_h = n$", reference=True)
    ax.set_xlabel(AXIS_LABELS[sweep])
    ax.set_ylabel("memorisation capacity N* (examples)")
    ax.set_ylim(bottom=0)

    parameters = ax.twinx()
    counts = points.drop_duplicates("value")
    parameters.plot(counts["value"], counts["n_params"], "s:", color="0.5", ms=4, label="trainable parameters (right axis)")
    parameters.set_ylabel("trainable parameters W", color="0.4")
    parameters.set_ylim(bottom=0, top=counts["n_params"].max() * 1.1)
    parameters.grid(False)
    ax.set_xticks(sorted(points["value"].unique()))
    ax.set_xlim(0, points["value"].max() * 1.05)
    style.shared_legend(fig, [ax, parameters], fontsize=7)
    style.caption(fig, _fixed_caption(points, sweep, params))
    return fig


def lower_bound_constant(bound: np.ndarray, capacity: np.ndarray) -> float:
    """The largest c with c * bound <= capacity at every point (the theorem's Omega(H min(n, d_h))
    drawn as a lower bound under the measurements, not fitted through them)."""
    return float(np.min(np.asarray(capacity, float) / np.asarray(bound, float)))


def _fixed_caption(points: pd.DataFrame, sweep: str, params: dict) -> str:
    symbols = {"d": "d", "heads": "H", "d_head": "d_h", "d_value": "d_v", "n_context": "n", "n_classes": "C"}
    fixed = ", ".join(f"{symbols[name]} = {points[name].iloc[0]}" for name in symbols if name != sweep)
    training = params["training"]
    return (f"{fixed}; count: max over probed N of N x training accuracy (Adam, {training['max_steps']} "
            f"full-batch steps for every layer, one seed; crosses: the same count at "
            f"{params['budget_check']['steps_factor']}x the steps over the sizes the budget check retrains)")


def assumptions(tables: dict[str, pd.DataFrame], params: dict):
    """The theorem's assumptions on the data each layer was trained on.

    Left: smallest rank over all context matrices vs n (needed: n; at most d). Right: randomised
    Kruskal rank of the query vectors (needed: >= n), with the share of random n-subsets of full rank.
    """
    capacity = tables["capacity"]
    # Jobs on the same (context, d, n) share their data pool; keep the worst case over them.
    data = capacity.groupby(["context", "d", "n_context"], as_index=False).agg(
        context_rank_min=("context_rank_min", "min"), context_full_rank=("context_full_rank", "min"),
        n_contexts=("n_contexts", "max"), kruskal_rank_estimate=("kruskal_rank_estimate", "min"),
        kruskal_subsets_full_rank=("kruskal_subsets_full_rank", "min"), kruskal_subsets=("kruskal_subsets", "max"),
    ).sort_values("n_context")
    kinds = [kind for kind in CONTEXT_LABELS if kind in set(data.context)]
    colours = style.palette([CONTEXT_LABELS[kind] for kind in kinds])
    fig, axes = style.figure(ncols=2, width=4.4, height=3.6)
    left, right = axes[0]
    n_grid = np.arange(1, data["n_context"].max() + 1)
    d = int(data["d"].max())
    offsets = dict(zip(kinds, np.linspace(-0.15, 0.15, len(kinds)) if len(kinds) > 1 else [0.0]))  # side by side
    for kind in kinds:
        here = data[data.context == kind]
        colour = colours[CONTEXT_LABELS[kind]]
        n = here["n_context"].to_numpy(float) + offsets[kind]
        full, matrices = here["context_full_rank"].min(), here["n_contexts"].max()
        checked = "1 context" if matrices == 1 else f"<= {matrices} contexts"
        left.plot(n, here["context_rank_min"], "o", color=colour, label=f"{kind} ({checked}): {full:.1%} of rank n")
        subsets = here["kruskal_subsets_full_rank"].min()
        right.plot(n, here["kruskal_rank_estimate"], "o", color=colour,
                   label=f"{kind}: {subsets:.1%} of n-subsets of rank n")
    for ax in (left, right):
        ax.plot(n_grid, n_grid, **style.THEORY_STYLE, label="needed: n")
        style.theory_hline(ax, d, f"d = {d} (largest possible)", reference=True)
        ax.set_xlabel("context size n (tokens)")
        ax.set_xticks(sorted(data["n_context"].unique()))
        ax.set_ylim(0, d * 1.5)  # headroom for the legend
        ax.legend(fontsize=7, loc="upper left")
    left.set_ylabel("smallest rank of a context matrix E")
    left.set_title("context rank (assumption: n)")
    right.set_ylabel("Kruskal rank of the queries e (estimate)")
    right.set_title("Kruskal rank (assumption: >= n)")
    style.caption(fig, f"ranks at float32 precision; Kruskal rank: largest k with all of "
                       f"{int(data['kruskal_subsets'].iloc[0])} random k-subsets independent")
    return fig


def heads(tables: dict[str, pd.DataFrame], params: dict):
    """Memorisation capacity vs the number of heads H, each context kind, with a linear fit and the
    lower bound c H min(n, d_h) under the points; trainable parameters on the right axis."""
    return capacity_sweep(tables["capacity"], "heads", params)


def context(tables: dict[str, pd.DataFrame], params: dict):
    """Memorisation capacity vs the context size n, each context kind, with the lower bound
    c H min(n, d_h) under the points; trainable parameters on the right axis."""
    return capacity_sweep(tables["capacity"], "n_context", params)


def head_dim(tables: dict[str, pd.DataFrame], params: dict):
    """Memorisation capacity vs the head dimension d_h (d_v = 1 as in the paper's code), each
    context kind, with the lower bound c H min(n, d_h) (flat beyond d_h = n, where it says nothing)
    under the points; parameters on the right axis."""
    return capacity_sweep(tables["capacity"], "d_head", params)


FIGURES = {"heads": heads, "context": context, "head_dim": head_dim, "assumptions": assumptions}
