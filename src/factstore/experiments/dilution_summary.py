"""Summary step of the capacity-per-label (dilution) study (S3, second half): the max dilution of
every sweep of the archetype, BERT-pruning and FewRel steps, and the metrics the claims read.

The rule dilution_summary in workflow/rules/dilution.smk calls it through
`python -m factstore dilution_summary.summary`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from factstore.dilution import claim_metrics
from factstore.dilution.pruning import max_dilutions
from factstore.io import concat_tables
from factstore.metrics import MetricsTable


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Max dilutions of every sweep and the metrics the S3 capacity-per-label claims read.

    inputs: archetypes_<sweep>, bert_<subset>, fewrel_<sweep>. params: archetype_tolerance,
    bert_tolerance, fewrel_tolerance (relative accuracy drop still counted as the plateau).
    """
    toy_curves = concat_tables(inputs, "archetypes_")
    bert_curves = concat_tables(inputs, "bert_")
    fewrel_curves = concat_tables(inputs, "fewrel_")
    toy_max = max_dilutions(toy_curves, ["sweep", "value"], "test_accuracy", params["archetype_tolerance"])
    bert_max = max_dilutions(bert_curves, ["subset", "group"], "apt", params["bert_tolerance"])
    fewrel_max = max_dilutions(fewrel_curves, ["sweep", "n_labels", "per_label"], "test_accuracy", params["fewrel_tolerance"])
    table = pd.concat([
        toy_max.assign(part="archetypes"),
        bert_max.rename(columns={"group": "sweep"}).assign(part="bert"),
        fewrel_max.assign(part="fewrel", value=lambda t: np.where(t.sweep == "labels", t.n_labels, t.per_label)),
    ], ignore_index=True)

    metrics = MetricsTable()
    claim_metrics.archetype_metrics(metrics, toy_max, toy_curves)
    claim_metrics.bert_metrics(metrics, bert_max, bert_curves, params["bert_tolerance"])
    claim_metrics.fewrel_metrics(metrics, fewrel_max, fewrel_curves)
    return {"max_dilution": table, "metrics": metrics.frame()}
