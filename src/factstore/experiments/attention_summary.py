"""Summary step of the multi-head attention memorisation study (S4): the sweeps' capacity and
probe tables gathered, and the metrics config/claims.yaml checks (factstore.attention.summary).
The rule attention_summary in workflow/rules/attention.smk calls it through
`python -m factstore attention_summary.summary`; its own module, so that editing a metric reruns
the summary alone, never the capacity searches.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore.attention import summary as attention_summary
from factstore.io import read_table


def _sweep_tables(inputs: dict[str, Path], prefix: str) -> pd.DataFrame:
    """Concatenate inputs named '<prefix>__<sweep>__<context>__<value>', tagging rows with sweep
    and value (the tables hold the context kind already). One file may serve several sweeps."""
    tables = []
    for name, path in sorted(inputs.items()):
        kind, sweep, _context, value = name.split("__")
        if kind == prefix:
            tables.append(read_table(path).assign(sweep=sweep, value=int(value)))
    return pd.concat(tables, ignore_index=True)


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Gather the sweeps; compute the S4 metrics (factstore.attention.summary).

    inputs: capacity__<sweep>__<context>__<value>=... and probes__... for every sweep point. The
    claim metrics (unsuffixed names) come from the shared-context sweeps, the setting of the
    paper's d_h experiment; the per-example context gets the suffix _per_example. Returns
    {"capacity", "probes", "metrics"} tables.
    """
    probes = _sweep_tables(inputs, "probes")
    capacities = attention_summary.capacity_table(_sweep_tables(inputs, "capacity"), probes)
    return {"capacity": capacities, "probes": probes,
            "metrics": attention_summary.metrics_table(capacities, params["relative_resolution"])}
