"""The study's metrics, the ones config/claims.yaml checks: the language model's recall and router
weights, MLP swap's margins over the best baseline (efficacy, paraphrase, specificity, the
harmonic-mean score, unseen-template recall; the smallest over the edit fractions, and each
fraction's) with their bootstrap intervals over facts, the harmonic-mean reading, r_NF per method
and the fewest edited facts behind a score. Every metric name is written out literally here, so
`grep` leads from a claim to the code that computes it.
"""

from __future__ import annotations

import pandas as pd

from factstore.editing.margins import Interval, fraction_margins, margin_reading
from factstore.editing.method_table import best_baseline
from factstore.editing.methods import METHOD_ORDER
from factstore.metrics import MetricsTable


def add_margin(metrics: MetricsTable, name: str, per_fraction: dict[float, Interval], what: str) -> None:
    """The smallest margin over the edit fractions (its standard error the bootstrap's at that
    fraction), every fraction's with its 95% interval in the detail."""
    fraction = min(per_fraction, key=lambda key: per_fraction[key].value)
    worst = per_fraction[fraction]
    each = "; ".join(f"{100 * key:g}%: {interval.describe()}" for key, interval in sorted(per_fraction.items()))
    metrics.add(name, worst.value, standard_error=worst.standard_error,
                detail=f"min over edit fractions (at {100 * fraction:g}%) of swap - best baseline, {what}; "
                       f"per fraction with 95% bootstrap intervals over facts: {each}")


def score_reading(fraction: float, margin: Interval, table: pd.DataFrame) -> str:
    """One fraction's harmonic-mean margin, its 95% interval and reading (ahead / tie / behind),
    with MLP swap's and the best baseline's scores and r_NF beside it."""
    swap_row = table[(table["fraction"] == fraction) & (table["method"] == "swap")].iloc[0]
    best = best_baseline(table, fraction)
    return (f"{100 * fraction:g}%: {margin.value:+.4f} [{margin.low:+.4f}, {margin.high:+.4f}] {margin_reading(margin)} "
            f"(swap {swap_row['score']:.4f}, r_NF {swap_row['perplexity_ratio']:.2f}; best baseline {best['method']} "
            f"{best['score']:.4f}, r_NF {best['perplexity_ratio']:.2f})")


def add_score_reading(metrics: MetricsTable, per_fraction: dict[float, Interval], table: pd.DataFrame) -> None:
    """MLP swap is best on the harmonic mean only where the margin's 95% interval lies above 0:
    `swap_score_margin_low`, the interval's lower end, the smallest over the edit fractions (an
    interval that reaches 0 is a tie); and `best_baseline_score`, the best baseline's harmonic
    mean, the largest over the fractions (how much room the baselines leave for MLP swap to be
    better). Each fraction's value is a metric of its own (`_f<percent>`)."""
    fraction = min(per_fraction, key=lambda key: per_fraction[key].low)
    readings = "; ".join(score_reading(key, per_fraction[key], table) for key in sorted(per_fraction))
    metrics.add("swap_score_margin_low", per_fraction[fraction].low,
                detail=f"lower end of the 95% bootstrap interval over facts of swap - best baseline on the harmonic mean, "
                       f"the smallest over the edit fractions (at {100 * fraction:g}%): best where it lies above 0, a "
                       f"tie where the interval reaches 0; per fraction: {readings}")
    best = {key: best_baseline(table, key) for key in per_fraction}
    ceiling = max(best, key=lambda key: best[key]["score"])
    metrics.add("best_baseline_score", float(best[ceiling]["score"]),
                detail=f"the best baseline's harmonic mean of efficacy, paraphrase and specificity, the largest over the "
                       f"edit fractions (at {100 * ceiling:g}%): " + ", ".join(
                           f"{100 * key:g}%: {best[key]['method']} {best[key]['score']:.4f}" for key in sorted(best)))
    for key, margin in per_fraction.items():
        metrics.add(f"swap_score_margin_low_f{100 * key:g}", margin.low,
                    detail=f"at {100 * key:g}% edited: lower end of the 95% bootstrap interval over facts of swap - best "
                           f"baseline on the harmonic mean; {score_reading(key, margin, table)}")
        metrics.add(f"best_baseline_score_f{100 * key:g}", float(best[key]["score"]),
                    detail=f"at {100 * key:g}% edited: the best baseline ({best[key]['method']})'s harmonic mean")


def editing_metrics(language_model: pd.Series, recall: pd.DataFrame, facts: pd.DataFrame, table: pd.DataFrame,
                    seed: int) -> MetricsTable:
    """The claims' metrics from the training's one-row `language_model` table, its per-template
    `recall`, the per-fact outcomes `facts` of every edit job (all fractions stacked) and the
    `method_table` built from them; bootstrap intervals seeded by `seed`."""
    metrics = MetricsTable()
    seen = recall[~recall["held_out"]]
    metrics.add("lm_recall_seen", float(seen["recall"].mean()),
                detail=f"mean over the {len(seen)} seen templates; worst {seen['recall'].min():.3f}")
    metrics.add("lm_recall_held_out", float(recall[recall["held_out"]]["recall"].mean()),
                detail="held-out paraphrase templates, never seen in training: unseen-template generalisation (reported)")
    metrics.add("router_weight_gap", float(language_model["fact_weight"] - language_model["text_weight"]),
                detail=f"router weight on the fact expert at answer positions {language_model['fact_weight']:.3f}"
                        f" minus at template-word positions {language_model['text_weight']:.3f}")
    metrics.add("fact_expert_standalone_accuracy", float(language_model["expert_standalone_accuracy"]),
                detail="the frozen fact expert alone, decoding over the whole vocabulary")
    margins = {fraction: fraction_margins(group, seed) for fraction, group in facts.groupby("fraction")}
    per = {column: {fraction: margins[fraction][column] for fraction in margins}
           for column in ("efficacy", "paraphrase", "specificity", "score", "unseen_template")}
    add_margin(metrics, "swap_efficacy_margin", per["efficacy"], "recall of the new author on its edit sentence")
    add_margin(metrics, "swap_paraphrase_margin", per["paraphrase"],
               "recall of the new author through the other seen templates")
    add_margin(metrics, "swap_specificity_margin", per["specificity"], "recall of the unedited facts (seen templates)")
    add_margin(metrics, "swap_score_margin", per["score"], "harmonic mean of the three")
    add_margin(metrics, "swap_unseen_template_margin", per["unseen_template"],
               "recall of the new author through the held-out templates, never trained on (reported)")
    for column, intervals in per.items():
        for fraction, interval in intervals.items():
            metrics.add(f"swap_{column}_margin_f{100 * fraction:g}", interval.value, standard_error=interval.standard_error,
                        detail=f"at {100 * fraction:g}% edited: swap - best baseline, 95% bootstrap interval over facts "
                               f"[{interval.low:+.3f}, {interval.high:+.3f}]")
    add_score_reading(metrics, per["score"], table)
    for method in METHOD_ORDER:
        ratios = table[table["method"] == method]
        metrics.add(f"perplexity_ratio_{method}", float(ratios["perplexity_ratio"].max()),
                    detail="r_NF (template-word perplexity after / before the edit), the largest over the edit "
                           "fractions: " + ", ".join(f"{100 * f:g}%: {r:.3f}" for f, r in
                                                     zip(ratios["fraction"], ratios["perplexity_ratio"])) + " (reported)")
    metrics.add("edited_facts_min", float(table["edited_facts"].min()),
                detail="the fewest edited facts behind one method's scores at one fraction (test blocks pooled)")
    return metrics
