"""S0.info-bound: every measured count against the line of about b bits per parameter, as a band.

Each count W is the end of a width search: the true smallest count lies in (W_failing, W]
(failing_parameters). The band reads the bits each count must hold at its target over W against
b / (1 - resolution) (band_edge), at both ends of each interval, per count and as a statistic
over seeds, and the hard line W / (log2 F! / b) (scaling.information_bound).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factstore.metrics import MetricsTable
from factstore.mlp.methods import METHODS
from factstore.mlp.scaling import information_bound, permutation_bits, target_bits


def failing_parameters(measured: pd.DataFrame) -> np.ndarray:
    """(rows,) a lower bound on the parameter count at the largest width that missed the target,
    the open end of each row's search interval (W_failing, W]. GD's bisection stops within its
    resolution: its W is linear in the width (bias-free, parameters_per_unit x width), so
    W_failing = W x width_failing / width (0 where no narrower probe failed: the interval then
    reaches down to nothing). The NTK's and the encoder-decoder's searches are exact to one unit
    (one-pass prefix, nested codes): their W is taken as exact."""
    trained = measured.method.map(lambda method: METHODS[method].search.trains).to_numpy(bool)
    ratio = (measured.width_failing / measured.width).fillna(0.0).to_numpy()
    return np.where(trained, measured.n_params.to_numpy() * ratio, measured.n_params.to_numpy())


def band_edge(bits_assumed: float, resolution: float) -> float:
    """The most bits per parameter that 'about b bits' admits, b / (1 - r): a count read at
    exactly b bits by a width search that stops within relative resolution r of the width
    (failing_parameters: the true smallest count lies in (W (1 - r), W]) may hold up to
    b / (1 - r) bits per parameter; the search cannot tell those counts from b."""
    return bits_assumed / (1.0 - resolution)


def bits_per_parameter_both_ends(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows,) bits / W at the smallest storing count W and at the open end of each row's width
    search interval, bits / W_failing (failing_parameters; inf where no narrower probe failed)."""
    with np.errstate(divide="ignore"):
        upper = np.where(failing > 0, bits / np.where(failing > 0, failing, 1.0), math.inf)
    return bits / measured.n_params.to_numpy(), upper


def band_metrics(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray, edge: float,
                 names: tuple[str, str, str], setting: str, metrics: MetricsTable) -> None:
    """The band reading of one bit count per row: max (bits / W) / edge (the check: at most 1),
    the same at each interval's open end (bits / W_failing, inf where no narrower probe failed)
    and whether the intervals decide it: every interval's open end within the band (inside for
    certain) or some count's W past it (outside for certain); 0 when the extreme interval straddles
    the edge. names: (ratio, ratio at the open end, decided)."""
    ratio_name, upper_name, decided_name = names
    per_parameter, per_parameter_upper = bits_per_parameter_both_ends(bits, measured, failing)
    worst = measured.iloc[int(np.argmax(per_parameter))]
    ratio, upper = per_parameter.max() / edge, per_parameter_upper.max() / edge
    metrics.add(ratio_name, ratio,
                f"max over {len(measured)} measured counts of ({setting}) / W = {per_parameter.max():.4g} bits per "
                f"parameter, over the band edge {edge:.4g}; worst: {worst.method}, {worst.experiment}, F = {worst.F}, "
                f"target {worst.target:g}, W = {worst.n_params:g}")
    metrics.add(upper_name, upper,
                "the same with each count at the open end of its search interval (the largest width that failed; inf "
                f"where none did): the true maximum lies in [{ratio:.4g}, {upper:.4g})")
    metrics.add(decided_name, float(upper <= 1.0 or ratio > 1.0),
                f"1 when the search intervals decide the band ({setting}): every interval within it, or some count "
                f"past it; 0 when the extreme interval [{ratio:.4g}, {upper:.4g}) straddles 1")


SETTING_KEYS = ["experiment", "method", "degree", "d", "F", "kappa", "spectrum", "alpha", "target"]
"""One measured setting of the mlp study: its seeds are repeated measurements of one count."""


def seed_excess_metrics(bits: np.ndarray, measured: pd.DataFrame, failing: np.ndarray, bits_assumed: float,
                        names: tuple[str, str], setting: str, metrics: MetricsTable) -> None:
    """'No method stores more than about b bits per parameter' as a statistic over seeds: per
    setting (SETTING_KEYS) the mean over its seeds of bits / W minus 2 standard errors of that
    mean (0 with one seed), the largest over settings, over b (the check: at most 1, i.e. no
    setting exceeds b by more than 2 standard errors). The same read at the open ends of the
    width searches' intervals (bits / W_failing, inf where no narrower probe failed) says whether
    the search resolution decides it: 1 when both readings agree. names: (statistic, statistic at
    the open ends, decided)."""
    statistic_name, open_end_name, decided_name = names
    per_parameter, upper = bits_per_parameter_both_ends(bits, measured, failing)
    def largest(values: np.ndarray) -> tuple[float, tuple, int]:
        grouped = measured[SETTING_KEYS].assign(value=values).groupby(SETTING_KEYS, dropna=False).value
        mean, count = grouped.mean(), grouped.size()
        spread = grouped.std(ddof=1).fillna(0.0) / np.sqrt(count)
        lower = (mean - 2 * spread).fillna(math.inf).to_numpy()
        worst = int(np.argmax(lower))
        return float(lower[worst]), dict(zip(SETTING_KEYS, mean.index[worst])), int(count.iloc[worst])

    value, worst, seeds = largest(per_parameter)
    value_upper, _, _ = largest(upper)
    metrics.add(statistic_name, value / bits_assumed,
                f"max over settings of (mean over seeds of ({setting}) / W - 2 SE) = {value:.4g} bits per parameter, over "
                f"{bits_assumed:g}; worst: {worst['method']}, {worst['experiment']}, F = {worst['F']}, "
                f"target {worst['target']}, {seeds} seeds")
    metrics.add(open_end_name, value_upper / bits_assumed,
                "the same with each count at the open end of its width search's interval (the largest width that "
                "failed; inf where none did)")
    metrics.add(decided_name, float(value_upper <= bits_assumed or value > bits_assumed),
                f"1 when the width searches' resolution decides it: the statistic at the smallest storing W "
                f"({value / bits_assumed:.4g}) and at each interval's open end ({value_upper / bits_assumed:.4g}) lie "
                "on the same side of 1; 0 when they straddle it")


def information_bound_metrics(measured: pd.DataFrame, bits_assumed: float, metrics: MetricsTable,
                               resolution: float = 0.0) -> None:
    """S0.info-bound: every measured count (every experiment and NTK degree) against the 2-bits-
    per-parameter line, an empirical ceiling (not the paper's theorem, which has no constant), as
    an interval: the true smallest count lies in (W_failing, W] (failing_parameters). The bound
    holds for certain when every W_failing is above it, fails for certain when some W is below
    it, and the width search cannot decide when the interval straddles it (the claim's gate).

    The check reads the band: the bits each count must hold at the target it was searched to
    (scaling.target_bits: the covering count with floor((1 - target) F) errors allowed, log2 F!
    at target 1), per parameter, over band_edge(b, resolution) (info_bits_band_ratio, at most 1;
    gate info_bits_band_decided). Reported beside it: the same with log2 F! for every target
    (_permutation), with the hard line b (_hard), over seed means (_seed_mean), and the minimum
    ratios W / (bits / b) of the hard line (info_bound_min_ratio: log2 F! for every target;
    info_bound_min_ratio_target: the target's bits).
    resolution: GD's width-search resolution (mlp.search.resolution)."""
    failing = failing_parameters(measured)
    bits = target_bits(measured.F.to_numpy(), measured.target.to_numpy())
    permutation = permutation_bits(measured.F.to_numpy())
    edge = band_edge(bits_assumed, resolution)
    metrics.add("info_bits_band_edge", edge,
                f"the band 'about {bits_assumed:g} bits per parameter' admits: {bits_assumed:g} / (1 - {resolution:g}), "
                f"the most a count read at {bits_assumed:g} bits holds within GD's width-search resolution {resolution:g}")
    target_bound = "target bits (log2 F! at target 1; the covering count with floor((1 - target) F) errors below 1)"
    band_metrics(bits, measured, failing, edge, ("info_bits_band_ratio", "info_bits_band_ratio_upper", "info_bits_band_decided"),
                 target_bound, metrics)
    band_metrics(permutation, measured, failing, edge,
                 ("info_bits_band_ratio_permutation", "info_bits_band_ratio_upper_permutation",
                  "info_bits_band_decided_permutation"), "log2 F! for every target", metrics)
    band_metrics(bits, measured, failing, bits_assumed,
                 ("info_bits_band_ratio_hard", "info_bits_band_ratio_upper_hard", "info_bits_band_decided_hard"),
                 target_bound + f", against the hard line {bits_assumed:g}", metrics)
    seed_excess_metrics(bits, measured, failing, bits_assumed,
                        ("info_bits_seed_ratio", "info_bits_seed_ratio_open_end", "info_bits_seed_decided"),
                        target_bound, metrics)
    seed_excess_metrics(permutation, measured, failing, bits_assumed,
                        ("info_bits_seed_ratio_permutation", "info_bits_seed_ratio_open_end_permutation",
                         "info_bits_seed_decided_permutation"),
                        "log2 F! for every target", metrics)
    metrics.add("info_bits_per_parameter_max", (bits / measured.n_params.to_numpy()).max(),
                f"max {target_bound} / W over every measured count")
    # the same band over seed means of W (the seeds that stored), where several seeds ran a setting
    means = measured.groupby(SETTING_KEYS, dropna=False).n_params.agg(["mean", "size"]).reset_index()
    mean_bits = target_bits(means.F.to_numpy(), means.target.to_numpy()) / means["mean"].to_numpy()
    metrics.add("info_bits_band_ratio_seed_mean", mean_bits.max() / edge,
                f"the band ratio over {len(means)} settings' seed-mean W (the seeds that stored; "
                f"{int((means['size'] > 1).sum())} settings with more than one): a single seed's extreme count "
                "against the average over seeds")
    bound_target = measured.n_params.to_numpy() / (bits / bits_assumed)
    worst_target = measured.iloc[int(np.argmin(bound_target))]
    metrics.add("info_bound_min_ratio_target", bound_target.min(),
                f"min W / (target bits / {bits_assumed:g}) over {len(measured)} measured counts (the hard line, each count's "
                f"own target); worst: {worst_target.method}, {worst_target.experiment}, F = {worst_target.F}, "
                f"target {worst_target.target:g}")
    bound = information_bound(measured.F.to_numpy(), bits_assumed)
    ratio = measured.n_params.to_numpy() / bound
    lower = failing_parameters(measured) / bound
    worst = measured.iloc[int(np.argmin(ratio))]
    worst_lower = measured.iloc[int(np.argmin(lower))]
    metrics.add("info_bound_min_ratio", ratio.min(),
                f"min W / (log2(F!) / {bits_assumed:g}) over {len(measured)} measured counts, i.e. at most {bits_assumed:g} "
                f"bits per parameter (an empirical ceiling); worst: {worst.method}, {worst.experiment}, F = {worst.F}, "
                f"target {worst.target:g} ({worst.bits_per_parameter:.3g} bits/param as F log2 F / W)")
    metrics.add("info_bound_min_ratio_lower", lower.min(),
                f"the same with each count at the open end of its search interval (the largest width that failed): "
                f"the true minimum ratio lies in ({lower.min():.4g}, {ratio.min():.4g}]; worst: {worst_lower.method}, "
                f"{worst_lower.experiment}, F = {worst_lower.F}, target {worst_lower.target:g}")
    decided = bool(lower.min() >= 1.0 or ratio.min() < 1.0)
    metrics.add("info_bound_decided", float(decided),
                "1 when the search intervals decide the bound (every interval above it, or some count below it); 0 when "
                f"the interval of the minimum ({lower.min():.4g}, {ratio.min():.4g}] straddles 1")
    metrics.add("max_bits_per_parameter", measured.bits_per_parameter.max(),
                f"max F log2 F / W over all measured counts ({worst.method} is the extreme of the bound ratio)")
