"""The MLP study's results table: one row per (experiment, method, fact set, replicate, target).

Every search step writes rows of TABLE_COLUMNS; the summary stacks them, and figures read them.
A row holds the smallest parameter count W a search found (NaN where the method did not store
within its cap, with the cap's count in params_at_cap, a lower bound on W), the decodability rho
of the value set where it was solved, and, for the whitening experiment, the Lipschitz constants
of the folded MLP.
"""

from __future__ import annotations

import math

import pandas as pd

from factstore.facts import FactSet
from factstore.mlp.capacity import WidthSearch
from factstore.mlp.scaling import random_map_bits

TABLE_COLUMNS = [
    "experiment", "method", "d", "F", "replicate", "kappa", "alpha", "target", "width", "n_params",
    "accuracy", "best_accuracy", "stored", "params_at_cap", "probes", "steps", "seconds", "rho",
    "bits_per_parameter", "facts_per_parameter", "lipschitz", "lipschitz_relative", "output_rms",
]


def result_row(result: WidthSearch, fact_set: FactSet, **fields) -> dict:
    """One row of a search result; fields: the columns the search does not know (experiment,
    method, replicate, kappa, alpha, target, rho, and the Lipschitz columns where measured).

    bits_per_parameter counts F log2 F bits (scaling.random_map_bits, SPEC's count);
    facts_per_parameter is F / W, 0 where nothing stored (so means over seeds count failures).
    """
    stored = result.width is not None
    n_params = result.n_params if stored else math.nan
    n_facts = fact_set.n_facts
    return {
        "d": fact_set.key_dim, "F": n_facts, "width": result.width if stored else math.nan,
        "n_params": n_params, "accuracy": result.accuracy if stored else math.nan,
        "best_accuracy": result.best_accuracy, "stored": stored,
        "params_at_cap": result.params_at_cap if result.params_at_cap is not None else math.nan,
        "probes": len(result.evaluations), "steps": result.steps, "seconds": result.seconds,
        "bits_per_parameter": float(random_map_bits(n_facts)) / n_params if stored else math.nan,
        "facts_per_parameter": n_facts / n_params if stored else 0.0,
        "lipschitz": math.nan, "lipschitz_relative": math.nan, "output_rms": math.nan,
    } | fields


def tidy_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as a table with exactly TABLE_COLUMNS, in that order (NaN where a row lacks one)."""
    table = pd.DataFrame(rows)
    for column in TABLE_COLUMNS:
        if column not in table:
            table[column] = math.nan
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
