"""The usability claims' declared alternatives that the summary's tables answer (config/claims.yaml):
each checked metric recomputed under one declared departure from the run's reading, named
<metric>_<alternative>, and `beside`, which places each right after the metric it is the
alternative of, so the claims report reads the check again, same range (factstore.robustness).

The alternatives: the capacity gain's readings where a row does not store within the width cap
(`capacity_gain_alternatives`); the trade-off at the standalone host or over every family
(`trade_off_alternatives`); the Lipschitz threshold with another estimate, location, pool,
cut-offs or host sizes (`lipschitz_alternatives`). Tables are the whitening and capacity steps'
(factstore.usability.summary names their columns).
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.usability import summary as measures

ALTERNATIVE_STORING, ALTERNATIVE_USABLE = 1.0, 0.95
"""The declared alternative cut-offs of S0.lipschitz-threshold: storing = the swapped MLP recalls
every fact on its own (the whitening MLPs' own target); usable = max fact-adaptive accuracy >= 0.95."""


# S0.lipschitz-threshold's checked metric -> its name under each declared alternative the tables answer.
UNNORMALISED = {"lipschitz_usable_fraction_above": "lipschitz_usable_fraction_above_unnormalised",
                "lipschitz_fraction_below_threshold": "lipschitz_fraction_below_threshold_unnormalised",
                "lipschitz_logistic_slope": "lipschitz_logistic_slope_unnormalised"}
ONE_THRESHOLD = {"lipschitz_usable_fraction_above": "lipschitz_usable_fraction_above_one_threshold",
                 "lipschitz_fraction_below_threshold": "lipschitz_fraction_below_threshold_one_threshold"}
WITH_PROBES = {"lipschitz_usable_fraction_above": "lipschitz_usable_fraction_above_with_probes",
               "lipschitz_fraction_below_threshold": "lipschitz_fraction_below_threshold_with_probes",
               "lipschitz_logistic_slope": "lipschitz_logistic_slope_with_probes"}
ONE_HOST = {"lipschitz_usable_fraction_above": "lipschitz_usable_fraction_above_one_host",
            "lipschitz_fraction_below_threshold": "lipschitz_fraction_below_threshold_one_host",
            "lipschitz_logistic_slope": "lipschitz_logistic_slope_one_host"}
CUT_OFFS = {"lipschitz_usable_fraction_above": "lipschitz_usable_fraction_above_all_stored_usable95",
            "lipschitz_fraction_below_threshold": "lipschitz_fraction_below_threshold_all_stored_usable95",
            "lipschitz_logistic_slope": "lipschitz_logistic_slope_all_stored_usable95"}


def beside(metrics: list[measures.Metric], alternatives: list[tuple[str, measures.Metric]]) -> list[measures.Metric]:
    """`metrics` in their order, each followed by its alternatives ((name of the metric it is the
    alternative of, metric) pairs, in their order); an alternative whose metric is absent last."""
    placed, names = [], {metric[0] for metric in metrics}
    for metric in metrics:
        placed += [metric] + [alternative for of, alternative in alternatives if of == metric[0]]
    return placed + [alternative for of, alternative in alternatives if of not in names]


def capacity_gain_readings(rows: pd.DataFrame, moderate_alphas: list[float]) -> pd.DataFrame:
    """Per seed (index replicate), the capacity gain of one (kind, method)'s whitening rows under
    the run's reading and the two declared alternatives of S0.whitening-tradeoff's choice "capacity
    gain where a row does not store within the width cap":

    - gain: the run's reading (measures.capacity_gains);
    - exact: the exact F / W ratio of the worse moderate alpha over alpha = 0, NaN where alpha = 0
      or a moderate alpha does not store within the cap (the pre-result reading);
    - bound: the certified lower bound only, NaN where neither stores (the 2026-12-02 reading;
      0 where only alpha = 0 stores, as the run's reading).
    Where every row stores the three agree; they differ only in the cases the cap leaves open."""
    rows = rows.assign(stored=rows.stored.astype(bool))
    gain = measures.capacity_gains(rows, moderate_alphas)
    zero_stored = rows[rows.alpha == 0.0].groupby("replicate").stored.all().reindex(gain.index)
    moderate_stored = rows[rows.alpha.isin(moderate_alphas)].groupby("replicate").stored.all().reindex(gain.index)
    return pd.DataFrame({"gain": gain, "exact": gain.where(zero_stored & moderate_stored),
                         "bound": gain.where(zero_stored | moderate_stored)})


def _least_seed_mean(per_family: list[pd.Series]) -> tuple[float, float]:
    """(min over families of the seed mean, its standard error over seeds), as the run's gain
    metric reads it: NaN when there is no family, or a family's mean is NaN (a NaN seed)."""
    means = [(float(seeds.mean(skipna=False)), measures.standard_error(seeds)) for seeds in per_family]
    if not means or any(math.isnan(value) for value, _ in means):
        return math.nan, math.nan
    return min(means, key=lambda pair: pair[0])


def capacity_gain_alternatives(table: pd.DataFrame) -> list[tuple[str, measures.Metric]]:
    """whitening_moderate_capacity_gain_min under its declared alternative readings, over the
    families whitening_metrics reads (measures.verdict_families of the verdict's host): the same
    min over families of the seed mean, only the per-seed reading differs."""
    if table.empty:
        return []
    exact, bound, worse = [], [], []
    for _, _, rows, present in measures.verdict_families(measures.hosted(table, measures.VERDICT_HOST)):
        readings = capacity_gain_readings(rows, present)
        exact.append(readings.exact)
        bound.append(readings.bound)
        worse.append(measures.capacity_gains(rows, present, reduce="min"))
    (exact_min, exact_error), (bound_min, bound_error) = _least_seed_mean(exact), _least_seed_mean(bound)
    worse_min, worse_error = _least_seed_mean(worse)
    return [
        ("whitening_moderate_capacity_gain_min", (
            "whitening_moderate_capacity_gain_min_exact", exact_min,
            "alternative of whitening_moderate_capacity_gain_min (the pre-result reading): min over (kind, method) of "
            "the seed mean of the exact F / W ratio of the moderate alphas over alpha = 0, NaN where either does "
            "not store within the width cap", exact_error)),
        ("whitening_moderate_capacity_gain_min", (
            "whitening_moderate_capacity_gain_min_bound", bound_min,
            "alternative of whitening_moderate_capacity_gain_min (the earlier reading): the certified lower bound "
            "only, as the run's reading where alpha = 0 or every moderate alpha stores within the width cap, NaN where "
            "neither stores", bound_error)),
        ("whitening_moderate_capacity_gain_min", (
            "whitening_moderate_capacity_gain_min_worse", worse_min,
            "alternative of whitening_moderate_capacity_gain_min (the earlier reading): per seed the worse moderate "
            "alpha's gain, not the moderate alphas' mean", worse_error)),
    ]


TRADE_OFF = {"vs_control": "whitening_moderate_vs_control_min", "drop": "whitening_full_drop_min",
             "gain": "whitening_moderate_capacity_gain_min"}
"""S0.whitening-tradeoff's checked metrics by their measures.trade_off reading."""


def trade_off_alternatives(table: pd.DataFrame) -> list[tuple[str, measures.Metric]]:
    """S0.whitening-tradeoff's checked metrics under two declared alternatives the whitening tables
    answer: the MLPs hosted at their standalone size (host 'standalone', the earlier host; NaN
    where no kind ran it), and every family judged, a control whose MLPs do not store included."""
    if table.empty:
        return []
    readings = {"standalone_host": (measures.trade_off_least(table, host="standalone"),
                                    "alternative host: the MLPs at their standalone size (1x), whose swapped MLP need "
                                    "not store its own facts; the same families"),
                "all_kinds": (measures.trade_off_least(table, judged_only=False),
                              "alternative families: every (kind, method) judged, also where the alpha = 0 MLPs do not "
                              "store every fact at the width cap")}
    return [(name, (f"{name}_{suffix}", read[key][0], f"{reading}; {name} under it", read[key][1]))
            for suffix, (read, reading) in readings.items() for key, name in TRADE_OFF.items()]


def _renamed(metrics: list[measures.Metric], names: dict[str, str], reading: str) -> list[tuple[str, measures.Metric]]:
    """(run's name, metric under its alternative name) for each metric `names` maps, its detail
    led by the alternative's `reading`."""
    found = {name: (value, detail, error) for name, value, detail, error in metrics}
    return [(name, (alternative, found[name][0], f"{reading}; {found[name][1]}", found[name][2]))
            for name, alternative in names.items()]


def lipschitz_alternatives(whitening_table: pd.DataFrame, mlps: pd.DataFrame, target: float,
                           column: str) -> list[tuple[str, measures.Metric]]:
    """S0.lipschitz-threshold's checked metrics under its declared alternatives that the tables
    answer, each one departure from the run's reading (measures.lipschitz_metrics):

    - Lipschitz estimate: the tangent-space Jacobian's norm without dividing by the RMS output
      norm (the `lipschitz` column);
    - threshold location: one threshold over the storing whitening MLPs pooled, not one per
      (kind, method) family (the logistic slope is pooled either way: unchanged);
    - pool: the capacity probes' MLPs (their own (kind, method) families) with the whitening MLPs;
    - cut-offs: storing = recalls every fact on its own, usable = max fact-adaptive accuracy >= 0.95;
    - sizes: only the verdict's host (one MLP size per alpha and seed), not every host the step ran.
    """
    if whitening_table.empty:
        return []
    unnormalised = measures.lipschitz_metrics(whitening_table, target, "lipschitz")
    one_threshold = measures.lipschitz_metrics(whitening_table.assign(kind="all", method="all"), target, column)
    with_probes = measures.lipschitz_metrics(mlps, target, column)
    one_host = measures.lipschitz_metrics(measures.hosted(whitening_table, measures.VERDICT_HOST), target, column)
    strict = whitening_table[whitening_table.standalone_swapped >= ALTERNATIVE_STORING]
    cut_offs = measures.lipschitz_metrics(strict, ALTERNATIVE_USABLE, column)
    return (_renamed(unnormalised, UNNORMALISED, "alternative Lipschitz estimate: lipschitz, not divided by the RMS "
                     "output norm")
            + _renamed(one_threshold, ONE_THRESHOLD, "alternative location: one threshold over every storing "
                       "whitening MLP pooled (kind and method 'all')")
            + _renamed(with_probes, WITH_PROBES, "alternative pool: the capacity probes' MLPs (kind 'spherical', a "
                       "family per method) with the whitening MLPs")
            + _renamed(cut_offs, CUT_OFFS, f"alternative cut-offs: storing = standalone_swapped >= "
                       f"{ALTERNATIVE_STORING:g} (every fact), usable = max fact-adaptive accuracy >= {ALTERNATIVE_USABLE:g}")
            + _renamed(one_host, ONE_HOST, f"alternative sizes: only the {measures.VERDICT_HOST} host's MLPs, one "
                       "size per (alpha, seed)"))
