"""Perfect storage per load: the fraction of seeds whose W recalls every fact, and the window of
grid loads around a run's last perfectly stored load, where S1.rank-capacity's optimisation check
retrains W = Q R^T (the step `assoc.rank_check`; `rank_capacity.rank_check_metrics` reads it).

Its own module, without the summary's readings, so that the training steps (which pick the
window) do not depend on the metrics' code.

Tables: curves with columns alpha, seed, accuracy (one run).
"""

from __future__ import annotations

import pandas as pd


def perfect_fraction(curve: pd.DataFrame) -> pd.Series:
    """Per load, the fraction of seeds whose W recalls every fact (accuracy 1)."""
    return (curve["accuracy"] >= 1.0).groupby(curve["alpha"]).mean()


def window_loads(baseline: pd.DataFrame, alphas: list[float], window: int) -> list[float]:
    """`window` grid loads from the last one where at least half the seeds of `baseline` (a
    table with alpha, seed, accuracy) store every fact (the smallest grid load if none does)."""
    alphas = sorted(alphas)
    stored = perfect_fraction(baseline)
    good = [a for a in alphas if stored.get(a, 0.0) >= 0.5]
    start = alphas.index(max(good)) if good else 0
    return alphas[start:start + window]
