"""Across all works: bits stored per parameter, one unit for every study.

Each study's metrics table may hold metrics named `bits_per_parameter*` (F log2 F / W for
F-valued facts, one bit per binary label); this step gathers them for one figure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore.io import read_table


def bits_per_parameter(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """inputs: metrics_<study>=results/<study>/metrics.csv for every study that ran."""
    from factstore.plots import overview, style

    rows = []
    for name, path in sorted(inputs.items()):
        table = read_table(path)
        bits = table[table.metric.str.startswith("bits_per_parameter")]
        rows += [{"study": name.removeprefix("metrics_"), "metric": r.metric, "value": r.value, "detail": r.detail}
                 for r in bits.itertuples()]
    table = pd.DataFrame(rows, columns=["study", "metric", "value", "detail"])
    return {"table": table} | style.outputs(overview.bits_per_parameter(table))
