"""The MLP study's results table: one row per (experiment, method, fact set, replicate, target).

Every search step writes rows of TABLE_COLUMNS; the summary stacks them, and figures read them.
A row holds the smallest parameter count W a search found (NaN where the method did not store
within its cap, with the cap's count in params_at_cap, a lower bound on W), the decodability rho
of the value set where it was solved, the family of the conditioned values' singular values
(`spectrum`: linspace or geometric; empty where the values are not conditioned by kappa) and,
for the whitening experiment, the Lipschitz constants of the folded MLP. NTK rows carry the Hermite degree of their features (`degree`; NaN for the
other methods): the NTK runs at every degree of the config, and `best_degree_rows` keeps, per
setting, the degree that stores at the least cost (the best NTK, not a handicapped one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from factstore.facts import FactSet
from factstore.io import concat_tables
from factstore.mlp.scaling import random_map_bits
from factstore.mlp.smallest_width_searches import WidthSearch
from factstore.statistics import linear_fit

TABLE_COLUMNS = [
    "experiment", "method", "degree", "d", "F", "replicate", "kappa", "spectrum", "alpha", "target", "width", "n_params",
    "accuracy", "best_accuracy", "stored", "params_at_cap", "probes", "steps", "rho",
    "bits_per_parameter", "facts_per_parameter", "lipschitz", "lipschitz_relative", "output_rms", "width_failing",
]


def result_row(result: WidthSearch, fact_set: FactSet, **fields) -> dict:
    """One row of a search result; fields: the columns the search does not know (experiment,
    method, degree, replicate, kappa, spectrum, alpha, target, rho, and the Lipschitz columns where
    measured; spectrum defaults to empty: values not conditioned by kappa).

    width_failing: the largest probed width (or code size) below `width` that missed the target
    (NaN when none did): the smallest storing width lies in (width_failing, width], the search's
    interval (one unit wide for the exact searches, up to its resolution for GD's bisection).
    bits_per_parameter counts F log2 F bits (scaling.random_map_bits, S0's count);
    facts_per_parameter is F / W, 0 where nothing stored (so means over seeds count failures).
    """
    stored = result.width is not None
    n_params = result.n_params if stored else math.nan
    failing = [width for width, accuracy in result.evaluations.items()
               if accuracy < result.target and (not stored or width < result.width)]
    n_facts = fact_set.n_facts
    return {
        "d": fact_set.key_dim, "F": n_facts, "width": result.width if stored else math.nan,
        "n_params": n_params, "accuracy": result.accuracy if stored else math.nan,
        "best_accuracy": result.best_accuracy, "stored": stored,
        "params_at_cap": result.params_at_cap if result.params_at_cap is not None else math.nan,
        "probes": len(result.evaluations), "steps": result.steps,
        "bits_per_parameter": float(random_map_bits(n_facts)) / n_params if stored else math.nan,
        "facts_per_parameter": n_facts / n_params if stored else 0.0,
        "lipschitz": math.nan, "lipschitz_relative": math.nan, "output_rms": math.nan, "degree": math.nan,
        "width_failing": max(failing) if failing else math.nan, "spectrum": "",
    } | fields


def tidy_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as a table with exactly TABLE_COLUMNS, in that order (NaN where a row lacks one;
    `spectrum` empty where a row lacks it or reads back empty from CSV)."""
    table = pd.DataFrame(rows)
    for column in TABLE_COLUMNS:
        if column not in table:
            table[column] = math.nan
    table["spectrum"] = table["spectrum"].astype(object).fillna("").astype(str)
    if table.empty:  # so that stacking it onto real tables keeps `stored` boolean
        table = table.astype({"stored": bool})
    return table[TABLE_COLUMNS]


def seed_means(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean W over replicates per group of `keys`; stored only if every replicate stored (else
    W = NaN). Also the means of best_accuracy, rho, the Lipschitz columns and facts per
    parameter, the largest params_at_cap, and the number of replicates."""
    grouped = table.groupby(keys, dropna=False)
    out = grouped.agg(n_params=("n_params", "mean"), stored=("stored", "all"), replicates=("replicate", "nunique"),
                      best_accuracy=("best_accuracy", "mean"), params_at_cap=("params_at_cap", "max"),
                      rho=("rho", "mean"), lipschitz=("lipschitz", "mean"),
                      lipschitz_relative=("lipschitz_relative", "mean"),
                      facts_per_parameter=("facts_per_parameter", "mean")).reset_index()
    out.loc[~out.stored, "n_params"] = math.nan
    return out


SETTING_COLUMNS = ["experiment", "method", "d", "F", "kappa", "spectrum", "alpha", "target"]
"""What a 'setting' is: one search configuration, all its replicates (seeds) together (a kappa of
one family of singular values is not the same setting as that kappa of the other)."""


def best_degree_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The table with, per setting (SETTING_COLUMNS), only the rows of the NTK degree that does best.

    Rows without a degree (other methods) are kept as they are. Among the degrees of one setting
    the best is the one stored in the most replicates, then the smallest mean W over its
    replicates (where all stored), then the highest mean best accuracy within the width cap.
    Chosen per setting, not per replicate: the degree is a choice of the construction, not of
    one random draw. The result has a `degree` per NTK row, so figures can say which won where.
    A `spectrum` read back empty from CSV (NaN) is compared as empty.
    """
    table = table.assign(spectrum=table.spectrum.astype(object).fillna("").astype(str))
    has_degree = table.degree.notna()
    ntk, others = table[has_degree], table[~has_degree]
    if ntk.empty:
        return table
    keys = SETTING_COLUMNS
    scores = ntk.groupby(keys + ["degree"], dropna=False).agg(
        stored=("stored", "mean"), w=("n_params", "mean"), accuracy=("best_accuracy", "mean")).reset_index()
    scores["w"] = scores.w.where(scores.stored == 1.0, math.inf)
    scores = scores.sort_values(["stored", "w", "accuracy", "degree"], ascending=[False, True, False, True])
    best = scores.drop_duplicates(subset=keys, keep="first")[keys + ["degree"]]
    # NaN keys (kappa or alpha of another experiment) must match NaN: compare on a filled copy
    fill = {column: -1.0 for column in ("kappa", "alpha")}
    chosen = ntk.fillna(fill).merge(best.fillna(fill), on=keys + ["degree"], how="inner")
    chosen = chosen.replace({"kappa": {-1.0: math.nan}, "alpha": {-1.0: math.nan}})[table.columns]
    return pd.concat([others, chosen], ignore_index=True)


def ustar_capacity_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per kappa: the U* gain as a capacity ratio at a FIXED parameter budget, beside ustar_gains'
    parameter ratio at fixed F. The budget W* is the NTK's seed-mean W at the largest F it stores
    (in every seed), F_ntk; F_ustar(W*) is read off NTK + U*'s W(F) line, a least-squares fit of
    log W on log F over the F it stores (`statistics.linear_fit`; at least two F), interpolated when
    W* lies within its measured W, extrapolated otherwise (`kind`). Columns kappa, W, F_ntk,
    F_ustar, ratio = F_ustar / F_ntk, kind; kappas where the NTK stores nothing are left out."""
    pair = seed_means(table[table.method.isin(["ntk", "ntk_ustar"])], ["method", "kappa", "F"])
    rows = []
    for kappa, group in pair.groupby("kappa"):
        ntk = group[(group.method == "ntk") & group.stored].sort_values("F")
        ustar = group[(group.method == "ntk_ustar") & group.stored].sort_values("F")
        if ntk.empty or ustar.F.nunique() < 2:
            continue
        budget, n_facts = float(ntk.n_params.iloc[-1]), int(ntk.F.iloc[-1])
        fit = linear_fit(np.log(ustar.F.to_numpy(float)), np.log(ustar.n_params.to_numpy(float)))
        facts_ustar = float(np.exp((np.log(budget) - fit.intercept) / fit.slope))
        inside = ustar.n_params.min() <= budget <= ustar.n_params.max()
        rows.append((kappa, budget, n_facts, facts_ustar, facts_ustar / n_facts, "interpolated" if inside else "extrapolated"))
    return pd.DataFrame(rows, columns=["kappa", "W", "F_ntk", "F_ustar", "ratio", "kind"])


def ustar_gains(table: pd.DataFrame) -> pd.DataFrame:
    """Per (kappa, F) setting: the U* gain W(ntk) / W(ntk_ustar) and what kind of number it is.

    Both store (in every seed): exact. Only NTK + U* stores: 'lower' bound, the NTK's width cap
    W_cap(ntk) over W(ntk_ustar). Only the NTK stores: 'upper' bound W(ntk) / W_cap(ntk_ustar)
    (<= 1 with equal caps). Neither: left out. Columns kappa, F, gain, kind.
    """
    pair = seed_means(table[table.method.isin(["ntk", "ntk_ustar"])], ["method", "kappa", "F"])
    rows = []
    for (kappa, n_facts), group in pair.groupby(["kappa", "F"]):
        by = group.set_index("method")
        if not {"ntk", "ntk_ustar"} <= set(by.index):
            continue
        ntk, ustar = by.loc["ntk"], by.loc["ntk_ustar"]
        if ntk.stored and ustar.stored:
            rows.append((kappa, n_facts, ntk.n_params / ustar.n_params, "exact"))
        elif ustar.stored:
            rows.append((kappa, n_facts, ntk.params_at_cap / ustar.n_params, "lower"))
        elif ntk.stored:
            rows.append((kappa, n_facts, ntk.n_params / ustar.params_at_cap, "upper"))
    return pd.DataFrame(rows, columns=["kappa", "F", "gain", "kind"])


def of_degree(table: pd.DataFrame, degree: int) -> pd.Series:
    """Rows of a fact-storing-MLP table built with NTK Hermite degree `degree` (other methods'
    degree is NaN and always kept)."""
    if "degree" not in table:
        return pd.Series(True, index=table.index)
    return table.degree.isna() | np.isclose(table.degree, degree)


def read_tables(inputs: Mapping[str, Path], prefix: str) -> pd.DataFrame:
    """The search tables of every input whose name starts with `prefix`, stacked (io.concat_tables;
    tidy_table's columns when there is none), `spectrum` empty where it reads back empty (NaN)."""
    table = concat_tables(inputs, prefix, tidy_table([]))
    spectrum = table.spectrum if "spectrum" in table else pd.Series("", index=table.index)
    return table.assign(spectrum=spectrum.astype(object).fillna("").astype(str))
