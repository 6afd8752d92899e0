"""Figures of the capacity-per-label (dilution) study (S3, second half).

Each figure is `name(tables, params) -> Figure`, tables being the inputs of the study's figure
rule read as DataFrames (workflow/rules/dilution.smk: DILUTION_FIGURE_INPUTS); FIGURES lists them.
The x axis of every sweep is the kept weight fraction 1 - rate on a log scale (rate 0 at the left),
so the high dilutions where the plateau ends are spread out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.plots import style

SWEEP_TITLES = {
    "n_labels": "number of labels O",
    "per_label": "training samples per label",
    "depth": "hidden layers",
    "flip_probability": r"flip probability $P_f$",
}
GROUP_TITLES = {
    "later_blocks": "later blocks (no Q/K/V)",
    "qkv": "Q/K/V (later blocks)",
    "first_block": "first block",
    "head": "MLM head (transform)",
}


REMOVED_AT = 1e-3  # where a rate-1 point (every weight of the group removed) is drawn on the log axis


def _kept_axis(ax) -> None:
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("kept weight fraction 1 - dilution rate")


def _curves(ax, curves: pd.DataFrame, by: str, accuracy: str, colours: dict, label_format: str) -> None:
    for value, group in curves.groupby(by):
        mean = group.groupby("rate")[accuracy].agg(["mean", "std"]).fillna(0)
        kept = 1 - mean.index.to_numpy()
        ax.errorbar(kept, mean["mean"], yerr=mean["std"], marker="o", ms=3, capsize=2,
                    color=colours[value], label=label_format.format(value))


def _mark_max(ax, max_dilution: float, colour) -> None:
    ax.axvline(1 - max_dilution, color=colour, linewidth=0.8, alpha=0.6, linestyle=":")


def archetypes(tables: dict[str, pd.DataFrame], params: dict):
    """Test accuracy vs kept fraction of the input-to-hidden weights, one panel per sweep (labels,
    training samples per label, depth, P_f), the max dilution of each curve dotted.

    tables: archetypes_<sweep> (dilution_archetypes.archetypes), max_dilution (dilution_summary.summary).
    """
    curves = style.stacked(tables, "archetypes_")
    maxima = tables["max_dilution"]
    maxima = maxima[maxima.part == "archetypes"]
    sweeps = [s for s in SWEEP_TITLES if s in set(curves.sweep)]
    fig, axes = style.figure(ncols=len(sweeps), width=3.6, sharey=True)
    for ax, sweep in zip(axes[0], sweeps):
        here = curves[curves.sweep == sweep]
        colours = style.palette(sorted(here.value.unique()))
        _curves(ax, here, "value", "test_accuracy", colours, "{:g}")
        for row in maxima[maxima.sweep == sweep].itertuples():
            _mark_max(ax, row.max_dilution, colours[row.value])
        _kept_axis(ax)
        ax.set_title(SWEEP_TITLES[sweep])
        ax.legend(fontsize=7, title=SWEEP_TITLES[sweep].split(" ")[-1], title_fontsize=7)
    axes[0][0].set_ylabel("test accuracy")
    style.caption(fig, f"archetype toy model; mean ± std over {curves.seed.nunique()} seeds; dotted: max dilution "
                       f"(accuracy >= (1 - {params['archetype_tolerance']}) x undiluted)")
    return fig


def bert_pretraining(tables: dict[str, pd.DataFrame], params: dict):
    """APT (accuracy per masked token, held-out paragraphs) vs kept fraction per pruned group,
    both Wikipedia subsets; last panel: the MLM training curves.

    tables: bert_<subset> (dilution_bert.prune_bert), log_<subset> (dilution_bert.pretrain's log).
    """
    curves = style.stacked(tables, "bert_")
    logs = style.stacked(tables, "log_")
    groups = [g for g in GROUP_TITLES if g in set(curves.group)]
    fig, axes = style.figure(ncols=len(groups) + 1, width=3.4)
    subsets = sorted(curves.subset.unique())
    colours = style.palette(subsets)
    for ax, group in zip(axes[0], groups):
        for subset in subsets:
            here = curves[(curves.group == group) & (curves.subset == subset)].sort_values("rate")
            first = here.iloc[0]
            ax.errorbar(np.maximum(1 - here.rate, REMOVED_AT), here.apt, yerr=here.apt_standard_error, marker="o", ms=3, capsize=2,
                        color=colours[subset], label=f"{subset}: {first.paragraphs} paragraphs, {first.tokens} tokens")
            ax.axhline(first.apt_unpruned * (1 - params["bert_tolerance"]), color=colours[subset], linewidth=0.7, linestyle=":")
            ax.axhline(first.most_frequent_apt, color=colours[subset], linewidth=0.7, linestyle="--")
        _kept_axis(ax)
        ax.set_title(GROUP_TITLES[group])
    axes[0][0].set_ylabel("accuracy per masked token (APT)")
    ax = axes[0][-1]
    for subset, log in logs.groupby("subset"):
        ax.plot(log.step, log.loss, color=colours.get(subset, "k"), label=subset)
    ax.set_xlabel("MLM step")
    ax.set_ylabel("training loss (masked tokens)")
    ax.set_title("pretraining")
    style.shared_legend(fig, axes)
    retrain = int(curves.retrain_steps.iloc[0])
    style.caption(fig, f"magnitude pruning after pretraining; {'no re-training' if retrain == 0 else f'{retrain} MLM steps of re-training with masks held'}"
                       f"; dotted: the plateau's lower edge; dashed: always the most frequent token; {int(curves.masked_tokens.iloc[0])} masked tokens"
                       f" (every evaluation token once), bars one standard error; rate 1 (the group removed) drawn at kept {REMOVED_AT:g}")
    return fig


def fewrel(tables: dict[str, pd.DataFrame], params: dict):
    """BERT-1 FewRel test accuracy vs kept fraction of its block's weights: labels sweep and
    samples-per-label sweep, each curve's max dilution dotted.

    tables: fewrel_<sweep> (dilution_fewrel.fewrel_dilution), max_dilution (dilution_summary.summary).
    """
    curves = style.stacked(tables, "fewrel_")
    maxima = tables["max_dilution"]
    maxima = maxima[maxima.part == "fewrel"]
    fig, axes = style.figure(ncols=2, width=4.2)
    for ax, (sweep, key, title) in zip(axes[0], [("labels", "n_labels", "labels"), ("samples", "per_label", "samples per label")]):
        here = curves[curves.sweep == sweep]
        if here.empty:
            continue
        colours = style.palette(sorted(here[key].unique()))
        _curves(ax, here, key, "test_accuracy", colours, "{:g}")
        for row in maxima[maxima.sweep == sweep].itertuples():
            _mark_max(ax, row.max_dilution, colours[getattr(row, key)])
        fixed = "per_label" if key == "n_labels" else "n_labels"
        ax.set_title(f"{title} ({fixed.replace('_', ' ')} = {here[fixed].iloc[0]})")
        ax.legend(fontsize=7, title=title, title_fontsize=7)
        _kept_axis(ax)
    axes[0][0].set_ylabel("test accuracy")
    style.caption(fig, f"FewRel {', '.join(sorted(curves.source.unique()))}, held-out test split; BERT-1 (MiniLM's first block) pruned by magnitude, "
                       f"masks held while fine-tuning; points: the rates the plateau search visited; dotted: max dilution "
                       f"(tolerance {params['fewrel_tolerance']})")
    return fig


def max_dilution(tables: dict[str, pd.DataFrame], params: dict):
    """Max dilution against the number of labels and against the training-set size, for the
    archetypes and FewRel, and per pruned group for the two BERT subsets.

    tables: max_dilution (dilution_summary.summary).
    """
    table = tables["max_dilution"]
    fig, axes = style.figure(ncols=3, width=3.8)
    labels_ax, data_ax, bert_ax = axes[0]
    toy = table[table.part == "archetypes"]
    few = table[table.part == "fewrel"]
    colours = style.palette(["archetypes", "FewRel"])
    for ax, toy_sweep, fewrel_sweep, xlabel in [
        (labels_ax, "n_labels", "labels", "number of labels"),
        (data_ax, "per_label", "samples", "training samples per label"),
    ]:
        for name, part, sweep in [("archetypes", toy, toy_sweep), ("FewRel", few, fewrel_sweep)]:
            here = part[part.sweep == sweep].sort_values("value")
            if len(here):
                ax.plot(here.value.astype(float), here.max_dilution, marker="o", color=colours[name], label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
    labels_ax.set_ylabel("max dilution (rate keeping accuracy)")
    labels_ax.set_title("vs labels")
    data_ax.set_title("vs training-set size")
    bert = table[table.part == "bert"]
    groups = [g for g in GROUP_TITLES if g in set(bert.sweep)]
    subsets = sorted(bert.subset.unique())
    width = 0.8 / max(len(subsets), 1)
    subset_colours = style.palette(subsets)
    for i, subset in enumerate(subsets):
        here = bert[bert.subset == subset].set_index("sweep").reindex(groups)
        bert_ax.bar(np.arange(len(groups)) + i * width, here.max_dilution, width, color=subset_colours[subset], label=f"{subset} paragraphs")
    bert_ax.set_xticks(np.arange(len(groups)) + width * (len(subsets) - 1) / 2)
    bert_ax.set_xticklabels([GROUP_TITLES[g].replace(" (", "\n(") for g in groups], fontsize=7)
    style.theory_hline(bert_ax, 0.95, "~95% (the paper, later blocks)", reference=True)
    bert_ax.set_ylim(0, 1.02)
    bert_ax.set_title("BERT: max pruning keeping APT")
    bert_ax.legend(fontsize=7)
    style.caption(fig, f"tolerances (relative): archetypes {params['archetype_tolerance']}, BERT {params['bert_tolerance']}, FewRel {params['fewrel_tolerance']}")
    return fig


FIGURES = {
    "archetypes": archetypes,
    "bert_pretraining": bert_pretraining,
    "fewrel": fewrel,
    "max_dilution": max_dilution,
}
