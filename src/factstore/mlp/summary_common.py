"""What the mlp summary's metric modules share: the families of singular values a kappa sweep
reads, a suffixed view of a metrics table (one family of metrics from a second sweep, reported
beside the checked one), and the notice for a row that has no metric names."""

from __future__ import annotations

import pandas as pd

from factstore.metrics import MetricsTable

SPECTRA = ("geometric", "linspace")
"""The families of singular values of the conditioned values (facts.SPECTRA), in the order read."""


def families(table: pd.DataFrame) -> list[str]:
    """The families of singular values in a kappa sweep's rows (`spectrum`), in SPECTRA's order."""
    present = set(table.spectrum) if "spectrum" in table else set()
    return [family for family in SPECTRA if family in present]


class RenamedMetrics:
    """A view of a MetricsTable that appends `suffix` to every name and `note` to every detail:
    the same family of metrics from a second sweep, reported beside the checked one."""

    def __init__(self, metrics: MetricsTable, suffix: str, note: str) -> None:
        self.metrics, self.suffix, self.note = metrics, suffix, note

    def add(self, name: str, value: float, detail: str = "", standard_error: float | None = None) -> None:
        self.metrics.add(name + self.suffix, value, detail + self.note, standard_error)


def missing_names(family: str, key) -> None:
    """Say that a method (or setting) has no names in one family's table of metric names: its
    numbers stay in results and fits, and the table in its factstore.mlp module needs a row."""
    print(f"no {family} metric names for {key}: add them to its table of names in factstore/mlp/", flush=True)
