"""One look for every figure: seaborn theme, method colours, theory lines, labelled axes.

Figure functions (factstore.plots.<study>) build a matplotlib Figure with these helpers; the
figure step (factstore.experiments.figures) returns it and the runner saves PNG and PDF atomically.
"""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

THEORY_STYLE = {"color": "0.25", "linestyle": "--", "linewidth": 1.2}
REFERENCE_STYLE = {"color": "0.55", "linestyle": ":", "linewidth": 1.2}


def apply() -> None:
    """Set the shared seaborn theme (idempotent)."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "legend.frameon": False, "axes.titleweight": "bold"})


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.4, **kwargs):
    """A figure of `nrows` x `ncols` panels of the given size (inches) each; returns (fig, axes)."""
    apply()
    kwargs.setdefault("layout", "constrained")
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
    return fig, axes


def shared_legend(fig, axes, **kwargs) -> None:
    """One legend for all panels (each label once), outside the panels on the right."""
    handles = {}
    for ax in getattr(axes, "flat", axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    kwargs.setdefault("fontsize", 8)
    kwargs.setdefault("loc", "outside right center")
    fig.legend(handles.values(), handles.keys(), **kwargs)


def palette(names) -> dict[str, tuple]:
    """A stable colour per name (method, d, ...), in the order given."""
    names = list(dict.fromkeys(names))
    return dict(zip(names, sns.color_palette("colorblind", n_colors=max(len(names), 1))))


def theory_vline(ax, x: float, label: str | None = None, reference: bool = False) -> None:
    ax.axvline(x, label=label, **(REFERENCE_STYLE if reference else THEORY_STYLE))


def theory_hline(ax, y: float, label: str | None = None, reference: bool = False) -> None:
    ax.axhline(y, label=label, **(REFERENCE_STYLE if reference else THEORY_STYLE))


def caption(fig, text: str) -> None:
    """A note under the figure (scale, seeds): what a reader needs to judge it, wrapped to the
    figure's width (a longer line would widen the saved figure and shrink its panels)."""
    characters_per_line = max(60, int(fig.get_figwidth() * 16))  # ~16 characters per inch at 8 pt
    lines = [textwrap.fill(line, characters_per_line) for line in text.split("\n")]
    fig.supxlabel("\n".join(lines), fontsize=8, color="0.3")


def stacked(tables: dict, prefix: str) -> pd.DataFrame:
    """The tables whose names start with `prefix` (in name order), stacked into one; empty (no
    columns) when there is none. Figures read sweeps split over one table per setting this way."""
    parts = [table for name, table in sorted(tables.items()) if name.startswith(prefix)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def outputs(fig) -> dict:
    """What a figure step returns: the same figure for the rule's `png` and `pdf` outputs."""
    return {"png": fig, "pdf": fig}
