"""Summary step of the language-model and fact-editing study (S0, "Language modelling and fact
editing").

The rule `editing_summary` calls it as `python -m factstore editing_summary.summary`: it stacks the
edit jobs' tables and writes the method x edit-fraction table (CSV and Markdown,
factstore.editing.method_table) and the claims' metrics (factstore.editing.claim_metrics, where
every metric name is written out literally). It lives apart from the training and edit steps, so
a change to the metrics reruns the summary alone, never the language model's training.
"""

from __future__ import annotations

from pathlib import Path

from factstore.editing.claim_metrics import editing_metrics
from factstore.editing.method_table import markdown_table, method_table
from factstore.io import concat_tables, read_table


def summary(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `table` (CSV), `table_markdown` and `metrics` (the claims')."""
    seed = params["seed"]
    language_model = read_table(inputs["language_model"]).iloc[0]
    recall = read_table(inputs["recall"])
    edits, facts = concat_tables(inputs, "edits_"), concat_tables(inputs, "facts_")
    table = method_table(edits, facts, seed)
    metrics = editing_metrics(language_model, recall, facts, table, seed)
    return {"table": table, "table_markdown": markdown_table(table), "metrics": metrics.frame()}
