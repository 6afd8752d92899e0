"""Figures of the NTK study (S2): `name(tables, params) -> Figure`, listed in FIGURES.

Log-log panels show every seed (light points), the mean over seeds (line), the fitted power law
and the theory's reference slope anchored at the mean curve's geometric middle, so a reader can
compare the measured slope with the predicted one by eye.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from factstore.plots import style
from factstore.statistics import power_law_fit

LINEARISED_COLOR = "0.1"  # the linearised prediction is drawn dark and dashed over each coloured curve


def _power_law_panel(ax, table: pd.DataFrame, x: str, y: str, label: str,
                     fit_from: float = -np.inf) -> tuple[np.ndarray, np.ndarray, float]:
    """Seeds as points, their mean as a line, and the power law fitted to the means at x >= fit_from
    (drawn over that range); returns (xs, means, slope)."""
    color = style.palette(["measured"])["measured"]
    ax.scatter(table[x], table[y], s=12, alpha=0.35, color=color, linewidths=0, label=f"{label} (each seed)")
    means = table.groupby(x)[y].mean().sort_index()
    xs, ys = means.index.to_numpy(float), means.to_numpy(float)
    ax.plot(xs, ys, "o-", color=color, markersize=4, label=f"{label} (mean)")
    fitted = xs >= fit_from
    fit = power_law_fit(xs[fitted], ys[fitted])
    ax.plot(xs[fitted], fit.prefactor * xs[fitted] ** fit.exponent, color=color, linestyle=(0, (1, 1)), linewidth=1.5,
            label=f"fit: slope {fit.exponent:.2f} ($R^2$ {fit.r2:.3f})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    return xs, ys, fit.exponent


def _reference_slope(ax, xs: np.ndarray, ys: np.ndarray, slope: float, label: str, reference: bool = False) -> None:
    """A line of the given log-log slope through the mean curve's geometric middle."""
    anchor_x = np.exp(np.log(xs).mean())
    anchor_y = np.exp(np.interp(np.log(anchor_x), np.log(xs), np.log(ys)))
    line_style = style.REFERENCE_STYLE if reference else style.THEORY_STYLE
    ax.plot(xs, anchor_y * (xs / anchor_x) ** slope, label=label, **line_style)


def _seeds(table: pd.DataFrame) -> int:
    return table["seed"].nunique()


def convergence(tables: dict[str, pd.DataFrame], params: dict) -> Figure:
    """Relative Frobenius error of the empirical NTK at initialisation vs width, with the CLT's
    n^-1/2. tables: table (ntk.convergence); params: the ntk.convergence section."""
    table = tables["table"]
    fig, axes = style.figure()
    ax = axes[0, 0]
    xs, ys, _ = _power_law_panel(ax, table, "width", "rel_error", "empirical NTK")
    _reference_slope(ax, xs, ys, -0.5, r"theory $\propto n^{-1/2}$ (CLT over units)")
    ax.set_xlabel("width n (hidden units)")
    ax.set_ylabel(r"$\|\Theta_{emp} - \Theta\|_F \,/\, \|\Theta\|_F$")
    ax.set_title("Empirical NTK at init vs analytic NTK")
    ax.legend(fontsize=7)
    style.caption(fig, f"two-layer ReLU, NTK parameterisation; d = {params['input_dim']}, "
                       f"N = {params['n_inputs']} inputs on the sphere, {_seeds(table)} seeds")
    return fig


def lazy_training(tables: dict[str, pd.DataFrame], params: dict) -> Figure:
    """Relative NTK change over a fixed GD run vs width, with the n^-1/2 bound and the n^-1 rate.
    tables: training_w<width> (ntk.training summaries); params: the ntk.training section."""
    summary = style.stacked(tables, "training_")
    fig, axes = style.figure()
    ax = axes[0, 0]
    xs, ys, _ = _power_law_panel(ax, summary, "width", "kernel_change", "NTK change")
    _reference_slope(ax, xs, ys, -0.5, r"bound $\propto n^{-1/2}$ (Jacot; Lee et al.)")
    _reference_slope(ax, xs, ys, -1.0, r"$\propto n^{-1}$ (smooth activations)", reference=True)
    ax.set_xlabel("width n (hidden units)")
    ax.set_ylabel(r"$\|\Theta_T - \Theta_0\|_F \,/\, \|\Theta_0\|_F$")
    ax.set_title("Lazy training: the NTK barely moves")
    ax.legend(fontsize=7)
    style.caption(fig, _training_caption(summary, params))
    return fig


def _training_caption(summary: pd.DataFrame, params: dict) -> str:
    return (f"full-batch GD on $\\|f - y\\|^2/2N$, lr {params['learning_rate']}, {params['steps']} steps; "
            f"d = {params['input_dim']}, N = {params['n_train']}, ReLU teacher; {_seeds(summary)} seeds")


def _trajectory_panel(ax, trajectories: pd.DataFrame, width: int, learning_rate: float) -> None:
    """Training outputs of a few points over time: network (solid) and linearised prediction (dashed)."""
    runs = trajectories[trajectories["width"] == width]
    runs = runs[runs["seed"] == runs["seed"].min()]
    colors = style.palette(sorted(runs["sample"].unique()))
    for sample, run in runs.groupby("sample"):
        run = run.sort_values("step")
        flow_time = learning_rate * run["step"]
        ax.plot(flow_time, run["network"], color=colors[sample], linewidth=1.6)
        ax.plot(flow_time, run["linearised"], color=LINEARISED_COLOR, linestyle="--", linewidth=0.9)
        ax.plot(flow_time.iloc[-1], run["target"].iloc[0], marker="x", color=colors[sample], markersize=5)
    ax.set_xlabel(r"training time $\eta t$ (lr x GD steps)")
    ax.set_title(f"width n = {width}")


def linearised(tables: dict[str, pd.DataFrame], params: dict) -> Figure:
    """Left/middle: outputs over training at the narrowest and widest width, network vs
    f_t = f_0 + (I - exp(-eta Theta_0 t / N))(y - f_0). Right: their relative distance vs width.

    tables: training_w<width>, trajectories_w<width> (ntk.training); params: ntk.training.
    """
    summary, trajectories = style.stacked(tables, "training_"), style.stacked(tables, "trajectories_")
    fig, axes = style.figure(ncols=3, layout="constrained")
    widths = sorted(trajectories["width"].unique())
    for ax, width in zip(axes[0, :2], (widths[0], widths[-1])):
        _trajectory_panel(ax, trajectories, int(width), params["learning_rate"])
    axes[0, 0].set_ylabel("output $f(x_i)$ on training points")
    axes[0, 1].sharey(axes[0, 0])
    handles = [
        Line2D([], [], color="0.5", linewidth=1.6, label="trained network (one colour per training point)"),
        Line2D([], [], color=LINEARISED_COLOR, linestyle="--", linewidth=0.9,
               label=r"linearised: $f_0 + (I - e^{-\eta \Theta_0 t / N})(y - f_0)$"),
        Line2D([], [], color="0.5", marker="x", linestyle="none", label="target y"),
    ]
    fig.legend(handles=handles, loc="outside upper left", ncol=3, fontsize=8)

    ax = axes[0, 2]
    xs, ys, _ = _power_law_panel(ax, summary, "width", "linearised_error", "network vs linearised")
    _reference_slope(ax, xs, ys, -0.5, r"bound $\propto n^{-1/2}$ (Lee et al.)")
    floor = summary["discretisation_floor"].mean()
    style.theory_hline(ax, floor, label="GD discretisation floor (discrete vs exp)", reference=True)
    ax.set_xlabel("width n (hidden units)")
    ax.set_ylabel(r"$\|f_{net} - f_{lin}\|_F \,/\, \|f_{lin} - f_0\|_F$")
    ax.set_title("Linearised dynamics: error vs width")
    ax.legend(fontsize=7, loc="upper right")
    style.caption(fig, _training_caption(summary, params) + "; linearisation uses the empirical NTK at init")
    return fig


def kernel_scaling(tables: dict[str, pd.DataFrame], params: dict) -> Figure:
    """Test error of ridgeless analytic-NTK regression vs training-set size, with a fitted power
    law, beside the learning curve the spectral theory of kernel regression predicts from the
    kernel's spectrum on the sphere and the teacher's weights in it (mean over seeds), and the
    predicted curve's slope over the same fit window. tables: table (ntk.scaling); params: the
    ntk.scaling section."""
    table = tables["table"]
    fig, axes = style.figure()
    ax = axes[0, 0]
    fit_from = params["fit_min_train_size"]
    _power_law_panel(ax, table, "train_size", "test_error", "NTK regression", fit_from=fit_from)
    predicted = table.groupby("train_size")["predicted_error"].mean().sort_index()
    xs, ys = predicted.index.to_numpy(float), predicted.to_numpy(float)
    window = xs >= fit_from
    exponent = power_law_fit(xs[window], ys[window]).exponent
    ax.plot(xs, ys, label=f"predicted (spectral theory): slope {exponent:.2f}", **style.THEORY_STYLE)
    style.theory_vline(ax, fit_from, label=f"fit from P = {fit_from} (asymptotic regime)", reference=True)
    ax.set_xlabel("training-set size P (examples)")
    ax.set_ylabel(r"relative test error $\|\hat f - f^*\|^2 / \|f^*\|^2$")
    ax.set_title("NTK kernel regression: scaling law")
    ax.legend(fontsize=7)
    style.caption(fig, f"teacher: two-layer ReLU with {params['teacher_width']} units, d = {params['input_dim']}, "
                       f"inputs on the sphere; {params['n_test']} test points; {_seeds(table)} seeds")
    return fig


FIGURES = {
    "convergence": convergence,
    "lazy_training": lazy_training,
    "linearised": linearised,
    "kernel_scaling": kernel_scaling,
}
