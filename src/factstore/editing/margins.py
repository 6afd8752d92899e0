"""How much better MLP swap edits than the best baseline, with a bootstrap confidence interval over facts.

The per-fact outcomes of every method on the SAME edited facts (factstore.editing.protocol:
fact_outcomes) are paired: a resample draws facts, and every method is scored on the drawn
facts. Efficacy, paraphrase and unseen-template recall are means over the edited facts;
specificity is a mean over the unedited ones; the harmonic-mean score needs both, so its
resample draws edited and unedited facts independently (scipy.stats.bootstrap with two
samples). Percentile intervals: the outcomes are 0/1 or means of a few 0/1, and BCa is
undefined when every resample gives the same value (e.g. efficacy 1 for every method).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import bootstrap, hmean

from factstore.editing.methods import METHOD_ORDER


@dataclass(frozen=True)
class Interval:
    """A statistic, its bootstrap confidence interval [low, high] and standard error."""

    value: float
    low: float
    high: float
    standard_error: float

    def describe(self) -> str:
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def margin_reading(margin: Interval) -> str:
    """How a margin (swap - best baseline) reads: 'ahead' when its whole interval lies above 0,
    'behind' when it lies below 0, else 'tie' (an interval that reaches 0 does not separate the
    methods, whatever the sign of the point value)."""
    if margin.low > 0:
        return "ahead"
    if margin.high < 0:
        return "behind"
    return "tie"


def swap_margin(scores: np.ndarray) -> float:
    """scores (M,), column 0 MLP swap's and the others the baselines': swap - the best baseline."""
    return float(scores[0] - np.max(scores[1:]))


def harmonic_score(efficacy: np.ndarray, paraphrase: np.ndarray, specificity: np.ndarray) -> np.ndarray:
    """(M,) the harmonic mean of three (M,) scores, 0 where one of them is 0 (as the edit's score)."""
    stacked = np.stack([efficacy, paraphrase, specificity])
    return np.where(stacked.min(axis=0) > 0, hmean(np.clip(stacked, 1e-300, None), axis=0), 0.0)


def bootstrap_interval(statistic: Callable[..., float], samples: tuple[np.ndarray, ...], seed: int,
                       confidence: float = 0.95, n_resamples: int = 2000) -> Interval:
    """`statistic(*samples)` with its percentile bootstrap interval: each sample (n_k, ...) is
    resampled along its first axis (rows are facts), independently of the other samples."""
    indices = tuple(np.arange(len(sample)) for sample in samples)

    def on_rows(*rows: np.ndarray) -> float:
        return statistic(*(sample[row] for sample, row in zip(samples, rows, strict=True)))

    result = bootstrap(indices, on_rows, vectorized=False, paired=False, n_resamples=n_resamples,
                       confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    return Interval(statistic(*samples), float(result.confidence_interval.low),
                    float(result.confidence_interval.high), float(result.standard_error))


def mean_margin(outcomes: np.ndarray, seed: int) -> Interval:
    """outcomes (n_facts, M) one score per fact and method (column 0 MLP swap): the margin of the
    means, swap - best baseline, resampling facts."""
    return bootstrap_interval(lambda rows: swap_margin(rows.mean(axis=0)), (outcomes,), seed)


def score_margin(edited: np.ndarray, unedited: np.ndarray, seed: int) -> Interval:
    """edited (n, 2, M): efficacy and paraphrase per edited fact and method; unedited (u, M):
    specificity per unedited fact: the margin of the harmonic-mean scores, resampling both."""
    def statistic(edited_rows: np.ndarray, unedited_rows: np.ndarray) -> float:
        means = edited_rows.mean(axis=0)
        return swap_margin(harmonic_score(means[0], means[1], unedited_rows.mean(axis=0)))

    return bootstrap_interval(statistic, (edited, unedited), seed)


def mean_interval(values: np.ndarray, seed: int) -> Interval:
    """values (n,): their mean with a percentile bootstrap interval (the figure's error bars)."""
    return bootstrap_interval(lambda rows: float(rows.mean()), (values,), seed)


def by_method(frame: pd.DataFrame, column: str) -> np.ndarray:
    """(n, M) the column's per-fact values, one row per (block, fact) with a value, the methods in
    METHOD_ORDER (MLP swap first): the paired sample of the margins' bootstrap."""
    return frame.pivot_table(index=["block", "fact"], columns="method", values=column)[list(METHOD_ORDER)].to_numpy()


def fraction_margins(facts: pd.DataFrame, seed: int) -> dict[str, Interval]:
    """At one edit fraction (its test blocks pooled): swap - best baseline on efficacy, paraphrase,
    unseen_template, specificity (means over facts) and the harmonic-mean score, each with its
    bootstrap interval over facts."""
    edited, unedited = facts[facts["edited"].astype(bool)], facts[~facts["edited"].astype(bool)]
    margins = {column: mean_margin(by_method(edited, column), seed)
               for column in ("efficacy", "paraphrase", "unseen_template")}
    margins["specificity"] = mean_margin(by_method(unedited, "specificity"), seed)
    margins["score"] = score_margin(np.stack([by_method(edited, "efficacy"), by_method(edited, "paraphrase")], axis=1),
                                    by_method(unedited, "specificity"), seed)
    return margins
