"""The claims step: evaluate config/claims.yaml against every study's metrics table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore import claims, claims_report, robustness

TABLE_COLUMNS = ("id", "short", "status", "check_status", "robustness", "measured", "expected", "margins", "fragile",
                 "figures", "scale", "run_scale", "note")


def report(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """inputs: registry=config/claims.yaml and metrics_<study>=<run dir>/results/<study>/metrics.csv.

    A claim names its table as results/<study>/metrics.csv, whatever the run directory: the
    input named metrics_<study> is that table of this run."""
    registry = claims.load_registry(inputs["registry"])
    tables = {f"results/{name.removeprefix('metrics_')}/metrics.csv": path
              for name, path in inputs.items() if name.startswith("metrics_")}
    metrics = claims.read_metrics(tables)
    records = claims.evaluate_tables(registry, metrics, params["scale"],
                                     warnings={result: claims.study_warnings(path) for result, path in tables.items()})
    records = robustness.assess_all(registry, records, metrics, params["scale"])
    table = pd.DataFrame([
        {column: r.get(column) for column in TABLE_COLUMNS}
        | {"status": claims_report.status_text(r), "robustness": claims_report.robustness_text(r),
           "measured": claims_report.measured_text(r),
           "margins": claims_report.margin_text(r), "figures": ", ".join(r["figures"])}
        for r in records
    ], columns=TABLE_COLUMNS)
    return {
        "json": records,
        "markdown": claims_report.markdown(records, claims_report.data_source_line(metrics)),
        "html": claims_report.html_page(records),
        "summary": claims_report.counts(records),
        "flat": claims_report.flat_metrics(records),
        "table": table,
    }
