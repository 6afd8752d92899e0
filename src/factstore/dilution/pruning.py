"""Dilution masks and the max dilution of a sweep.

Masks are torch.nn.utils.prune reparametrisations (weight = weight_orig * weight_mask, applied in
a forward pre-hook), so they stay applied through every later training step: the optimiser moves
weight_orig, and the masked entries of the effective weight stay exactly zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn.utils import prune


def dilute_randomly(module: nn.Module, rate: float, generator: torch.Generator, name: str = "weight") -> None:
    """Remove a fraction `rate` of `module.<name>`'s entries chosen uniformly at random (a fixed
    mask through prune.custom_from_mask, drawn from `generator` so a sweep is reproducible)."""
    weight = getattr(module, name)
    count = int(round(rate * weight.numel()))
    mask = torch.ones(weight.numel(), dtype=weight.dtype)
    if count > 0:
        mask[torch.randperm(weight.numel(), generator=generator)[:count]] = 0
    prune.custom_from_mask(module, name, mask.view_as(weight).to(weight.device))


def prune_by_magnitude(parameters: Sequence[tuple[nn.Module, str]], rate: float) -> None:
    """Global magnitude pruning: zero the fraction `rate` of the smallest |w| over all the given
    (module, parameter name) pairs together (prune.global_unstructured with L1Unstructured)."""
    if rate <= 0:
        for module, name in parameters:
            prune.identity(module, name)
        return
    prune.global_unstructured(list(parameters), pruning_method=prune.L1Unstructured, amount=float(rate))


def zero_fraction(parameters: Sequence[tuple[nn.Module, str]]) -> float:
    """Fraction of exactly-zero entries of the effective weights (after masks)."""
    zeros = total = 0
    for module, name in parameters:
        weight = getattr(module, name)
        zeros += int((weight == 0).sum())
        total += weight.numel()
    return zeros / max(total, 1)


def max_dilution(rates: Sequence[float], accuracies: Sequence[float], baseline: float, tolerance: float) -> float:
    """The largest rate of the plateau: every rate up to it keeps accuracy >= baseline (1 - tolerance).

    rates: the sweep's dilution rates (any order; 0 is the undiluted net); accuracies: the
    (seed-averaged) accuracy at each; tolerance: the relative drop still counted as the plateau.
    Returns 0 when even the smallest diluted rate falls off.
    """
    order = np.argsort(np.asarray(rates, dtype=float))
    threshold = baseline * (1 - tolerance)
    best = 0.0
    for index in order:
        if accuracies[index] < threshold:
            break
        best = float(rates[index])
    return best


def search_plateau_end(rates: Sequence[float], accuracy_at: Callable[[float], float], tolerance: float) -> dict[float, float]:
    """Measure accuracy only where a bisection for the plateau's end needs it; returns {rate: accuracy}.

    rates: the grid (0 included: the undiluted baseline); accuracy_at: rate -> (seed-averaged)
    accuracy, the costly call; tolerance: as for max_dilution. Assuming the accuracy leaves the
    plateau once and for all as the rate grows, max_dilution over the returned rates equals
    max_dilution over the whole grid, after 1 + ceil(log2(n + 1)) calls for n diluted rates instead
    of n + 1: every measured rate below the end is on the plateau, the next grid rate above it is
    measured and off it.
    """
    measured = {0.0: float(accuracy_at(0.0))}
    threshold = measured[0.0] * (1 - tolerance)
    diluted = sorted({float(rate) for rate in rates if rate > 0})
    on_plateau, off_plateau = -1, len(diluted)  # indices into diluted; -1 is rate 0, len(diluted) past the grid
    while off_plateau - on_plateau > 1:
        middle = (on_plateau + off_plateau) // 2
        measured[diluted[middle]] = float(accuracy_at(diluted[middle]))
        if measured[diluted[middle]] >= threshold:
            on_plateau = middle
        else:
            off_plateau = middle
    return measured


def kept_fraction_ratio(max_dilutions: Sequence[float]) -> float:
    """max / min of the kept weight fractions 1 - d over a set of max dilutions (1 = identical)."""
    kept = 1 - np.asarray(max_dilutions, dtype=float)
    return float(kept.max() / kept.min()) if kept.min() > 0 else float("inf")


def max_dilution_interval(
    rates: Sequence[float], accuracies: Sequence[float], standard_errors: Sequence[float],
    baseline: float, tolerance: float, width: float,
) -> tuple[float, float]:
    """(low, high) ends of a grid-read max dilution: the plateau's end read with every accuracy
    `width` standard errors lower (low: the rates surely on the plateau) and higher (high: the
    rates not excluded from it).

    rates, accuracies, standard_errors: one sweep, aligned (the standard error of each rate's
    accuracy drop from the baseline, 0 at rate 0); baseline, tolerance: as for max_dilution.
    low <= max_dilution(rates, accuracies, ...) <= high; width 0 gives that read twice.
    """
    accuracy, error = np.asarray(accuracies, dtype=float), np.asarray(standard_errors, dtype=float)
    return (max_dilution(rates, accuracy - width * error, baseline, tolerance),
            max_dilution(rates, accuracy + width * error, baseline, tolerance))


def max_dilutions(curves: pd.DataFrame, keys: list[str], accuracy: str, tolerance: float) -> pd.DataFrame:
    """Per group of `keys`: the seed-averaged baseline (rate 0) and the max dilution (the end of
    the plateau within `tolerance`, relative) of the seed-averaged accuracy curve."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("rate", as_index=False)[accuracy].mean()
        baseline = float(mean.loc[mean.rate == 0, accuracy].iloc[0])
        value = max_dilution(mean["rate"].to_numpy(), mean[accuracy].to_numpy(), baseline, tolerance)
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"baseline": baseline, "max_dilution": value})
    return pd.DataFrame(rows)
