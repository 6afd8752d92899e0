"""Figures of the fact-storing MLP study (S0): capacity scaling, bits per parameter,
anisotropy, whitening and the two sweeps at the paper's d = 128 (seed_regime): `name(tables,
params) -> Figure`, listed in FIGURES; tables: results (and fits) of `mlp_summary.summary`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from factstore.mlp.methods import METHODS
from factstore.mlp.encoder_decoder import gated_parameter_count
from factstore.mlp.results import best_degree_rows, seed_means
from factstore.mlp.scaling import fitted_params, information_bound, random_map_bits
from factstore.plots import style

MARKERS = {"ntk": "o", "ntk_ustar": "s", "ed_gated": "D", "ed_gated_v": "d", "ed_plain": "^", "gd_gated": "v", "gd_plain": "P"}


def _colours() -> dict:
    """One colour per method, the same in every figure of the study."""
    return style.palette(list(METHODS))


def _label(method: str) -> str:
    return METHODS[method].label


def _target_label(target: float) -> str:
    return f"accuracy $\\geq$ {100 * target:g}%"


def _degrees(params: dict) -> str:
    return ", ".join(str(k) for k in params["ntk_degrees"])


def _per_group(rows: pd.DataFrame, x: str) -> pd.DataFrame:
    """Mean, min and max W over replicates per x; stored only where every replicate stored."""
    grouped = rows.groupby(x)
    out = grouped.agg(mean=("n_params", "mean"), low=("n_params", "min"), high=("n_params", "max"),
                      stored=("stored", "all"), cap=("params_at_cap", "max")).reset_index()
    return out


def _plot_counts(ax, rows: pd.DataFrame, x: str, method: str, colour, label: bool = True, linestyle: str = "-") -> None:
    """Seed-mean W with min-max bars where stored; the cap (a lower bound) with an up-caret where not."""
    groups = _per_group(rows, x)
    stored = groups[groups.stored]
    errors = [(stored["mean"] - stored["low"]).clip(lower=0), (stored["high"] - stored["mean"]).clip(lower=0)]
    ax.errorbar(stored[x], stored["mean"], yerr=errors, linestyle=linestyle,
                marker=MARKERS.get(method, "o"), ms=4, capsize=2, color=colour, label=_label(method) if label else None)
    failed = groups[~groups.stored & groups.cap.notna()]
    if len(failed):  # nudged sideways per method so that carets at the same cap stay visible
        nudge = 1.04 ** (list(METHODS).index(method) - 3)
        ax.plot(failed[x] * nudge, failed["cap"], linestyle="none", marker=6, ms=9, color=colour, markerfacecolor="none")


def capacity_scaling(tables: dict[str, pd.DataFrame], params: dict):
    """Smallest parameter count W against F (log-log), one panel per target, with fits and bounds."""
    results, fits = tables["results"], tables["fits"]
    every_degree = results[(results.experiment == "capacity") & results.degree.notna()]
    table = best_degree_rows(results[results.experiment == "capacity"])
    targets = sorted(table.target.unique())
    fig, axes = style.figure(ncols=len(targets), width=4.4, height=3.8, sharey=True)
    colours = _colours()
    bits = params["bits_per_parameter_assumed"]
    grid = np.geomspace(table.F.min(), table.F.max(), 60)
    for ax, target in zip(axes[0], targets):
        here = table[table.target == target]
        for method in [m for m in METHODS if m in set(here.method)]:
            _plot_counts(ax, here[here.method == method], "F", method, colours[method])
            fit = fits[(fits.method == method) & (fits.target == target)]
            if len(fit) and np.isfinite(fit.C.iloc[0]) and fit.C.iloc[0] > 0:  # C <= 0: no F log F growth to draw
                ax.plot(grid, fitted_params(grid, fit.iloc[0]), color=colours[method], linewidth=0.8, alpha=0.6, linestyle="-.")
        for (method, degree), rows in every_degree[every_degree.target == target].groupby(["method", "degree"]):
            per_f = rows.groupby("F").agg(w=("n_params", "mean"), ok=("stored", "all"))
            per_f = per_f[per_f.ok]
            ax.plot(per_f.index, per_f.w, color=colours[method], linewidth=0.7, alpha=0.7,
                    linestyle=":" if degree == 1 else (0, (1, 3)), marker=f"${int(degree)}$", ms=5)
        ax.plot(grid, random_map_bits(grid) / bits, **style.REFERENCE_STYLE,
                label=f"$F\\log_2 F / {bits:g}$: {bits:g} bits per parameter (random map)")
        ax.plot(grid, information_bound(grid, bits), **style.THEORY_STYLE,
                label=f"counting bound $\\log_2(F!) / {bits:g}$ (permutation, $\\leq$ {bits:g} bits per parameter)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("number of facts $F$")
        ax.set_title(_target_label(target))
    axes[0][0].set_ylabel("smallest parameter count $W$")
    axes[0][0].plot([], [], color="0.3", linewidth=0.8, linestyle="-.", label="fit $W = C F(\\log_2 F + b)$ per method")
    axes[0][0].plot([], [], linestyle="none", marker=6, ms=9, color="0.3", markerfacecolor="none",
                    label="not stored within the width cap (W above)")
    axes[0][0].plot([], [], color="0.3", linewidth=0.7, linestyle=":", marker="$k$", ms=5,
                    label="NTK at Hermite degree k alone (markers: k)")
    style.shared_legend(fig, axes)
    section = params["capacity"]
    style.caption(fig, f"spherical keys and values, d = {section['d']}, random permutation map; mean over {section['seeds']} "
                       f"seeds (bars: min-max); NTK: the best of Hermite degrees {_degrees(params)} per F (thin lines: each "
                       f"degree); the bound lines assume {bits:g} bits per parameter, an empirical ceiling\n99% is the project's "
                       f"standalone storage target (the paper's 99% of Fig. 7 is fact-adaptive accuracy inside a Transformer)")
    return fig


def bits_per_parameter(tables: dict[str, pd.DataFrame], params: dict):
    """Facts per parameter and bits per parameter (F log2 F / W) against F, for every method."""
    results = best_degree_rows(tables["results"])
    table = results[(results.experiment == "capacity") & results.stored]
    targets = sorted(table.target.unique())
    fig, axes = style.figure(ncols=2, width=4.2, height=3.6)
    left, right = axes[0]
    colours = _colours()
    styles = dict(zip(targets, ["-", "-.", ":"]))
    for method in [m for m in METHODS if m in set(table.method)]:
        for target in targets:
            rows = table[(table.method == method) & (table.target == target)].groupby("F")
            mean = rows[["facts_per_parameter", "bits_per_parameter"]].mean()
            label = _label(method) if target == params["main_target"] else None
            kwargs = dict(color=colours[method], linestyle=styles[target], marker=MARKERS.get(method, "o"), ms=3)
            left.plot(mean.index, mean.facts_per_parameter, label=label, **kwargs)
            right.plot(mean.index, mean.bits_per_parameter, **kwargs)
    for target in targets:
        left.plot([], [], color="0.4", linestyle=styles[target], label=_target_label(target))
    bits = params["bits_per_parameter_assumed"]
    style.theory_hline(right, bits, f"{bits:g} bits per parameter (an empirical ceiling of trained networks)")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("number of facts $F$")
    left.set_ylabel("facts per parameter $F / W$")
    right.set_ylabel("bits per parameter $F \\log_2 F / W$")
    style.shared_legend(fig, axes)
    section = params["capacity"]
    style.caption(fig, f"spherical facts, d = {section['d']}, mean over {section['seeds']} seeds; stored points only; NTK: the "
                       f"best of Hermite degrees {_degrees(params)} per F; 99%: the project's standalone target")
    return fig


FAMILY_STYLES = {"geometric": "-", "linspace": "--"}
"""Line style of each family of singular values of the conditioned values (the kappa sweeps)."""
FAMILY_LABELS = {"linspace": "linspace(1, 1/kappa)", "geometric": "kappa^(-t), t in [0, 1] (geometric)"}


def _families(table: pd.DataFrame) -> list[str]:
    """The families of singular values in a kappa sweep's rows, geometric first."""
    present = set(table.spectrum.fillna("")) if "spectrum" in table else set()
    return [family for family in FAMILY_STYLES if family in present]


def anisotropy(tables: dict[str, pd.DataFrame], params: dict, experiment: str = "anisotropy"):
    """2 x 3 panels against the value condition number kappa: (a) W of every method at the sweep's
    largest F; (b) rho(V); (c) the NTK's best accuracy within its width cap; (d) the facts-per-
    parameter gain of U* for the NTK; (e) the cost normalised by the paper's law W ~ F log F /
    rho(V)^2, W rho^2 over its kappa = 1 value (1: the law; above: a cost growing faster than it);
    (f) W / W(kappa = 1) against the law's prediction (rho(1) / rho)^2, the law the diagonal. Each
    family of singular values of the sweep (solid geometric, dashed linspace) in (a), (b), (e) and
    (f); (c) and (d) the first family (geometric where it ran: S0.ntk-ustar-gain's). experiment:
    the kappa sweep drawn, also the name of its config section."""
    results = tables["results"]
    table = best_degree_rows(results[results.experiment == experiment])
    section = params[experiment]
    main_facts = max(section["n_facts"])
    main = table[table.F == main_facts]
    present = _families(table)
    first = table[table.spectrum == present[0]] if present else table
    fig, axes = style.figure(ncols=3, nrows=2, width=4.3, height=3.3)
    (counts, decodability, accuracy), (gain_ax, law_ax, diagonal_ax) = axes
    colours = _colours()
    for family in present:
        here = main[main.spectrum == family]
        for method in [m for m in METHODS if m in set(here.method)]:
            _plot_counts(counts, here[here.method == method], "kappa", method, colours[method], label=family == present[0],
                         linestyle=FAMILY_STYLES[family])
    counts.plot([], [], linestyle="none", marker=6, ms=9, color="0.3", markerfacecolor="none",
                label="not stored within the width cap (W above)")
    for family in present:
        counts.plot([], [], color="0.3", linestyle=FAMILY_STYLES[family], label=f"values' singular values {FAMILY_LABELS[family]}")
    counts.set_yscale("log")
    counts.set_ylabel("smallest parameter count $W$")
    counts.set_title(f"(a) F = {main_facts}, d = {section['d']}")

    greys = dict(zip(sorted(table.F.unique()), ["0.65", "0.4", "0.1", "0.55", "0.25"] * 3))
    for family in present:
        for n_facts, rows in table[table.spectrum == family].groupby("F"):
            rho = rows.groupby("kappa").rho.agg(["mean", "min", "max"])
            errors = [(rho["mean"] - rho["min"]).clip(lower=0), (rho["max"] - rho["mean"]).clip(lower=0)]
            decodability.errorbar(rho.index, rho["mean"], yerr=errors, marker="x", ms=4, capsize=2, color=greys[n_facts],
                                  linestyle=FAMILY_STYLES[family], label=f"$\\rho(V)$, F = {n_facts}" if family == present[0] else None)
    decodability.set_ylim(bottom=0)
    decodability.set_ylabel("decodability $\\rho(V)$")
    decodability.set_title("(b) decodability of the values")

    ntk_rows = first[first.method.isin(["ntk", "ntk_ustar"])]
    sizes = sorted(ntk_rows.F.unique())
    line_styles = dict(zip(sizes, [":", "--", "-", "-."] * 3))
    for (method, n_facts), rows in ntk_rows.groupby(["method", "F"]):
        best = rows.groupby("kappa").best_accuracy.mean()
        accuracy.plot(best.index, best.values, color=colours[method], linestyle=line_styles[n_facts], marker=MARKERS[method], ms=3)
    for n_facts in sizes:
        accuracy.plot([], [], color="0.4", linestyle=line_styles[n_facts], label=f"NTK runs at F = {n_facts}")
    style.theory_hline(accuracy, 1.0, "perfect storage")
    accuracy.set_ylabel(f"best accuracy, $\\leq$ {params['search']['ntk_max_width']} units")
    accuracy.set_title(f"(c) NTK within its width cap ({present[0] if present else ''})")

    pair = ntk_rows.groupby(["method", "F", "kappa"]).agg(w=("n_params", "mean"), ok=("stored", "all"),
                                                          cap=("params_at_cap", "max")).reset_index()
    wide = pair.pivot_table(index=["F", "kappa"], columns="method", values=["w", "ok", "cap"])
    if len(wide) and {"ntk", "ntk_ustar"} <= set(wide["w"].columns):
        both = wide["ok"]["ntk"].astype(bool) & wide["ok"]["ntk_ustar"].astype(bool)
        only_ustar = ~wide["ok"]["ntk"].astype(bool) & wide["ok"]["ntk_ustar"].astype(bool)
        gain = (wide["w"]["ntk"] / wide["w"]["ntk_ustar"])[both]
        bound = (wide["cap"]["ntk"] / wide["w"]["ntk_ustar"])[only_ustar]
        for n_facts in sizes:
            if n_facts in gain.index.get_level_values("F"):
                here = gain.xs(n_facts, level="F")
                gain_ax.plot(here.index, here.values, color=colours["ntk_ustar"], linestyle=line_styles[n_facts], marker="s", ms=3)
            if n_facts in bound.index.get_level_values("F"):
                here = bound.xs(n_facts, level="F")
                gain_ax.plot(here.index, here.values, linestyle="none", marker=6, ms=9, color=colours["ntk_ustar"],
                             markerfacecolor="none")
        gain_ax.plot([], [], linestyle="none", marker=6, ms=9, color="0.3", markerfacecolor="none",
                     label="only NTK + U* stores: lower bound $W_{cap}(NTK) / W_{NTK+U^*}$")
    gain_ax.axhspan(2, 4, color="0.88", label="claimed U* gain 2-4x")
    style.theory_hline(gain_ax, 1.0, reference=True)
    gain_ax.set_yscale("log", base=2)
    gain_ax.set_ylabel("$W_{NTK} / W_{NTK+U^*}$")
    gain_ax.set_title(f"(d) U* gain for the NTK ({present[0] if present else ''})")

    _law_panels(law_ax, diagonal_ax, main, present, colours)
    law_ax.set_title(f"(e) cost over the law, F = {main_facts}")
    diagonal_ax.set_title(f"(f) W against the law, F = {main_facts}")
    for ax in list(axes.flat)[:5]:
        ax.set_xscale("log")
        ax.set_xlabel("value condition number $\\kappa$")
    style.shared_legend(fig, axes)
    style.caption(fig, f"W: the smallest parameter count storing {100 * section['target']:g}% of the facts; "
                       f"spherical keys; values with singular values "
                       + " or ".join(FAMILY_LABELS[family] for family in present)
                       + f", d = {section['d']}; mean over {section['seeds']} seeds (bars: min-max); NTK and NTK + U*: the "
                       f"best of Hermite degrees {_degrees(params)} per setting\n(e, f): the paper's cost law W ~ F log F / "
                       f"rho(V)^2 from each method's kappa = 1 cost; a method that keeps its scaling stays at or below it "
                       f"(S0.others-robust), an NTK that breaks leaves it or stops storing (S0.ntk-anisotropy-breaks)")
    return fig


def _law_panels(law_ax, diagonal_ax, main: pd.DataFrame, present: list[str], colours: dict) -> None:
    """(e) seed-mean W rho(V)^2 over its kappa = 1 value against kappa, per method and family (a
    caret at the largest stored ratio where a kappa did not store in every seed); (f) seed-mean
    W / W(kappa = 1) against (rho(1) / rho(V))^2, the law's prediction, with the diagonal."""
    extent = [1.0]
    for family in present:
        for method in [m for m in METHODS if m in set(main[main.spectrum == family].method)]:
            rows = main[(main.spectrum == family) & (main.method == method)]
            per = rows.assign(cost=rows.n_params * rows.rho**2).groupby("kappa").agg(
                cost=("cost", "mean"), w=("n_params", "mean"), rho=("rho", "mean"), ok=("stored", "all"))
            if 1.0 not in per.index or not per.ok.get(1.0, False):
                continue
            reference = per.loc[1.0]
            stored = per[per.ok]
            kwargs = dict(color=colours[method], linestyle=FAMILY_STYLES[family], marker=MARKERS.get(method, "o"), ms=3)
            law_ax.plot(stored.index, stored.cost / reference.cost, **kwargs)
            failed = per[~per.ok]
            if len(failed):
                law_ax.plot(failed.index, np.full(len(failed), (stored.cost / reference.cost).max()), linestyle="none",
                            marker=6, ms=9, color=colours[method], markerfacecolor="none")
            predicted = (reference.rho / stored.rho) ** 2
            diagonal_ax.plot(predicted, stored.w / reference.w, **kwargs)
            extent += list(predicted)
    style.theory_hline(law_ax, 1.0, "the law $W \\propto F \\log F / \\rho(V)^2$ from $\\kappa = 1$")
    law_ax.set_yscale("log", base=2)
    law_ax.set_ylabel("$W \\rho^2 / (W \\rho^2)_{\\kappa = 1}$")
    grid = np.geomspace(1.0, max(extent) * 1.1, 20)
    diagonal_ax.plot(grid, grid, **style.THEORY_STYLE)
    diagonal_ax.set_xscale("log")
    diagonal_ax.set_yscale("log")
    for axis in (diagonal_ax.xaxis, diagonal_ax.yaxis):  # labelled minor ticks of a short log range overlap
        axis.set_minor_formatter(NullFormatter())
    diagonal_ax.set_xlabel("the law's prediction $(\\rho_{\\kappa = 1} / \\rho(V))^2$")
    diagonal_ax.set_ylabel("$W / W_{\\kappa = 1}$")


def anisotropy_regime(tables: dict[str, pd.DataFrame], params: dict):
    """`anisotropy` for the NTK methods' kappa sweep at the paper's d = 128 (mlp.anisotropy_regime),
    which S0.ntk-anisotropy-breaks and S0.ntk-ustar-gain read."""
    return anisotropy(tables, params, experiment="anisotropy_regime")


def whitening(tables: dict[str, pd.DataFrame], params: dict):
    """Top row (d = 384): facts per parameter, the relative Lipschitz constant and rho(V) against
    alpha. Bottom row (the sweep at F >> d, whitening_regime): facts per parameter, the accuracy
    within the width cap (the NTK's reading where it does not store) and rho(V)."""
    results = tables["results"]
    table = results[results.experiment == "whitening"].sort_values("alpha")
    regime = best_degree_rows(results[results.experiment == "whitening_regime"]).sort_values("alpha")
    section = params["whitening"]
    fig, axes = style.figure(ncols=3, nrows=2 if len(regime) else 1, width=4.0, height=3.4)
    capacity_ax, lipschitz_ax, rho_ax = axes[0]
    colours = _colours()
    for method, rows in _plot_capacity_against_alpha(capacity_ax, table, colours, "lipschitz_relative").items():
        failed = rows[~rows.stored]
        lipschitz_ax.plot(rows.alpha, rows.lipschitz_relative, color=colours[method], marker=MARKERS[method], ms=4)
        lipschitz_ax.plot(failed.alpha, failed.lipschitz_relative, linestyle="none", marker="o", ms=10,
                          markerfacecolor="none", color=colours[method])
    capacity_ax.plot([], [], linestyle="none", marker="x", ms=7, color="0.3", label="not stored within the width cap in every seed (x)")
    lipschitz_ax.plot([], [], linestyle="none", marker="o", ms=10, markerfacecolor="none", color="0.3",
                      label="ringed: MLP at the width cap, not storing")
    capacity_ax.set_yscale("log")
    capacity_ax.set_ylabel("facts per parameter $F / W$")
    capacity_ax.set_title(f"(a) capacity ({100 * section['target']:g}% stored; NTK degree "
                          f"{', '.join(str(k) for k in section['ntk_degrees'])})")
    lipschitz_ax.set_yscale("log")
    lipschitz_ax.set_ylabel("relative Lipschitz constant")
    lipschitz_ax.set_title("(b) Lipschitz constant")
    rho = table.groupby("alpha").rho.mean()
    seeds = table.replicate.nunique()
    rho_ax.plot(rho.index, rho.values, color="0.3", marker="x", label="decodability $\\rho(V)$ of the whitened values")
    rho_ax.set_ylim(bottom=0)
    rho_ax.set_ylabel("decodability $\\rho(V)$")
    rho_ax.set_title("(c) decodability")
    if len(regime):
        _whitening_regime_panels(axes[1], regime, params["whitening_regime"], colours)
    for ax in axes.flat:
        ax.set_xlabel("whitening strength $\\alpha$")
    style.shared_legend(fig, axes)
    n_facts = int(table.F.iloc[0]) if len(table) else 0
    style.caption(fig, f"MiniLM embeddings of {n_facts} Goodreads titles (keys) and their authors (values), d = 384; keys and values "
                       f"whitened with the same alpha, MLP folded back to the original basis; mean over {seeds} seeds\nrelative "
                       f"Lipschitz constant = max Jacobian spectral norm over {section['lipschitz_samples']} keys / RMS output norm over "
                       f"all keys, at each MLP's smallest storing width (decoding does not depend on the output scale)"
                       + (f"\nbottom row: the same facts on their top {params['whitening_regime']['d']} principal directions "
                          f"(F / d = {int(regime.F.iloc[0]) / params['whitening_regime']['d']:g}), mean over "
                          f"{params['whitening_regime']['seeds']} seeds; accuracy within the width cap of each method's "
                          f"search (NTK: {params['whitening_regime']['ntk_max_width']:,} units)" if len(regime) else ""))
    return fig


def _plot_capacity_against_alpha(ax, table: pd.DataFrame, colours: dict, column: str) -> dict[str, pd.DataFrame]:
    """Seed-mean F / W per method against alpha where every seed stored, an x at a floor below the
    smallest stored F / W where not. Returns {method: per-alpha means of F / W and `column`, and
    whether every seed stored}, for the panels beside it."""
    per_method = {method: table[table.method == method].groupby("alpha").agg(
                      facts_per_parameter=("facts_per_parameter", "mean"), **{column: (column, "mean")},
                      stored=("stored", "all")).reset_index()
                  for method in METHODS if method in set(table.method)}
    drawn = [rows.facts_per_parameter[rows.stored] for rows in per_method.values()]
    positive = pd.concat(drawn) if drawn else pd.Series(dtype=float)
    floor = positive.min() / 3 if len(positive) else 1e-6
    for method, rows in per_method.items():
        stored, failed = rows[rows.stored], rows[~rows.stored]
        ax.plot(stored.alpha, stored.facts_per_parameter, color=colours[method], marker=MARKERS[method], ms=4,
                label=_label(method))
        ax.plot(failed.alpha, np.full(len(failed), floor), linestyle="none", marker="x", ms=7, color=colours[method])
    return per_method


def _whitening_regime_panels(axes, regime: pd.DataFrame, section: dict, colours: dict) -> None:
    """(d) F / W per method where every seed stored (x at the floor where not), (e) the mean best
    accuracy within the width cap, (f) rho(V) of the projected, whitened values; against alpha."""
    capacity_ax, accuracy_ax, rho_ax = axes
    for method, rows in _plot_capacity_against_alpha(capacity_ax, regime, colours, "best_accuracy").items():
        accuracy_ax.plot(rows.alpha, rows.best_accuracy, color=colours[method], marker=MARKERS[method], ms=4)
    capacity_ax.set_yscale("log")
    capacity_ax.set_ylabel("facts per parameter $F / W$")
    capacity_ax.set_title(f"(d) capacity at d = {section['d']}")
    accuracy_ax.axhline(section["target"], color="0.5", linestyle=":", linewidth=1)
    accuracy_ax.set_ylabel("best accuracy within the cap")
    accuracy_ax.set_title("(e) a fixed width budget")
    rho = regime.groupby("alpha").rho.mean()
    rho_ax.plot(rho.index, rho.values, color="0.3", marker="x")
    rho_ax.set_ylim(bottom=0)
    rho_ax.set_ylabel("decodability $\\rho(V)$")
    rho_ax.set_title(f"(f) decodability at d = {section['d']}")


def seed_regime(tables: dict[str, pd.DataFrame], params: dict):
    """The two sweeps at the paper's d = 128, three panels: (a) the NTK's smallest parameter count W
    against F (every target, degree of ntk_regime.ntk_degrees) with the counting bound log2(F!) / b
    and the F log2 F / b line; (b) the fraction of seeds the NTK stores within its width cap per F
    (S0.ntk-stores) and its best accuracy there; (c) the encoder-decoder's cost ratio
    W(kappa) / W(kappa = 1) against kappa per F and family of singular values (solid geometric,
    dashed linspace; S0.others-robust), each with the paper's cost law's prediction
    (rho(1) / rho(V))^2 (thin), the earlier fixed 2x band and the ceiling its code size m <= d
    allows, W(m = d) / W(kappa = 1)."""
    results = tables["results"]
    regime = results[results.experiment == "ntk_regime"]
    robust = results[results.experiment == "robust_regime"]
    fig, axes = style.figure(ncols=3, width=4.3, height=3.5)
    count_ax, fraction_ax, robust_ax = axes[0]
    colours = _colours()
    targets = sorted(regime.target.unique())
    target_styles = dict(zip(targets, ["-.", "-", ":"]))
    bits = params["bits_per_parameter_assumed"]
    for (method, degree, target), rows in regime.groupby(["method", "degree", "target"]):
        groups = _per_group(rows, "F")
        stored = groups[groups.stored]
        errors = [(stored["mean"] - stored["low"]).clip(lower=0), (stored["high"] - stored["mean"]).clip(lower=0)]
        label = f"{_label(method)}, degree {int(degree)}, {_target_label(target)}"
        count_ax.errorbar(stored.F, stored["mean"], yerr=errors, marker=MARKERS.get(method, "o"), ms=4, capsize=2,
                          color=colours[method], linestyle=target_styles[target], label=label)
        failed = groups[~groups.stored & groups.cap.notna()]
        count_ax.plot(failed.F, failed.cap, linestyle="none", marker=6, ms=9, color=colours[method], markerfacecolor="none")
        per_f = rows.groupby("F").agg(stored=("stored", "mean"), best=("best_accuracy", "mean"))
        fraction_ax.plot(per_f.index, per_f.stored, color=colours[method], linestyle=target_styles[target],
                         marker=MARKERS.get(method, "o"), ms=4)
        if target == max(targets):
            fraction_ax.plot(per_f.index, per_f.best, color=colours[method], linestyle="none", marker="x", ms=6)
    if len(regime):
        grid = np.geomspace(regime.F.min(), regime.F.max(), 60)
        count_ax.plot(grid, random_map_bits(grid) / bits, **style.REFERENCE_STYLE,
                      label=f"$F\\log_2 F / {bits:g}$: {bits:g} bits per parameter (random map)")
        count_ax.plot(grid, information_bound(grid, bits), **style.THEORY_STYLE,
                      label=f"counting bound $\\log_2(F!) / {bits:g}$ ($\\leq$ {bits:g} bits per parameter)")
    count_ax.plot([], [], linestyle="none", marker=6, ms=9, color="0.3", markerfacecolor="none",
                  label="not stored within the width cap (W above)")
    count_ax.set_yscale("log")
    count_ax.set_ylabel("smallest parameter count $W$")
    count_ax.set_title(f"(a) NTK, d = {params['ntk_regime']['d']}")
    fraction_ax.plot([], [], color="0.3", linestyle="none", marker="x", ms=6, label="NTK best accuracy within the width cap")
    style.theory_hline(fraction_ax, 1.0, "every seed stored (S0.ntk-stores)")
    fraction_ax.set_ylim(-0.05, 1.05)
    fraction_ax.set_ylabel("fraction stored; x: best accuracy")
    fraction_ax.set_title(f"(b) NTK, $\\leq$ {params['search']['ntk_max_width']} units")
    for ax in (count_ax, fraction_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of facts $F$")

    means = seed_means(robust, ["method", "spectrum", "F", "kappa"]) if len(robust) else robust
    greys = dict(zip(sorted(robust.F.unique()), ["0.6", "0.1", "0.35", "0.8"] * 3))
    present = _families(robust)
    for (method, family, n_facts), rows in means.groupby(["method", "spectrum", "F"]) if len(means) else []:
        by = rows.set_index("kappa")
        ratio = by.n_params / by.n_params.get(1.0, np.nan)
        robust_ax.plot(ratio.index, ratio.values, color=greys[n_facts], marker=MARKERS.get(method, "o"), ms=4,
                       linestyle=FAMILY_STYLES.get(family, "-"),
                       label=f"{_label(method)}, F = {n_facts}" if family == present[0] else None)
        law = (by.rho.get(1.0, np.nan) / by.rho) ** 2  # the cost law's prediction W(1) (rho(1) / rho)^2
        robust_ax.plot(law.index, law.values, color=greys[n_facts], linestyle=FAMILY_STYLES.get(family, "-"), linewidth=0.7,
                       alpha=0.6)
        if method == "ed_gated" and family == present[0] and np.isfinite(by.n_params.get(1.0, np.nan)):
            d = int(robust.d.iloc[0])
            ceiling = gated_parameter_count(int(n_facts), d, d, d) / by.n_params.get(1.0)
            robust_ax.axhline(ceiling, color=greys[n_facts], linestyle=(0, (1, 3)), linewidth=1.0)
    robust_ax.plot([], [], color="0.4", linewidth=0.7, alpha=0.6, label="the law: $(\\rho_{\\kappa = 1} / \\rho(V))^2$ (thin)")
    for family in present:
        robust_ax.plot([], [], color="0.3", linestyle=FAMILY_STYLES[family], label=f"values {FAMILY_LABELS[family]}")
    robust_ax.plot([], [], color="0.4", linestyle=(0, (1, 3)), label="ceiling $W(m = d) / W(\\kappa = 1)$ (code size $m \\leq d$)")
    style.theory_hline(robust_ax, 2.0, "2x: the earlier fixed band (an alternative of S0.others-robust)", reference=True)
    robust_ax.set_xscale("log")
    robust_ax.set_yscale("log", base=2)
    robust_ax.set_xlabel("value condition number $\\kappa$")
    robust_ax.set_ylabel("$W(\\kappa) / W(\\kappa = 1)$")
    robust_ax.set_title(f"(c) encoder-decoder, d = {params['robust_regime']['d']}")
    style.shared_legend(fig, axes)
    regime_section, robust_section = params["ntk_regime"], params["robust_regime"]
    style.caption(fig, f"(a, b) spherical keys and values, d = {regime_section['d']}, random permutation map, mean over "
                       f"{regime_section['seeds']} seeds (bars: min-max); the NTK's one-pass unit-prefix search at Hermite "
                       f"degree {', '.join(str(k) for k in regime_section['ntk_degrees'])}; the bound lines assume {bits:g} "
                       f"bits per parameter\n(c) values with condition number kappa, singular values "
                       + " or ".join(FAMILY_LABELS[family] for family in _families(robust))
                       + f", d = {robust_section['d']}, {100 * robust_section['target']:g}% stored, mean over "
                       f"{robust_section['seeds']} seeds; closed-form constructions (no training); below the thin line the "
                       f"cost grows more slowly than the law W ~ F log F / rho(V)^2")
    return fig


FIGURES = {
    "capacity_scaling": capacity_scaling,
    "bits_per_parameter": bits_per_parameter,
    "anisotropy": anisotropy,
    "anisotropy_regime": anisotropy_regime,
    "whitening": whitening,
    "seed_regime": seed_regime,
}
