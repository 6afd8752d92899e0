"""Experiment steps of the linear-associative-memory study (S1).

Rules in workflow/rules/assoc.smk call these through `python -m factstore assoc.<step>`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from factstore import assoc
from factstore.device import derived_generator
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable
from factstore.statistics import first_crossing_below, spearman


# Resamples of the bootstrap over seeds behind the standard errors of S1.optimal-capacity's fit.
BOOTSTRAP_RESAMPLES = 1999


def hebbian(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Hebbian recall accuracy over a fine load grid for several d, many seeds (cheap: no training).

    params: d (list), alphas (list), seeds (int), seed (int), chunk_size (int).
    """
    rows = []
    jobs = [(d, alpha) for d in params["d"] for alpha in params["alphas"]]
    for d, alpha in tqdm(jobs, desc="hebbian", mininterval=5):
        p = assoc.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], "hebbian", d, alpha)
        for seed in range(params["seeds"]):
            # One seed at a time keeps memory at O(p d) even for large d.
            x, y = assoc.sample_problem(p, d, 1, generator)
            x, y = x.to(context.device), y.to(context.device)
            accuracy = assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y, params["chunk_size"]).item()
            rows.append({"d": d, "alpha": alpha, "p": p, "seed": seed, "accuracy": accuracy})
    return {"table": pd.DataFrame(rows)}


def trained(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Train W (full rank, or W = Q R^T of rank kappa d) at every load of the grid, seeds batched.

    Also records the Hebbian W on the same problem instances, and the normalised singular
    values of the trained W. params: d, problem ('original' | 'decoupled'), rank_fraction,
    alphas, seeds, seed, max_steps, learning_rate, patience, min_gain.
    """
    d, problem, kappa = params["d"], params["problem"], params.get("rank_fraction", 1.0)
    rank = None if kappa >= 1 else max(1, round(kappa * d))
    rows, spectra = [], []
    for alpha in tqdm(params["alphas"], desc=f"{problem} d={d} kappa={kappa}", mininterval=5):
        p = assoc.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], problem, d, kappa, alpha)
        x, y = assoc.sample_problem(p, d, params["seeds"], generator, decoupled=problem == "decoupled")
        x, y = x.to(context.device), y.to(context.device)
        result = assoc.train_optimal(
            x,
            y,
            rank=rank,
            max_steps=params["max_steps"],
            learning_rate=params["learning_rate"],
            patience=params["patience"],
            min_gain=params["min_gain"],
            generator=generator,
        )
        hebbian_accuracy = assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y).cpu()
        # The trained W's spectrum, and for W = Q R^T the spectrum of its initialisation (a product
        # of two Gaussian factors), the reference S1.quarter-circle compares the trained one with,
        # and the top-m spectrum of the Hebbian W (a null that stores facts without optimising).
        stages = {"trained": assoc.normalised_singular_values(result.weights, rank).cpu().numpy()}
        if result.initial_weights is not None:
            stages["initial"] = assoc.normalised_singular_values(result.initial_weights, rank).cpu().numpy()
        if rank is not None:  # the null: the Hebbian W of the same facts, truncated to its top `rank` values
            stages["hebbian"] = assoc.normalised_singular_values(assoc.hebbian_weights(x, y), rank).cpu().numpy()
        for seed in range(params["seeds"]):
            common = {"d": d, "alpha": alpha, "p": p, "seed": seed, "problem": problem, "rank_fraction": kappa}
            rows.append(common | {"method": "trained", "accuracy": float(result.best_accuracy[seed]), "steps": result.steps})
            rows.append(common | {"method": "hebbian", "accuracy": float(hebbian_accuracy[seed]), "steps": 0})
            for stage, values in stages.items():
                spectra += [common | {"stage": stage, "index": i, "singular_value": s} for i, s in enumerate(values[seed])]
        del x, y, result  # freed before the next load's problem is drawn: one problem in memory at a time
    return {"table": pd.DataFrame(rows), "spectra": pd.DataFrame(spectra)}


# The variants of the rank-constrained training that S1.rank-capacity's optimisation check tries
# (name -> changes to the study's settings): more steps, a smaller and a larger learning rate,
# another initial draw, and a 10x larger initialisation. None may store more than the baseline.
RANK_CHECK_VARIANTS = {
    "steps x4": {"steps_factor": 4},
    "lr x0.2, steps x4": {"learning_rate_factor": 0.2, "steps_factor": 4},
    "lr x2": {"learning_rate_factor": 2.0},
    "other initial draw": {"new_init": True},
    "initial scale x10": {"init_scale": 1.0, "new_init": True},
}


def rank_check(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Is the rank-constrained W = Q R^T trained to its optimum? Retrain it, at one (d, kappa), with
    each of RANK_CHECK_VARIANTS on the loads around the baseline's capacity, on the SAME problem
    instances as the baseline run (same generator stream as `trained`).

    inputs: baseline (the `trained` table of this (d, kappa)). params: as `trained` (alphas: the
    rank grid), plus window: the number of grid loads tried, from the last load the baseline
    stores perfectly (in at least half the seeds) upward. Returns {"table": rows like
    `trained`'s, method 'trained', with a column variant}.
    """
    d, kappa = params["d"], params["rank_fraction"]
    rank = max(1, round(kappa * d))
    baseline = read_table(inputs["baseline"])
    baseline = baseline[baseline.method == "trained"]
    loads = window_loads(baseline, params["alphas"], params["window"])
    rows = []
    jobs = [(name, alpha) for name in RANK_CHECK_VARIANTS for alpha in loads]
    for name, alpha in tqdm(jobs, desc=f"rank check d={d} kappa={kappa}", mininterval=5):
        variant = RANK_CHECK_VARIANTS[name]
        p = assoc.facts_for_load(alpha, d)
        generator = derived_generator(params["seed"], "original", d, kappa, alpha)  # the baseline's problems
        x, y = assoc.sample_problem(p, d, params["seeds"], generator)
        if variant.get("new_init"):
            generator = derived_generator(params["seed"], "rank-check-init", d, kappa, alpha, name)
        factor = variant.get("steps_factor", 1)
        result = assoc.train_optimal(
            x.to(context.device), y.to(context.device), rank=rank,
            max_steps=params["max_steps"] * factor, patience=params["patience"] * factor,
            learning_rate=params["learning_rate"] * variant.get("learning_rate_factor", 1.0),
            init_scale=variant.get("init_scale", 0.1), min_gain=params["min_gain"], generator=generator,
        )
        for seed in range(params["seeds"]):
            rows.append({"d": d, "alpha": alpha, "p": p, "seed": seed, "problem": "original", "rank_fraction": kappa,
                         "method": "trained", "variant": name, "accuracy": float(result.best_accuracy[seed]),
                         "steps": result.steps})
    return {"table": pd.DataFrame(rows)}


def window_loads(baseline: pd.DataFrame, alphas: list[float], window: int) -> list[float]:
    """`window` grid loads from the last one where at least half the seeds of `baseline` (a
    table with alpha, seed, accuracy) store every fact (the smallest grid load if none does)."""
    alphas = sorted(alphas)
    stored = perfect_fraction(baseline)
    good = [a for a in alphas if stored.get(a, 0.0) >= 0.5]
    start = alphas.index(max(good)) if good else 0
    return alphas[start:start + window]


def perfect_fraction(curve: pd.DataFrame) -> pd.Series:
    """Per load, the fraction of seeds whose W recalls every fact (accuracy 1)."""
    return (curve["accuracy"] >= 1.0).groupby(curve["alpha"]).mean()


def capacities(curves: pd.DataFrame, threshold: float, keys: list[str]) -> pd.DataFrame:
    """Apparent capacity per group: the load where the seed-averaged accuracy falls below `threshold`
    (criterion 'mean'). Reported beside the capacity proper, `perfect_storage_capacities`."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("alpha", as_index=False)["accuracy"].mean()
        alpha_c = first_crossing_below(mean["alpha"].to_numpy(), mean["accuracy"].to_numpy(), threshold)
        d = int(curve["d"].iloc[0])
        p_c = assoc.facts_for_load(alpha_c, d) if np.isfinite(alpha_c) else np.nan
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"alpha_c": alpha_c, "p_c": p_c})
    return pd.DataFrame(rows).assign(criterion="mean")


def perfect_storage_capacities(curves: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The capacity of the paper (S1, criterion 'all'): per group, the load up to which at least
    half of the seeds store ALL facts (accuracy 1), interpolated where that fraction crosses 1/2
    between grid loads. nan when the grid's smallest load already fails or its largest still stores."""
    perfect = curves.assign(accuracy=(curves["accuracy"] >= 1.0).astype(float))
    return capacities(perfect, 0.5, keys).assign(criterion="all")


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Capacities, spectra statistics and the metrics the S1 claims are checked against.

    inputs: hebbian=..., trained_*=..., spectra_*=..., rank_check=... ; params: capacity_accuracy,
    spectrum_d, rank_d, rank_alphas. The capacity is the paper's (criterion 'all': at least half of
    the seeds store every fact); the apparent capacity at mean accuracy >= capacity_accuracy
    (criterion 'mean') is reported beside it.
    """
    threshold = params["capacity_accuracy"]
    curves = concat_tables(inputs, "trained_")
    spectra = concat_tables(inputs, "spectra_")
    hebbian_curves = read_table(inputs["hebbian"])

    keys = ["method", "problem", "rank_fraction", "d"]
    capacity = pd.concat([perfect_storage_capacities(curves, keys), capacities(curves, threshold, keys)], ignore_index=True)
    # "All facts stored" for Hebbian: the load where half of the seeds still recall every fact.
    hebbian_all = perfect_storage_capacities(hebbian_curves, ["d"]).assign(
        method="hebbian-all", problem="original", rank_fraction=1.0
    )
    capacity = pd.concat([capacity, hebbian_all], ignore_index=True)

    metrics = MetricsTable()
    trained = capacity[capacity.method == "trained"]
    full = trained[(trained.rank_fraction == 1.0) & (trained.criterion == "all")]
    for row in full.itertuples():
        metrics.add(f"{row.problem}_capacity_d{row.d}", row.alpha_c, f"all facts stored in >= half the seeds, p_c = {row.p_c}")
    for row in trained[(trained.rank_fraction == 1.0) & (trained.criterion == "mean")].itertuples():
        metrics.add(f"{row.problem}_capacity_mean_accuracy_d{row.d}", row.alpha_c,
                    f"mean accuracy >= {threshold} (apparent capacity, reported), p_c = {row.p_c}")
    original_curves = curves[(curves.method == "trained") & (curves.problem == "original") & (curves.rank_fraction == 1.0)]
    errors, interval = capacity_fit_bootstrap(original_curves, BOOTSTRAP_RESAMPLES, params["seed"])
    for name, value, detail in optimal_capacity_metrics(trained, threshold):
        metrics.add(name, value, detail, standard_error=errors.get(name))
    if interval is not None:
        for name, value, bound in zip(("optimal_capacity_extrapolated_interval_low", "optimal_capacity_extrapolated_interval_high"),
                                      interval, ("lower", "upper")):
            metrics.add(name, value, f"{bound} end of the 95% percentile bootstrap interval of the extrapolated capacity a "
                        f"({BOOTSTRAP_RESAMPLES} resamples of each d's seeds; reported)")

    hebbian_largest = hebbian_all.sort_values("d").iloc[-1]
    for row in hebbian_all.itertuples():
        metrics.add(f"hebbian_all_capacity_d{row.d}", row.alpha_c, "half of the seeds recall every fact")
    metrics.add("hebbian_all_capacity_largest_d", hebbian_largest.alpha_c, f"d = {hebbian_largest.d}")
    metrics.add("bits_per_parameter_hebbian", hebbian_largest.alpha_c / np.log(2), f"Hebbian W, all facts, d = {hebbian_largest.d}")
    largest_d = hebbian_curves.d.max()
    at_largest = hebbian_curves[hebbian_curves.d == largest_d].groupby("alpha")["accuracy"].mean()
    metrics.add(
        "hebbian_accuracy_at_half_largest_d",
        np.interp(0.5, at_largest.index.to_numpy(), at_largest.to_numpy()),
        f"mean per-fact accuracy at alpha = 1/2, d = {largest_d}",
    )

    trained_full = curves[(curves.method == "trained") & (curves.rank_fraction == 1.0)]
    mean = trained_full.groupby(["problem", "d", "alpha"])["accuracy"].mean().unstack("problem")
    if {"original", "decoupled"} <= set(mean.columns):
        both = mean.dropna()
        gap = (both["original"] - both["decoupled"]).abs()
        metrics.add("decoupled_mean_accuracy_gap", gap.mean(), f"mean |acc_original - acc_decoupled| over {len(gap)} (d, alpha) points")
        metrics.add("decoupled_max_accuracy_gap", gap.max(), "largest gap on the grid (steep near capacity)")
        # The claim (never revised) reads the apparent capacity at mean accuracy >= threshold; the
        # gap of the capacity proper (all facts, >= half the seeds) is reported.
        apparent = trained[(trained.rank_fraction == 1.0) & (trained.criterion == "mean")]
        caps = apparent.pivot_table(index="d", columns="problem", values="alpha_c").dropna()
        metrics.add("decoupled_capacity_gap", (caps["original"] - caps["decoupled"]).abs().max(),
                    f"apparent capacity (mean accuracy >= {threshold}) at d = {caps.index.tolist()}")
        caps = full.pivot_table(index="d", columns="problem", values="alpha_c").dropna()
        metrics.add("decoupled_capacity_gap_perfect_storage", (caps["original"] - caps["decoupled"]).abs().max(),
                    f"capacity (all facts, >= half the seeds) at d = {caps.index.tolist()}")
        steps = decoupled_gap_grid_steps(caps, curves)
        metrics.add("decoupled_capacity_gap_grid_steps", steps.max(),
                    "largest perfect-storage capacity gap |original - decoupled| over d, in steps of the coarser of the two "
                    f"load grids at capacity (per d: {', '.join(f'{d}: {v:.3g}' for d, v in steps.items())})")
        transition = transition_accuracy_gaps(trained_full)
        worst = transition.idxmax() if len(transition) else None
        metrics.add("decoupled_max_transition_accuracy_gap", transition.max() if len(transition) else np.nan,
                    "largest |mean accuracy original - decoupled| over the transition loads (where some seed of either "
                    f"problem fails to store every fact and some stores over half), at (d, alpha) = {worst} (reported)")

    for name, value, detail in _spectrum_statistics(spectra, capacity, params["spectrum_d"]):
        metrics.add(name, value, detail)

    rank = trained[(trained.problem == "original") & (trained.d == params["rank_d"]) & (trained.criterion == "all")]
    rank = rank.sort_values("rank_fraction")
    for row in rank.itertuples():
        metrics.add(f"rank_capacity_kappa{row.rank_fraction:g}", row.alpha_c, f"d = {row.d}, all facts in >= half the seeds")
    if len(rank) >= 2:
        metrics.add("rank_capacity_spearman", spearman(rank.rank_fraction, rank.alpha_c), "capacity vs kappa")
    rank_curves = curves[(curves.method == "trained") & (curves.problem == "original") & (curves.d == params["rank_d"])
                         & (curves.rank_fraction < 1.0)]
    for name, value, detail in rank_curve_metrics(rank, np.sort(rank_curves.alpha.unique())):
        metrics.add(name, value, detail)
    if "rank_check" in inputs:
        check = read_table(inputs["rank_check"])
        kappa = float(check.rank_fraction.iloc[0])
        baseline = curves[(curves.method == "trained") & (curves.problem == "original")
                          & (curves.d == params["rank_d"]) & (curves.rank_fraction == kappa)]
        for name, value, detail in rank_check_metrics(baseline, check, params["rank_alphas"]):
            metrics.add(name, value, detail)
    return {"capacity": capacity, "metrics": metrics.frame()}


def optimal_capacity_metrics(trained: pd.DataFrame, threshold: float) -> list[tuple[str, float, str]]:
    """S1.optimal-capacity from the capacity table's full-rank, original-problem, trained rows:
    the fit alpha_c(d) = a + b / ln p_c over the d with a measured capacity, for the capacity
    proper (criterion 'all': its intercept a and slope b are the claim's checks) and, reported,
    for the apparent capacity at mean accuracy >= threshold (criterion 'mean')."""
    out = []
    original = trained[(trained.problem == "original") & (trained.rank_fraction == 1.0)]
    for criterion in ("all", "mean"):
        rows = original[original.criterion == criterion].sort_values("d")
        usable = rows[np.isfinite(rows.alpha_c.astype(float))]
        if len(usable) < 2:
            continue
        intercept, slope = assoc.extrapolate_capacity(usable.alpha_c.to_numpy(float), usable.p_c.to_numpy(float))
        fit = f"fit alpha_c = a + b / ln p_c over d = {usable.d.tolist()}"
        if criterion == "all":
            out.append(("optimal_capacity_extrapolated", intercept, f"{fit} (all facts stored in >= half the seeds), b = {slope:.3g}"))
            out.append(("optimal_capacity_slope_b", slope, f"{fit}: b > 0 means capacity falls as d grows"))
            out.append(("optimal_capacity_min_finite_d", usable.alpha_c.min(), f"smallest capacity over d = {usable.d.tolist()}"))
            # At capacity W stores p_c facts of log2 p_c bits in d^2 weights: p log2 p / d^2 = alpha_c / ln 2.
            largest = usable.iloc[-1]
            out.append(("bits_per_parameter_optimal", largest.alpha_c / np.log(2), f"trained W at capacity, d = {largest.d}"))
        else:
            out.append(("optimal_capacity_extrapolated_mean_accuracy", intercept,
                        f"{fit}, apparent capacity at mean accuracy >= {threshold} (reported), b = {slope:.3g}"))
            out.append(("optimal_capacity_slope_b_mean_accuracy", slope, f"{fit}, apparent capacity (reported)"))
    return out


def capacity_fit_standard_errors(original: pd.DataFrame, n_resamples: int, seed: int) -> dict[str, float]:
    """The standard errors of `capacity_fit_bootstrap` alone."""
    return capacity_fit_bootstrap(original, n_resamples, seed)[0]


def capacity_fit_bootstrap(
    original: pd.DataFrame, n_resamples: int, seed: int
) -> tuple[dict[str, float], tuple[float, float] | None]:
    """Standard errors of S1.optimal-capacity's fitted intercept a and slope b (alpha_c = a + b /
    ln p_c), by a bootstrap over seeds (scipy.stats.bootstrap, percentile): each d's seeds are
    resampled on their own (d's may have different seed counts; a seed is one problem instance per
    load), the perfect-storage capacity of each d recomputed as `perfect_storage_capacities` does
    and the line refitted. original: full-rank trained curves of the original problem (columns d,
    alpha, seed, accuracy). Returns {metric name: standard error}; nan where a resample leaves
    fewer than two d with a capacity on the grid. Also returns the 95% percentile interval
    (low, high) of the intercept a from the same resamples (None with fewer than two d)."""
    from scipy.stats import bootstrap

    dims = sorted(original["d"].unique())
    if len(dims) < 2:
        return {}, None
    stored = {d: original[original.d == d].pivot_table(index="seed", columns="alpha", values="accuracy") >= 1.0 for d in dims}

    def fit(*seed_rows):
        alpha_c, p_c = [], []
        for d, rows in zip(dims, seed_rows):
            table = stored[d]
            fraction = table.to_numpy(float)[np.asarray(rows, int)].mean(axis=0)
            crossing = first_crossing_below(table.columns.to_numpy(float), fraction, 0.5)
            if np.isfinite(crossing):
                alpha_c.append(crossing)
                p_c.append(assoc.facts_for_load(crossing, d))
        if len(alpha_c) < 2:
            return np.array([np.nan, np.nan])
        return np.array(assoc.extrapolate_capacity(np.array(alpha_c), np.array(p_c)))

    samples = tuple(np.arange(len(stored[d])) for d in dims)
    result = bootstrap(samples, fit, vectorized=False, paired=False, n_resamples=n_resamples, method="percentile",
                       rng=np.random.default_rng(seed))
    intercept_error, slope_error = result.standard_error
    interval = (float(result.confidence_interval.low[0]), float(result.confidence_interval.high[0]))
    return {"optimal_capacity_extrapolated": float(intercept_error), "optimal_capacity_slope_b": float(slope_error)}, interval


def decoupled_gap_grid_steps(capacities: pd.DataFrame, curves: pd.DataFrame) -> pd.Series:
    """Per d, |capacity original - capacity decoupled| in grid steps: the spacing of the coarser of
    the two problems' load grids around the capacities. capacities: index d, columns original and
    decoupled (alpha_c); curves: the runs' tables (problem, d, alpha). Within one step, the two
    capacities are the same at the grid's resolution."""
    steps = {}
    for d, row in capacities.iterrows():
        low, high = sorted((row["original"], row["decoupled"]))
        spacing = 0.0
        for problem in ("original", "decoupled"):
            loads = np.sort(curves[(curves.problem == problem) & (curves.d == d)]["alpha"].unique())
            spacing = max(spacing, grid_spacing(loads, low, high))
        steps[d] = (high - low) / spacing if spacing > 0 else np.nan
    return pd.Series(steps, dtype=float)


def grid_spacing(loads: np.ndarray, low: float, high: float) -> float:
    """The largest spacing between consecutive grid loads over the interval [low, high] (the two
    grid intervals holding its ends, and every one between). loads: sorted 1-D."""
    spacings = np.diff(loads)
    first = max(int(np.searchsorted(loads, low, side="right")) - 1, 0)
    last = min(max(int(np.searchsorted(loads, high, side="left")), first + 1), len(loads) - 1)
    return float(spacings[first:last].max()) if last > first else float(spacings.max())


def transition_accuracy_gaps(curves: pd.DataFrame) -> pd.Series:
    """|mean accuracy original - mean accuracy decoupled| at the transition loads: (d, alpha) where
    both problems ran and, in either, not every seed stores every fact while some seed's accuracy
    is above 1/2. curves: full-rank trained rows (problem, d, alpha, seed, accuracy). Index (d, alpha)."""
    grouped = curves.groupby(["problem", "d", "alpha"])["accuracy"]
    mean = grouped.mean().unstack("problem")
    in_transition = ((grouped.min() < 1.0) & (grouped.max() > 0.5)).unstack("problem")
    if not {"original", "decoupled"} <= set(mean.columns):
        return pd.Series(dtype=float)
    both = mean[["original", "decoupled"]].dropna()
    window = in_transition.loc[both.index].astype(bool).any(axis=1)  # both ran there: no gaps
    return (both["original"] - both["decoupled"]).abs()[window]


# S1.rank-capacity's predicted curves alpha_c(kappa) / alpha_c(1): the derived one (the top-kappa
# share of the quarter circle's second moment) and, as the declared alternative, parameters per fact.
RANK_CURVES = {
    "rank_capacity_curve_gap_grid_steps": ("the quarter circle's top-kappa second-moment share", assoc.rank_capacity_ratio),
    "rank_capacity_curve_gap_grid_steps_parameter_count": ("the parameter count kappa (2 - kappa) (reported)",
                                                           lambda kappa: kappa * (2 - kappa)),
}


def rank_curve_metrics(rank: pd.DataFrame, loads: np.ndarray) -> list[tuple[str, float, str]]:
    """S1.rank-capacity's curve: per kappa < 1 the measured ratio alpha_c(kappa) / alpha_c(1), and
    for each predicted curve of RANK_CURVES the largest |alpha_c(kappa) - ratio(kappa) alpha_c(1)|
    over kappa in steps of the rank load grid around the two values (`grid_spacing`). rank: the
    capacity rows of one d (rank_fraction, alpha_c), the full-rank row (1.0) among them; loads:
    the rank runs' sorted load grid. Empty without a full-rank capacity or a kappa < 1."""
    by_kappa = rank.set_index("rank_fraction")["alpha_c"].astype(float)
    full = by_kappa.get(1.0, np.nan)
    kappas = [k for k in by_kappa.index if k < 1 and np.isfinite(by_kappa[k])]
    if not np.isfinite(full) or not kappas or len(loads) < 2:
        return []
    out = [(f"rank_capacity_ratio_kappa{k:g}", by_kappa[k] / full,
            f"alpha_c(kappa) / alpha_c(1) = {by_kappa[k]:.4g} / {full:.4g} (predicted {assoc.rank_capacity_ratio(k):.3f}; "
            f"parameter count {k * (2 - k):.3f})") for k in kappas]
    for name, (what, ratio) in RANK_CURVES.items():
        steps = {}
        for k in kappas:
            measured, predicted = by_kappa[k], ratio(k) * full
            steps[k] = abs(measured - predicted) / grid_spacing(loads, min(measured, predicted), max(measured, predicted))
        listed = ", ".join(f"kappa {k:g}: {v:.3g}" for k, v in steps.items())
        out.append((name, max(steps.values()), f"largest |alpha_c(kappa) - ratio(kappa) alpha_c(1)| in rank-grid steps, "
                    f"ratio = {what}, alpha_c(1) = {full:.4g} ({listed})"))
    return out


def rank_check_metrics(baseline: pd.DataFrame, check: pd.DataFrame, alphas: list[float]) -> list[tuple[str, float, str]]:
    """S1.rank-capacity's optimisation check: each variant's capacity (all facts in >= half the
    seeds) on the window it was run on, the baseline's curve standing in below the window; a
    variant that still stores at the window's top counts with that load (a lower bound). The
    largest gain over the baseline is reported in loads and in grid steps (the spacing of the grid
    loads around the baseline's capacity)."""
    alphas = np.sort(np.asarray(alphas, float))
    base_fraction = perfect_fraction(baseline)
    base_capacity = first_crossing_below(base_fraction.index.to_numpy(), base_fraction.to_numpy(), 0.5)
    window = np.sort(check.alpha.unique())
    out, gains = [], {}
    for name, curve in check.groupby("variant", sort=False):
        fraction = pd.concat([base_fraction[base_fraction.index < window[0]], perfect_fraction(curve)]).sort_index()
        capacity = first_crossing_below(fraction.index.to_numpy(), fraction.to_numpy(), 0.5)
        if not np.isfinite(capacity) and fraction.iloc[-1] >= 0.5:
            capacity = float(fraction.index[-1])  # stores up to the window's top: at least that
        gains[name] = capacity - base_capacity
    gain = max(gains.values()) if gains else np.nan
    # The grid step at the baseline's capacity: the spacing of the two grid loads around it.
    above = np.searchsorted(alphas, base_capacity) if np.isfinite(base_capacity) else 0
    step = alphas[min(max(above, 1), len(alphas) - 1)] - alphas[min(max(above, 1), len(alphas) - 1) - 1]
    described = ", ".join(f"{name}: {value:+.3g}" for name, value in gains.items())
    out.append(("rank_optimisation_baseline_capacity", base_capacity, "the baseline W = Q R^T's capacity at the checked (d, kappa)"))
    out.append(("rank_optimisation_capacity_gain", gain, f"largest capacity gain of a training variant over the baseline ({described})"))
    out.append(("rank_optimisation_gain_grid_steps", gain / step, f"that gain in grid steps (step {step:g} at the baseline's capacity)"))
    return out


def _spectrum_statistics(spectra: pd.DataFrame, capacity: pd.DataFrame, d: int) -> list[tuple[str, float, str]]:
    """KS distances of the singular values at capacity (at d) to the quarter-circle law (full rank,
    reported) and, for W = Q R^T, of the trained and of the initial W to the top-kappa truncated
    law; rank_spectrum_ks_gain = the smallest, over the kappa run, of KS(initial) - KS(trained)."""
    from scipy.stats import ks_2samp, kstwo

    if "stage" not in spectra:
        spectra = spectra.assign(stage="trained")
    out, samples, gains = [], {}, {}
    over_critical = {stage: {} for stage in OVER_CRITICAL_METRICS}  # stage -> {kappa: KS / 5% critical value}
    for (problem, kappa), group in spectra[spectra.d == d].groupby(["problem", "rank_fraction"]):
        alpha = assoc.spectrum_load(capacity, spectra, problem, d, kappa)
        at_load = group[group.alpha == alpha]
        values = at_load[at_load.stage == "trained"].singular_value.to_numpy()
        samples[problem, kappa] = values
        detail = f"d = {d}, alpha = {alpha:g}, {len(values)} singular values"
        # The 5% critical value of the one-sample KS statistic for a sample of that size (scipy's
        # exact kstwo): a reference, not a test, since singular values of one W repel each other
        # and are no i.i.d. sample (their KS to their own law is smaller than an i.i.d. sample's).
        critical = float(kstwo.ppf(0.95, len(values))) if len(values) else float("nan")
        if kappa >= 1:
            name = {"original": "quarter_circle_ks_original", "decoupled": "quarter_circle_ks_decoupled"}[problem]
            out.append((name, assoc.ks_distance(values, assoc.quarter_circle_cdf), detail))
            critical_name = {"original": "quarter_circle_ks_critical_original",
                             "decoupled": "quarter_circle_ks_critical_decoupled"}[problem]
            out.append((critical_name, critical, f"5% KS critical value for the pooled sample of {len(values)} (reported)"))
            continue
        # Rank m < d: the top-kappa truncation of the law (the optimal rank-m W's law, derived in
        # docs/assoc_truncated_law.md), for the trained W and for its initialisation.
        initial = at_load[at_load.stage == "initial"].singular_value.to_numpy()
        trained_ks, initial_ks = rank_spectrum_ks(values, initial, kappa)
        out.append((f"truncated_quarter_circle_ks_{problem}_kappa{kappa:g}", trained_ks, detail))
        out.append((f"truncated_quarter_circle_ks_initial_{problem}_kappa{kappa:g}", initial_ks, f"{detail}, W = Q R^T at step 0"))
        hebbian = at_load[at_load.stage == "hebbian"].singular_value.to_numpy()
        hebbian_ks = assoc.ks_distance(hebbian, lambda v: assoc.truncated_quarter_circle_cdf(v, kappa)) if len(hebbian) else float("nan")
        out.append((f"truncated_quarter_circle_ks_hebbian_{problem}_kappa{kappa:g}", hebbian_ks,
                    f"{detail}, the null: the Hebbian W of the same facts truncated to its top kappa d singular values (reported)"))
        out.append((f"truncated_quarter_circle_ks_critical_{problem}_kappa{kappa:g}", critical,
                    f"5% KS critical value for the pooled sample of {len(values)} (reported)"))
        out.append((f"quarter_circle_ks_{problem}_kappa{kappa:g}", assoc.ks_distance(values, assoc.quarter_circle_cdf), detail))
        gains[kappa] = initial_ks - trained_ks
        if problem == "original":
            for stage, ks in (("trained", trained_ks), ("hebbian", hebbian_ks), ("initial", initial_ks)):
                over_critical[stage][kappa] = ks / critical
            above = np.sort(group.alpha.unique())
            above = above[above > alpha]
            if above.size:  # the declared alternative load: the first grid load above the capacity
                beyond = group[(group.alpha == above[0]) & (group.stage == "trained")].singular_value.to_numpy()
                over_critical["above_capacity"][kappa] = (rank_spectrum_ks(beyond, beyond[:0], kappa)[0]
                                                          / float(kstwo.ppf(0.95, len(beyond))))
    if gains:
        listed = ", ".join(f"kappa {k:g}: {g:+.3g}" for k, g in sorted(gains.items()))
        out.append(("rank_spectrum_ks_gain", min(gains.values()),
                    f"KS(initial W, truncated law) - KS(trained W, truncated law), smallest over kappa ({listed}), d = {d} (reported)"))
    out += _over_critical_metrics(over_critical, d)
    if ("original", 1.0) in samples and ("decoupled", 1.0) in samples:
        statistic = ks_2samp(samples["original", 1.0], samples["decoupled", 1.0]).statistic
        out.append(("spectrum_ks_original_vs_decoupled", statistic, f"two-sample KS, d = {d}"))
    return out


# S1.quarter-circle's check and its two comparisons: the largest, over the kappa run, of a W's KS
# distance to the truncated law divided by the 5% KS critical value of its pooled sample size.
OVER_CRITICAL_METRICS = {
    "trained": ("rank_spectrum_ks_over_critical", "the trained W = Q R^T"),
    "hebbian": ("rank_spectrum_ks_over_critical_hebbian",
                "the Hebbian W of the same facts cut to its top kappa d values (a matrix drawn from the law's own model; reported)"),
    "initial": ("rank_spectrum_ks_over_critical_initial",
                "the initial W = Q R^T, a product of two Gaussian factors (reported)"),
    "above_capacity": ("rank_spectrum_ks_over_critical_above_capacity",
                       "the trained W = Q R^T at the first grid load above the measured capacity (a declared alternative load)"),
}


def _over_critical_metrics(over_critical: dict[str, dict[float, float]], d: int) -> list[tuple[str, float, str]]:
    """Per stage (trained, hebbian, initial, above_capacity), the largest over kappa of KS(W, truncated law) / the 5%
    KS critical value of the pooled sample size: at most 1 means that W's top-kappa spectrum is
    within the finite-size KS reference of the law at every kappa. over_critical: stage -> {kappa:
    ratio}, kappa < 1 of the original problem; stages without a value are left out."""
    out = []
    for stage, (name, what) in OVER_CRITICAL_METRICS.items():
        ratios = {k: v for k, v in over_critical.get(stage, {}).items() if np.isfinite(v)}
        if not ratios:
            continue
        listed = ", ".join(f"kappa {k:g}: {v:.3g}" for k, v in sorted(ratios.items()))
        out.append((name, max(ratios.values()),
                    f"KS(W, truncated law) / 5% KS critical value, largest over kappa, for {what}, d = {d} ({listed})"))
    return out


def rank_spectrum_ks(trained: np.ndarray, initial: np.ndarray, kappa: float) -> tuple[float, float]:
    """KS distances of the trained and of the initial normalised singular values (top kappa d of
    each) to the top-kappa truncated quarter-circle law; nan for an empty sample."""
    def truncated(s):
        return assoc.truncated_quarter_circle_cdf(s, kappa)

    return tuple(assoc.ks_distance(v, truncated) if len(v) else float("nan") for v in (trained, initial))
