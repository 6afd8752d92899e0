"""The method x edit-fraction table: each method's scores at each edit fraction, its test blocks
pooled, with 95% bootstrap intervals over facts (CSV), and its scores as Markdown."""

from __future__ import annotations

import pandas as pd

from factstore.editing.margins import mean_interval
from factstore.editing.methods import BASELINES, METHOD_ORDER
from factstore.editing.protocol import summarise_outcomes

SCORE_COLUMNS = ("efficacy", "paraphrase", "specificity", "score", "unseen_template", "perplexity_ratio")
MEAN_COLUMNS = ("efficacy", "paraphrase", "unseen_template", "specificity", "unseen_specificity")
"""Per-fact outcome columns, pooled over a fraction's test blocks by their mean over facts."""


def method_table(edits: pd.DataFrame, facts: pd.DataFrame, seed: int) -> pd.DataFrame:
    """One row per (method, edit fraction), the fraction's test blocks pooled: the means over facts
    of MEAN_COLUMNS with 95% bootstrap intervals (`<column>_low`, `<column>_high`), the harmonic
    mean `score` of the pooled efficacy, paraphrase and specificity, r_NF (`perplexity_ratio`, mean
    over blocks), the number of blocks and of edited facts, and the chosen setting."""
    rows = []
    for (fraction, method), group in facts.groupby(["fraction", "method"]):
        block_rows = edits[(edits["fraction"] == fraction) & (edits["method"] == method)]
        row = {"method": method, "fraction": fraction, "blocks": len(block_rows),
               "edited_facts": int(block_rows["edited_facts"].sum()), **summarise_outcomes(group),
               "perplexity_ratio": float(block_rows["perplexity_ratio"].mean())}
        for column in MEAN_COLUMNS:
            interval = mean_interval(group[column].dropna().to_numpy(), seed)
            row |= {f"{column}_low": interval.low, f"{column}_high": interval.high}
        first = block_rows.iloc[0]
        row |= {key: first[key] for key in ("target_learning_rate", "clamp", "ridge", "threshold", "validation_score",
                                            "expert_standalone_accuracy") if key in first}
        rows.append(row)
    table = pd.DataFrame(rows)
    order = table["method"].map(METHOD_ORDER.index)
    return table.assign(order=order).sort_values(["fraction", "order"]).drop(columns="order").reset_index(drop=True)


def markdown_table(table: pd.DataFrame) -> str:
    """The method x edit-fraction table of the scores (`method_table`), as Markdown."""
    lines = ["| method | edit fraction | edited facts | " + " | ".join(SCORE_COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(SCORE_COLUMNS)]
    for _, row in table.iterrows():
        lines.append(f"| {row['method']} | {row['fraction']:g} | {int(row['edited_facts'])} | "
                     + " | ".join(f"{row[column]:.3f}" for column in SCORE_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def best_baseline(table: pd.DataFrame, fraction: float) -> pd.Series:
    """The `method_table` row of the baseline with the highest harmonic-mean score at `fraction`
    (the one the score margin subtracts)."""
    rows = table[(table["fraction"] == fraction) & table["method"].isin(BASELINES)]
    return rows.loc[rows["score"].idxmax()]

