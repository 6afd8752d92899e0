"""The S0 summary metrics on hand-made tables: each claim's verdict flips when its input crosses
the range (built tables, the registry's own checks through claims.evaluate_claim). No science
outcome is asserted here: the claims report checks the measured values."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import REPOSITORY

from factstore import claims, robustness
from factstore.experiments import mlp_summary
from factstore.metrics import MetricsTable
from factstore.mlp.encoder_decoder import gated_parameter_count
from factstore.mlp.results import best_degree_rows, tidy_table
from factstore.mlp.scaling import covering_bits, permutation_bits, target_bits

REGISTRY = {claim["id"]: claim for claim in claims.load_registry(REPOSITORY / "config/claims.yaml")}
D = 32


def row(method: str, n_facts: int, kappa: float, replicate: int, n_params: float | None, *, degree: float = math.nan,
        width: float = math.nan, rho: float = 0.5, cap: float = 10_000.0, experiment: str = "anisotropy",
        d: int = D, target: float = 1.0) -> dict:
    """One results row; n_params None: not stored within the cap `cap`."""
    stored = n_params is not None
    return {"experiment": experiment, "method": method, "degree": degree, "d": d, "F": n_facts, "replicate": replicate,
            "kappa": kappa, "alpha": math.nan, "target": target, "width": width if stored else math.nan,
            "n_params": n_params if stored else math.nan, "stored": stored,
            "best_accuracy": 1.0 if stored else 0.9, "params_at_cap": math.nan if stored else cap, "rho": rho,
            "facts_per_parameter": n_facts / n_params if stored else 0.0}


def anisotropy_frame(rows: list[dict], main_facts: list[int]) -> pd.DataFrame:
    metrics = MetricsTable()
    mlp_summary.anisotropy_metrics(best_degree_rows(tidy_table(rows)), main_facts, metrics)
    return metrics.frame()


def verdict(claim_id: str, frame: pd.DataFrame, only: str | None = None) -> str:
    """The registry's verdict on `frame`; `only`: just the check of that metric, and the gates
    whose metrics `frame` holds (those of the claim's other checks are left out)."""
    claim = REGISTRY[claim_id]
    if only is not None:
        written = set(frame.metric)
        claim = claim | {"checks": [check for check in claim["checks"] if check["metric"] == only],
                         "gates": [gate for gate in claim.get("gates", []) if gate["metric"] in written]}
    return claims.evaluate_claim(claim, {claim["result"]: frame}, "paper")["status"]


def alternative_verdict(claim_id: str, frame: pd.DataFrame, metrics: dict[str, str]) -> str:
    """The registry's verdict on `frame` under a declared alternative: each check's metric renamed
    by `metrics`, same ranges (robustness.alternative_claim)."""
    claim = robustness.alternative_claim(REGISTRY[claim_id], {"metrics": metrics})
    return claims.evaluate_claim(claim, {claim["result"]: frame}, "paper")["status"]


def value(frame: pd.DataFrame, name: str) -> float:
    return float(frame.set_index("metric").value[name])


# ---------------------------------------------------------------------------------------------
# The best NTK degree per setting
# ---------------------------------------------------------------------------------------------


def test_best_degree_is_chosen_per_setting_and_other_methods_are_kept():
    rows = [row("ntk", 256, 1.0, r, w, degree=1.0) for r, w in enumerate([300, 340])]
    rows += [row("ntk", 256, 1.0, r, w, degree=2.0) for r, w in enumerate([2000, 2100])]
    rows += [row("ntk", 512, 1.0, 0, None, degree=1.0), row("ntk", 512, 1.0, 1, 900, degree=1.0)]
    rows += [row("ntk", 512, 1.0, r, 5000, degree=2.0) for r in range(2)]
    rows += [row("gd_gated", 256, 1.0, r, 100) for r in range(2)]
    best = best_degree_rows(tidy_table(rows))
    chosen = best[best.method == "ntk"].groupby("F").degree.unique()
    assert list(chosen[256]) == [1.0]  # the cheaper degree where both store
    assert list(chosen[512]) == [2.0]  # the degree that stores in every seed beats a cheaper one that does not
    assert len(best[best.method == "gd_gated"]) == 2 and len(best) == 6


def test_ntk_stores_per_degree_reads_every_degree():
    rows = [row("ntk", f, 1.0, 0, 1000, degree=2.0, experiment="capacity") for f in (64, 128)]
    rows += [row("ntk", 64, 1.0, 0, 300, degree=1.0, experiment="capacity"),
             row("ntk", 128, 1.0, 0, None, degree=1.0, experiment="capacity")]
    metrics = MetricsTable()
    mlp_summary._ntk_degree_metrics(tidy_table(rows), {"search": {"ntk_max_width": 4096}}, metrics)
    frame = metrics.frame()
    assert value(frame, "ntk_stores_fraction_degree1") == 0.5 and value(frame, "ntk_stores_fraction_degree2") == 1.0
    assert verdict("S0.ntk-stores", frame) == "PASS"
    failing = tidy_table(rows[:1] + [row("ntk", 128, 1.0, 0, None, degree=2.0, experiment="capacity")] + rows[2:])
    metrics = MetricsTable()
    mlp_summary._ntk_degree_metrics(failing, {"search": {"ntk_max_width": 4096}}, metrics)
    assert verdict("S0.ntk-stores", metrics.frame()) == "FAIL"
    # the capacity sweep (its small d) is reported under its own names, which the claim does not read
    metrics = MetricsTable()
    mlp_summary._ntk_degree_metrics(failing, {"search": {"ntk_max_width": 4096}}, metrics,
                                    mlp_summary.NTK_STORES_METRICS_CAPACITY_SWEEP, " (reported)")
    assert value(metrics.frame(), "ntk_stores_fraction_degree2_capacity_sweep") == 0.5
    assert verdict("S0.ntk-stores", metrics.frame()) == "NOT RUN"


# ---------------------------------------------------------------------------------------------
# S0.ntk-ustar-gain
# ---------------------------------------------------------------------------------------------


def gain_rows(exact: dict[float, float], ustar_only: dict[float, float], cap: float = 10_000.0) -> list[dict]:
    """NTK and NTK + U* at F = 256 (2 seeds): exact gains {kappa: W_ntk / W_ustar}, and U*-only
    settings {kappa: the lower bound cap / W_ustar}; kappa = 1 both store at equal cost."""
    rows = []
    for r in range(2):
        rows += [row("ntk", 256, 1.0, r, 1000, degree=2.0), row("ntk_ustar", 256, 1.0, r, 1000, degree=2.0)]
        for kappa, gain in exact.items():
            rows += [row("ntk", 256, kappa, r, 1000 * gain, degree=2.0), row("ntk_ustar", 256, kappa, r, 1000, degree=2.0)]
        for kappa, bound in ustar_only.items():
            rows += [row("ntk", 256, kappa, r, None, degree=2.0, cap=cap),
                     row("ntk_ustar", 256, kappa, r, cap / bound, degree=2.0)]
    return rows


def test_the_break_at_a_fixed_budget_sees_a_cost_that_grows_inside_the_width_cap():
    """The NTK stores at every kappa within its cap, its cost 1x, 1.5x, 3x, 4x of kappa = 1: the
    cap-based break is NaN (a FAIL), the 2x-budget break is kappa = 100."""
    rows = []
    for r in range(3):
        for kappa, factor in ((1.0, 1.0), (10.0, 1.5), (100.0, 3.0), (1000.0, 4.0)):
            rows += [row("ntk", 512, kappa, r, 1000 * factor, degree=2.0), row("ntk_ustar", 512, kappa, r, 800 * factor, degree=2.0)]
    frame = anisotropy_frame(rows, [512])
    assert math.isnan(value(frame, "ntk_break_kappa")) and value(frame, "ntk_break_kappa_budget") == 100.0
    assert value(frame, "ntk_ustar_break_kappa_budget") == 100.0
    assert verdict("S0.ntk-anisotropy-breaks", frame) == "PASS"
    steady = [r | {"n_params": 1000.0} if r["method"] == "ntk" else r for r in rows]  # the NTK's cost flat
    assert math.isnan(value(anisotropy_frame(steady, [512]), "ntk_break_kappa_budget"))
    assert verdict("S0.ntk-anisotropy-breaks", anisotropy_frame(steady, [512])) == "FAIL"
    unstored = mlp_summary.budget_break_kappa(tidy_table([row("ntk", 512, 1.0, 0, None), row("ntk", 512, 10.0, 0, 900)]), 2.0)
    assert all(math.isnan(x) for x in unstored)  # no budget without a kappa = 1 cost


def test_ustar_capacity_ratio_reads_the_ustar_line_at_the_ntks_budget():
    """NTK + U* costs W = F^1.5 / 10; the NTK stores F = 256 at 2x that cost (kappa = 10) or at the
    same cost (kappa = 1): at the NTK's budget U* stores 2^(1/1.5) x (or 1x) as many facts."""
    rows = []
    for r in range(2):
        for kappa, factor in ((1.0, 1.0), (10.0, 2.0)):
            rows.append(row("ntk", 256, kappa, r, factor * 256 ** 1.5 / 10, degree=2.0))
            rows.append(row("ntk", 512, kappa, r, None, degree=2.0))
            rows += [row("ntk_ustar", f, kappa, r, f ** 1.5 / 10, degree=2.0) for f in (128, 256, 512)]
    ratios = mlp_summary.ustar_capacity_ratios(tidy_table(rows)).set_index("kappa")
    assert ratios.loc[1.0, "ratio"] == pytest.approx(1.0) and ratios.loc[1.0, "F_ntk"] == 256
    assert ratios.loc[10.0, "ratio"] == pytest.approx(2 ** (1 / 1.5)) and ratios.loc[10.0, "kind"] == "interpolated"
    frame = anisotropy_frame(rows, [256])
    assert value(frame, "ustar_capacity_ratio_median") == pytest.approx(2 ** (1 / 1.5))


def test_ustar_gain_counts_ustar_only_settings_as_lower_bounds():
    frame = anisotropy_frame(gain_rows({2.0: 1.5, 5.0: 1.5}, {10.0: 3.0, 30.0: 3.0, 100.0: 3.0}), [256])
    assert value(frame, "ustar_gain_median_both_store") == pytest.approx(1.5)  # the settings where both store
    assert value(frame, "ustar_gain_median") == pytest.approx(3.0)  # median of 1.5, 1.5, >= 3, >= 3, >= 3
    assert value(frame, "ustar_gain_median_upper") == math.inf  # three of five unbounded above
    assert value(frame, "ustar_stores_where_ntk_fails") == 3
    assert verdict("S0.ntk-ustar-gain", frame, only="ustar_gain_median") == "PASS"
    assert verdict("S0.ntk-ustar-gain", frame) == "FAIL"  # the upper end cannot be bounded


@pytest.mark.parametrize("gain, expected", [(3.0, "PASS"), (1.5, "FAIL"), (5.0, "FAIL")])
def test_ustar_gain_verdict_flips_across_the_range(gain, expected):
    frame = anisotropy_frame(gain_rows({2.0: gain, 5.0: gain, 10.0: gain}, {100.0: gain * 1.1}), [256])
    assert verdict("S0.ntk-ustar-gain", frame) == expected


# ---------------------------------------------------------------------------------------------
# S0.ntk-anisotropy-breaks
# ---------------------------------------------------------------------------------------------

KAPPAS = [1.0, 10.0, 100.0, 1000.0]


def break_rows(ntk_breaks: float, ustar_breaks: float) -> list[dict]:
    """Both NTKs at F = 512, 2 seeds, storing below their break kappa and failing from it on."""
    rows = []
    for r in range(2):
        for kappa in KAPPAS:
            rows.append(row("ntk", 512, kappa, r, 1000 if kappa < ntk_breaks else None, degree=2.0))
            rows.append(row("ntk_ustar", 512, kappa, r, 800 if kappa < ustar_breaks else None, degree=2.0))
    return rows


@pytest.mark.parametrize("ntk_breaks, ustar_breaks, expected", [
    (10.0, 100.0, "PASS"),
    (10.0, math.inf, "FAIL"),  # NTK + U* stores at every kappa: it does not break
    (1000.0, 100.0, "FAIL"),  # the NTK breaks only at the top of the sweep, not at a moderate kappa
    (1.0, 100.0, "FAIL"),  # the NTK does not store even isotropic values
])
def test_break_verdict_needs_both_ntks_to_break_at_a_moderate_kappa(ntk_breaks, ustar_breaks, expected):
    frame = anisotropy_frame(break_rows(ntk_breaks, ustar_breaks), [512])
    assert verdict("S0.ntk-anisotropy-breaks", frame) == expected


def test_break_kappa_is_the_smallest_kappa_failing_in_half_the_seeds():
    rows = break_rows(100.0, 1000.0)
    rows = [r for r in rows if not (r["method"] == "ntk" and r["kappa"] == 10.0 and r["replicate"] == 0)]
    rows.append(row("ntk", 512, 10.0, 0, None, degree=2.0))  # one of two seeds fails at kappa = 10
    frame = anisotropy_frame(rows, [512])
    assert value(frame, "ntk_break_kappa") == 10.0 and value(frame, "ntk_ustar_break_kappa") == 1000.0


BREAK_ALTERNATIVES = {"3x": {"ntk_break_kappa_budget": "ntk_break_kappa_budget_3x",
                             "ntk_ustar_break_kappa_budget": "ntk_ustar_break_kappa_budget_3x"},
                      "smaller F": {"ntk_stored_fraction_kappa1": "ntk_stored_fraction_kappa1_smaller_f",
                                    "ntk_break_kappa_budget": "ntk_break_kappa_budget_smaller_f",
                                    "ntk_ustar_stored_fraction_kappa1": "ntk_ustar_stored_fraction_kappa1_smaller_f",
                                    "ntk_ustar_break_kappa_budget": "ntk_ustar_break_kappa_budget_smaller_f"}}


def test_the_break_alternatives_read_a_3x_budget_and_the_next_smaller_f():
    """Both NTKs store at every kappa within the cap (3 seeds). At F = 512 their cost is 1x, 1.5x,
    2.5x, 4x of kappa = 1: the 2x break is kappa = 100 (PASS), the 3x break 1000, the top of the
    sweep (FAIL). At F = 256 their cost is flat: no break within 2x there (FAIL)."""
    rows = []
    for r in range(3):
        for kappa, factor in zip(KAPPAS, (1.0, 1.5, 2.5, 4.0)):
            rows += [row("ntk", 512, kappa, r, 1000 * factor, degree=2.0), row("ntk_ustar", 512, kappa, r, 800 * factor, degree=2.0),
                     row("ntk", 256, kappa, r, 500, degree=2.0), row("ntk_ustar", 256, kappa, r, 400, degree=2.0)]
    metrics = MetricsTable()
    mlp_summary.ntk_anisotropy_metrics(best_degree_rows(tidy_table(rows)), 512, metrics, 2.0, alternatives=True)
    frame = metrics.frame()
    assert value(frame, "ntk_break_kappa_budget") == 100.0 and value(frame, "ntk_break_kappa_budget_3x") == 1000.0
    assert value(frame, "ntk_ustar_break_kappa_budget_3x") == 1000.0
    assert value(frame, "ntk_stored_fraction_kappa1_smaller_f") == 1.0
    assert math.isnan(value(frame, "ntk_break_kappa_budget_smaller_f"))
    assert math.isnan(value(frame, "ntk_ustar_break_kappa_budget_smaller_f"))
    assert verdict("S0.ntk-anisotropy-breaks", frame) == "PASS"
    assert alternative_verdict("S0.ntk-anisotropy-breaks", frame, BREAK_ALTERNATIVES["3x"]) == "FAIL"
    assert alternative_verdict("S0.ntk-anisotropy-breaks", frame, BREAK_ALTERNATIVES["smaller F"]) == "FAIL"
    # the same growth at F = 256 too: the smaller F breaks at kappa = 100 as well (PASS)
    grown = [r | {"n_params": r["n_params"] * {1.0: 1.0, 10.0: 1.5, 100.0: 2.5, 1000.0: 4.0}[r["kappa"]]}
             if r["F"] == 256 else r for r in rows]
    metrics = MetricsTable()
    mlp_summary.ntk_anisotropy_metrics(best_degree_rows(tidy_table(grown)), 512, metrics, 2.0, alternatives=True)
    assert value(metrics.frame(), "ntk_ustar_break_kappa_budget_smaller_f") == 100.0
    assert alternative_verdict("S0.ntk-anisotropy-breaks", metrics.frame(), BREAK_ALTERNATIVES["smaller F"]) == "PASS"
    # only the checked sweep writes them (the summary's d = 32 sweep calls without `alternatives`)
    assert "ntk_break_kappa_budget_3x" not in set(anisotropy_frame(rows, [256, 512]).metric)


def test_the_ntk_claims_read_the_d128_sweep_and_the_d32_sweep_is_reported_beside(tmp_path):
    """summary: the break and U* gain metrics come from anisotropy_regime (d = 128); the same
    metrics of the d = 32 anisotropy sweep carry the suffix (the NTK claims read d = 128)."""
    d32 = break_rows(10.0, 100.0)
    d128 = [r | {"experiment": "anisotropy_regime", "d": 128} for r in break_rows(100.0, 1000.0)]
    inputs = {}
    for name, rows in [("anisotropy_k1", d32), ("anisotropy_regime", d128)]:
        inputs[name] = tmp_path / f"{name}.csv"
        tidy_table(rows).to_csv(inputs[name], index=False)
    params = {"bits_per_parameter_assumed": 2, "main_target": 1.0, "ntk_degrees": [2], "search": {"ntk_max_width": 10_000, "resolution": 0.05},
              "anisotropy_facts": [512], "break_width_budget": 2.0}
    frame = mlp_summary.summary(params, inputs, None)["metrics"]
    assert value(frame, "ntk_break_kappa") == 100.0 and value(frame, "ntk_ustar_break_kappa") == 1000.0
    assert value(frame, "ntk_break_kappa_anisotropy_sweep") == 10.0
    assert value(frame, "ntk_ustar_break_kappa_anisotropy_sweep") == 100.0
    assert "d = 128" in frame.set_index("metric").detail["ntk_break_kappa"]
    # the d = 32 sweep's breaks (10, 100) pass; the d = 128 NTK + U* breaks only at the top of the
    # sweep (1000), so the claim fails although the d = 32 sweep is unchanged
    assert verdict("S0.ntk-anisotropy-breaks", frame) == "FAIL"
    moderate = [r | {"experiment": "anisotropy_regime", "d": 128} for r in break_rows(100.0, 100.0)]
    tidy_table(moderate).to_csv(inputs["anisotropy_regime"], index=False)
    frame = mlp_summary.summary(params, inputs, None)["metrics"]
    assert verdict("S0.ntk-anisotropy-breaks", frame) == "PASS"


# ---------------------------------------------------------------------------------------------
# S0.others-robust
# ---------------------------------------------------------------------------------------------


def robust_rows(facts: list[int], gd_ratio: float = 1.5, ed_code_sizes: tuple[int, int] = (8, 12)) -> list[dict]:
    """GD and the gated encoder-decoder at each F over KAPPAS (2 seeds): GD's W grows by gd_ratio
    from kappa = 1 to the others; the encoder-decoder's code size from ed_code_sizes[0] to [1]."""
    rows = []
    for n_facts in facts:
        for r in range(2):
            for kappa in KAPPAS:
                grown = kappa > 1
                rows.append(row("gd_gated", n_facts, kappa, r, 1000 * (gd_ratio if grown else 1.0)))
                m = ed_code_sizes[1] if grown else ed_code_sizes[0]
                rows.append(row("ed_gated", n_facts, kappa, r, gated_parameter_count(n_facts, D, D, m), width=m))
    return rows


@pytest.mark.parametrize("rows, expected", [
    (robust_rows([256, 512]), "PASS"),
    (robust_rows([512]), "FAIL"),  # one F cannot show scaling
    (robust_rows([256, 512], gd_ratio=2.5), "FAIL"),
    (robust_rows([256, 512], ed_code_sizes=(8, 20)), "FAIL"),
    # the code size starts near its cap m = d: no ratio above 1.45 is possible, so the check could not fail
    (robust_rows([256, 512], ed_code_sizes=(24, 30)), "FAIL"),
])
def test_robust_verdict_flips_with_cost_ratio_number_of_f_and_code_size_headroom(rows, expected):
    assert verdict("S0.others-robust", robust_frame(rows)) == expected


def robust_frame(rows: list[dict]) -> pd.DataFrame:
    """The anisotropy sweep's metrics (GD's checks) and the encoder-decoder's rows again as the
    d = 128 sweep (robust_regime: its checks), in one metrics table."""
    metrics = MetricsTable()
    mlp_summary._robust_regime_metrics(tidy_table([r | {"experiment": "robust_regime"} for r in rows
                                                   if r["method"] == "ed_gated"]), metrics)
    return pd.concat([anisotropy_frame(rows, sorted({r["F"] for r in rows})), metrics.frame()], ignore_index=True)


def test_the_encoder_decoder_is_checked_on_its_d128_sweep():
    frame = robust_frame(robust_rows([256, 512]))
    assert value(frame, "robust_regime_n_facts") == 2
    assert value(frame, "robust_regime_cost_ratio_ed_gated") == pytest.approx(value(frame, "robust_cost_ratio_ed_gated"))
    # the d = 32 sweep alone does not decide the encoder-decoder's checks
    assert verdict("S0.others-robust", anisotropy_frame(robust_rows([256, 512]), [256, 512])) == "NOT RUN"


def test_robust_cost_ratio_is_the_worst_over_f_and_a_failure_is_infinite():
    rows = robust_rows([256, 512])
    rows = [r for r in rows if not (r["method"] == "gd_gated" and r["F"] == 256 and r["kappa"] == 1000.0 and r["replicate"] == 1)]
    rows.append(row("gd_gated", 256, 1000.0, 1, None))
    frame = anisotropy_frame(rows, [256, 512])
    assert value(frame, "robust_cost_ratio_gd_gated") == math.inf
    assert value(frame, "robust_stored_fraction_gd_gated") == pytest.approx(15 / 16)
    m_ratio = gated_parameter_count(256, D, D, 12) / gated_parameter_count(256, D, D, 8)
    assert value(frame, "robust_cost_ratio_ed_gated") == pytest.approx(max(
        m_ratio, gated_parameter_count(512, D, D, 12) / gated_parameter_count(512, D, D, 8)))
    assert value(frame, "robust_cost_ceiling_ed_gated") == pytest.approx(min(
        gated_parameter_count(f, D, D, D) / gated_parameter_count(f, D, D, 8) for f in (256, 512)))


# ---------------------------------------------------------------------------------------------
# S0.rho-predicts
# ---------------------------------------------------------------------------------------------


def rho_rows(code_sizes: dict[float, tuple[int, int]], rhos: dict[float, tuple[float, float]]) -> list[dict]:
    """The gated encoder-decoder at F = 512 per kappa: code sizes and rho(V) of two seeds."""
    return [row("ed_gated", 512, kappa, r, gated_parameter_count(512, D, D, code_sizes[kappa][r]),
                width=code_sizes[kappa][r], rho=rhos[kappa][r])
            for kappa in code_sizes for r in range(2)]


RHOS = {1.0: (0.50, 0.46), 10.0: (0.44, 0.48), 100.0: (0.35, 0.33), 1000.0: (0.20, 0.22)}


def test_rho_spearman_averages_seeds_first():
    # seed 0's kappa = 1 set is cheaper and seed 1's dearer than kappa = 10's; their means rank with rho
    sizes = {1.0: (7, 9), 10.0: (8, 9), 100.0: (14, 14), 1000.0: (20, 20)}
    frame = anisotropy_frame(rho_rows(sizes, RHOS), [512])
    assert value(frame, "rho_spearman_ed_gated") == pytest.approx(1.0)
    assert verdict("S0.rho-predicts", frame, only="rho_spearman_ed_gated") == "PASS"
    reversed_sizes = {1.0: (20, 20), 10.0: (14, 14), 100.0: (8, 9), 1000.0: (7, 9)}
    assert verdict("S0.rho-predicts", anisotropy_frame(rho_rows(reversed_sizes, RHOS), [512]),
                   only="rho_spearman_ed_gated") == "FAIL"


def test_rho_spearman_leaves_out_value_sets_at_the_code_size_cap():
    sizes = {1.0: (8, 8), 10.0: (10, 10), 100.0: (14, 14), 1000.0: (D, D)}
    rhos = RHOS | {1000.0: (0.6, 0.6)}  # a capped point that would break the ranking
    frame = anisotropy_frame(rho_rows(sizes, rhos) + rho_rows({3000.0: (16, 16)}, {3000.0: (0.30, 0.30)}), [512])
    assert value(frame, "ed_code_cap_fraction_ed_gated") == pytest.approx(0.2)
    assert value(frame, "rho_spearman_ed_gated") == pytest.approx(1.0)
    assert value(frame, "rho_spearman_ed_gated_with_capped") < 0.8  # with it, the ranking breaks
    only_three = {1.0: (8, 8), 10.0: (D, D), 100.0: (D, 14), 1000.0: (D, D)}
    frame = anisotropy_frame(rho_rows(only_three, RHOS), [512])
    assert math.isnan(value(frame, "rho_spearman_ed_gated"))  # fewer than 3 uncapped value sets
    assert verdict("S0.rho-predicts", frame, only="rho_spearman_ed_gated") == "FAIL"


def test_rho_range_ratio_reads_the_value_sets_ranked():
    assert mlp_summary.rho_range_ratio(pd.Series([0.2, 0.5, 0.3])) == pytest.approx(2.5)
    assert math.isnan(mlp_summary.rho_range_ratio(pd.Series([], dtype=float)))
    sizes = {1.0: (8, 8), 10.0: (10, 10), 100.0: (14, 14), 1000.0: (D, D)}  # kappa = 1000 capped: left out
    rhos = RHOS | {1000.0: (0.05, 0.05)}
    frame = anisotropy_frame(rho_rows(sizes, rhos), [512])
    assert value(frame, "rho_range_ratio_ed_gated") == pytest.approx(0.48 / 0.34)
    assert value(frame, "rho_range_ratio_ed_gated_with_capped") == pytest.approx(0.48 / 0.05)


def test_a_rho_rank_over_a_narrow_range_is_untestable():
    sizes = {1.0: (7, 7), 10.0: (8, 8), 100.0: (14, 14), 1000.0: (20, 20)}
    wide = anisotropy_frame(rho_rows(sizes, RHOS), [512])  # rho 0.48 to 0.21: ratio 2.3
    assert value(wide, "rho_range_ratio_ed_gated") >= 1.5
    assert verdict("S0.rho-predicts", wide, only="rho_spearman_ed_gated") == "PASS"
    narrow_rhos = {1.0: (0.50, 0.50), 10.0: (0.46, 0.46), 100.0: (0.42, 0.42), 1000.0: (0.38, 0.38)}
    narrow = anisotropy_frame(rho_rows(sizes, narrow_rhos), [512])  # the same ranking over 0.50 to 0.38: ratio 1.3
    assert value(narrow, "rho_spearman_ed_gated") == pytest.approx(1.0)
    assert verdict("S0.rho-predicts", narrow, only="rho_spearman_ed_gated") == "UNTESTABLE"


def test_the_whitening_half_is_gated_on_its_own_rho_range():
    def whitening_frame(rhos: list[float]) -> pd.DataFrame:
        rows = [row("ed_gated", 256, math.nan, r, 1000.0 / (i + 1), rho=rho, d=384, experiment="whitening")
                | {"alpha": alpha, "lipschitz": 1.0, "lipschitz_relative": 1.0}
                for i, (alpha, rho) in enumerate(zip([0.0, 0.1, 0.2, 0.5, 1.0], rhos)) for r in range(2)]
        metrics = MetricsTable()
        mlp_summary._whitening_metrics(tidy_table(rows), metrics)
        return metrics.frame()

    narrow = whitening_frame([0.56, 0.60, 0.64, 0.68, 0.71])
    assert value(narrow, "rho_spearman_whitening_ed_gated") == pytest.approx(1.0)
    assert value(narrow, "rho_range_ratio_whitening_ed_gated") == pytest.approx(0.71 / 0.56)
    assert verdict("S0.rho-predicts", narrow, only="rho_spearman_whitening_ed_gated") == "UNTESTABLE"
    wide = whitening_frame([0.3, 0.4, 0.5, 0.6, 0.7])
    assert verdict("S0.rho-predicts", wide, only="rho_spearman_whitening_ed_gated") == "PASS"
    assert verdict("S0.rho-predicts", whitening_frame([0.7, 0.6, 0.5, 0.4, 0.3]),
                   only="rho_spearman_whitening_ed_gated") == "FAIL"


# ---------------------------------------------------------------------------------------------
# S0.ed-matches-gd-asymptotics
# ---------------------------------------------------------------------------------------------


def capacity_frame(gd_exponent_at_large_f: float | None) -> pd.DataFrame:
    """ed_gated and gd_gated at d = 16, F = 2^5..2^11: W = F log2 F for both, except GD's W grows
    like F^gd_exponent_at_large_f from F / d = 32 on; below F / d = 32 GD is erratic (ignored)."""
    rows = []
    for log2_f in range(5, 12):
        n_facts = 2**log2_f
        ed = 3.0 * n_facts * log2_f
        gd = ed / 10 * (3.0 if n_facts < 32 * 16 else 1.0)
        if gd_exponent_at_large_f is not None and n_facts >= 32 * 16:
            gd = 512 * 9 * 0.3 * (n_facts / 512) ** gd_exponent_at_large_f
        for method, w in (("ed_gated", ed), ("gd_gated", gd)):
            rows.append(row(method, n_facts, 1.0, 0, w, experiment="capacity", d=16, target=0.99))
    table = tidy_table(rows)
    metrics = MetricsTable()
    mlp_summary._capacity_metrics(table, mlp_summary.fits_table(table), 0.99, {"search": {"ntk_max_width": 1}}, metrics)
    return metrics.frame()


def test_exponents_are_compared_only_over_f_over_d_at_least_32():
    frame = capacity_frame(None)
    assert value(frame, "exponent_gap_ed_gd_asymptotic") == pytest.approx(0.0, abs=1e-12)
    assert value(frame, "exponent_gap_ed_gd") > 0.2  # over all F the erratic small-F points differ
    assert verdict("S0.ed-matches-gd-asymptotics", frame) == "PASS"
    steeper = capacity_frame(1.5)
    assert value(steeper, "exponent_asymptotic_gd_gated") == pytest.approx(1.5)
    assert verdict("S0.ed-matches-gd-asymptotics", steeper) == "FAIL"


def two_target_capacity_rows(gd_exponent_t099: float, gd_cheaper_t099: bool = True) -> list[dict]:
    """ed_gated and gd_gated at d = 16, F = 512 and 1,024 (F / d >= 32), targets 0.99 and 1: W = F log2 F
    for the encoder-decoder, a tenth of it for GD at target 1; at target 0.99 GD's W grows like
    F^gd_exponent_t099 from a tenth (or, gd_cheaper_t099 False, twice) the encoder-decoder's W at F = 512."""
    rows = []
    for n_facts in (512, 1024):
        ed = n_facts * math.log2(n_facts)
        gd_t099 = (0.1 if gd_cheaper_t099 else 2.0) * 512 * 9 * (n_facts / 512) ** gd_exponent_t099
        for method, target, w in (("ed_gated", 0.99, ed), ("ed_gated", 1.0, ed),
                                  ("gd_gated", 0.99, gd_t099), ("gd_gated", 1.0, ed / 10)):
            rows.append(row(method, n_facts, 1.0, 0, w, experiment="capacity", d=16, target=target))
    return rows


def capacity_metrics_frame(rows: list[dict]) -> pd.DataFrame:
    table = best_degree_rows(tidy_table(rows))
    metrics = MetricsTable()
    mlp_summary._capacity_metrics(table, mlp_summary.fits_table(table), 0.99, {"search": {"ntk_max_width": 1}}, metrics)
    return metrics.frame()


def test_the_exponent_gap_at_target_1_only_leaves_out_target_099():
    """GD's slope is 1.5 at target 0.99 (gap ~0.4, FAIL) and F log F's at target 1 (gap 0, PASS)."""
    frame = capacity_metrics_frame(two_target_capacity_rows(1.5))
    assert value(frame, "exponent_gap_ed_gd_asymptotic") > 0.3
    assert value(frame, "exponent_gap_ed_gd_asymptotic_t1") == pytest.approx(0.0, abs=1e-12)
    assert verdict("S0.ed-matches-gd-asymptotics", frame) == "FAIL"
    alternative = {"exponent_gap_ed_gd_asymptotic": "exponent_gap_ed_gd_asymptotic_t1"}
    assert alternative_verdict("S0.ed-matches-gd-asymptotics", frame, alternative) == "PASS"
    one_target = capacity_metrics_frame([r for r in two_target_capacity_rows(1.5) if r["target"] == 0.99])
    assert "exponent_gap_ed_gd_asymptotic_t1" not in set(one_target.metric)  # no target 1: no metric


def test_gd_cost_advantage_at_target_1_only_leaves_out_target_099():
    """GD costs twice the encoder-decoder at target 0.99 (advantage 0.5, FAIL), a tenth at target 1 (10, PASS)."""
    frame = capacity_metrics_frame(two_target_capacity_rows(1.0, gd_cheaper_t099=False))
    assert value(frame, "gd_cost_advantage_min") == pytest.approx(0.5)
    assert value(frame, "gd_cost_advantage_min_t1") == pytest.approx(10.0)
    assert verdict("S0.gd-cheapest", frame) == "FAIL"
    assert alternative_verdict("S0.gd-cheapest", frame, {"gd_cost_advantage_min": "gd_cost_advantage_min_t1"}) == "PASS"


def test_the_ntk_cost_at_degree_2_only_reads_the_degree_2_rows():
    """At F = 1,024 (2 seeds) the degree-1 NTK stores at 0.5x the encoder-decoder's W (the best degree:
    ratio 0.5, FAIL); degree 2 stores at 3x (PASS), or not at all, read at its cap (a lower bound, 4x)."""
    def rows(degree2_w: float | None) -> list[dict]:
        out = []
        for r in range(2):
            out += [row("ed_gated", 1024, 1.0, r, 10_000, experiment="capacity"),
                    row("ntk", 1024, 1.0, r, 5_000, degree=1.0, experiment="capacity"),
                    row("ntk", 1024, 1.0, r, degree2_w, degree=2.0, experiment="capacity", cap=40_000)]
        return out

    def frame(degree2_w: float | None) -> pd.DataFrame:
        capacity_all = tidy_table(rows(degree2_w))
        table = best_degree_rows(capacity_all)
        metrics = MetricsTable()
        mlp_summary._capacity_metrics(table, mlp_summary.fits_table(table), 1.0, {"search": {"ntk_max_width": 1}}, metrics)
        mlp_summary._ntk_degree2_cost_metrics(capacity_all, metrics)
        return metrics.frame()

    alternative = {"ntk_over_ed_largest_f": "ntk_over_ed_largest_f_degree2"}
    stored = frame(30_000)
    assert value(stored, "ntk_over_ed_largest_f") == pytest.approx(0.5)
    assert value(stored, "ntk_over_ed_largest_f_degree2") == pytest.approx(3.0)
    assert verdict("S0.ntk-costlier", stored) == "FAIL"
    assert alternative_verdict("S0.ntk-costlier", stored, alternative) == "PASS"
    assert value(frame(None), "ntk_over_ed_largest_f_degree2") == pytest.approx(4.0)
    cheap = frame(2_000)  # degree 2 the cheaper: it is also the best degree, both read 0.2
    assert value(cheap, "ntk_over_ed_largest_f") == value(cheap, "ntk_over_ed_largest_f_degree2") == pytest.approx(0.2)
    metrics = MetricsTable()
    mlp_summary._ntk_degree2_cost_metrics(tidy_table([r for r in rows(30_000) if r["degree"] != 2.0]), metrics)
    assert metrics.frame().empty  # no degree-2 rows: no metric


@pytest.mark.parametrize("n_facts, dim, code_size", [(40, 8, 3), (64, 16, 16), (100, 12, 5)])
def test_gated_parameter_count_is_the_built_modules_count(n_facts, dim, code_size):
    """The robustness ceiling W(m = d) uses the count without building the module."""
    import torch

    from factstore.facts import make_fact_set
    from factstore.mlp import encoder_decoder

    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(0))
    built = encoder_decoder.build(facts, code_size, torch.Generator().manual_seed(0))[1]
    assert gated_parameter_count(n_facts, dim, dim, code_size) == built


# ---------------------------------------------------------------------------------------------
# S0.info-bound: the search's interval against the bound
# ---------------------------------------------------------------------------------------------


def bound_frame(ratio: float, failing_fraction: float, target: float = 1.0, resolution: float = 0.05) -> pd.DataFrame:
    """One gated-GD count at `ratio` x the 2-bit bound log2(F!) / 2, its largest failing probe at
    failing_fraction x its width; an NTK count (an exact search) far above the bound."""
    n_facts = 256
    bound = float(mlp_summary.information_bound(n_facts, 2.0))
    width = 1000
    gd = row("gd_gated", n_facts, 1.0, 0, ratio * bound, width=width, experiment="capacity", target=target) | {
        "width_failing": failing_fraction * width, "bits_per_parameter": 1.0}
    ntk = row("ntk", n_facts, 1.0, 0, 10 * bound, width=5000, degree=2.0, experiment="capacity") | {
        "width_failing": 4999, "bits_per_parameter": 0.1}
    metrics = MetricsTable()
    measured = tidy_table([gd, ntk])
    mlp_summary._information_bound_metrics(measured[measured.stored], 2.0, metrics, resolution)
    return metrics.frame()


def test_the_hard_line_is_decided_only_when_the_search_interval_does_not_straddle_it():
    certain = bound_frame(1.2, 0.95)  # (1.14, 1.2]: above the bound for certain
    assert value(certain, "info_bound_min_ratio") == pytest.approx(1.2)
    assert value(certain, "info_bound_min_ratio_lower") == pytest.approx(1.14)
    assert value(certain, "info_bound_decided") == 1.0
    straddling = bound_frame(1.0002, 0.96)  # (0.96, 1.0002]: the resolution decides, not the MLP
    assert value(straddling, "info_bound_decided") == 0.0
    below = bound_frame(0.9, 0.85)  # a count below the bound: decided
    assert value(below, "info_bound_decided") == 1.0
    no_failing_probe = bound_frame(1.5, math.nan)  # stored at the first probe: the interval reaches down to 0
    assert value(no_failing_probe, "info_bound_min_ratio_lower") == 0.0
    assert value(no_failing_probe, "info_bits_band_ratio_upper") == math.inf


def test_the_covering_count_is_log2_factorial_without_errors_and_falls_with_them():
    for n_facts in (1, 2, 7, 64, 1024):
        assert covering_bits(n_facts, 0) == pytest.approx(permutation_bits(n_facts))
        bits = covering_bits(n_facts, list(range(n_facts + 1)))
        assert (bits >= 0).all()  # clipped where the count stops binding
        assert (pd.Series(bits).diff().dropna() <= 1e-9).all()  # never rises with k
        positive = bits[bits > 0]
        assert (pd.Series(positive).diff().dropna() < 0).all()  # strictly falls while it binds
    # by hand, F = 4, k = 1: log2 24 - log2 4 - log2 4 = log2(1.5)
    assert covering_bits(4, 1) == pytest.approx(math.log2(1.5))


def test_a_count_is_held_to_the_bits_of_the_target_it_was_searched_to():
    assert target_bits(1024, 1.0) == pytest.approx(permutation_bits(1024))
    assert target_bits(1024, 0.99) == pytest.approx(covering_bits(1024, 10))  # k = floor(10.24)
    assert target_bits(100, 0.99) == pytest.approx(covering_bits(100, 1))  # 1 - 0.99 in floats is 0.01000...01
    assert target_bits(10, 0.9) == pytest.approx(covering_bits(10, 1))  # and 1 - 0.9 is 0.0999...98
    assert target_bits(1024, 0.99) < target_bits(1024, 1.0)
    # the same count reads fewer bits per parameter at 0.99 than at 1.0
    at_99, at_1 = bound_frame(0.99, 0.999, target=0.99), bound_frame(0.99, 0.999, target=1.0)
    assert value(at_99, "info_bits_band_ratio") < value(at_1, "info_bits_band_ratio")
    assert value(at_99, "info_bits_band_ratio_permutation") == pytest.approx(value(at_1, "info_bits_band_ratio"))
    assert value(at_99, "info_bound_min_ratio") == pytest.approx(0.99)  # the hard line on log2 F!, unchanged
    assert value(at_99, "info_bound_min_ratio_target") > 1.0  # the hard line on the target's bits


def test_about_2_bits_is_a_band_as_wide_as_the_search_resolution():
    assert mlp_summary.band_edge(2.0, 0.05) == pytest.approx(2 / 0.95)
    assert mlp_summary.band_edge(2.0, 0.0) == 2.0
    # a count at 2.05 bits per parameter (ratio 2 / 2.05 to the hard bound), its interval within 2% of W
    inside = bound_frame(2 / 2.05, 0.98)
    assert value(inside, "info_bits_per_parameter_max") == pytest.approx(2.05)
    assert value(inside, "info_bits_band_ratio") == pytest.approx(2.05 * 0.95 / 2)
    band = {"info_bits_seed_ratio": "info_bits_band_ratio", "info_bits_seed_decided": "info_bits_band_decided"}  # the declared alternative reading
    assert value(inside, "info_bits_band_decided") == 1.0 and alternative_verdict("S0.info-bound", inside, band) == "PASS"
    assert value(inside, "info_bits_band_ratio_hard") > 1.0  # past the hard line for certain
    assert alternative_verdict("S0.info-bound", inside, {"info_bits_seed_ratio": "info_bits_band_ratio_hard",
                                                         "info_bits_seed_decided": "info_bits_band_decided_hard"}) == "FAIL"
    # the same count at an exact search (resolution 0): the band is the hard line
    assert alternative_verdict("S0.info-bound", bound_frame(2 / 2.05, 0.98, resolution=0.0), band) == "FAIL"
    # past the band for certain, and straddling its edge
    past = bound_frame(2 / 2.3, 0.9)
    assert value(past, "info_bits_band_decided") == 1.0 and alternative_verdict("S0.info-bound", past, band) == "FAIL"
    straddling = bound_frame(2 / 2.08, 0.95)  # [2.08, 2.19) bits against the edge 2.105
    assert value(straddling, "info_bits_band_decided") == 0.0
    assert alternative_verdict("S0.info-bound", straddling, band) == "UNTESTABLE"
    well_inside = bound_frame(1.2, 0.95)
    assert value(well_inside, "info_bits_band_decided") == 1.0 and alternative_verdict("S0.info-bound", well_inside, band) == "PASS"


def seeds_frame(bits_per_parameter: list[float], failing_fraction: float) -> pd.DataFrame:
    """One gated-GD setting (F = 256, target 1) with one seed per entry holding that many bits
    per parameter, each seed's largest failing probe at failing_fraction x its width."""
    bound = float(mlp_summary.information_bound(256, 2.0))
    rows = [row("gd_gated", 256, 1.0, seed, 2 / bits * bound, width=1000, experiment="capacity")
            | {"width_failing": failing_fraction * 1000} for seed, bits in enumerate(bits_per_parameter)]
    metrics = MetricsTable()
    mlp_summary._information_bound_metrics(tidy_table(rows), 2.0, metrics, 0.05)
    return metrics.frame()


def test_about_2_bits_is_2_standard_errors_over_seeds():
    """The claim's reading: no setting's mean over seeds exceeds 2 bits per parameter by more
    than 2 standard errors; the search resolution decides it or the claim is UNTESTABLE."""
    noisy = seeds_frame([2.05, 1.95], 0.99)  # mean 2.0, SE 0.05: 1.9 bits
    assert value(noisy, "info_bits_seed_ratio") == pytest.approx(0.95)
    assert verdict("S0.info-bound", noisy) == "PASS"
    assert verdict("S0.info-bound", seeds_frame([2.30, 2.32], 0.99)) == "FAIL"  # 2.29 bits past 2 for certain
    assert verdict("S0.info-bound", seeds_frame([2.05], 0.98)) == "FAIL"  # one seed carries no error
    straddling = seeds_frame([1.99], 0.95)  # 1.99 bits at W, 2.09 at the interval's open end
    assert value(straddling, "info_bits_seed_decided") == 0.0 and verdict("S0.info-bound", straddling) == "UNTESTABLE"


def test_the_seed_mean_band_reads_the_average_count_of_each_setting():
    n_facts, bound = 256, float(mlp_summary.information_bound(256, 2.0))
    rows = [row("gd_gated", n_facts, 1.0, r, w * bound, width=100, experiment="capacity") | {"width_failing": 99}
            for r, w in enumerate([0.9, 1.1])]
    metrics = MetricsTable()
    mlp_summary._information_bound_metrics(tidy_table(rows), 2.0, metrics, 0.05)
    frame = metrics.frame()
    assert value(frame, "info_bits_band_ratio") == pytest.approx(2 / 0.9 / mlp_summary.band_edge(2.0, 0.05))
    assert value(frame, "info_bits_band_ratio_seed_mean") == pytest.approx(2 / 1.0 / mlp_summary.band_edge(2.0, 0.05))


# ---------------------------------------------------------------------------------------------
# S0.whitening-capacity at F >> d
# ---------------------------------------------------------------------------------------------

ALPHAS = [0.0, 0.2, 1.0]


def whitening_regime_rows(method: str, accuracies: list[float], widths: list[float | None]) -> list[dict]:
    """One method at each alpha of ALPHAS, 2 seeds: stored with W = widths[i], or not stored
    within the cap with best accuracy accuracies[i]."""
    rows = []
    for alpha, accuracy, n_params in zip(ALPHAS, accuracies, widths):
        for replicate in range(2):
            entry = row(method, 256, math.nan, replicate, n_params, experiment="whitening_regime", d=64,
                        degree=2.0 if method.startswith("ntk") else math.nan)
            rows.append(entry | {"alpha": alpha, "best_accuracy": 1.0 if n_params is not None else accuracy})
    return rows


def whitening_regime_frame(rows: list[dict]) -> pd.DataFrame:
    metrics = MetricsTable()
    mlp_summary.whitening_regime_metrics(best_degree_rows(tidy_table(rows)), metrics)
    return metrics.frame()


@pytest.mark.parametrize("accuracies, widths, expected", [
    ([0.36, 0.95, 0.98], [None, None, None], "PASS"),  # no alpha stores: the accuracy within the cap rises
    ([0.98, 0.95, 0.36], [None, None, None], "FAIL"),  # ... or falls
    ([0.36, 1.0, 1.0], [None, 9000, 6000], "PASS"),  # stored alphas read 1: the rise to storage counts
    ([1.0, 1.0, 1.0], [3000, 6000, 9000], "FAIL"),  # every alpha stores: F / W, here falling
    ([1.0, 1.0, 1.0], [9000, 6000, 3000], "PASS"),
])
def test_whitening_regime_reads_capacity_within_the_width_budget(accuracies, widths, expected):
    """The NTK at F >> d: F / W where every (alpha, seed) stores, else the facts recalled within
    the width cap (read at a fixed width budget), so the check flips with the trend."""
    frame = whitening_regime_frame(whitening_regime_rows("ntk", accuracies, widths))
    assert verdict("S0.whitening-capacity", frame, only="whitening_regime_capacity_spearman_ntk") == expected
    assert value(frame, "whitening_regime_stored_fraction_ntk") == sum(w is not None for w in widths) / len(widths)


def test_whitening_regime_reports_every_method_and_the_claim_reads_the_ntk():
    rows = (whitening_regime_rows("ntk", [0.36, 0.95, 0.98], [None, None, None])
            + whitening_regime_rows("gd_gated", [1.0] * 3, [1344, 1536, 2112])
            + whitening_regime_rows("ed_gated", [1.0] * 3, [17914, 14049, 21979]))
    frame = whitening_regime_frame(rows)
    assert value(frame, "whitening_regime_capacity_spearman_gd_gated") == pytest.approx(-1.0)
    assert value(frame, "whitening_regime_capacity_spearman_ed_gated") == pytest.approx(-0.5)
    assert value(frame, "whitening_regime_capacity_spearman_ntk") == pytest.approx(1.0)
    assert "whitening_regime_capacity_spearman_ntk" in [c["metric"] for c in REGISTRY["S0.whitening-capacity"]["checks"]]
