"""The usability study's measurements: tables in, (name, value, detail, standard error) out.

Every value that is a mean over seeds carries its standard error over seeds (std / sqrt(n),
ddof 1); a fraction over n cases carries the binomial sqrt(p (1 - p) / n); a max or min over
settings carries the standard error of the setting it picked. The claims report compares a
value's distance to its bound with this spread (factstore.claims).

- usable capacity (S0.usable): the usable-over-standalone ratio over the CONSTRUCTIONS (NTK,
  encoder-decoder), the claim's subject; GD's beside it, not checked.
- whitening (S0.whitening-tradeoff): the maximum fact-adaptive accuracy (the paper's criterion)
  and standalone F / W along alpha, per embedding kind and method.
- Lipschitz threshold (S0.lipschitz-threshold): located within each method's whitening family
  (the paper's Fig. 8b reads the MLPs of Fig. 8a), then pooled (threshold.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.statistics import binomial_standard_error, spearman
from factstore.usability import threshold

CONSTRUCTIONS = ("ntk", "ntk_ustar", "ed_gated", "ed_plain", "ed_gated_v")
"""The constructed MLPs (every other method, gd_*, is trained)."""
MODERATE_ALPHAS = (0.1, 0.2)
Metric = tuple[str, float, str, float]


def standard_error(values) -> float:
    """std / sqrt(n) with ddof 1 (NaN for fewer than two finite values)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan


def usable_table(capacity_table: pd.DataFrame, standalone: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per (method, d, F): seed-mean usable and standalone parameter counts and their ratio, with
    the ratio's standard error over seeds (usable_params of each seed / the standalone mean).
    standalone: the fact-storing-MLP study's rows of the usability study's NTK degree (the caller
    selects them, mlp.results.of_degree). usable_params (and the ratio) NaN unless a usable size
    was found in every seed; standalone NaN unless every standalone seed stored."""
    rows = standalone[np.isclose(standalone.target, target)]
    reference = rows.groupby(["method", "d", "F"]).agg(standalone_params=("n_params", "mean"),
                                                       standalone_stored=("stored", "all")).reset_index()
    reference.loc[~reference.standalone_stored, "standalone_params"] = math.nan
    table = capacity_table.merge(reference, on=["method", "d", "F"], how="left", suffixes=("_guess", ""))
    table["ratio"] = table.usable_params / table.standalone_params
    grouped = table.groupby(["method", "d", "F"]).agg(
        usable_params=("usable_params", "mean"), found=("found", "all"), seeds=("replicate", "nunique"),
        best_fact_adaptive=("best_fact_adaptive", "mean"), standalone_params=("standalone_params", "first"),
        usable_over_standalone_se=("ratio", standard_error)).reset_index()
    grouped.loc[~grouped.found, "usable_params"] = math.nan
    grouped["usable_over_standalone"] = grouped.usable_params / grouped.standalone_params
    return grouped


def _ratio_max(usable: pd.DataFrame) -> tuple[float, float]:
    """(max ratio, its standard error); inf when some (method, F) has no ratio (not found in every
    seed, or no stored standalone W): no usable size within the cap counts against the claim."""
    if usable.empty:
        return math.nan, math.nan
    if usable.usable_over_standalone.isna().any():
        return math.inf, math.nan
    row = usable.loc[usable.usable_over_standalone.idxmax()]
    return float(row.usable_over_standalone), float(row.usable_over_standalone_se)


def usable_metrics(capacity_table: pd.DataFrame, usable: pd.DataFrame, probes: pd.DataFrame,
                   target: float) -> list[Metric]:
    if capacity_table.empty:
        return []
    built = capacity_table.method.isin(CONSTRUCTIONS)
    setting = (f"d = {int(capacity_table.d.iloc[0])}, F in {sorted(int(f) for f in capacity_table.F.unique())}, "
               f"{capacity_table.replicate.nunique()} seeds, usable: max fact-adaptive accuracy over training >= {target:g}")
    ratios = ", ".join(f"{r.method} F {r.F}: {r.usable_over_standalone:.3g}" for r in usable.itertuples())
    found, found_gd = capacity_table[built].found.mean(), capacity_table[~built].found.mean()
    ratio, ratio_error = _ratio_max(usable[usable.method.isin(CONSTRUCTIONS)])
    ratio_gd, ratio_gd_error = _ratio_max(usable[~usable.method.isin(CONSTRUCTIONS)])
    attending = (probes.attention_on_key >= 0.5).mean()
    return [
        ("usable_found_fraction", found, f"fraction of (construction, F, seed) where some size up to the cap is usable; "
         f"constructions {sorted(capacity_table[built].method.unique())}; {setting}", binomial_standard_error(found, int(built.sum()))),
        ("usable_found_fraction_gd", found_gd, f"the same for the trained MLPs (GD), beside the claim; {setting}",
         binomial_standard_error(found_gd, int((~built).sum()))),
        ("usable_over_standalone_max", ratio, "max over (construction, F) of seed-mean usable W / seed-mean standalone W "
         f"(inf if a usable size was not found in every seed): {ratios}", ratio_error),
        ("usable_over_standalone_max_gd", ratio_gd, "the same for GD, beside the claim", ratio_gd_error),
        ("usable_over_standalone_median", usable.usable_over_standalone.median(),
         "median of the ratio over every (method, F) where it exists", math.nan),
        ("best_fact_adaptive_min", capacity_table.best_fact_adaptive.min(),
         "min over (method, F, seed) of the best fact-adaptive accuracy any probed size reached", math.nan),
        ("memorisation_gap_max", (probes.plain_recall - probes.fact_adaptive).max(),
         "max over probes of plain recall - final fact-adaptive accuracy (large: facts memorised around the MLP)", math.nan),
        ("attention_on_key_median", probes.attention_on_key.median(),
         "median over probes of the attention weight the query puts on the key after training", math.nan),
        ("attending_fraction", attending, "fraction of probes whose attention on the key is >= 0.5 after training "
         "(restarts included)", binomial_standard_error(attending, len(probes))),
        ("restarts_total", float(probes.restarts.sum()), f"restarts over {len(probes)} probes (attention on the key "
         "< 0.5 after the restart window)", math.nan),
    ]


def _per_setting(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Seed mean and standard error of `column` per (kind, method, alpha)."""
    return table.groupby(["kind", "method", "alpha"])[column].agg(["mean", standard_error]).rename(
        columns={"standard_error": "se"})


def _least(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The (value, standard error) pair of least value; NaN when there is none or any value is NaN."""
    if not pairs or any(math.isnan(value) for value, _ in pairs):
        return math.nan, math.nan
    return min(pairs, key=lambda pair: pair[0])


def capacity_gains(rows: pd.DataFrame, moderate_alphas: list[float]) -> pd.Series:
    """Per seed: the standalone capacity gain of whitening, the worse moderate alpha's over alpha = 0's.

    rows: one (kind, method)'s whitening rows (replicate, alpha, F, n_params, stored,
    standalone_trained). A stored row's F / n_params is its capacity per parameter; a row that did
    not store within the width cap has n_params at the largest width searched. Per seed:
    - every moderate alpha stores: the worse one's F / W over alpha = 0's, exact where alpha = 0
      stores; where it does not, its F / W at the cap bounds it from ABOVE, so the ratio is a
      certified lower bound on the gain;
    - a moderate alpha does not store but alpha = 0 does: 0 (it has less capacity);
    - neither stores: both MLPs are at the cap's width, so the gain is read at that fixed width
      budget (as S0.ntk-anisotropy-breaks reads the anisotropy break), the facts each recalls there on its own per
      parameter (standalone_trained x F / n_params), the worse non-storing moderate alpha's over
      alpha = 0's. On the real MiniLM keys the degree-2 NTK stores neither alpha = 0 nor, for one
      seed, alpha = 0.1 at any width up to 2^18 (docs/methods/usability.md), so no width cap
      makes the first reading a number there.
    Returns a Series indexed by replicate."""
    rows = rows.assign(stored=rows.stored.astype(bool), per_parameter=rows.F / rows.n_params,
                       recalled_per_parameter=rows.standalone_trained * rows.F / rows.n_params)
    gains = {}
    for replicate, seed in rows.groupby("replicate"):
        at_zero = seed[seed.alpha == 0.0].iloc[0]
        moderate = seed[seed.alpha.isin(moderate_alphas)]
        not_stored = moderate[~moderate.stored]
        if not_stored.empty:
            gains[replicate] = moderate.per_parameter.min() / at_zero.per_parameter
        elif at_zero.stored:
            gains[replicate] = 0.0
        else:
            gains[replicate] = not_stored.recalled_per_parameter.min() / at_zero.recalled_per_parameter
    return pd.Series(gains, dtype=float)


def whitening_metrics(table: pd.DataFrame) -> list[Metric]:
    if table.empty:
        return []
    accuracy, capacity = _per_setting(table, "fact_adaptive_max"), _per_setting(table, "facts_per_parameter")
    moderate, drops, gains = [], [], []
    for (kind, method), group in accuracy.groupby(level=["kind", "method"]):
        group = group.droplevel(["kind", "method"])
        present = [alpha for alpha in MODERATE_ALPHAS if alpha in group.index]
        if not present or 1.0 not in group.index or 0.0 not in group.index:
            continue
        worst = group.loc[present, "mean"].idxmin()
        moderate.append((group.loc[worst, "mean"], group.loc[worst, "se"]))
        drops.append((group.loc[worst, "mean"] - group.loc[1.0, "mean"], math.hypot(group.loc[worst, "se"], group.loc[1.0, "se"])))
        paired = capacity_gains(table[(table.kind == kind) & (table.method == method)], present)
        gains.append((float(paired.mean(skipna=False)), standard_error(paired)))
    setting = (f"{sorted(table.kind.unique())} embeddings, methods {sorted(table.method.unique())}, alpha in "
               f"{sorted(float(a) for a in table.alpha.unique())}, value fold {sorted(table.value_fold.unique())}, "
               f"mean over {table.replicate.nunique()} seeds of the max fact-adaptive accuracy over training")

    (accuracy_min, accuracy_error), (drop, drop_error), (gain, gain_error) = map(_least, (moderate, drops, gains))
    metrics = [
        ("whitening_moderate_accuracy_min", accuracy_min,
         f"min over (kind, method, alpha in {MODERATE_ALPHAS}) of the mean max fact-adaptive accuracy; {setting}",
         accuracy_error),
        ("whitening_full_drop_min", drop,
         "min over (kind, method) of [worse moderate alpha's accuracy - accuracy at alpha = 1]", drop_error),
        ("whitening_moderate_capacity_gain_min", gain,
         "min over (kind, method) of the seed mean of the standalone capacity gain, the worse moderate alpha's F / W over "
         "alpha = 0's (exact where alpha = 0 stores; a certified lower bound where only the moderate alpha stores within "
         "the width cap, alpha = 0's F / W at the cap bounding it from above; 0 where only alpha = 0 stores; where "
         "neither stores, the ratio of the facts each recalls on its own per parameter at the cap's width)",
         gain_error),
    ]
    for (kind, method, alpha), row in accuracy.iterrows():
        metrics.append((f"whitening_fact_adaptive_{kind}_{method}_a{alpha:g}", row["mean"], setting, row["se"]))
    for (kind, method, alpha), row in capacity.iterrows():
        metrics.append((f"whitening_facts_per_parameter_{kind}_{method}_a{alpha:g}", row["mean"],
                        "standalone F / W (0 where not stored)", row["se"]))
    return metrics


def lipschitz_metrics(table: pd.DataFrame, target: float, column: str) -> list[Metric]:
    """The threshold within each (kind, method) whitening family over its MLPs that store >=
    target of their facts on their own (folded), then pooled over families."""
    names = ("lipschitz_threshold", "lipschitz_usable_fraction_above", "lipschitz_fraction_below_threshold",
             "lipschitz_logistic_slope", "lipschitz_logistic_threshold", "lipschitz_spearman")
    storing = table[(table.standalone_swapped >= target) & table[column].notna()] if len(table) else table
    detail = (f"{column} (tangent-space Jacobian at the keys) of the swapped MLP vs its max fact-adaptive accuracy, "
              f"over the {len(storing)} MLPs of the whitening experiment that store >= {target:g} of their facts")
    if len(storing) < 2:
        return [(name, math.nan, detail + " (too few)", math.nan) for name in names]
    limits, above, below, usable_above = [], 0, 0, 0
    for (kind, method), family in storing.groupby(["kind", "method"]):
        lipschitz, accuracy = family[column].to_numpy(float), family.fact_adaptive_max.to_numpy(float)
        limit = threshold.smallest_failing(lipschitz, accuracy, target)
        limits.append(f"{kind} {method}: {limit:.3g}")
        above += int((lipschitz >= limit).sum())
        usable_above += int(((lipschitz >= limit) & (accuracy >= target)).sum())
        below += int((lipschitz < limit).sum())
    finite = [float(item.split(": ")[1]) for item in limits if math.isfinite(float(item.split(": ")[1]))]
    lipschitz, accuracy = storing[column].to_numpy(float), storing.fact_adaptive_max.to_numpy(float)
    fit = threshold.logistic_fit(lipschitz, accuracy >= target)
    fraction_above = usable_above / above if above else math.nan
    fraction_below = below / len(storing)
    return [
        ("lipschitz_threshold", min(finite, default=math.inf), "smallest per-family threshold (smallest L of a storing "
         f"MLP that is not usable, per kind and method: {'; '.join(limits)}); {detail}", math.nan),
        ("lipschitz_usable_fraction_above", fraction_above, "fraction usable among the MLPs at or above their family's "
         "threshold, pooled over families (NaN: no MLP failed)", binomial_standard_error(fraction_above, above)),
        ("lipschitz_fraction_below_threshold", fraction_below, "fraction of the storing MLPs below their family's "
         "threshold (usable by construction; a family where none fails is all below)",
         binomial_standard_error(fraction_below, len(storing))),
        ("lipschitz_logistic_slope", fit.slope, "slope of P(usable) against log10 L, pooled (negative: usability falls)",
         math.nan),
        ("lipschitz_logistic_threshold", fit.threshold, "L where the pooled logistic fit crosses P(usable) = 1/2", math.nan),
        ("lipschitz_spearman", spearman(lipschitz, accuracy), "Spearman(L, max fact-adaptive accuracy), pooled", math.nan),
    ]
