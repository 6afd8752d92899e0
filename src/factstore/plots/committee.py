"""Figures of the committee-machine study (S3, first half).

Each figure is `name(tables, params) -> Figure`, tables being the inputs of the study's figure
rule read as DataFrames (workflow/rules/committee.smk: COMMITTEE_FIGURE_INPUTS); FIGURES lists them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from factstore.committee.multi_output import FLOOR_MARGIN, fit_window
from factstore.plots import style
from factstore.statistics import first_crossing_below, power_law_fit

# The paper's simulations and the one-step RSB value they are compared with.
PAPER_CPW = {1: 2.0, 3: 2.96, 5: 3.33}
ONE_STEP_RSB = 3.0
LOG_FLOOR = 1e-4  # a measured 0 is drawn here on the log axes, as an open triangle
SOLVER_LABELS = {"backprop": "back-propagation (tanh, beta annealed)", "least_action": "least action + LP polish (restarts included)",
                 "trajectory_search": "least action, restarts, then the trajectory search",
                 "function_search": "least action + LP polish through each upper-layer function", "lp": "exact (LP)",
                 "milp": "exact (MILP over internal representations)"}
SOLVER_STYLES = {"backprop": "-", "least_action": "-.", "trajectory_search": (0, (8, 2, 1, 2, 1, 2)), "function_search": (0, (3, 1, 1, 1, 1, 1)),
                 "lp": ":", "milp": (0, (1, 2))}  # theory lines are dashed
SOLVER_MARKERS = {"backprop": "o", "least_action": "s", "trajectory_search": "v", "function_search": "D", "lp": "^", "milp": "*"}
DEPTH_SOLVER_NAMES = {"backprop": "back-propagation", "least_action": "multilayer least action", "function_search": "function search"}


def fraction_embedded(tables: dict[str, pd.DataFrame], params: dict):
    """Fraction of instances embedded with zero error vs alpha, one panel per K, one colour per N.

    tables: fractions (committee.summary).
    """
    fractions = tables["fractions"]
    tree = fractions[fractions.run.str.startswith("tree_")]
    ks = sorted(tree.hidden.unique())
    fig, axes = style.figure(ncols=len(ks), width=3.8, sharey=True)
    colours = style.palette([f"N = {n}" for n in sorted(tree.n.unique())])
    for ax, k in zip(axes[0], ks):
        here = tree[tree.hidden == k]
        for (solver, n), curve in here.groupby(["solver", "n"]):
            curve = curve.sort_values("alpha")
            ax.plot(curve.alpha, curve.fraction, marker="o", ms=3, color=colours[f"N = {n}"],
                    linestyle=SOLVER_STYLES[solver], label=f"N = {n}")
            if solver == "least_action" and (curve.first_attempt_fraction != curve.fraction).any():  # restarts added instances
                ax.plot(curve.alpha, curve.first_attempt_fraction, color=colours[f"N = {n}"], linewidth=0.8, alpha=0.5,
                        linestyle=SOLVER_STYLES[solver])
        for solver in here.solver.unique():
            ax.plot([], [], color="0.3", linestyle=SOLVER_STYLES[solver], label=SOLVER_LABELS[solver])
        if (here.first_attempt_fraction != here.fraction).any():
            ax.plot([], [], color="0.3", linewidth=0.8, alpha=0.5, linestyle=SOLVER_STYLES["least_action"],
                    label="least action, first attempt alone")
        style.theory_vline(ax, PAPER_CPW[k], f"paper: {PAPER_CPW[k]:g}" if k != 1 else "perceptron: 2")
        if k > 1:
            style.theory_vline(ax, ONE_STEP_RSB, "one-step RSB ~ 3", reference=True)
        ax.axhline(0.5, color="0.7", linewidth=0.8)
        ax.set_title(f"tree committee machine, K = {k}")
        ax.set_xlabel(r"load $\alpha = P / N$")
    axes[0][0].set_ylabel("fraction of instances embedded perfectly")
    style.shared_legend(fig, axes)
    style.caption(fig, f"{int(tree.instances.max())} instances per point; CpW = where the fraction crosses 1/2 (grey line)")
    return fig


def capacity_extrapolation(tables: dict[str, pd.DataFrame], params: dict):
    """CpW vs 1/N per K and solver, with the line a + b/N extrapolated to N -> infinity.

    tables: capacity, extrapolation (committee.summary).
    """
    table, lines = tables["capacity"], tables["extrapolation"]
    tree = table[table.run.str.startswith("tree_")].dropna(subset=["cpw"])
    fig, axes = style.figure(width=8.0, height=4.0)
    ax = axes[0][0]
    colours = style.palette([f"K = {k}" for k in sorted(tree.hidden.unique())])
    x_max = 1.1 / tree.n.min() if len(tree) else 0.1
    for (k, solver, run), group in tree.groupby(["hidden", "solver", "run"]):
        colour = colours[f"K = {k}"]
        marker = SOLVER_MARKERS[solver]
        ax.plot(1 / group.n, group.cpw, marker, color=colour, label=f"K = {k}, {SOLVER_LABELS[solver]}")
        fit = lines[(lines.run == run) & (lines.solver == solver)]
        if len(fit) and np.isfinite(fit.cpw_infinite_n.iloc[0]):
            grid = np.linspace(0, x_max, 20)
            ax.plot(grid, fit.cpw_infinite_n.iloc[0] + fit.slope.iloc[0] * grid, color=colour,
                    linestyle=SOLVER_STYLES[solver], alpha=0.7)
    for k, value in PAPER_CPW.items():
        if f"K = {k}" in colours:
            ax.plot([0], [value], "*", ms=11, color=colours[f"K = {k}"], markeredgecolor="k",
                    label=f"paper, K = {k}: {value:g}" if k > 1 else "perceptron: 2")
    style.theory_hline(ax, ONE_STEP_RSB, "one-step RSB ~ 3", reference=True)
    ax.set_xlim(left=-0.002, right=x_max)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("1 / N")
    ax.set_ylabel("capacity per weight (fraction embedded = 1/2)")
    style.shared_legend(fig, axes, fontsize=7)
    style.caption(fig, "points: certified lower bounds at each N; lines: CpW = a + b/N (reported, not checked: "
                       "for a solver-limited curve a is not a finite-size extrapolation)")
    return fig


def depth(tables: dict[str, pd.DataFrame], params: dict):
    """Left: CpW vs the number of hidden layers, tree (1 and 2 hidden layers, same N) and fully
    connected (every solver). Right: the fully connected function search's embedded fractions per
    depth, and (faint) the part the committee (majority upper function) alone embedded.

    tables: capacity, fractions (committee.summary).
    """
    table, fractions = tables["capacity"], tables["fractions"]
    fig, axes = style.figure(ncols=2, width=4.4, height=4.2)
    ax = axes[0][0]
    depth_params = params["depth"]
    tree = table[table.run.isin([depth_params["reference_run"], depth_params["tree_run"]])]
    largest_n = tree.n.max() if len(tree) else 0
    tree = tree[tree.n == largest_n].sort_values("hidden_layers")
    fc = table[table.run.isin(params["fc_runs"])].sort_values("hidden_layers")
    colours = style.palette(["tree", "fully connected"])
    if len(tree):
        ax.plot(tree.hidden_layers, tree.cpw, "o-", color=colours["tree"], label=f"tree (K = 3; 9 -> 3), N = {largest_n}, least action")
    for solver, group in fc.groupby("solver"):
        ax.plot(group.hidden_layers, group.cpw, marker=SOLVER_MARKERS[solver], linestyle=SOLVER_STYLES[solver], color=colours["fully connected"],
                label=f"fully connected, N = {group.n.iloc[0]}, H = {group.hidden.iloc[0]}: {DEPTH_SOLVER_NAMES[solver]}")
    ax.plot([1, 2], [PAPER_CPW[3], 2.99], "*", ms=11, color="0.4", label="paper: 2.96 (K = 3), 2.99 (two layers)")
    style.theory_hline(ax, ONE_STEP_RSB, "one-step RSB ~ 3", reference=True)
    ax.set_xticks([1, 2, 3])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("hidden layers")
    ax.set_ylabel("capacity per weight")
    ax.set_title("CpW vs depth")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.21))
    ax = axes[0][1]
    searched = fractions[fractions.run.isin(params["fc_runs"]) & (fractions.solver == "function_search")]
    layer_colours = dict(zip(sorted(searched.hidden_layers.unique()), sns.color_palette("crest", n_colors=3)))
    for layers, curve in searched.sort_values("alpha").groupby("hidden_layers"):
        colour = layer_colours[layers]
        ax.plot(curve.alpha, curve.fraction, "D-", ms=3, color=colour, label=f"{layers} hidden layer{'s' if layers > 1 else ''} (W = {curve.weights.iloc[0]})")
        ax.plot(curve.alpha, curve.committee_alone_fraction, ":", color=colour, alpha=0.6)
    if len(searched):
        ax.plot([], [], ":", color="0.3", alpha=0.6, label="embedded by the committee (majority) alone")
    ax.axhline(0.5, color="0.7", linewidth=0.8)
    ax.set_xlabel(r"load $\alpha = P / W$")
    ax.set_ylabel("fraction of instances embedded perfectly")
    ax.set_title("fully connected: function search")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.21))
    style.caption(fig, "tree: certified lower bounds (least action + LP polish) at the largest N; "
                       f"fully connected ({', '.join(fc.solver.unique())}): alpha = P / (N H + (layers - 1) H^2); "
                       "function search: least action + LP polish through the committee, then the parity on the rest "
                       "(the functions two or more H = 3 layers realise); every embedding checked on the full machine")
    return fig


def _plot_with_zeros(ax, x: pd.Series, y: pd.Series, fmt: str, colour, label: str | None = None) -> None:
    """Plot y (>= 0) on a log axis: the values > 0 as `fmt`, each 0 as an open triangle at LOG_FLOOR
    (labelled once), and the line (if `fmt` has one) through both."""
    zero = y <= 0
    ax.plot(x, y.clip(lower=LOG_FLOOR), fmt, color=colour, label=label, markevery=list(np.flatnonzero(~zero.to_numpy())))
    if zero.any():
        ax.plot(x[zero], np.full(int(zero.sum()), LOG_FLOOR), "v", color=colour, markerfacecolor="none",
                label=f"0 measured (drawn at {LOG_FLOOR:g})")


def multi_output(tables: dict[str, pd.DataFrame], params: dict):
    """Saturated accuracy above chance and the finite-error CpW vs the number of outputs O (log-log).

    tables: outputs (per-O means, committee.summary), table (per instance, committee.multi_output).
    """
    per_o, runs = tables["outputs"], tables["table"]
    fig, axes = style.figure(ncols=3, width=3.8)
    left, right, labels = axes[0]
    colours = style.palette(["measured", "fit"])
    left.plot(runs.outputs, runs.above_chance.clip(lower=LOG_FLOOR), ".", color="0.7", label="instances")
    _plot_with_zeros(left, per_o.outputs, per_o.above_chance, "o", colours["measured"], label="mean")
    if "floor_above_chance" in per_o:
        left.plot(per_o.outputs, per_o.floor_above_chance.clip(lower=LOG_FLOOR), "s--", ms=3, color="0.5",
                  label="floor: random hidden layer, fitted outputs")
        left.plot(per_o.outputs, (FLOOR_MARGIN * per_o.floor_above_chance).clip(lower=LOG_FLOOR), ":", color="0.5",
                  label=f"{FLOOR_MARGIN:g}x floor: the fit window's edge")
        window = fit_window(per_o)
    else:
        window = per_o
    if (window.above_chance > 0).all() and len(window) >= 2:
        fit = power_law_fit(window.outputs, window.above_chance)
        grid = np.geomspace(window.outputs.min(), window.outputs.max(), 30)
        left.plot(grid, fit.prefactor * grid**fit.exponent, color=colours["fit"],
                  label=f"fit: exponent {fit.exponent:.2f} (R² {fit.r2:.2f})")
        left.plot(grid, fit.prefactor * grid**-0.9, color="0.4", linestyle=":", label="paper: exponent -0.9")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("outputs O")
    left.set_ylabel("saturated training accuracy - 1/2")
    left.legend(fontsize=7)
    right.plot(per_o.outputs, per_o.bits_per_weight, "o-", color=colours["measured"])
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("outputs O")
    right.set_ylabel("finite-error CpW: P O (1 - H2(error)) / W")
    labels.plot(runs.outputs, runs.label_accuracy.clip(lower=LOG_FLOOR), ".", color="0.7")
    _plot_with_zeros(labels, per_o.outputs, per_o.label_accuracy, "o-", colours["measured"])
    if labels.get_legend_handles_labels()[0]:
        labels.legend(fontsize=7)
    labels.set_xscale("log")
    labels.set_yscale("log")
    labels.set_xlabel("outputs O")
    labels.set_ylabel("O-bit label accuracy (every bit right)")
    labels.set_title("label accuracy")
    n, hidden, p = (int(runs[column].iloc[0]) for column in ("n", "hidden", "patterns"))
    left.set_title("accuracy above chance (checked)")
    right.set_title("finite-error capacity per weight")
    style.caption(fig, f"N = {n}, H = {hidden}, P = {p}; {runs.instance.nunique()} instances; "
                       f"trained through the whole anneal ({int(per_o.epochs.max())} epochs); fit where acc - 1/2 >= "
                       f"{FLOOR_MARGIN:g}x the floor")
    return fig


def solver_reach(tables: dict[str, pd.DataFrame], params: dict):
    """Each solver's certified CpW against N, K = 3 and 5: the exact MILP at small N (its lower and
    upper bound joined by a bar; they coincide when no instance is undecided) beside least action
    and the trajectory search on the same instances, and every tree solver at the study's N.

    tables: capacity and fractions (committee.summary). Every point is a certified lower bound
    (the MILP's upper bar end excepted); the gap between the solvers at one N is the solvers' reach.
    """
    capacity, fractions = tables["capacity"], tables["fractions"]
    fig, axes = style.figure(ncols=2, width=3.8, sharey=True)
    trees = capacity[capacity.run.str.match(r"^(tree|reference)_k\d+_")].dropna(subset=["cpw"])
    colours = style.palette(sorted(trees.solver.unique()))
    for ax, k in zip(axes[0], (3, 5)):
        here = trees[trees.hidden == k]
        for solver in sorted(here.solver.unique(), key=lambda s: s == "milp"):  # the exact points on top
            group = here[here.solver == solver].sort_values("n")
            ax.errorbar(group.n, group.cpw, yerr=group.cpw_standard_error.fillna(0), marker=SOLVER_MARKERS[solver],
                        linestyle="none", ms=8 if solver == "milp" else 5, capsize=2, color=colours[solver],
                        label=SOLVER_LABELS[solver])
        exact = fractions[(fractions.hidden == k) & (fractions.solver == "milp")].sort_values("alpha")
        if len(exact):
            upper = first_crossing_below(exact.alpha.to_numpy(), 1 - exact.unembeddable_fraction.to_numpy(), 0.5)
            lower = here[here.solver == "milp"].cpw
            if len(lower) and np.isfinite(upper):
                ax.vlines(exact.n.iloc[0], float(lower.iloc[0]), upper, color="0.3", linewidth=2)
        style.theory_hline(ax, PAPER_CPW[k], f"paper, K = {k}: {PAPER_CPW[k]:g}")
        ax.set_xscale("log")
        ax.set_xticks(sorted(here.n.unique()), [str(n) for n in sorted(here.n.unique())])
        ax.minorticks_off()
        ax.set_title(f"tree, K = {k}")
        ax.set_xlabel("N")
    axes[0][0].set_ylabel("certified CpW (crossing of 1/2)")
    style.shared_legend(fig, axes)
    style.caption(fig, "small N: the exact MILP (bar: its lower to upper bound) and the solvers on the same instances; larger N: the study's runs")
    return fig


FIGURES = {
    "fraction_embedded": fraction_embedded,
    "solver_reach": solver_reach,
    "capacity_extrapolation": capacity_extrapolation,
    "depth": depth,
    "multi_output": multi_output,
}
