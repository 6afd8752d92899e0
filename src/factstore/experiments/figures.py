"""The one figure step of every study: `python -m factstore figures.draw`.

Each study's plots module (factstore.plots.<study>) holds one function per figure,
`figure(tables, params) -> matplotlib Figure`, and lists them in `FIGURES`. The study's single
figure rule passes params {"study", "figure", ...figure parameters} and the tables the figure
reads as named inputs; this step reads every input as a table and returns the figure for the
rule's `png` and `pdf` outputs. The plots module is imported by name, so a figure rule depends on
its own plots module only (workflow/rules/common.smk: figure_code).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from factstore.io import read_table
from factstore.plots import style


def draw(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """params: study, figure (a key of factstore.plots.<study>.FIGURES) and the figure's own
    parameters; inputs: the tables the figure reads, by name."""
    study, name = params["study"], params["figure"]
    plots = importlib.import_module(f"factstore.plots.{study}")
    if name not in plots.FIGURES:
        raise ValueError(f"factstore.plots.{study} has no figure '{name}' (it has: {', '.join(sorted(plots.FIGURES))})")
    tables = {input_name: read_table(path) for input_name, path in inputs.items()}
    return style.outputs(plots.FIGURES[name](tables, params))
