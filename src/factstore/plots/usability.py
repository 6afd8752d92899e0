"""Figures of the usability study (S0 "Usability inside a Transformer"; the paper's Figs. 7-8).

Each figure is `name(tables, params) -> Figure`, tables being the inputs of the study's figure
rule read as DataFrames (workflow/rules/usability.smk: USABILITY_FIGURE_INPUTS); FIGURES lists them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.mlp.methods import METHODS
from factstore.plots import style
from factstore.usability import threshold
from factstore.usability.summary import VERDICT_HOST, hosted

LABELS = {name: method.label for name, method in METHODS.items()}
"""Each method's legend label: the one its entry of mlp.methods.METHODS gives it."""


def usable_capacity(tables: dict[str, pd.DataFrame], params: dict):
    """Smallest usable MLP (fact-adaptive accuracy >= target) vs F beside the standalone capacity.

    tables: usable (summary), capacity_<method> (capacity step).
    """
    usable, runs = tables["usable"], style.stacked(tables, "capacity_")
    methods = list(dict.fromkeys(usable.method))
    colours = style.palette(methods)
    fig, axes = style.figure(ncols=2, width=4.4)
    left, right = axes[0]
    for method in methods:
        here = usable[usable.method == method].sort_values("F")
        label = LABELS.get(method, method)
        left.plot(here.F, here.standalone_params, "--", marker="s", mfc="none", color=colours[method],
                  label=f"{label}: standalone")
        left.plot(here.F, here.usable_params, "-", marker="o", color=colours[method], label=f"{label}: usable")
        missing = runs[(runs.method == method) & ~runs.found.astype(bool)]
        left.plot(missing.F, missing.params_at_cap, "x", color=colours[method], ms=7)
        best = runs[runs.method == method].groupby("F").best_fact_adaptive.mean()
        right.plot(best.index, best.values, marker="o", color=colours[method], label=label)
    facts = sorted(usable.F.unique())
    left.set(xscale="log", yscale="log", xlabel="facts F", ylabel="MLP parameters W")

    left.set_title("usable vs standalone capacity")
    style.theory_hline(right, params["target"], f"target {params['target']:g}")
    right.set(xscale="log", xlabel="facts F", ylabel="best fact-adaptive accuracy", title="best over probed sizes")
    for ax in (left, right):
        ax.set_xticks(facts, [str(f) for f in facts])
        ax.minorticks_off()
    style.shared_legend(fig, axes)
    style.caption(fig, f"d = {params['d']}; x: no size up to the cap usable (W at the cap); "
                       f"mean over {runs.replicate.nunique() if len(runs) else 0} seeds")
    return fig


def recall(tables: dict[str, pd.DataFrame], params: dict):
    """Plain recall (the MLP trained with) vs fact-adaptive accuracy (a new MLP, new facts), every MLP.

    tables: mlps (summary). Memorisation shows as points far below the diagonal.
    """
    mlps = tables["mlps"]
    fig, axes = style.figure(ncols=1, width=4.6)
    ax = axes[0][0]
    groups = list(dict.fromkeys(mlps.experiment + ": " + mlps.method.map(lambda m: LABELS.get(m, m))))
    colours = style.palette(groups)
    for name, group in mlps.groupby(mlps.experiment + ": " + mlps.method.map(lambda m: LABELS.get(m, m))):
        ax.plot(group.plain_recall, group.fact_adaptive_max, "o", ms=4, alpha=0.7, color=colours[name], label=name)
    ax.plot([0, 1], [0, 1], **style.REFERENCE_STYLE)
    ax.set(xlabel="plain recall (trained MLP and facts)",
           ylabel="max fact-adaptive accuracy over training\n(swapped MLP, new facts)")
    style.shared_legend(fig, axes)
    style.caption(fig, "one point per Transformer trained; diagonal: no memorisation")
    return fig


def whitening(tables: dict[str, pd.DataFrame], params: dict):
    """Standalone capacity (F / W) and fact-adaptive accuracy vs the whitening strength alpha.

    tables: whitening_<kind> (whitening step), one column of panels per embedding kind.
    """
    every_host = style.stacked(tables, "whitening_")
    table = hosted(every_host, VERDICT_HOST)
    kinds = sorted(table.kind.unique())
    fig, axes = style.figure(ncols=len(kinds), nrows=2, width=4.0, height=3.0, sharex=True)
    colours = style.palette(table.method.unique())
    for column, kind in enumerate(kinds):
        here = table[table.kind == kind]
        for method, group in here.groupby("method"):
            means = group.groupby("alpha")[["facts_per_parameter", "fact_adaptive_max", "plain_recall"]].mean()
            label = LABELS.get(method, method)
            stored = group.groupby("alpha").stored.all()
            axes[0][column].plot(means.index[stored.values], means.facts_per_parameter[stored.values], marker="o",
                                 color=colours[method], label=f"{label}: standalone F / W")
            if not stored.all():  # F / W at the width cap bounds an unstored setting's F / W from above
                at_cap = (group.F / group.n_params).groupby(group.alpha).mean()[~stored]
                axes[0][column].plot(at_cap.index, at_cap, "v", color=colours[method], fillstyle="none",
                                     label=f"{label}: not stored by the cap")
            axes[1][column].plot(means.index, means.fact_adaptive_max, marker="o", color=colours[method],
                                 label=f"{label}: max fact-adaptive")
            axes[1][column].plot(means.index, means.plain_recall, ":", marker=".", color=colours[method],
                                 label=f"{label}: plain recall")
            at_standalone = hosted(every_host, "standalone")
            at_standalone = at_standalone[(at_standalone.kind == kind) & (at_standalone.method == method)]
            if "host" in every_host and len(at_standalone):
                axes[1][column].plot(*zip(*at_standalone.groupby("alpha").fact_adaptive_max.mean().items()), "--",
                                     marker="x", color=colours[method], label=f"{label}: max fact-adaptive, 1x host")
        axes[0][column].set(title=f"{kind} embeddings, F = {int(here.F.iloc[0])}", ylabel="standalone F / W")
        style.theory_hline(axes[1][column], params["target"], f"target {params['target']:g}")
        axes[1][column].set(xlabel=r"whitening strength $\alpha$", ylabel="accuracy in the Transformer")
    style.shared_legend(fig, axes)
    style.caption(fig, f"standalone F / W: the smallest MLP storing {params['standalone_target']:.0%} of its facts; the "
                       f"Transformer hosts MLPs at the first of 1x, 2x, 4x ... that size where both store every fact; mean over "
                       f"{table.replicate.nunique()} seeds; open triangles: not stored within the width cap in "
                       f"some seed (F / W at the cap, an upper bound)")
    return fig


def lipschitz(tables: dict[str, pd.DataFrame], params: dict):
    """Max fact-adaptive accuracy vs the swapped MLP's tangent-space Lipschitz constant, with the
    threshold of each whitening family (the paper's Fig. 8b reads the MLPs of Fig. 8a).

    tables: mlps (summary). Only the whitening experiment's MLPs that store >= target of their
    facts on their own (folded back).
    """
    mlps, target, column = tables["mlps"], params["target"], params["lipschitz_on"]
    mlps = mlps[mlps.experiment == "whitening"]
    storing = mlps[(mlps.standalone_swapped >= target) & mlps[column].notna()]
    fig, axes = style.figure(ncols=1, width=5.0)
    ax = axes[0][0]
    names = storing.kind + ": " + storing.method.map(lambda m: LABELS.get(m, m))
    colours = style.palette(names.unique())
    for name, group in storing.groupby(names):
        ax.plot(group[column], group.fact_adaptive_max, "o", ms=4, alpha=0.75, color=colours[name], label=name)
        limit = threshold.smallest_failing(group[column], group.fact_adaptive_max, target)
        if np.isfinite(limit):
            ax.axvline(limit, color=colours[name], ls="--", lw=1)
    notes = ["dashed: each family's threshold (smallest failing L)"]
    if len(storing) >= 2:
        fit = threshold.logistic_fit(storing[column], storing.fact_adaptive_max >= target)
        lowest, highest = storing[column].min(), storing[column].max()
        if np.isfinite(fit.threshold) and lowest / 10 <= fit.threshold <= highest * 10:
            style.theory_vline(ax, fit.threshold, "logistic P(usable) = 1/2", reference=True)
        elif np.isfinite(fit.threshold):  # a flat fit puts its midpoint far outside the data: say so, do not draw it
            notes.append(f"logistic midpoint {fit.threshold:.3g} lies outside the data")
    style.theory_hline(ax, target, None, reference=True)
    ax.set(xscale="log", xlabel="Lipschitz constant / RMS output" if column == "lipschitz_relative" else "Lipschitz constant",
           ylabel="max fact-adaptive accuracy")
    style.shared_legend(fig, axes)
    style.caption(fig, "; ".join([f"{len(storing)} whitened MLPs storing >= {target:g} standalone", *notes]))
    return fig


FIGURES = {"usable_capacity": usable_capacity, "recall": recall, "whitening": whitening, "lipschitz": lipschitz}
