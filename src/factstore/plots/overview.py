"""The cross-study figure: bits per parameter with the known reference lines."""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.plots import style

# (value, label, dotted): two known values share x = 2, so one line carries both labels; the
# lines differ in style so the legend tells them apart.
REFERENCES = [
    (2.0, "2: perceptron bits / weight (Gardner); ~2 measured in language models (Allen-Zhu & Li 2024)", False),
    (1 / (2 * np.log(2)), r"$1/(2\ln 2) \approx 0.72$: linear memory at $\alpha_c = 1/2$", True),
]


def bits_per_parameter(table: pd.DataFrame):
    """One horizontal bar per measured capacity, grouped by study, reference lines on top."""
    fig, axes = style.figure(width=6.5, height=0.45 * max(len(table), 4) + 1.2)
    ax = axes[0][0]
    labels = [f"{r.study}: {r.metric.removeprefix('bits_per_parameter').strip('_') or 'best'}" for r in table.itertuples()]
    colours = style.palette(table.study)
    ax.barh(np.arange(len(table)), table.value, color=[colours[s] for s in table.study])
    ax.set_yticks(np.arange(len(table)), labels)
    ax.invert_yaxis()
    for value, label, dotted in REFERENCES:
        style.theory_vline(ax, value, label, reference=dotted)
    ax.set_xlabel("capacity in bits per parameter")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return fig
