"""Readings of the dilution study's tables that its claims check: the BERT testability metrics
and the per-subset tolerance differences from the pruning tables, and the trend statistic of a
max-dilution sweep.

Each function takes the pruning tables as the prune_bert step writes them (one row per subset,
group and rate: apt, apt_unpruned, drop_standard_error, ...) or plain arrays, and returns values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.dilution.pruning import max_dilution, max_dilution_interval
from factstore.statistics import spearman


def _in_standard_errors(difference: pd.Series, standard_error: pd.Series) -> pd.Series:
    """difference / standard_error; a zero difference with a zero standard error (identical
    predictions) is 0 standard errors, a nonzero one is +-inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = difference / standard_error
    return ratio.where(difference != 0, 0.0)


def bert_gate_metrics(curves: pd.DataFrame) -> list[tuple[str, float, str, float | None]]:
    """The BERT testability metrics, (name, value, detail, standard error), from the pruning tables:

    bert_apt_margin_se: min over subsets of (unpruned APT - most-frequent-token APT) / its paired SE;
    bert_apt_standard_error: max over subsets of the unpruned APT's binomial SE;
    bert_removal_drop_se: min over subsets of (unpruned APT - APT with the later blocks pruned at
    rate 1.0) / its paired SE (NaN when the sweep stops short of 1.0);
    bert_first_block_removal_drop_se: the same for the first block;
    and bert_apt_unpruned_<subset>, reported with its SE.
    """
    rows, unpruned = [], curves[curves.rate == 0].groupby("subset").first()
    for subset, row in unpruned.iterrows():
        rows.append((f"bert_apt_unpruned_{subset}", row.apt_unpruned,
                     f"accuracy per masked token over {row.masked_tokens} held-out tokens; most frequent token {row.most_frequent_apt:.4f}",
                     row.apt_standard_error))
    margin = _in_standard_errors(unpruned.apt_unpruned - unpruned.most_frequent_apt, unpruned.margin_standard_error)
    rows.append(("bert_apt_margin_se", margin.min(), f"per subset {margin.round(2).to_dict()}", None))
    rows.append(("bert_apt_standard_error", unpruned.apt_standard_error.max(), f"per subset {unpruned.apt_standard_error.round(4).to_dict()}", None))
    for name, group, words in (("bert_removal_drop_se", "later_blocks", "the later blocks"),
                               ("bert_first_block_removal_drop_se", "first_block", "the first block")):
        drop, removed_apt = _removal_drop_se(curves, group, unpruned.index)
        rows.append((name, drop.min(skipna=False),
                     f"per subset {drop.round(2).to_dict()}; APT with {words} removed {removed_apt.round(4).to_dict()}", None))
    return rows


def _removal_drop_se(curves: pd.DataFrame, group: str, subsets: pd.Index) -> tuple[pd.Series, pd.Series]:
    """Per subset: (unpruned APT - APT with `group` pruned at rate 1.0) / its paired SE, and that
    APT; NaN for a subset whose sweep of the group stops short of 1.0."""
    removed = curves[(curves.group == group) & (curves.rate == 1.0)].set_index("subset")
    drop = _in_standard_errors(removed.apt_unpruned - removed.apt, removed.drop_standard_error).reindex(subsets)
    return drop, removed.apt


# group -> (its words, the metrics of its per-subset reading: lower end at 1 SE, at 2 SE, plain grid difference)
TOLERANCE_GROUPS = {
    "qkv": ("Q/K/V", "bert_later_minus_qkv_max_pruning_lower", "bert_later_minus_qkv_max_pruning_lower_2se",
            "bert_later_minus_qkv_max_pruning_subset_min"),
    "first_block": ("first block", "bert_later_minus_first_block_max_pruning_lower",
                    "bert_later_minus_first_block_max_pruning_lower_2se", "bert_later_minus_first_block_max_pruning_subset_min"),
}


def _group_curve(curves: pd.DataFrame, subset: str, group: str) -> pd.DataFrame:
    """One subset's pruning curve of one group, by rate: rate, apt, drop_standard_error, apt_unpruned."""
    curve = curves[(curves.subset == subset) & (curves.group == group)]
    return curve.groupby("rate", as_index=False)[["apt", "drop_standard_error", "apt_unpruned"]].mean()


def tolerance_difference_bounds(curves: pd.DataFrame, tolerance: float, group: str, width: float) -> dict[str, float]:
    """{subset: lower end of (later blocks' max pruning - `group`'s)}: the later blocks' max
    pruning read with each APT `width` paired SE of its drop lower, the group's with each APT
    `width` SE higher (pruning.max_dilution_interval); width 0 is the plain grid difference."""
    bounds = {}
    for subset in sorted(curves.subset.unique()):
        ends = []
        for name, side in (("later_blocks", 0), (group, 1)):
            curve = _group_curve(curves, subset, name)
            baseline = float(curve.apt_unpruned.iloc[0])
            interval = max_dilution_interval(curve.rate.to_numpy(), curve.apt.to_numpy(), curve.drop_standard_error.to_numpy(),
                                             baseline, tolerance, width)
            ends.append(interval[side])
        bounds[subset] = ends[0] - ends[1]
    return bounds


def _deficit_at_later_max(curves: pd.DataFrame, tolerance: float, group: str) -> dict[str, str]:
    """{subset: 'APT(later) - APT(group) at the later blocks' max pruning, over the sum of the two
    drops' paired SE'}: the sum bounds the pair's own paired SE from above (triangle inequality of
    standard deviations), so the ratio is conservative; reported in the check metric's detail."""
    deficits = {}
    for subset in sorted(curves.subset.unique()):
        later, other = _group_curve(curves, subset, "later_blocks"), _group_curve(curves, subset, group)
        rate = max_dilution(later.rate.to_numpy(), later.apt.to_numpy(), float(later.apt_unpruned.iloc[0]), tolerance)
        a, b = later[later.rate == rate].iloc[0], other[other.rate == rate]
        if b.empty:
            deficits[subset] = f"rate {rate:g} not swept for {group}"
            continue
        difference = a.apt - b.apt.iloc[0]
        ratio = _in_standard_errors(pd.Series([difference]), pd.Series([a.drop_standard_error + b.drop_standard_error.iloc[0]]))[0]
        deficits[subset] = f"at rate {rate:g}: {difference:+.4f} APT = {ratio:+.2f} SE (bound)"
    return deficits


def bert_tolerance_metrics(curves: pd.DataFrame, tolerance: float) -> list[tuple[str, float, str]]:
    """The per-subset readings of 'Q/K/V and the first block tolerate less', (name, value, detail):

    bert_later_minus_<group>_max_pruning_lower: min over subsets of the lower end of (later blocks'
    max pruning - the group's), each end read one paired SE of its APT drop away (the check);
    ..._lower_2se: the same two SE away; ..._subset_min: min over subsets of the plain grid
    difference (both alternatives of the check's reading).
    """
    rows = []
    for group, (words, lower, lower_2se, subset_min) in TOLERANCE_GROUPS.items():
        if group not in set(curves.group) or "later_blocks" not in set(curves.group):
            continue
        plain, one, two = (tolerance_difference_bounds(curves, tolerance, group, width) for width in (0.0, 1.0, 2.0))
        deficits = _deficit_at_later_max(curves, tolerance, group)
        rows.append((lower, min(one.values()),
                     f"later blocks minus {words}, lower end at 1 SE per subset {_rounded(one)} (at 0 SE {_rounded(plain)}); "
                     f"APT later minus {words} {deficits}"))
        rows.append((lower_2se, min(two.values()), f"lower end at 2 SE per subset {_rounded(two)}"))
        rows.append((subset_min, min(plain.values()), f"grid difference per subset {_rounded(plain)}"))
    return rows


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {key: round(value, 4) for key, value in values.items()}


def abs_trend_spearman(x, y) -> float:
    """|Spearman(x, y)| of a trend check: 0 when y is constant (no trend at all), NaN with fewer
    than 3 points or a constant x (nothing to rank)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        return float("nan")
    return 0.0 if np.ptp(y) == 0 else abs(float(spearman(x, y)))
