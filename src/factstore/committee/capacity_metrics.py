"""The S3 capacity readings: embedding rows in; the embedded fractions, the CpW per (run, solver,
N), the 1/N lines and the capacity metrics out. The metrics: K = 1 against its exact LP and Cover's
formula; K = 3 and K = 5 per solver with the best solver's certified lower bound; what least
action's restarts add; the exact MILP reference at small N; the epoch sweep (the solver's share);
depth in the tree and in the fully connected machines.

Tables: the embedding rows have one row per (run, instance, alpha) with the columns of the
committee embedding steps (run, architecture, kind, hidden, hidden_layers, solver, n, weights,
instance, alpha, embedded, embedded_in_attempt, and where the solver writes them upper_function,
outcome, embedded_by_search); a capacity table one row per (run, solver, N) (`capacities`).
Every name a claim reads is written out in full in the maps below, never assembled.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.committee import capacity, separability
from factstore.metrics import MetricsTable
from factstore.statistics import first_crossing_below

SEARCHED_RUN = r"^(tree|reference)_k\d+_least_action$"
"""The least-action runs whose trajectory search is read as a solver of its own."""

# K -> solver -> names of (CpW at the largest N, its 1/N intercept); "best": the best solver's.
TREE_METRICS = {
    3: {"backprop": ("cpw_k3_backprop_largest_n", "cpw_k3_backprop_extrapolated"),
        "least_action": ("cpw_k3_least_action_largest_n", "cpw_k3_least_action_extrapolated"),
        "trajectory_search": ("cpw_k3_trajectory_search_largest_n", "cpw_k3_trajectory_search_extrapolated"),
        "best": ("cpw_k3_best_largest_n", "cpw_k3_best_extrapolated")},
    5: {"backprop": ("cpw_k5_backprop_largest_n", "cpw_k5_backprop_extrapolated"),
        "least_action": ("cpw_k5_least_action_largest_n", "cpw_k5_least_action_extrapolated"),
        "trajectory_search": ("cpw_k5_trajectory_search_largest_n", "cpw_k5_trajectory_search_extrapolated"),
        "best": ("cpw_k5_best_largest_n", "cpw_k5_best_extrapolated")},
}
# K -> name of least action's first attempt alone (no restarts) at the largest N.
FIRST_ATTEMPT_METRICS = {3: "cpw_k3_least_action_first_attempt_largest_n",
                         5: "cpw_k5_least_action_first_attempt_largest_n"}
# Reference key -> names of the exact MILP reference's metrics (`reference_metrics`).
REFERENCE_METRICS = {
    "k3": ("reference_k3_milp_cpw", "reference_k3_milp_cpw_upper", "reference_k3_milp_undecided",
           "reference_k3_least_action_cpw", "reference_k3_trajectory_search_cpw", "reference_k3_least_action_shortfall",
           "reference_k3_trajectory_search_shortfall"),
    "k5": ("reference_k5_milp_cpw", "reference_k5_milp_cpw_upper", "reference_k5_milp_undecided",
           "reference_k5_least_action_cpw", "reference_k5_trajectory_search_cpw", "reference_k5_least_action_shortfall",
           "reference_k5_trajectory_search_shortfall"),
}


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


def capacity_metrics(runs: pd.DataFrame, capacity_table: pd.DataFrame, lines: pd.DataFrame, params: dict,
                     metrics: MetricsTable) -> None:
    """Adds the capacity metrics to `metrics`, in this order: K = 1, K = 3 and K = 5 per solver and
    the best, least action's first attempts, the exact references, the epoch sweep, depth.

    runs: the embedding rows after `split_search`; capacity_table: `capacities(runs)`; lines:
    `extrapolations(capacity_table)`; params: solvers {k1, k3, k5: [solver, ...]} (the tree runs),
    reference {k3, k5: {milp, least_action}} (optional), epoch_sweep {n, runs: [[run, epochs], ...]},
    depth {tree_run, reference_run}, fc_runs (the fully connected runs)."""
    tree_metrics(capacity_table, lines, params["solvers"], metrics)
    first_attempt_metrics(runs, metrics)
    # The exact reference at small N: the MILP's bounds beside least action's and the search's CpW, same instances.
    for key, reference_runs in params.get("reference", {}).items():
        for metric in reference_metrics(runs, capacity_table, reference_runs, key):
            metrics.add(*metric[:3], standard_error=metric[3])
    epoch_sweep_metrics(capacity_table, params["epoch_sweep"], metrics)
    depth_metrics(runs, capacity_table, params["depth"], params["fc_runs"], metrics)


def _row_at(capacity_table: pd.DataFrame, run: str, n: int | None = None) -> pd.Series | None:
    """The capacity row of a run at N (None: its largest N)."""
    here = capacity_table[capacity_table.run == run].sort_values("n")
    if n is not None:
        here = here[here.n == n]
    return here.iloc[-1] if len(here) else None


def _at_largest_n(capacity_table: pd.DataFrame, run: str) -> tuple[float, str, float]:
    """(CpW, detail, standard error) of a run at its largest N: a certified lower bound there."""
    here = capacity_table[capacity_table.run == run].sort_values("n")
    if here.empty:
        return math.nan, f"{run}: not run", math.nan
    per_n = ", ".join(f"N={r.n}: {r.cpw:.3g} +- {r.cpw_standard_error:.2g}" for r in here.itertuples())
    last = here.iloc[-1]
    return float(last.cpw), f"{last.architecture}, {last.solver}, largest N = {last.n}; {per_n}", float(last.cpw_standard_error)


def _extrapolated(lines: pd.DataFrame, run: str) -> tuple[float, str, float]:
    """(intercept, detail, its standard error) of the run's line CpW = a + b / N (reported, not checked)."""
    found = lines[lines.run == run]
    if found.empty or not np.isfinite(found.iloc[0].cpw_infinite_n):
        return math.nan, f"{run}: fewer than two finite capacities", math.nan
    fit = found.iloc[0]
    return (float(fit.cpw_infinite_n),
            f"CpW = a + b/N over N = {fit.n_values}, b = {fit.slope:.3g} +- {fit.slope_standard_error:.2g}, R^2 = {fit.r2:.3g}"
            " (a solver-limited curve: reported, not a finite-size extrapolation)",
            float(fit.cpw_infinite_n_standard_error))


def _add(metrics: MetricsTable, name: str, found: tuple[float, str, float]) -> None:
    value, detail, error = found
    metrics.add(name, value, detail, standard_error=error)


def tree_metrics(capacity_table: pd.DataFrame, lines: pd.DataFrame, solvers: dict, metrics: MetricsTable) -> None:
    """The tree machines' CpW: K = 1 by the exact LP, back-propagation (the paper's solver) and
    Cover's formula; K = 3 and K = 5 per solver at its largest N and its 1/N line, and the best
    solver at the study's largest N, the certified lower bound the claim reads (least action's
    runs read twice: alone, and with the trajectory search after it, `split_search`)."""
    _add(metrics, "cpw_k1_lp_largest_n", _at_largest_n(capacity_table, "tree_k1_lp"))
    _add(metrics, "cpw_k1_lp_extrapolated", _extrapolated(lines, "tree_k1_lp"))
    _add(metrics, "cpw_k1_backprop_largest_n", _at_largest_n(capacity_table, "tree_k1_backprop"))
    _add(metrics, "cpw_k1_backprop_extrapolated", _extrapolated(lines, "tree_k1_backprop"))
    exact = _row_at(capacity_table, "tree_k1_lp")
    backprop_k1 = _row_at(capacity_table, "tree_k1_backprop", None if exact is None else int(exact.n))
    gap = exact.cpw - backprop_k1.cpw if exact is not None and backprop_k1 is not None else math.nan
    metrics.add("cpw_k1_solver_gap_largest_n", gap,
                "exact (LP) minus back-propagation CpW at the LP's largest N: the part of back-propagation's K = 1 value that is the solver's")
    if exact is not None:
        metrics.add("cpw_k1_cover_largest_n", cover_capacity(int(exact.n)), f"Cover's formula at N = {int(exact.n)} (general position)")

    for k, names_of_k in TREE_METRICS.items():
        solvers_of_k = solvers[f"k{k}"] + (["trajectory_search"] if "least_action" in solvers[f"k{k}"] else [])
        runs_of_k = [f"tree_k{k}_{solver}" for solver in solvers_of_k]
        for solver in solvers_of_k:
            largest_name, extrapolated_name = names_of_k[solver]
            _add(metrics, largest_name, _at_largest_n(capacity_table, f"tree_k{k}_{solver}"))
            _add(metrics, extrapolated_name, _extrapolated(lines, f"tree_k{k}_{solver}"))
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
        best_line = _extrapolated(lines, best.run)
        metrics.add(best_name, best.cpw,
                    f"certified lower bound on CpW: the best solver ({best.solver}) at the largest N = {largest} ({others}); "
                    f"its 1/N intercept {best_line[0]:.3g} +- {best_line[2]:.2g} reported beside it",
                    standard_error=best.cpw_standard_error)
        metrics.add(best_extrapolated_name, best_line[0], f"{best.run}: {best_line[1]}", standard_error=best_line[2])


def first_attempt_metrics(runs: pd.DataFrame, metrics: MetricsTable) -> None:
    """What least action's restarts add: its first attempt alone at the largest N (reported)."""
    first_attempts = runs[(runs.solver == "least_action") & (runs.kind == "tree")]
    first_attempts = capacities(first_attempts.assign(embedded=first_attempts.embedded_in_attempt == 0))
    for k, name in FIRST_ATTEMPT_METRICS.items():
        here = first_attempts[first_attempts.run == f"tree_k{k}_least_action"].sort_values("n")
        if len(here):
            last = here.iloc[-1]
            metrics.add(name, last.cpw,
                        f"least action's first attempt alone (no restarts), N = {last.n}: what the restarts add is "
                        f"{TREE_METRICS[k]['least_action'][0]} minus this", standard_error=last.cpw_standard_error)


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
    names = REFERENCE_METRICS[key]
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


def epoch_sweep_metrics(capacity_table: pd.DataFrame, sweep: dict, metrics: MetricsTable) -> None:
    """The solver's share: CpW of the same K = 3 instances at one N after more and more epochs
    (sweep {n, runs: [[run, epochs], ...]}, back-propagation on identical instances)."""
    by_epochs = []
    for run, epochs in sweep["runs"]:
        found = _row_at(capacity_table, run, sweep["n"])
        by_epochs.append((epochs, float(found.cpw) if found is not None else math.nan))
    by_epochs.sort()
    epochs_detail = f"K = 3, N = {sweep['n']}, back-propagation, identical instances; " + ", ".join(f"{e} epochs: {c:.3g}" for e, c in by_epochs)
    metrics.add("cpw_k3_backprop_fewest_epochs", by_epochs[0][1], epochs_detail)
    metrics.add("cpw_k3_backprop_most_epochs", by_epochs[-1][1], epochs_detail)
    metrics.add("cpw_k3_backprop_epochs_gain", by_epochs[-1][1] - by_epochs[0][1],
                f"CpW gained from {by_epochs[0][0]} to {by_epochs[-1][0]} epochs: the solver's part of the gap at this N")


def depth_metrics(runs: pd.DataFrame, capacity_table: pd.DataFrame, depth: dict, fc_runs: list[str],
                  metrics: MetricsTable) -> None:
    """Depth: the two-hidden-layer tree against the one-layer K = 3 tree, same solver, at their
    largest N (depth {tree_run, reference_run}); the fully connected runs `fc_runs`, per depth the
    best solver's CpW (a certified lower bound) with every solver's beside it, the function search's
    part the committee alone embedded, and the ratio over depths by the best solver and by
    back-propagation alone. Per-depth names (depth_fc_l<L>_<solver>_cpw) follow the config's runs."""
    two_value, two_detail, two_error = _at_largest_n(capacity_table, depth["tree_run"])
    one_value, one_detail, one_error = _at_largest_n(capacity_table, depth["reference_run"])
    metrics.add("depth_tree_two_layers_cpw", two_value, two_detail, standard_error=two_error)
    metrics.add("depth_tree_one_layer_cpw", one_value, one_detail, standard_error=one_error)
    metrics.add("depth_tree_ratio", two_value / one_value,
                "CpW(two hidden layers) / CpW(one hidden layer), same N and solver, both certified lower bounds",
                standard_error=(two_value / one_value) * math.hypot(two_error / two_value, one_error / one_value))
    # Fully connected: per depth the best solver's CpW (a certified lower bound), every solver's beside it.
    fc = capacity_table[capacity_table.run.isin(fc_runs)].sort_values(["hidden_layers", "solver"])
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
    searched = runs[runs.run.isin(fc_runs) & (runs.solver == "function_search")]
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
