"""Figures of the language-model and fact-editing study (S0 "Language modelling and fact editing").

Each figure is `name(tables, params) -> Figure`, tables being the inputs of the study's figure
rule read as DataFrames (workflow/rules/editing.smk: EDITING_FIGURE_INPUTS); FIGURES lists them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.plots import style

METHOD_LABELS = {"swap": "MLP swap", "rome": "ROME", "memit": "MEMIT", "alphaedit": "AlphaEdit"}
SCORES = {"efficacy": "efficacy (edit sentence)", "paraphrase": "paraphrase (other seen templates)",
          "specificity": "specificity (unedited facts)", "score": "score (harmonic mean)",
          "unseen_template": "unseen-template generalisation\n(held-out templates, not in the score)",
          "perplexity_ratio": r"$r_{NF}$: template-word perplexity after / before"}


def scores(tables: dict[str, pd.DataFrame], params: dict):
    """Efficacy, paraphrase, specificity, their harmonic mean, the recall of the edited facts
    through templates never trained on, and r_NF vs the fraction of facts edited, one line per
    editing method (each baseline at the setting chosen on a validation block); error bars: 95%
    bootstrap intervals over facts (the test blocks of a fraction pooled).

    tables: table (editing_summary.summary).
    """
    table = tables["table"]
    fig, axes = style.figure(ncols=len(SCORES), width=3.1, height=3.2)
    colours = style.palette(list(METHOD_LABELS.values()))
    for ax, (column, label) in zip(axes[0], SCORES.items()):
        for offset, (method, label_method) in enumerate(METHOD_LABELS.items()):
            rows = table[table.method == method].sort_values("fraction")
            x = 100 * rows.fraction * (1 + 0.03 * (offset - 1.5))
            if f"{column}_low" in rows:
                errors = np.vstack([rows[column] - rows[f"{column}_low"], rows[f"{column}_high"] - rows[column]])
                ax.errorbar(x, rows[column], yerr=errors, marker="o", ms=4, capsize=2, color=colours[label_method],
                            label=label_method)
            else:
                ax.plot(x, rows[column], marker="o", ms=4, color=colours[label_method], label=label_method)
        if column == "perplexity_ratio":
            style.theory_hline(ax, 1.0, reference=True)
        else:
            ax.set_ylim(-0.03, 1.03)
        ax.set_xscale("log")
        ax.set_xticks(100 * np.sort(table.fraction.unique()), [f"{100 * f:g}" for f in np.sort(table.fraction.unique())])
        ax.set_xticks([], minor=True)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("facts edited (%)")
    style.shared_legend(fig, axes)
    per_fraction = table.drop_duplicates("fraction").sort_values("fraction")
    edited = ", ".join(f"{100 * row.fraction:g}%: {int(row.blocks)} x {int(row.edited_facts) // int(row.blocks)}"
                       for row in per_fraction.itertuples())
    style.caption(fig, f"test blocks x edited facts per fraction ({edited}); each fact's edit sentence a random seen "
                       "template; the paper's summary swaps the names efficacy / specificity")
    return fig


def recall(tables: dict[str, pd.DataFrame], params: dict):
    """Recall of the facts through each template (seen in training or held out) and the router's
    weight on the fact expert at the answer position vs at template-word positions.

    tables: recall (per template), language_model (one row; editing.train).
    """
    per_template, model = tables["recall"], tables["language_model"].iloc[0]
    fig, axes = style.figure(ncols=2, width=5.0, height=3.4)
    colours = style.palette(["seen in training", "held out (paraphrase)"])
    x = np.arange(len(per_template))
    held = per_template.held_out.astype(bool).to_numpy()
    ax = axes[0][0]
    for name, mask in (("seen in training", ~held), ("held out (paraphrase)", held)):
        ax.bar(x[mask], per_template.recall[mask], color=colours[name], label=name)
    style.theory_hline(ax, 0.95, "claim: seen >= 0.95")
    ax.set_xlabel("template")
    ax.set_ylabel("recall of the author (argmax)")
    ax.set_ylim(0, 1.05)
    ax.set_title("fact recall per template")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    ax = axes[0][1]
    ax.plot(x, per_template.fact_weight, marker="o", ms=3, label="answer position (the fact)")
    ax.plot(x, per_template.text_weight, marker="s", ms=3, label="template-word positions")
    ax.set_xlabel("template")
    ax.set_ylabel("router weight w on the fact expert")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("where the router uses the fact expert")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    style.caption(fig, f"{int(model.n_facts)} facts, d = {int(model.dim)}, {int(model.vocabulary)} tokens; fact expert "
                       f"{model.expert_method} (width {int(model.expert_width)}, standalone accuracy "
                       f"{model.expert_standalone_accuracy:.3f}); template-word perplexity {model.perplexity:.2f}")
    return fig


def grid(tables: dict[str, pd.DataFrame], params: dict):
    """Validation score of every hyper-parameter setting of each baseline, per edit fraction: the
    grid the reported setting was chosen from (MEMIT's ridge lambda, AlphaEdit's null-space
    threshold, each at every learning rate and clamp of the target optimisation).

    tables: grid_<fraction> (editing.edit), one per edit fraction.
    """
    table = style.stacked(tables, "grid_")
    fig, axes = style.figure(ncols=2, width=4.4, height=3.4, sharey=True)
    fractions = sorted(table.fraction.unique())
    colours = style.palette([f"{100 * f:g}% edited" for f in fractions])
    for ax, (method, knob, label) in zip(axes[0], (("memit", "ridge", r"MEMIT ridge $\lambda$"),
                                                   ("alphaedit", "threshold", "AlphaEdit null-space threshold"))):
        rows = table[table.method == method].assign(clamp=lambda frame: frame["clamp"].fillna(0) if "clamp" in frame else 0)
        for (fraction, rate, clamp), curve in rows.groupby(["fraction", "target_learning_rate", "clamp"]):
            curve = curve.sort_values(knob)
            ax.plot(curve[knob], curve.score, marker="s" if clamp else "o", ms=3,
                    color=colours[f"{100 * fraction:g}% edited"],
                    linestyle="-" if rate == rows.target_learning_rate.max() else ":",
                    label=f"{100 * fraction:g}% edited")
        rome = table[table.method == "rome"]
        for fraction, best in rome.groupby("fraction").score.max().items():
            ax.axhline(best, color=colours[f"{100 * fraction:g}% edited"], linewidth=0.7, alpha=0.5)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_title(METHOD_LABELS[method])
    axes[0][0].set_ylabel("validation score (harmonic mean)")
    style.shared_legend(fig, axes)
    style.caption(fig, "solid: the largest target learning rate, dotted: the others; squares: residuals clamped, circles: "
                       "not; thin lines: ROME's best; AlphaEdit's null space is empty (no edit) when the preserved keys span the key space")
    return fig


FIGURES = {"scores": scores, "recall": recall, "grid": grid}
