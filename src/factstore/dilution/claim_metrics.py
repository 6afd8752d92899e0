"""The dilution study's claim metrics (S3, capacity per label): the max-dilution tables and the
curves they come from in, metrics added to a MetricsTable, one function per part of the study.

Tables: max dilutions as `pruning.max_dilutions` gives them (archetypes per sweep and value, BERT
per subset and pruned group, FewRel per sweep, labels and samples per label, each with its
seed-averaged baseline); curves as the archetype, prune_bert and FewRel steps write them.
Every metric name is written out where it is added, so a search for a claim's metric finds it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.dilution.pruning import kept_fraction_ratio
from factstore.dilution.readings import abs_trend_spearman, bert_gate_metrics, bert_tolerance_metrics
from factstore.metrics import MetricsTable
from factstore.statistics import spearman


def _spearman_or_nan(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(spearman(x, y)) if len(x) >= 3 and np.ptp(y) > 0 else float("nan")


def archetype_metrics(metrics: MetricsTable, toy_max: pd.DataFrame, toy_curves: pd.DataFrame) -> None:
    """The archetype sweeps: max dilution vs labels (Spearman), vs samples per label (kept-fraction
    ratio, unresolved settings, trend), vs depth and flip probability (reported), the samples per
    weight, and each setting's max dilution."""
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


def bert_metrics(metrics: MetricsTable, bert_max: pd.DataFrame, bert_curves: pd.DataFrame, tolerance: float) -> None:
    """BERT pretraining: each subset's and group's max pruning, the later blocks against the other
    groups and across subsets, the per-subset tolerance readings and the testability gates."""
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
    for name, value, detail in bert_tolerance_metrics(bert_curves, tolerance):
        metrics.add(name, value, detail)
    for name, value, detail, error in bert_gate_metrics(bert_curves):
        metrics.add(name, value, detail, standard_error=error)


def fewrel_metrics(metrics: MetricsTable, fewrel_max: pd.DataFrame, fewrel_curves: pd.DataFrame) -> None:
    """FewRel: the undiluted accuracy, max dilution vs labels (Spearman) and vs samples per label
    (kept-fraction ratio), each setting's max dilution; details name the data set used."""
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
