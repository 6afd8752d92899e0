"""Figures of the linear-associative-memory study (S1).

Each figure is `name(tables, params) -> Figure`, tables being the inputs of the study's figure
rule read as DataFrames (workflow/rules/assoc.smk: ASSOC_FIGURE_INPUTS); FIGURES lists them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc import memory
from factstore.plots import style


def accuracy(tables: dict[str, pd.DataFrame], params: dict):
    """Recall accuracy vs load alpha, one panel per d: trained (original, decoupled) and Hebbian.

    tables: trained_<run> (assoc.trained tables), hebbian (assoc.hebbian).
    """
    curves, hebbian = style.stacked(tables, "trained_"), tables["hebbian"]
    full = curves[curves.rank_fraction == 1.0]
    dims = sorted(full.d.unique())
    fig, axes = style.figure(ncols=len(dims), width=3.6, sharey=True)
    colours = style.palette(["trained, original", "trained, decoupled", "Hebbian"])
    for ax, d in zip(axes[0], dims):
        here = full[full.d == d]
        for (method, problem), group in here.groupby(["method", "problem"]):
            if method == "hebbian":
                continue
            label = f"trained, {problem}"
            mean = group.groupby("alpha")["accuracy"].agg(["mean", "std"])
            ax.errorbar(mean.index, mean["mean"], yerr=mean["std"], marker="o", ms=3, capsize=2,
                        color=colours[label], linestyle="-" if problem == "original" else "--", label=label)
        heb = hebbian[hebbian.d == d].groupby("alpha")["accuracy"].mean()
        ax.plot(heb.index, heb.values, color=colours["Hebbian"], label="Hebbian")
        style.theory_vline(ax, 1 / 8, "1/8 (Hebbian, all facts)", reference=True)
        style.theory_vline(ax, 1 / 2, r"1/2 ($\alpha_c$, $d\to\infty$)")
        ax.set_title(f"d = {d}")
        ax.set_xlabel(r"load $\alpha = p \ln p / d^2$")
    axes[0][0].set_ylabel("recall accuracy (fraction of facts)")
    style.shared_legend(fig, axes)
    seeds = full[full.method == "trained"].groupby(["d", "problem"]).seed.nunique()  # per curve: 3 or 5 at the default scale
    counts = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
    style.caption(fig, f"mean ± std over {counts} seeds per curve; Hebbian over {hebbian.seed.nunique()} seeds")
    return fig


def capacity_extrapolation(tables: dict[str, pd.DataFrame], params: dict):
    """Apparent capacity vs 1 / ln p_c, extrapolated to d -> infinity (1 / ln p -> 0).

    tables: capacity (assoc_summary.summary).
    """
    capacity = tables["capacity"]
    fig, axes = style.figure(ncols=2, width=4.2)
    left, right = axes[0]
    criterion = capacity["criterion"] if "criterion" in capacity else pd.Series("all", index=capacity.index)
    full_rank = capacity[(capacity.method == "trained") & (capacity.rank_fraction == 1.0)].dropna(subset=["alpha_c"])
    trained = full_rank[criterion[full_rank.index] == "all"]
    apparent = full_rank[criterion[full_rank.index] == "mean"]
    colours = style.palette(["original", "decoupled"])
    for problem, group in trained.groupby("problem"):
        x = 1 / np.log(group.p_c.to_numpy(float))
        left.plot(x, group.alpha_c, "o", color=colours[problem], label=f"trained, {problem}: all facts, >= half the seeds")
        for xi, yi, d in zip(x, group.alpha_c, group.d):
            left.annotate(f"d={d}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for problem, group in apparent.groupby("problem"):
        left.plot(1 / np.log(group.p_c.to_numpy(float)), group.alpha_c, "o", mfc="none", color=colours[problem],
                  label=rf"trained, {problem}: mean accuracy $\geq$ {params['capacity_accuracy']} (reported)")
    original = trained[trained.problem == "original"]
    if len(original) >= 2:
        intercept, slope = memory.extrapolate_capacity(original.alpha_c.to_numpy(), original.p_c.to_numpy())
        grid = np.linspace(0, 1 / np.log(original.p_c.min()) * 1.05, 50)
        left.plot(grid, intercept + slope * grid, color=colours["original"], alpha=0.6,
                  label=rf"fit $a + b/\ln p$, $a$ = {intercept:.2f}")
    style.theory_hline(left, 0.5, r"$\alpha_c = 1/2$ (replica theory)")
    left.set_xlim(left=0)
    left.set_xlabel(r"$1 / \ln p_c$")
    left.set_ylabel(r"capacity $\alpha_c$ (largest load with every fact stored)")
    left.set_title("optimal W")
    left.legend(fontsize=7)

    hebbian = capacity[capacity.method == "hebbian-all"].dropna(subset=["alpha_c"])
    right.plot(1 / np.log(hebbian.p_c.to_numpy(float)), hebbian.alpha_c, "s", color="C2", label="Hebbian, all facts")
    for row in hebbian.itertuples():
        right.annotate(f"d={row.d}", (1 / np.log(row.p_c), row.alpha_c), textcoords="offset points", xytext=(4, 4), fontsize=7)
    style.theory_hline(right, 1 / 8, r"$\alpha = 1/8$ (theory)")
    right.set_xlim(left=0)
    right.set_ylim(0, 0.16)
    right.set_xlabel(r"$1 / \ln p_c$")
    right.set_ylabel("largest load with all facts recalled")
    right.set_title("Hebbian W")
    right.legend(fontsize=7)
    return fig


def spectrum(tables: dict[str, pd.DataFrame], params: dict):
    """Histogram of normalised singular values (E s^2 = 1) of the trained W at capacity (at
    d = params["spectrum_d"]) vs the (truncated) quarter-circle law; for W = Q R^T also its
    initialisation and the Hebbian W of the same facts cut to rank m.

    tables: spectra_<run> (assoc.trained spectra), capacity (assoc_summary.summary).
    """
    capacity, spectra, d = tables["capacity"], style.stacked(tables, "spectra_"), params["spectrum_d"]
    if "stage" not in spectra:
        spectra = spectra.assign(stage="trained")
    samples, initial, hebbian = {}, {}, {}  # (problem, kappa, alpha) -> singular values of the trained / initial / cut Hebbian W
    for (problem, kappa), group in spectra[spectra.d == d].groupby(["problem", "rank_fraction"]):
        alpha = memory.spectrum_load(capacity, spectra, problem, d, kappa)
        at_load = group[group.alpha == alpha]
        samples[problem, float(kappa), alpha] = at_load[at_load.stage == "trained"].singular_value.to_numpy()
        initial[problem, float(kappa), alpha] = at_load[at_load.stage == "initial"].singular_value.to_numpy()
        hebbian[problem, float(kappa), alpha] = at_load[at_load.stage == "hebbian"].singular_value.to_numpy()
    full = {k: v for k, v in samples.items() if k[1] >= 1}
    ranked = {k: v for k, v in samples.items() if k[1] < 1}
    fig, axes = style.figure(ncols=2 if ranked else 1, width=4.2)
    grid = np.linspace(0, 2.2, 300)
    ax = axes[0][0]
    colours = style.palette(["original", "decoupled"])
    for (problem, _, alpha), values in sorted(full.items()):
        ax.hist(values, bins=24, range=(0, 2.4), density=True, histtype="step", linewidth=1.5,
                color=colours[problem], label=rf"trained, {problem} ($\alpha$ = {alpha:g})")
    ax.plot(grid, memory.quarter_circle_density(grid), **style.THEORY_STYLE, label=r"quarter circle $\sqrt{4-s^2}/\pi$")
    ax.set_xlabel(r"singular value $s$ (normalised, $E\,s^2 = 1$)")
    ax.set_ylabel("density")
    ax.set_title(f"full rank, d = {d}")
    ax.legend(fontsize=7)
    if ranked:
        ax = axes[0][1]
        kappa_shown = sorted({k[1] for k in ranked})
        kappa = kappa_shown[len(kappa_shown) // 2]
        for (problem, k, alpha), values in ranked.items():
            if k != kappa:
                continue
            ax.hist(values, bins=16, range=(0, 2.4), density=True, histtype="step", linewidth=1.5, color="C4",
                    label=rf"trained, rank {k:g}$d$ ($\alpha$ = {alpha:g})")
            start = initial[problem, k, alpha]
            if len(start):
                ax.hist(start, bins=16, range=(0, 2.4), density=True, histtype="step", linewidth=1.0, color="0.5",
                        linestyle=":", label=r"its initialisation $W = QR^T$ (Gaussian factors)")
            cut = hebbian[problem, k, alpha]
            if len(cut):
                ax.hist(cut, bins=16, range=(0, 2.4), density=True, histtype="step", linewidth=1.0, color="C2",
                        label=r"Hebbian $W$ of the same facts, top $\kappa d$ values")
        lower, second_moment = memory.truncated_quarter_circle(kappa)
        scale = np.sqrt(second_moment)
        density = memory.quarter_circle_density(grid * scale) * scale / kappa * (grid * scale >= lower)
        ax.plot(grid, density, **style.THEORY_STYLE, label=r"top-$\kappa$ truncated quarter circle (optimal rank-$m$ $W$)")
        ax.plot(grid, memory.quarter_circle_density(grid), **style.REFERENCE_STYLE, label="untruncated quarter circle")
        ax.set_xlabel(r"singular value $s$ (normalised, $E\,s^2 = 1$)")
        ax.set_title(rf"rank-constrained, $\kappa$ = {kappa:g}")
        ax.legend(fontsize=7)
    return fig


def rank_capacity(tables: dict[str, pd.DataFrame], params: dict):
    """Capacity vs kappa = m / d for W = Q R^T, with the derived curve alpha_c(1) f(kappa) (f the
    quarter circle's top-kappa second-moment share) and the parameter count. tables: capacity
    (assoc_summary.summary)."""
    capacity = tables["capacity"]
    d = params["rank_d"]
    rows = capacity[(capacity.method == "trained") & (capacity.problem == "original") & (capacity.d == d)]
    if "criterion" in rows:
        rows = rows[rows.criterion == "all"]
    rows = rows.sort_values("rank_fraction")
    fig, axes = style.figure()
    ax = axes[0][0]
    ax.plot(rows.rank_fraction, rows.alpha_c, "o-", label=f"trained, d = {d}")
    full = rows[rows.rank_fraction == 1.0].alpha_c
    if len(full) and np.isfinite(full.iloc[0]):
        kappa = np.linspace(0.05, 1, 50)
        ax.plot(kappa, full.iloc[0] * np.array([memory.rank_capacity_ratio(k) for k in kappa]), **style.THEORY_STYLE,
                label=r"$\alpha_c(1)\,f(\kappa)$ (top-$\kappa$ quarter-circle share, predicted)")
        ax.plot(kappa, full.iloc[0] * kappa * (2 - kappa), **style.REFERENCE_STYLE,
                label=r"$\alpha_c(1)\,\kappa(2-\kappa)$ (parameter count, reference)")
    style.theory_hline(ax, 0.5, r"$\alpha_c(1) = 1/2$, $d\to\infty$")
    ax.set_xlabel(r"rank fraction $\kappa = m / d$")
    ax.set_ylabel(r"capacity $\alpha_c$ (every fact stored, $\geq$ half the seeds)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return fig


FIGURES = {
    "accuracy": accuracy,
    "capacity_extrapolation": capacity_extrapolation,
    "spectrum": spectrum,
    "rank_capacity": rank_capacity,
}
