"""S1.quarter-circle: the trained W's singular values at capacity against the quarter-circle law
(full rank) and its top-kappa truncation (W = Q R^T of rank kappa d), by KS distances; the KS
distances of the initial W and of the Hebbian W cut to rank kappa d beside them, and each over
the 5% KS critical value of its pooled sample size.

Tables: the spectra of the trained runs (columns problem, d, rank_fraction, alpha, seed, stage
(trained, initial, hebbian), index, singular_value) and the capacity table
(`capacity.capacity_table`), which picks the load read (`memory.spectrum_load`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factstore.assoc import memory

# S1.quarter-circle's check and its two comparisons: the largest, over the kappa run, of a W's KS
# distance to the truncated law divided by the 5% KS critical value of its pooled sample size.
OVER_CRITICAL_METRICS = {
    "trained": ("rank_spectrum_ks_over_critical", "the trained W = Q R^T"),
    "hebbian": ("rank_spectrum_ks_over_critical_hebbian",
                "the Hebbian W of the same facts cut to its top kappa d values (a matrix drawn from the law's own model; reported)"),
    "initial": ("rank_spectrum_ks_over_critical_initial",
                "the initial W = Q R^T, a product of two Gaussian factors (reported)"),
    "above_capacity": ("rank_spectrum_ks_over_critical_above_capacity",
                       "the trained W = Q R^T at the first grid load above the measured capacity (a declared alternative load)"),
}


def spectrum_statistics(spectra: pd.DataFrame, capacity: pd.DataFrame, d: int) -> list[tuple[str, float, str]]:
    """KS distances of the singular values at capacity (at d) to the quarter-circle law (full rank,
    reported) and, for W = Q R^T, of the trained and of the initial W to the top-kappa truncated
    law; rank_spectrum_ks_gain = the smallest, over the kappa run, of KS(initial) - KS(trained)."""
    from scipy.stats import ks_2samp, kstwo

    if "stage" not in spectra:
        spectra = spectra.assign(stage="trained")
    out, samples, gains = [], {}, {}
    over_critical = {stage: {} for stage in OVER_CRITICAL_METRICS}  # stage -> {kappa: KS / 5% critical value}
    for (problem, kappa), group in spectra[spectra.d == d].groupby(["problem", "rank_fraction"]):
        alpha = memory.spectrum_load(capacity, spectra, problem, d, kappa)
        at_load = group[group.alpha == alpha]
        values = at_load[at_load.stage == "trained"].singular_value.to_numpy()
        samples[problem, kappa] = values
        detail = f"d = {d}, alpha = {alpha:g}, {len(values)} singular values"
        # The 5% critical value of the one-sample KS statistic for a sample of that size (scipy's
        # exact kstwo): a reference, not a test, since singular values of one W repel each other
        # and are no i.i.d. sample (their KS to their own law is smaller than an i.i.d. sample's).
        critical = float(kstwo.ppf(0.95, len(values))) if len(values) else float("nan")
        if kappa >= 1:
            name = {"original": "quarter_circle_ks_original", "decoupled": "quarter_circle_ks_decoupled"}[problem]
            out.append((name, memory.ks_distance(values, memory.quarter_circle_cdf), detail))
            critical_name = {"original": "quarter_circle_ks_critical_original",
                             "decoupled": "quarter_circle_ks_critical_decoupled"}[problem]
            out.append((critical_name, critical, f"5% KS critical value for the pooled sample of {len(values)} (reported)"))
            continue
        # Rank m < d: the top-kappa truncation of the law (the optimal rank-m W's law, derived in
        # docs/assoc_truncated_law.md), for the trained W and for its initialisation.
        initial = at_load[at_load.stage == "initial"].singular_value.to_numpy()
        trained_ks, initial_ks = rank_spectrum_ks(values, initial, kappa)
        out.append((f"truncated_quarter_circle_ks_{problem}_kappa{kappa:g}", trained_ks, detail))
        out.append((f"truncated_quarter_circle_ks_initial_{problem}_kappa{kappa:g}", initial_ks, f"{detail}, W = Q R^T at step 0"))
        hebbian = at_load[at_load.stage == "hebbian"].singular_value.to_numpy()
        hebbian_ks = memory.ks_distance(hebbian, lambda v: memory.truncated_quarter_circle_cdf(v, kappa)) if len(hebbian) else float("nan")
        out.append((f"truncated_quarter_circle_ks_hebbian_{problem}_kappa{kappa:g}", hebbian_ks,
                    f"{detail}, the null: the Hebbian W of the same facts truncated to its top kappa d singular values (reported)"))
        out.append((f"truncated_quarter_circle_ks_critical_{problem}_kappa{kappa:g}", critical,
                    f"5% KS critical value for the pooled sample of {len(values)} (reported)"))
        out.append((f"quarter_circle_ks_{problem}_kappa{kappa:g}", memory.ks_distance(values, memory.quarter_circle_cdf), detail))
        gains[kappa] = initial_ks - trained_ks
        if problem == "original":
            for stage, ks in (("trained", trained_ks), ("hebbian", hebbian_ks), ("initial", initial_ks)):
                over_critical[stage][kappa] = ks / critical
            above = np.sort(group.alpha.unique())
            above = above[above > alpha]
            if above.size:  # the declared alternative load: the first grid load above the capacity
                beyond = group[(group.alpha == above[0]) & (group.stage == "trained")].singular_value.to_numpy()
                over_critical["above_capacity"][kappa] = (rank_spectrum_ks(beyond, beyond[:0], kappa)[0]
                                                          / float(kstwo.ppf(0.95, len(beyond))))
    if gains:
        listed = ", ".join(f"kappa {k:g}: {g:+.3g}" for k, g in sorted(gains.items()))
        out.append(("rank_spectrum_ks_gain", min(gains.values()),
                    f"KS(initial W, truncated law) - KS(trained W, truncated law), smallest over kappa ({listed}), d = {d} (reported)"))
    out += over_critical_metrics(over_critical, d)
    if ("original", 1.0) in samples and ("decoupled", 1.0) in samples:
        statistic = ks_2samp(samples["original", 1.0], samples["decoupled", 1.0]).statistic
        out.append(("spectrum_ks_original_vs_decoupled", statistic, f"two-sample KS, d = {d}"))
    return out


def over_critical_metrics(over_critical: dict[str, dict[float, float]], d: int) -> list[tuple[str, float, str]]:
    """Per stage (trained, hebbian, initial, above_capacity), the largest over kappa of KS(W, truncated law) / the 5%
    KS critical value of the pooled sample size: at most 1 means that W's top-kappa spectrum is
    within the finite-size KS reference of the law at every kappa. over_critical: stage -> {kappa:
    ratio}, kappa < 1 of the original problem; stages without a value are left out."""
    out = []
    for stage, (name, what) in OVER_CRITICAL_METRICS.items():
        ratios = {k: v for k, v in over_critical.get(stage, {}).items() if np.isfinite(v)}
        if not ratios:
            continue
        listed = ", ".join(f"kappa {k:g}: {v:.3g}" for k, v in sorted(ratios.items()))
        out.append((name, max(ratios.values()),
                    f"KS(W, truncated law) / 5% KS critical value, largest over kappa, for {what}, d = {d} ({listed})"))
    return out


def rank_spectrum_ks(trained: np.ndarray, initial: np.ndarray, kappa: float) -> tuple[float, float]:
    """KS distances of the trained and of the initial normalised singular values (top kappa d of
    each) to the top-kappa truncated quarter-circle law; nan for an empty sample."""
    def truncated(s):
        return memory.truncated_quarter_circle_cdf(s, kappa)

    return tuple(memory.ks_distance(v, truncated) if len(v) else float("nan") for v in (trained, initial))
