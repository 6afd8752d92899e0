"""Summary step of the committee-machine study: `committee_summary.summary` (fractions,
capacities, extrapolations and the metrics of the S3 claims). Its own module, so that the
embedding steps do not depend on the metrics' code: editing a metric reruns only this step and
what reads its tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from factstore.committee import capacity, separability
from factstore.committee import multi_output as many
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable
from factstore.statistics import first_crossing_below, power_law_fit


SEARCHED_RUN = r"^(tree|reference)_k\d+_least_action$"
"""The least-action runs whose trajectory search is read as a solver of its own."""


def split_search(runs: pd.DataFrame) -> pd.DataFrame:
    """The embedding rows with each searched least-action run (`SEARCHED_RUN`) read twice: as solver
    least_action (least action and its restarts alone: embedded and not by the search) and as solver
    trajectory_search, run <...>_trajectory_search (least action, its restarts, then the search)."""
    by_search = runs.get("embedded_by_search", pd.Series(False, index=runs.index)).fillna(False).astype(bool)
    searched = runs.run.str.match(SEARCHED_RUN) & (runs.solver == "least_action")
    alone = runs[searched].assign(embedded=runs.embedded[searched] & ~by_search[searched])
    search = runs[searched].assign(solver="trajectory_search",
                                   run=runs.run[searched].str.replace("_least_action", "_trajectory_search", regex=False))
    return pd.concat([runs[~searched], alone, search], ignore_index=True)


def embedded_fractions(runs: pd.DataFrame) -> pd.DataFrame:
    """Fraction of instances embedded per (run, solver, N, alpha), by the first attempt alone (least
    action's restarts excluded; the same for the other solvers), for the function search the
    fraction the committee (majority upper function) alone embedded (NaN for the other solvers), and
    for the MILP the fractions proven not embeddable and left undecided (NaN for the other solvers)."""
    keys = ["run", "architecture", "kind", "hidden", "hidden_layers", "solver", "n", "weights", "alpha"]
    by_committee = (runs.upper_function == "majority").where(runs.solver == "function_search")
    outcome = runs.get("outcome", pd.Series("", index=runs.index)).fillna("")
    exact = runs.solver == "milp"
    return (runs.assign(first_attempt=runs.embedded_in_attempt == 0, by_committee=by_committee.astype(float),
                        unembeddable=(outcome == "not embeddable").where(exact).astype(float),
                        undecided=(outcome == "undecided").where(exact).astype(float))
            .groupby(keys, as_index=False)
            .agg(fraction=("embedded", "mean"), first_attempt_fraction=("first_attempt", "mean"),
                 committee_alone_fraction=("by_committee", "mean"), unembeddable_fraction=("unembeddable", "mean"),
                 undecided_fraction=("undecided", "mean"), instances=("embedded", "size")))


def capacities(runs: pd.DataFrame) -> pd.DataFrame:
    """CpW per (run, solver, N): where the embedded fraction crosses 1/2 (NaN outside the grid), a
    certified lower bound at that N (every embedded instance is a proof), with its bootstrap
    standard error over instances."""
    keys = ["run", "architecture", "kind", "hidden", "hidden_layers", "solver", "n", "weights"]
    rows = []
    for key, group in runs.groupby(keys):
        table = group.pivot(index="instance", columns="alpha", values="embedded").sort_index(axis=1)
        curve = table.mean(axis=0)
        rows.append(dict(zip(keys, key)) | {
            "cpw": first_crossing_below(curve.index, curve.values, 0.5),
            "cpw_standard_error": capacity.crossing_standard_error(table.columns, table.to_numpy(dtype=bool)),
            "alpha_min": curve.index.min(), "alpha_max": curve.index.max(),
        })
    return pd.DataFrame(rows)


def extrapolations(capacity_table: pd.DataFrame) -> pd.DataFrame:
    """Per (run, solver): the line CpW(N) = a + b / N through the finite N, a with its standard error
    (reported, not checked: for a solver-limited curve a is not a finite-size extrapolation)."""
    rows = []
    for (run, solver), group in capacity_table.groupby(["run", "solver"]):
        finite = group.dropna(subset=["cpw"]).sort_values("n")
        row = {"run": run, "solver": solver, "n_values": " ".join(map(str, finite.n.tolist())), "points": len(finite)}
        if len(finite) >= 2:
            fit = capacity.extrapolate_in_inverse_n(finite.n, finite.cpw, finite.cpw_standard_error)
            row |= {"cpw_infinite_n": fit.intercept, "cpw_infinite_n_standard_error": fit.intercept_stderr,
                    "slope": fit.slope, "slope_standard_error": fit.slope_stderr, "r2": fit.r2}
        else:
            row |= {"cpw_infinite_n": math.nan, "cpw_infinite_n_standard_error": math.nan, "slope": math.nan,
                    "slope_standard_error": math.nan, "r2": math.nan}
        rows.append(row)
    return pd.DataFrame(rows)


def cover_capacity(n: int) -> float:
    """Where Cover's separable fraction crosses 1/2 for P = alpha N patterns (alpha = 2 up to 1/N rounding)."""
    counts = np.arange(n, 4 * n + 1)
    fractions = [separability.cover_fraction(int(p), n) for p in counts]
    return first_crossing_below(counts / n, fractions, 0.5)


def fc_spread_of_solver(fc: pd.DataFrame, solver: str) -> tuple[float, str]:
    """(max / min over depths of one solver's CpW, detail) on the fully connected capacity rows `fc`:
    the depth check's ratio read with that solver alone (e.g. back-propagation, the paper's solver)
    instead of the best solver per depth. NaN, as for the best solver's ratio, unless the solver has a
    finite CpW at every depth of `fc` and there are at least two depths."""
    depths = sorted(fc.hidden_layers.unique())
    own = fc[fc.solver == solver].groupby("hidden_layers").cpw.max()
    values = {layers: float(own.get(layers, math.nan)) for layers in depths}
    finite = [v for v in values.values() if np.isfinite(v)]
    spread = max(finite) / min(finite) if len(finite) == len(values) and len(finite) >= 2 else math.nan
    detail = f"fully connected, {solver} alone per depth: " + "; ".join(f"{layers} layers: {v:.3g}" for layers, v in values.items())
    return spread, detail


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Fractions, capacities, extrapolations and the metrics of the S3 claims.

    inputs: embedding_<run>=... for every run (tree runs named tree_k<K>_<solver>), multi_output=...;
    params: solvers {k1, k3, k5: [solver, ...]} (the tree runs), depth {tree_run, reference_run}
    (two-layer tree vs one-layer K = 3 tree, same solver, both at their largest N), fc_runs (the fully connected runs, fc_l<layers>_<solver>; per depth the best solver's CpW is read), epoch_sweep {n, runs: [[run, epochs], ...]} (K = 3
    back-propagation on identical instances with different epoch budgets).
    """
    runs = split_search(concat_tables(inputs, "embedding_"))
    fractions = embedded_fractions(runs)
    capacity_table = capacities(runs)
    lines = extrapolations(capacity_table)
    metrics = MetricsTable()

    def row_at(run: str, n: int | None = None) -> pd.Series | None:
        """The capacity row of a run at N (None: its largest N)."""
        here = capacity_table[capacity_table.run == run].sort_values("n")
        if n is not None:
            here = here[here.n == n]
        return here.iloc[-1] if len(here) else None

    def at_largest_n(run: str) -> tuple[float, str, float]:
        """(CpW, detail, standard error) of a run at its largest N: a certified lower bound there."""
        here = capacity_table[capacity_table.run == run].sort_values("n")
        if here.empty:
            return math.nan, f"{run}: not run", math.nan
        per_n = ", ".join(f"N={r.n}: {r.cpw:.3g} +- {r.cpw_standard_error:.2g}" for r in here.itertuples())
        last = here.iloc[-1]
        return float(last.cpw), f"{last.architecture}, {last.solver}, largest N = {last.n}; {per_n}", float(last.cpw_standard_error)

    def extrapolated(run: str) -> tuple[float, str, float]:
        """(intercept, detail, its standard error) of the run's line CpW = a + b / N (reported, not checked)."""
        found = lines[lines.run == run]
        if found.empty or not np.isfinite(found.iloc[0].cpw_infinite_n):
            return math.nan, f"{run}: fewer than two finite capacities", math.nan
        fit = found.iloc[0]
        return (float(fit.cpw_infinite_n),
                f"CpW = a + b/N over N = {fit.n_values}, b = {fit.slope:.3g} +- {fit.slope_standard_error:.2g}, R^2 = {fit.r2:.3g}"
                " (a solver-limited curve: reported, not a finite-size extrapolation)",
                float(fit.cpw_infinite_n_standard_error))

    def add(name: str, found: tuple[float, str, float]) -> None:
        value, detail, error = found
        metrics.add(name, value, detail, standard_error=error)

    # K = 1: exact (LP), the paper's solver (backprop), Cover's formula.
    add("cpw_k1_lp_largest_n", at_largest_n("tree_k1_lp"))
    add("cpw_k1_lp_extrapolated", extrapolated("tree_k1_lp"))
    add("cpw_k1_backprop_largest_n", at_largest_n("tree_k1_backprop"))
    add("cpw_k1_backprop_extrapolated", extrapolated("tree_k1_backprop"))
    exact, backprop_k1 = row_at("tree_k1_lp"), row_at("tree_k1_backprop", None if row_at("tree_k1_lp") is None else int(row_at("tree_k1_lp").n))
    gap = exact.cpw - backprop_k1.cpw if exact is not None and backprop_k1 is not None else math.nan
    metrics.add("cpw_k1_solver_gap_largest_n", gap,
                "exact (LP) minus back-propagation CpW at the LP's largest N: the part of back-propagation's K = 1 value that is the solver's")
    if exact is not None:
        metrics.add("cpw_k1_cover_largest_n", cover_capacity(int(exact.n)), f"Cover's formula at N = {int(exact.n)} (general position)")

    # K = 3 and K = 5: each solver at its largest N and its 1/N line; the best solver at the study's
    # largest N is the certified lower bound the claim reads (least action's runs read twice: alone,
    # and with the trajectory search after it, `split_search`).
    # The literal names: (largest N, 1/N intercept) per solver, and the best solver's.
    names = {
        3: {"backprop": ("cpw_k3_backprop_largest_n", "cpw_k3_backprop_extrapolated"),
            "least_action": ("cpw_k3_least_action_largest_n", "cpw_k3_least_action_extrapolated"),
            "trajectory_search": ("cpw_k3_trajectory_search_largest_n", "cpw_k3_trajectory_search_extrapolated"),
            "best": ("cpw_k3_best_largest_n", "cpw_k3_best_extrapolated")},
        5: {"backprop": ("cpw_k5_backprop_largest_n", "cpw_k5_backprop_extrapolated"),
            "least_action": ("cpw_k5_least_action_largest_n", "cpw_k5_least_action_extrapolated"),
            "trajectory_search": ("cpw_k5_trajectory_search_largest_n", "cpw_k5_trajectory_search_extrapolated"),
            "best": ("cpw_k5_best_largest_n", "cpw_k5_best_extrapolated")},
    }
    for k, names_of_k in names.items():
        solvers_of_k = params["solvers"][f"k{k}"] + (["trajectory_search"] if "least_action" in params["solvers"][f"k{k}"] else [])
        runs_of_k = [f"tree_k{k}_{solver}" for solver in solvers_of_k]
        for solver in solvers_of_k:
            largest_name, extrapolated_name = names_of_k[solver]
            add(largest_name, at_largest_n(f"tree_k{k}_{solver}"))
            add(extrapolated_name, extrapolated(f"tree_k{k}_{solver}"))
        best_name, best_extrapolated_name = names_of_k["best"]
        here = capacity_table[capacity_table.run.isin(runs_of_k)]
        if here.empty:
            metrics.add(best_name, math.nan, "no run")
            metrics.add(best_extrapolated_name, math.nan, "no run")
            continue
        largest = int(here.n.max())
        at_n = here[here.n == largest].sort_values("cpw", na_position="first")
        best = at_n.iloc[-1]
        others = ", ".join(f"{r.solver}: {r.cpw:.3g}" for r in at_n.itertuples())
        best_line = extrapolated(best.run)
        metrics.add(best_name, best.cpw,
                    f"certified lower bound on CpW: the best solver ({best.solver}) at the largest N = {largest} ({others}); "
                    f"its 1/N intercept {best_line[0]:.3g} +- {best_line[2]:.2g} reported beside it",
                    standard_error=best.cpw_standard_error)
        metrics.add(best_extrapolated_name, best_line[0], f"{best.run}: {best_line[1]}", standard_error=best_line[2])

    # What least action's restarts add: its first attempt alone at the largest N (reported).
    first_attempts = runs[(runs.solver == "least_action") & (runs.kind == "tree")]
    first_attempts = capacities(first_attempts.assign(embedded=first_attempts.embedded_in_attempt == 0))
    for k in names:
        here = first_attempts[first_attempts.run == f"tree_k{k}_least_action"].sort_values("n")
        if len(here):
            last = here.iloc[-1]
            metrics.add(f"cpw_k{k}_least_action_first_attempt_largest_n", last.cpw,
                        f"least action's first attempt alone (no restarts), N = {last.n}: what the restarts add is "
                        f"cpw_k{k}_least_action_largest_n minus this", standard_error=last.cpw_standard_error)

    # The exact reference at small N: the MILP's bounds beside least action's and the search's CpW, same instances.
    for key, reference_runs in params.get("reference", {}).items():
        for metric in reference_metrics(runs, capacity_table, reference_runs, key):
            metrics.add(*metric[:3], standard_error=metric[3])

    # The solver's share: CpW of the same K = 3 instances at one N after more and more epochs.
    sweep = params["epoch_sweep"]
    by_epochs = []
    for run, epochs in sweep["runs"]:
        found = row_at(run, sweep["n"])
        by_epochs.append((epochs, float(found.cpw) if found is not None else math.nan))
    by_epochs.sort()
    epochs_detail = f"K = 3, N = {sweep['n']}, back-propagation, identical instances; " + ", ".join(f"{e} epochs: {c:.3g}" for e, c in by_epochs)
    metrics.add("cpw_k3_backprop_fewest_epochs", by_epochs[0][1], epochs_detail)
    metrics.add("cpw_k3_backprop_most_epochs", by_epochs[-1][1], epochs_detail)
    metrics.add("cpw_k3_backprop_epochs_gain", by_epochs[-1][1] - by_epochs[0][1],
                f"CpW gained from {by_epochs[0][0]} to {by_epochs[-1][0]} epochs: the solver's part of the gap at this N")

    # Depth: the two-hidden-layer tree against the one-layer K = 3 tree, same solver, at their largest N.
    depth = params["depth"]
    two_value, two_detail, two_error = at_largest_n(depth["tree_run"])
    one_value, one_detail, one_error = at_largest_n(depth["reference_run"])
    metrics.add("depth_tree_two_layers_cpw", two_value, two_detail, standard_error=two_error)
    metrics.add("depth_tree_one_layer_cpw", one_value, one_detail, standard_error=one_error)
    metrics.add("depth_tree_ratio", two_value / one_value,
                "CpW(two hidden layers) / CpW(one hidden layer), same N and solver, both certified lower bounds",
                standard_error=(two_value / one_value) * math.hypot(two_error / two_value, one_error / one_value))
    # Fully connected: per depth the best solver's CpW (a certified lower bound), every solver's beside it.
    fc = capacity_table[capacity_table.run.isin(params["fc_runs"])].sort_values(["hidden_layers", "solver"])
    fc_values = {layers: float(group.cpw.max()) if group.cpw.notna().any() else math.nan
                 for layers, group in fc.groupby("hidden_layers")}
    fc_detail = "; ".join(
        f"{layers} layers: {fc_values[layers]:.3g} (" + ", ".join(f"{r.solver} {r.cpw:.3g}" for r in group.itertuples()) + ")"
        for layers, group in fc.groupby("hidden_layers"))
    for layers, group in fc.groupby("hidden_layers"):
        for r in group.itertuples():
            metrics.add(f"depth_fc_l{layers}_{r.solver}_cpw", r.cpw, f"{r.architecture}, N = {r.n}, {r.solver} (reported)",
                        standard_error=r.cpw_standard_error)
    # The function search's part the committee (majority) alone embedded: what depth adds through other functions.
    searched = runs[runs.run.isin(params["fc_runs"]) & (runs.solver == "function_search")]
    if len(searched):
        alone = capacities(searched.assign(embedded=searched.embedded & (searched.upper_function == "majority")))
        for r in alone.sort_values("hidden_layers").itertuples():
            metrics.add(f"depth_fc_l{r.hidden_layers}_function_search_committee_alone_cpw", r.cpw,
                        f"{r.architecture}, N = {r.n}: the instances the committee (majority upper function) embedded, "
                        "without the other functions the upper layers realise (reported)", standard_error=r.cpw_standard_error)
    metrics.add("depth_fc_one_layer_cpw", fc_values.get(1, math.nan), f"best solver per depth: {fc_detail}")
    metrics.add("depth_fc_two_layers_cpw", fc_values.get(2, math.nan), f"best solver per depth: {fc_detail}")
    metrics.add("depth_fc_three_layers_cpw", fc_values.get(3, math.nan), f"best solver per depth: {fc_detail}")
    finite_fc = [v for v in fc_values.values() if np.isfinite(v)]
    spread = max(finite_fc) / min(finite_fc) if len(finite_fc) == len(fc_values) and len(finite_fc) >= 2 else math.nan
    metrics.add("depth_fc_ratio_max_over_min", spread,
                f"fully connected, 1-{len(fc_values)} hidden layers, the best solver's certified lower bound per depth: {fc_detail}")
    # The same ratio with back-propagation alone (the paper's solver), not the best solver per depth.
    backprop_spread, backprop_detail = fc_spread_of_solver(fc, "backprop")
    metrics.add("depth_fc_backprop_ratio_max_over_min", backprop_spread,
                f"{backprop_detail} (the alternative to the best solver per depth)")

    # Many outputs: three readings of the power law in O (the check is on acc - 1/2, the reading the
    # claim names), fitted where acc - 1/2 stands clear of the random-hidden-layer floor.
    outputs_table = read_table(inputs["multi_output"])
    per_o = outputs_table.groupby("outputs", as_index=False).agg(
        above_chance=("above_chance", "mean"), floor_above_chance=("floor_above_chance", "mean"),
        accuracy=("accuracy", "mean"), label_accuracy=("label_accuracy", "mean"),
        bits_per_weight=("bits_per_weight", "mean"), epochs=("epochs", "max"), saturated_at=("saturated_at", "max"),
        saturated=("saturated", "all"),
    )
    window = many.fit_window(per_o)
    for metric in multi_output_metrics(per_o, window):
        metrics.add(*metric[:3], standard_error=metric[3])
    largest = per_o.iloc[-1]
    metrics.add("multi_output_cpw_largest_o", largest.bits_per_weight, f"P O (1 - H2(error)) / W at O = {int(largest.outputs)}")
    metrics.add("multi_output_saturation_epochs", per_o.saturated_at.max(),
                f"the last epoch any instance's accuracy improved, over every O (runs of at most {int(per_o.epochs.max())} epochs)")
    return {
        "fractions": fractions, "capacity": capacity_table, "extrapolation": lines,
        "outputs": per_o, "metrics": metrics.frame(),
    }


def reference_metrics(runs: pd.DataFrame, capacity_table: pd.DataFrame, reference_runs: dict, key: str
                      ) -> list[tuple[str, float, str, float]]:
    """The metrics of one K's exact reference (key "k3" or "k5"; reference_runs {milp, least_action}
    run names): the MILP's CpW read on the instances it embedded (a lower bound) and on those it did
    not prove unembeddable (an upper bound; the two agree when none is undecided), its undecided
    count, and least action's (restarts included) and the trajectory search's CpW on the same
    instances with their shortfall from the MILP's lower bound."""
    milp_run, la_run = reference_runs["milp"], reference_runs["least_action"]
    search_run = la_run.replace("_least_action", "_trajectory_search")
    exact = runs[runs.run == milp_run]
    if exact.empty:
        return []
    upper = capacities(exact.assign(embedded=exact.outcome != "not embeddable")).iloc[0]

    def cpw_of(run: str) -> tuple[float, float]:
        found = capacity_table[capacity_table.run == run]
        return (float(found.cpw.iloc[0]), float(found.cpw_standard_error.iloc[0])) if len(found) else (math.nan, math.nan)

    lower, lower_se = cpw_of(milp_run)
    la, la_se = cpw_of(la_run)
    search, search_se = cpw_of(search_run)
    n, instances = int(exact.n.iloc[0]), int(exact.instance.nunique())
    undecided = int((exact.outcome == "undecided").sum())
    where = f"K = {key[1:]}, N = {n}, {instances} instances per load, alpha = {', '.join(f'{a:g}' for a in sorted(exact.alpha.unique()))}"
    names = {"k3": ("reference_k3_milp_cpw", "reference_k3_milp_cpw_upper", "reference_k3_milp_undecided",
                    "reference_k3_least_action_cpw", "reference_k3_trajectory_search_cpw", "reference_k3_least_action_shortfall",
                    "reference_k3_trajectory_search_shortfall"),
             "k5": ("reference_k5_milp_cpw", "reference_k5_milp_cpw_upper", "reference_k5_milp_undecided",
                    "reference_k5_least_action_cpw", "reference_k5_trajectory_search_cpw", "reference_k5_least_action_shortfall",
                    "reference_k5_trajectory_search_shortfall")}[key]
    return [
        (names[0], lower, f"exact MILP, {where}: the crossing of the fraction it embedded (certified by the LPs; undecided "
         "instances counted as not embedded): a lower bound", lower_se),
        (names[1], float(upper.cpw), f"exact MILP, {where}: the crossing of the fraction not proven unembeddable "
         "(undecided counted as embeddable): an upper bound", float(upper.cpw_standard_error)),
        (names[2], float(undecided), f"MILP instances neither solved nor refuted within the node limit, {where} "
         f"(of {len(exact)})", math.nan),
        (names[3], la, f"least action with its restarts on the MILP's instances, {where}", la_se),
        (names[4], search, f"least action, its restarts and the trajectory search on the MILP's instances, {where}", search_se),
        (names[5], lower - la, "MILP lower bound minus least action (restarts included): how far least action falls "
         "short of the exact CpW at this N", math.nan),
        (names[6], lower - search, "MILP lower bound minus the trajectory search: how far it falls short of the exact "
         "CpW at this N", math.nan),
    ]


def _power_law_metrics(frame: pd.DataFrame, column: str, exponent_name: str, r2_name: str, meaning: str
                       ) -> list[tuple[str, float, str, float]]:
    """(exponent, R^2) of column ~ O^exponent over the rows of frame; NaN with fewer than 3 rows
    or a value <= 0."""
    o_values = frame.outputs.tolist()
    if len(frame) < 3 or not (frame[column] > 0).all():
        return [(exponent_name, math.nan, f"{meaning}: not positive at every O of {o_values} (or < 3 O): no power "
                 "law fitted", math.nan), (r2_name, math.nan, "no fit", math.nan)]
    fit = power_law_fit(frame.outputs, frame[column])
    return [(exponent_name, fit.exponent, f"{meaning} ~ O^exponent over O = {o_values}, prefactor {fit.prefactor:.3g}",
             fit.exponent_se), (r2_name, fit.r2, f"R^2 of the line in (log O, log {column})", math.nan)]


def multi_output_metrics(per_o: pd.DataFrame, window: pd.DataFrame) -> list[tuple[str, float, str, float]]:
    """The many-outputs readings: per_o holds the per-O means (outputs, above_chance,
    floor_above_chance, bits_per_weight, label_accuracy, saturated, saturated_at, epochs); window
    the O whose acc - 1/2 is >= FLOOR_MARGIN x its floor (the checked exponent's fit window)."""
    o_values = per_o.outputs.tolist()
    readings = {  # column: (exponent metric, its R^2 metric, what it is)
        "above_chance": ("multi_output_exponent_all_o", "multi_output_exponent_all_o_r2",
                         "bit accuracy above chance, acc - 1/2, every O (reported)"),
        "bits_per_weight": ("multi_output_cpw_exponent", "multi_output_cpw_exponent_r2",
                            "finite-error CpW, P O (1 - H2(1 - acc)) / W bits per weight (reported)"),
        "label_accuracy": ("multi_output_label_exponent", "multi_output_label_exponent_r2",
                           "O-bit label accuracy, the fraction of patterns with every bit right (reported)"),
    }
    metrics = [("multi_output_above_chance_min", per_o.above_chance.min(), f"mean over instances, O = {o_values}",
                math.nan)]
    metrics += _power_law_metrics(window, "above_chance", "multi_output_exponent", "multi_output_exponent_r2",
                                  f"bit accuracy above chance, acc - 1/2 (checked), where it is >= {many.FLOOR_MARGIN:g}x "
                                  "the random-hidden-layer floor")
    for column, (exponent_name, r2_name, meaning) in readings.items():
        metrics += _power_law_metrics(per_o, column, exponent_name, r2_name, meaning)
    upper = per_o[per_o.outputs >= per_o.outputs.median()]
    metrics += _power_law_metrics(upper, "above_chance", "multi_output_exponent_upper_half", "multi_output_exponent_upper_half_r2",
                                  "acc - 1/2 over the larger half of O (reported)")
    floors = ", ".join(f"O {int(row.outputs)}: {row.floor_above_chance:.3f}" for row in per_o.itertuples())
    metrics += [
        ("multi_output_window_points", float(len(window)), f"O whose acc - 1/2 is >= {many.FLOOR_MARGIN:g}x the floor: "
         f"{window.outputs.tolist()} (floor, acc - 1/2 of a random hidden layer with fitted output perceptrons: {floors})",
         math.nan),
        ("multi_output_floor_median", per_o.floor_above_chance.median(), "median over O of the floor's acc - 1/2",
         math.nan),
        ("multi_output_saturated_fraction", per_o.saturated.mean(), "fraction of O whose run, trained through the "
         "whole anneal, ended saturated (no gain > 0.001 over its last `patience` epochs); unsaturated: "
         f"{per_o.outputs[~per_o.saturated].tolist()}", math.nan),
    ]
    return metrics
