"""The usability study's measurements: tables in, (name, value, detail, standard error) out.

Every value that is a mean over seeds carries its standard error over seeds (std / sqrt(n),
ddof 1); a fraction over n cases carries the binomial sqrt(p (1 - p) / n); a max or min over
settings carries the standard error of the setting it picked. The claims report compares a
value's distance to its bound with this spread (factstore.claims).

- usable capacity (S0.usable): the usable-over-standalone ratio over the CONSTRUCTIONS (NTK,
  encoder-decoder), the claim's subject; GD's beside it, not checked.
- whitening (S0.whitening-tradeoff): the maximum fact-adaptive accuracy (the paper's criterion)
  and standalone F / W along alpha, per embedding kind and method; the verdict reads the MLPs
  hosted where both store every fact (VERDICT_HOST), each moderate alpha against alpha = 0 (the
  control) paired per seed, over the families whose control stores (verdict_families).
- Lipschitz threshold (S0.lipschitz-threshold): located within each method's whitening family
  (the paper's Fig. 8b reads the MLPs of Fig. 8a), then pooled (threshold.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.mlp.methods import METHODS
from factstore.statistics import binomial_standard_error, spearman
from factstore.usability import threshold

CONSTRUCTIONS = tuple(name for name, method in METHODS.items() if not method.search.trains)
"""The constructed MLPs of mlp.methods.METHODS (NTK, encoder-decoder: every method whose outputs
are not learned; the others, gd_*, are trained)."""
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
    trained = probes[probes.attention_on_key.notna()]  # probes left untrained (ceiling below the target) have none
    attending = (trained.attention_on_key >= 0.5).mean()
    return [
        ("usable_found_fraction", found, f"fraction of (construction, F, seed) where some size up to the cap is usable; "
         f"constructions {sorted(capacity_table[built].method.unique())}; {setting}", binomial_standard_error(found, int(built.sum()))),
        ("usable_found_fraction_gd", found_gd, f"the same for the trained MLPs (GD), beside the claim; {setting}",
         binomial_standard_error(found_gd, int((~built).sum()))),
        *[(f"usable_found_fraction_{method}", rows.found.mean(), f"the same for {method} alone ({len(rows)} (F, seed))",
           binomial_standard_error(rows.found.mean(), len(rows))) for method, rows in capacity_table.groupby("method")],
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
        ("attending_fraction", attending, f"fraction of the {len(trained)} trained probes whose attention on the key is "
         ">= 0.5 after training (new initialisations included)", binomial_standard_error(attending, len(trained))),
        ("restarts_total", float(probes.restarts.sum()), f"new initialisations over {len(probes)} probes (stuck: "
         "attention on the key < 0.5 after the restart window, or ended below the target)", math.nan),
        *_at_ceiling(probes, target),
    ]


def _at_ceiling(probes: pd.DataFrame, target: float) -> list[Metric]:
    """How the probes whose swapped MLP could reach the target (ceiling >= target) ended: the
    fraction whose attention delivered the target (an attention miss is the rest)."""
    if "ceiling" not in probes:
        return []
    reachable = probes[probes.ceiling >= target]
    fraction = (reachable.fact_adaptive_max >= target).mean() if len(reachable) else math.nan
    trained = probes[probes.fact_adaptive_max.notna()]
    return [("reachable_usable_fraction", fraction, f"fraction of the {len(reachable)} probes whose swapped MLP "
             f"recalls >= {target:g} with attention on the key (its ceiling) that reached the target inside the "
             "Transformer (the rest are attention misses)", binomial_standard_error(fraction, len(reachable))),
            ("fact_adaptive_over_ceiling_max", (trained.fact_adaptive_max - trained.ceiling).max(),
             f"max over the {len(trained)} trained probes of the maximum fact-adaptive accuracy minus the ceiling "
             "(<= 0 when no attention delivers more than attending to the key, the ceiling stop's premise)", math.nan)]


def _per_setting(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Seed mean and standard error of `column` per (kind, method, alpha)."""
    return table.groupby(["kind", "method", "alpha"])[column].agg(["mean", standard_error]).rename(
        columns={"standard_error": "se"})


def _least(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The (value, standard error) pair of least value; NaN when there is none or any value is NaN."""
    if not pairs or any(math.isnan(value) for value, _ in pairs):
        return math.nan, math.nan
    return min(pairs, key=lambda pair: pair[0])


VERDICT_HOST = "stores_all"
"""The host the whitening verdict reads (usability.whitening_probes.HOSTS): each probe's MLPs at the
first width of the ladder s, 2s, ... where both store every fact on their own."""


def hosted(table: pd.DataFrame, host: str) -> pd.DataFrame:
    """The whitening rows of one host; a table without a host column (one probe per setting) is
    read whole."""
    return table[table.host == host] if "host" in table else table


def control_stores(rows: pd.DataFrame) -> bool:
    """Whether a family's control can be read: at alpha = 0 every seed's host stores every fact in
    both MLPs (host_stored; a table without the column: the standalone search stored)."""
    zero = rows[rows.alpha == 0.0]
    column = "host_stored" if "host_stored" in rows else "stored"
    return bool(len(zero)) and bool(zero[column].astype(bool).all())


def verdict_families(table: pd.DataFrame, judged_only: bool = True) -> list[tuple[str, str, pd.DataFrame, list[float]]]:
    """(kind, method, rows, moderate alphas present) of each whitening family the trade-off reads:
    a moderate alpha, alpha = 0 and alpha = 1 present and, with judged_only, its control storing
    (control_stores). A family whose alpha = 0 MLPs do not store every fact even at the width cap
    (the real MiniLM keys, docs/methods/usability.md) has no control to compare with: reported, not judged."""
    families = []
    for (kind, method), rows in table.groupby(["kind", "method"]):
        alphas = set(rows.alpha)
        present = [alpha for alpha in MODERATE_ALPHAS if alpha in alphas]
        if present and 1.0 in alphas and 0.0 in alphas and (control_stores(rows) or not judged_only):
            families.append((kind, method, rows, present))
    return families


def paired_difference(rows: pd.DataFrame, column: str, alpha: float, reference: float) -> pd.Series:
    """Per seed (index replicate): `column` at `alpha` minus at `reference` (one row per seed and alpha)."""
    by_alpha = rows.pivot_table(index="replicate", columns="alpha", values=column, aggfunc="first")
    return by_alpha[alpha] - by_alpha[reference]


def capacity_gain_per_alpha(rows: pd.DataFrame, moderate_alphas: list[float]) -> pd.DataFrame:
    """Per seed (index replicate) and moderate alpha (columns): the standalone capacity gain of
    whitening, that alpha's over alpha = 0's.

    rows: one (kind, method)'s whitening rows (replicate, alpha, F, n_params, stored,
    standalone_trained). A stored row's F / n_params is its capacity per parameter; a row that did
    not store within the width cap has n_params at the largest width searched. Per seed and alpha:
    - both store: the exact F / W ratio;
    - only the moderate alpha stores: alpha = 0's F / W at the cap bounds it from ABOVE, so the
      ratio is a certified lower bound on the gain;
    - only alpha = 0 stores: 0 (the moderate alpha has less capacity);
    - neither stores: both MLPs are at the cap's width, so the gain is read at that fixed width
      budget (as S0.ntk-anisotropy-breaks reads the anisotropy break), the facts each recalls there
      on its own per parameter (standalone_trained x F / n_params). On the real MiniLM keys the
      degree-2 NTK stores neither alpha = 0 nor, for one seed, alpha = 0.1 at any width up to 2^18
      (docs/methods/usability.md)."""
    rows = rows.assign(stored=rows.stored.astype(bool), per_parameter=rows.F / rows.n_params,
                       recalled_per_parameter=rows.standalone_trained * rows.F / rows.n_params)
    gains = {}
    for replicate, seed in rows.groupby("replicate"):
        at_zero = seed[seed.alpha == 0.0].iloc[0]
        for alpha in moderate_alphas:
            here = seed[seed.alpha == alpha].iloc[0]
            if here.stored:
                gain = here.per_parameter / at_zero.per_parameter
            elif at_zero.stored:
                gain = 0.0
            else:
                gain = here.recalled_per_parameter / at_zero.recalled_per_parameter
            gains[(replicate, alpha)] = gain
    return pd.Series(gains, dtype=float).unstack()


def capacity_gains(rows: pd.DataFrame, moderate_alphas: list[float], reduce: str = "mean") -> pd.Series:
    """Per seed (index replicate): the capacity gain of the moderate alphas (capacity_gain_per_alpha),
    their mean (the verdict's reading: the moderate band as a whole) or, reduce='min', the worse
    one's (the earlier reading, biased below the band's gain by the noise of two ratios)."""
    if rows.empty:
        return pd.Series(dtype=float)
    per_alpha = capacity_gain_per_alpha(rows, moderate_alphas)
    return per_alpha.mean(axis=1) if reduce == "mean" else per_alpha.min(axis=1)


def trade_off(rows: pd.DataFrame, present: list[float]) -> dict[str, tuple[float, float]]:
    """One family's (seed mean, standard error over seeds) of: moderate, the worse moderate alpha's
    mean max fact-adaptive accuracy; vs_control, that alpha's minus alpha = 0's per seed; drop,
    that alpha's minus alpha = 1's per seed; gain, the capacity gain (capacity_gains)."""
    means = rows.groupby("alpha").fact_adaptive_max.mean()
    worst = means.loc[present].idxmin()
    pairs = {"moderate": rows[rows.alpha == worst].fact_adaptive_max,
             "vs_control": paired_difference(rows, "fact_adaptive_max", worst, 0.0),
             "drop": paired_difference(rows, "fact_adaptive_max", worst, 1.0),
             "gain": capacity_gains(rows, present)}
    return {name: (float(values.mean(skipna=False)), standard_error(values)) for name, values in pairs.items()}


def trade_off_least(table: pd.DataFrame, host: str = VERDICT_HOST, judged_only: bool = True) -> dict[str, tuple[float, float]]:
    """min over the verdict's families (verdict_families of the VERDICT_HOST rows) of each
    trade_off reading of their `host` rows, with its standard error; NaN where no family is read
    (or a family has no `host` rows)."""
    at_host = hosted(table, host)
    readings = []
    for kind, method, _, present in verdict_families(hosted(table, VERDICT_HOST), judged_only):
        rows = at_host[(at_host.kind == kind) & (at_host.method == method)]
        readings.append(trade_off(rows, present) if set(present) | {0.0, 1.0} <= set(rows.alpha)
                        else dict.fromkeys(("moderate", "vs_control", "drop", "gain"), (math.nan, math.nan)))
    return {name: _least([reading[name] for reading in readings]) for name in ("moderate", "vs_control", "drop", "gain")}


def whitening_metrics(table: pd.DataFrame) -> list[Metric]:
    if table.empty:
        return []
    verdict = hosted(table, VERDICT_HOST)
    accuracy, capacity = _per_setting(verdict, "fact_adaptive_max"), _per_setting(verdict, "facts_per_parameter")
    judged = [f"{kind} {method}" for kind, method, _, _ in verdict_families(verdict)]
    read = trade_off_least(table)
    setting = (f"{sorted(table.kind.unique())} embeddings, methods {sorted(table.method.unique())}, alpha in "
               f"{sorted(float(a) for a in table.alpha.unique())}, value fold {sorted(table.value_fold.unique())}, "
               f"mean over {table.replicate.nunique()} seeds of the max fact-adaptive accuracy over training; host "
               f"{VERDICT_HOST if 'host' in table else 'standalone'}; families judged (alpha = 0 stores every fact in "
               f"both MLPs in every seed): {judged or 'none'}")
    metrics = [
        ("whitening_moderate_vs_control_min", *read["vs_control"][:1],
         f"min over judged (kind, method) of the seed mean of [the worse moderate alpha's (of {MODERATE_ALPHAS}) max "
         f"fact-adaptive accuracy - alpha = 0's], paired per seed; {setting}", read["vs_control"][1]),
        ("whitening_moderate_accuracy_min", *read["moderate"][:1],
         "min over judged (kind, method) of the worse moderate alpha's mean max fact-adaptive accuracy (absolute, "
         "beside the check)", read["moderate"][1]),
        ("whitening_full_drop_min", *read["drop"][:1],
         "min over judged (kind, method) of the seed mean of [worse moderate alpha's accuracy - accuracy at alpha = 1], "
         "paired per seed", read["drop"][1]),
        ("whitening_moderate_capacity_gain_min", *read["gain"][:1],
         "min over judged (kind, method) of the seed mean of the standalone capacity gain, the moderate alphas' F / W "
         "over alpha = 0's averaged over the moderate alphas (exact where both store; a certified lower bound where "
         "only the moderate alpha stores within the width cap; 0 where only alpha = 0 stores; where neither stores, "
         "the ratio of the facts each recalls on its own per parameter at the cap's width)", read["gain"][1]),
    ]
    for (kind, method, alpha), row in accuracy.iterrows():
        metrics.append((f"whitening_fact_adaptive_{kind}_{method}_a{alpha:g}", row["mean"], setting, row["se"]))
    for (kind, method, alpha), row in capacity.iterrows():
        metrics.append((f"whitening_facts_per_parameter_{kind}_{method}_a{alpha:g}", row["mean"],
                        "standalone F / W (0 where not stored)", row["se"]))
    if {"host_stored", "host_size"} <= set(verdict):
        for (kind, method, alpha), rows in verdict.groupby(["kind", "method", "alpha"]):
            metrics.append((f"whitening_host_width_{kind}_{method}_a{alpha:g}", float(rows.host_size.mean()),
                            f"mean host width ({VERDICT_HOST}); stores every fact in {int(rows.host_stored.sum())} of "
                            f"{len(rows)} seeds; standalone width {rows['size'].mean():g}", standard_error(rows.host_size)))
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
