"""Summary step of the capacity-per-label (dilution) study (S3, second half): the max dilution of
every sweep of the archetype, BERT-pruning and FewRel steps, and the metrics the claims read.

The rule dilution_summary in workflow/rules/dilution.smk calls it through
`python -m factstore dilution_summary.summary`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from factstore.dilution.pruning import kept_fraction_ratio, max_dilution
from factstore.dilution.readings import abs_trend_spearman, bert_gate_metrics, bert_tolerance_metrics
from factstore.io import concat_tables
from factstore.metrics import MetricsTable
from factstore.statistics import spearman


def max_dilutions(curves: pd.DataFrame, keys: list[str], accuracy: str, tolerance: float) -> pd.DataFrame:
    """Per group of `keys`: the seed-averaged baseline (rate 0) and the max dilution (the end of
    the plateau within `tolerance`, relative) of the seed-averaged accuracy curve."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("rate", as_index=False)[accuracy].mean()
        baseline = float(mean.loc[mean.rate == 0, accuracy].iloc[0])
        value = max_dilution(mean["rate"].to_numpy(), mean[accuracy].to_numpy(), baseline, tolerance)
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"baseline": baseline, "max_dilution": value})
    return pd.DataFrame(rows)


def _spearman_or_nan(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(spearman(x, y)) if len(x) >= 3 and np.ptp(y) > 0 else float("nan")


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Max dilutions of every sweep and the metrics the S3 capacity-per-label claims read.

    inputs: archetypes_<sweep>, bert_<subset>, fewrel_<sweep>. params: archetype_tolerance,
    bert_tolerance, fewrel_tolerance (relative accuracy drop still counted as the plateau).
    """
    toy_curves = concat_tables(inputs, "archetypes_")
    bert_curves = concat_tables(inputs, "bert_")
    fewrel_curves = concat_tables(inputs, "fewrel_")
    toy_max = max_dilutions(toy_curves, ["sweep", "value"], "test_accuracy", params["archetype_tolerance"])
    bert_max = max_dilutions(bert_curves, ["subset", "group"], "apt", params["bert_tolerance"])
    fewrel_max = max_dilutions(fewrel_curves, ["sweep", "n_labels", "per_label"], "test_accuracy", params["fewrel_tolerance"])
    table = pd.concat([
        toy_max.assign(part="archetypes"),
        bert_max.rename(columns={"group": "sweep"}).assign(part="bert"),
        fewrel_max.assign(part="fewrel", value=lambda t: np.where(t.sweep == "labels", t.n_labels, t.per_label)),
    ], ignore_index=True)

    metrics = MetricsTable()
    # Archetypes: one row per swept value.
    by_sweep = {sweep: group.sort_values("value") for sweep, group in toy_max.groupby("sweep")}
    labels = by_sweep.get("n_labels")
    if labels is not None:
        metrics.add("archetype_labels_spearman", _spearman_or_nan(labels.value, labels.max_dilution),
                    f"max dilution vs O = {labels.value.tolist()}: {labels.max_dilution.tolist()}")
    samples = by_sweep.get("per_label")
    if samples is not None:
        metrics.add("archetype_samples_kept_ratio", kept_fraction_ratio(samples.max_dilution),
                    f"max/min kept fraction 1 - d over samples per label {samples.value.tolist()}: max dilution {samples.max_dilution.tolist()}")
        unresolved = samples[samples.max_dilution == 0]
        metrics.add("archetype_samples_unresolved_settings", float(len(unresolved)),
                    f"samples-per-label settings whose accuracy falls off at the grid's first diluted rate (max dilution 0, "
                    f"the plateau's end not resolved): {unresolved.value.tolist()}")
        metrics.add("archetype_samples_abs_spearman", abs_trend_spearman(samples.value, samples.max_dilution),
                    f"|Spearman(max dilution, samples per label)| over {len(samples)} settings (0 when the max dilution is constant): "
                    "near 1 is a steady trend the ratio may hide")
    depth = by_sweep.get("depth")
    if depth is not None:
        metrics.add("archetype_depth_kept_ratio", kept_fraction_ratio(depth.max_dilution),
                    f"depth {depth.value.tolist()}: max dilution {depth.max_dilution.tolist()} (the paper: hardly depends on depth; reported)")
    flips = by_sweep.get("flip_probability")
    if flips is not None:
        metrics.add("archetype_flip_spearman", _spearman_or_nan(flips.value, flips.max_dilution),
                    f"P_f {flips.value.tolist()}: max dilution {flips.max_dilution.tolist()} (reported)")
    cpw = toy_curves.assign(cpw=toy_curves.train_size / toy_curves.weights).groupby(["sweep", "value"]).cpw.first()
    sweep, value = cpw.idxmin()
    metrics.add("archetype_cpw_min", cpw.min(), f"training samples per weight P / W, smallest at {sweep} = {value:g}; largest {cpw.max():.2f}")
    for row in toy_max.itertuples():
        metrics.add(f"archetype_max_dilution_{row.sweep}_{row.value:g}", row.max_dilution, f"baseline test accuracy {row.baseline:.3f}")

    # BERT pretraining: per subset and pruned group.
    pivot = bert_max.pivot(index="group", columns="subset", values="max_dilution")
    for row in bert_max.itertuples():
        metrics.add(f"bert_max_pruning_{row.group}_{row.subset}", row.max_dilution, f"APT unpruned {row.baseline:.4f}")
    if "later_blocks" in pivot.index:
        later = pivot.loc["later_blocks"]
        metrics.add("bert_later_blocks_max_pruning", later.mean(), f"mean over subsets {later.to_dict()} (paper: ~0.95)")
        metrics.add("bert_subsets_kept_ratio", kept_fraction_ratio(later.to_numpy()), f"later blocks, subsets {later.to_dict()}")
        if "qkv" in pivot.index:
            metrics.add("bert_later_minus_qkv_max_pruning", (later - pivot.loc["qkv"]).mean(), f"Q/K/V {pivot.loc['qkv'].to_dict()}")
        if "first_block" in pivot.index:
            metrics.add("bert_later_minus_first_block_max_pruning", (later - pivot.loc["first_block"]).mean(),
                        f"first block {pivot.loc['first_block'].to_dict()}")
        if "head" in pivot.index:
            metrics.add("bert_later_minus_head_max_pruning", (later - pivot.loc["head"]).mean(),
                        f"head {pivot.loc['head'].to_dict()} (reported: the head claim came from a secondary note)")
    for name, value, detail in bert_tolerance_metrics(bert_curves, params["bert_tolerance"]):
        metrics.add(name, value, detail)
    for name, value, detail, error in bert_gate_metrics(bert_curves):
        metrics.add(name, value, detail, standard_error=error)

    # FewRel: labels sweep and samples-per-label sweep.
    undiluted = fewrel_max.assign(setting=lambda t: t.n_labels.astype(str) + "x" + t.per_label.astype(str))
    metrics.add("fewrel_undiluted_test_accuracy_min", undiluted.baseline.min(),
                "seed-averaged test accuracy at rate 0, per labels x samples per label: "
                + ", ".join(f"{r.setting}: {r.baseline:.3f}" for r in undiluted.itertuples()))
    fewrel_labels = fewrel_max[fewrel_max.sweep == "labels"].sort_values("n_labels")
    fewrel_samples = fewrel_max[fewrel_max.sweep == "samples"].sort_values("per_label")
    source = ",".join(sorted(fewrel_curves["source"].unique()))
    if len(fewrel_labels):
        metrics.add("fewrel_labels_spearman", _spearman_or_nan(fewrel_labels.n_labels, fewrel_labels.max_dilution),
                    f"{source}: labels {fewrel_labels.n_labels.tolist()} -> max dilution {fewrel_labels.max_dilution.tolist()}")
    if len(fewrel_samples):
        metrics.add("fewrel_samples_kept_ratio", kept_fraction_ratio(fewrel_samples.max_dilution),
                    f"{source}: samples per label {fewrel_samples.per_label.tolist()} -> max dilution {fewrel_samples.max_dilution.tolist()}")
    for row in fewrel_max.itertuples():
        metrics.add(f"fewrel_max_dilution_{row.sweep}_{row.n_labels}x{row.per_label}", row.max_dilution, f"baseline test accuracy {row.baseline:.3f}")
    return {"max_dilution": table, "metrics": metrics.frame()}
