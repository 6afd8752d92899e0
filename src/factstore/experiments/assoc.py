"""Experiment steps of the linear-associative-memory study (SPEC S1).

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
from factstore.statistics import spearman


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
    alphas, seeds, seed, max_steps, learning_rate, patience.
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
            generator=generator,
        )
        hebbian_accuracy = assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y).cpu()
        singular_values = assoc.normalised_singular_values(result.weights, rank).cpu().numpy()
        for seed in range(params["seeds"]):
            common = {"d": d, "alpha": alpha, "p": p, "seed": seed, "problem": problem, "rank_fraction": kappa}
            rows.append(common | {"method": "trained", "accuracy": float(result.best_accuracy[seed]), "steps": result.steps})
            rows.append(common | {"method": "hebbian", "accuracy": float(hebbian_accuracy[seed]), "steps": 0})
            spectra += [common | {"index": i, "singular_value": s} for i, s in enumerate(singular_values[seed])]
    return {"table": pd.DataFrame(rows), "spectra": pd.DataFrame(spectra)}


def capacities(curves: pd.DataFrame, threshold: float, keys: list[str]) -> pd.DataFrame:
    """Apparent capacity per group: the load where the seed-averaged accuracy falls below `threshold`."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("alpha", as_index=False)["accuracy"].mean()
        alpha_c = assoc.threshold_crossing(mean["alpha"].to_numpy(), mean["accuracy"].to_numpy(), threshold)
        d = int(curve["d"].iloc[0])
        p_c = assoc.facts_for_load(alpha_c, d) if np.isfinite(alpha_c) else np.nan
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"alpha_c": alpha_c, "p_c": p_c})
    return pd.DataFrame(rows)


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Capacities, spectra statistics and the metrics the S1 claims are checked against.

    inputs: hebbian=..., trained_*=..., spectra_*=... ; params: capacity_accuracy, spectrum_d.
    """
    threshold = params["capacity_accuracy"]
    curves = concat_tables(inputs, "trained_")
    spectra = concat_tables(inputs, "spectra_")
    hebbian_curves = read_table(inputs["hebbian"])

    capacity = capacities(curves, threshold, ["method", "problem", "rank_fraction", "d"])
    # "All facts stored" for Hebbian: the load where half of the seeds still recall every fact.
    hebbian_curves["perfect"] = (hebbian_curves["accuracy"] >= 1.0).astype(float)
    hebbian_all = capacities(
        hebbian_curves.drop(columns="accuracy").rename(columns={"perfect": "accuracy"}), 0.5, ["d"]
    ).assign(method="hebbian-all", problem="original", rank_fraction=1.0)
    capacity = pd.concat([capacity, hebbian_all], ignore_index=True)

    metrics = MetricsTable()

    full = capacity[(capacity.method == "trained") & (capacity.rank_fraction == 1.0)]
    original = full[full.problem == "original"].sort_values("d")
    for row in full.itertuples():
        metrics.add(f"{row.problem}_capacity_d{row.d}", row.alpha_c, f"accuracy >= {threshold}, p_c = {row.p_c}")
    usable = original[np.isfinite(original.alpha_c)]
    if len(usable) >= 2:
        intercept, slope = assoc.extrapolate_capacity(usable.alpha_c.to_numpy(), usable.p_c.to_numpy())
        metrics.add("optimal_capacity_extrapolated", intercept, f"fit alpha_c = a + b / ln p_c over d = {usable.d.tolist()}, b = {slope:.3g}")
    metrics.add("optimal_capacity_min_finite_d", original.alpha_c.min(), f"smallest apparent capacity over d = {original.d.tolist()}")
    # At capacity W stores p_c facts of log2 p_c bits in d^2 weights: p log2 p / d^2 = alpha_c / ln 2.
    largest = original.dropna(subset=["alpha_c"]).tail(1)
    for row in largest.itertuples():
        metrics.add("bits_per_parameter_optimal", row.alpha_c / np.log(2), f"trained W at capacity, d = {row.d}")

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
        caps = full.pivot_table(index="d", columns="problem", values="alpha_c").dropna()
        metrics.add("decoupled_capacity_gap", (caps["original"] - caps["decoupled"]).abs().max(), f"d = {caps.index.tolist()}")

    spectrum_rows = _spectrum_statistics(spectra, capacity, params["spectrum_d"])
    for name, value, detail in spectrum_rows:
        metrics.add(name, value, detail)

    rank = capacity[(capacity.method == "trained") & (capacity.problem == "original") & (capacity.d == params["rank_d"])]
    rank = rank.sort_values("rank_fraction")
    for row in rank.itertuples():
        metrics.add(f"rank_capacity_kappa{row.rank_fraction:g}", row.alpha_c, f"d = {row.d}")
    if len(rank) >= 2:
        metrics.add("rank_capacity_spearman", spearman(rank.rank_fraction, rank.alpha_c), "capacity vs kappa")
    return {"capacity": capacity, "metrics": metrics.frame()}


def _spectrum_statistics(spectra: pd.DataFrame, capacity: pd.DataFrame, d: int) -> list[tuple[str, float, str]]:
    from scipy.stats import ks_2samp

    out = []
    samples = {}
    for (problem, kappa), group in spectra[spectra.d == d].groupby(["problem", "rank_fraction"]):
        alpha = assoc.spectrum_load(capacity, spectra, problem, d, kappa)
        values = group[group.alpha == alpha].singular_value.to_numpy()
        samples[problem, kappa] = values
        detail = f"d = {d}, alpha = {alpha:g}, {len(values)} singular values"
        if kappa >= 1:
            name = {"original": "quarter_circle_ks_original", "decoupled": "quarter_circle_ks_decoupled"}[problem]
            out.append((name, assoc.ks_distance(values, assoc.quarter_circle_cdf), detail))
            continue
        # Rank m < d: the top-kappa truncation of the law (this project's reading of the paper), and
        # the untruncated law for comparison.
        truncated = lambda s, k=kappa: assoc.truncated_quarter_circle_cdf(s, k)
        out.append((f"truncated_quarter_circle_ks_{problem}_kappa{kappa:g}", assoc.ks_distance(values, truncated), detail))
        out.append((f"quarter_circle_ks_{problem}_kappa{kappa:g}", assoc.ks_distance(values, assoc.quarter_circle_cdf), detail))
    if ("original", 1.0) in samples and ("decoupled", 1.0) in samples:
        statistic = ks_2samp(samples["original", 1.0], samples["decoupled", 1.0]).statistic
        out.append(("spectrum_ks_original_vs_decoupled", statistic, f"two-sample KS, d = {d}"))
    return out
