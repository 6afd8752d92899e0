"""The baselines' hyper-parameter grid and the setting chosen on the validation block.

Each baseline (ROME, MEMIT, AlphaEdit) is scored at every setting of the grid on a validation
block of facts disjoint from the test blocks; the setting with the best harmonic-mean score is
the one its test blocks use.
"""

from __future__ import annotations

from itertools import product

import pandas as pd


def baseline_settings(grid: dict) -> list[dict]:
    """Every hyper-parameter setting of the grid: target learning rate x residual clamp (None: no
    clamp) x each method's own knob (MEMIT's ridge, AlphaEdit's null-space threshold)."""
    settings = []
    for learning_rate, clamp in product(grid["target_learning_rate"], grid["residual_clamp"]):
        shared = {"target_learning_rate": learning_rate, "clamp": clamp}
        settings.append({"method": "rome", **shared})
        settings += [{"method": "memit", **shared, "ridge": ridge} for ridge in grid["memit_ridge"]]
        settings += [{"method": "alphaedit", **shared, "threshold": threshold} for threshold in grid["alphaedit_threshold"]]
    return settings


def chosen_setting(grid: pd.DataFrame, method: str) -> dict:
    """The setting of `method` with the best validation score (its row's knobs, None where unset)."""
    candidates = grid[grid["method"] == method]
    best = candidates.loc[candidates["score"].idxmax()]
    setting = {key: None if pd.isna(best[key]) else best[key]
               for key in ("method", "target_learning_rate", "clamp", "ridge", "threshold") if key in best}
    return {**setting, "validation_score": float(best["score"])}
