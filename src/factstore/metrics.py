"""The metrics table a study's summary step writes (results/<study>/metrics.csv).

Each row is (metric, value, standard_error, detail); config/claims.yaml reads rows by their metric name. A name a
claim reads is written literally where it is added (`metrics.add("heads_linear_r2", ...)`), never
assembled from pieces, so `grep` finds the code behind every claim (tests/test_claims.py keeps it
so). Only families indexed by a config value that no claim reads (a capacity per d) append the
value to a literal stem.
"""

from __future__ import annotations

import math

import pandas as pd


class MetricsTable:
    """Collects named scalar results in the order they are added."""

    def __init__(self) -> None:
        self._rows: list[dict] = []

    def add(self, name: str, value: float, detail: str = "", standard_error: float | None = None) -> None:
        """One metric; `value` is stored as a float (NaN when it could not be measured).

        `standard_error` is the metric's standard error where one exists (a fitted slope's from
        the regression, a mean's or a median's from a bootstrap over seeds); NaN where none does.
        The claims report reads it to give a verdict's margin in standard errors.
        """
        error = math.nan if standard_error is None else float(standard_error)
        self._rows.append({"metric": name, "value": float(value), "standard_error": error, "detail": detail})

    def frame(self) -> pd.DataFrame:
        """The table as written to metrics.csv: columns metric, value, standard_error, detail."""
        return pd.DataFrame(self._rows, columns=["metric", "value", "standard_error", "detail"])
