"""The cross-study figures: bits per parameter with the known reference lines, and the claims'
verdicts per work, each drawn from one table by its own step (factstore.experiments.overview and
factstore.experiments.verdicts)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from factstore.plots import style

# The statuses' colours of the claims report (results/claims.html): PASS green, FAIL red,
# UNTESTABLE amber; NOT RUN, which no run decides, grey.
STATUS_COLOURS = {"PASS": "#176117", "FAIL": "#aa1111", "UNTESTABLE": "#a66a00", "NOT RUN": "#9a9a9a"}

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


def verdicts(counts: pd.DataFrame):
    """The claims' verdicts at a glance: one horizontal bar per work (paper), split into its
    claims' statuses (PASS green, FAIL red, UNTESTABLE amber, NOT RUN grey), each segment labelled
    with its count and each bar with its total; fragile verdicts count with their status.

    counts: a (work x status) table of integers, as claims_report.verdict_counts returns it; rows
    are drawn top to bottom in its order."""
    fig, axes = style.figure(width=7.5, height=0.62 * max(len(counts), 3) + 1.3)
    ax = axes[0][0]
    rows = np.arange(len(counts))
    left = np.zeros(len(counts))
    for status in counts.columns:
        widths = counts[status].to_numpy(dtype=float)
        bars = ax.barh(rows, widths, left=left, color=STATUS_COLOURS.get(status, "0.6"), label=status,
                       edgecolor="white", linewidth=0.8)
        ax.bar_label(bars, labels=[f"{n:.0f}" if n else "" for n in widths], label_type="center",
                     color="white", fontsize=9, fontweight="bold")
        left += widths
    for row, total in zip(rows, left):
        ax.text(total + 0.15, row, f"{total:.0f}", va="center", fontsize=9, color="0.25")
    ax.set_yticks(rows, [textwrap.fill(str(work), 44) for work in counts.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left.max(initial=0) * 1.08, 1))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("claims")
    ax.legend(ncols=len(counts.columns), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return fig


# The figure functions by name (the Snakemake report reads their docstrings as captions:
# factstore.report.figure_caption).
FIGURES = {"bits_per_parameter": bits_per_parameter, "verdicts": verdicts}
