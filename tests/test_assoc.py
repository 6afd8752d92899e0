"""The linear associative memory: load inversion, recall, training, spectra, capacity estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy.integrate import quad

from factstore import assoc


@given(alpha=st.floats(0.01, 3.0), d=st.integers(8, 512))
def test_facts_for_load_inverts_the_load(alpha, d):
    p = assoc.facts_for_load(alpha, d)
    # Rounding p to an integer moves the load by at most one fact's worth.
    assert abs(assoc.load(p, d) - alpha) <= (math.log(p) + 1) / d**2 + 1e-12


def test_quarter_circle_is_a_law_with_unit_second_moment():
    assert quad(assoc.quarter_circle_density, 0, 2)[0] == pytest.approx(1, abs=1e-9)
    assert quad(lambda s: s * s * assoc.quarter_circle_density(s), 0, 2)[0] == pytest.approx(1, abs=1e-9)
    s = np.linspace(0, 2, 7)
    numeric = [quad(assoc.quarter_circle_density, 0, x)[0] for x in s]
    np.testing.assert_allclose(assoc.quarter_circle_cdf(s), numeric, atol=1e-9)


@pytest.mark.parametrize("kappa", [0.25, 0.5, 0.9])
def test_truncated_quarter_circle_is_normalised(kappa):
    lower, second_moment = assoc.truncated_quarter_circle(kappa)
    top = 2 / math.sqrt(second_moment)
    assert assoc.truncated_quarter_circle_cdf(lower / math.sqrt(second_moment), kappa) == pytest.approx(0, abs=1e-9)
    assert assoc.truncated_quarter_circle_cdf(top, kappa) == pytest.approx(1, abs=1e-9)
    # In its own units the truncated law has mean square one, like the normalised samples.
    density = lambda s: np.gradient(assoc.truncated_quarter_circle_cdf(s, kappa), s)
    grid = np.linspace(0, top, 20001)
    assert np.trapezoid(grid**2 * density(grid), grid) == pytest.approx(1, rel=1e-3)


def test_chunked_accuracy_equals_one_pass():
    generator = torch.Generator().manual_seed(0)
    for decoupled in (False, True):
        x, y = assoc.sample_problem(150, 16, 2, generator, decoupled=decoupled)
        weights = assoc.hebbian_weights(x, y)
        whole = assoc.recall_accuracy(weights, x, y, chunk_size=1000)
        chunked = assoc.recall_accuracy(weights, x, y, chunk_size=7)
        torch.testing.assert_close(whole, chunked)


def test_hebbian_recalls_everything_at_a_tiny_load_and_about_half_at_one_half():
    generator = torch.Generator().manual_seed(1)
    x, y = assoc.sample_problem(assoc.facts_for_load(0.02, 128), 128, 2, generator)
    assert (assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y) == 1).all()
    x, y = assoc.sample_problem(assoc.facts_for_load(0.5, 128), 128, 2, generator)
    assert 0.35 < assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y).mean() < 0.65


@pytest.mark.parametrize("decoupled", [False, True])
def test_training_stores_what_hebbian_cannot(decoupled):
    generator = torch.Generator().manual_seed(2)
    x, y = assoc.sample_problem(assoc.facts_for_load(0.4, 24), 24, 2, generator, decoupled=decoupled)
    result = assoc.train_optimal(x, y, max_steps=500, learning_rate=0.5, patience=100)
    assert (result.best_accuracy == 1).all()
    assert (assoc.recall_accuracy(result.weights, x, y) == 1).all()
    assert (assoc.recall_accuracy(assoc.hebbian_weights(x, y), x, y) < 1).all()


def test_rank_constrained_weights_have_the_rank():
    generator = torch.Generator().manual_seed(3)
    x, y = assoc.sample_problem(40, 16, 1, generator)
    result = assoc.train_optimal(x, y, rank=4, max_steps=50, learning_rate=0.1, generator=generator)
    # float32 products leave ~1e-7 relative noise in the zero singular values
    assert torch.linalg.matrix_rank(result.weights[0], rtol=1e-4) == 4


def test_normalised_singular_values_have_unit_mean_square():
    weights = torch.randn(3, 20, 20, generator=torch.Generator().manual_seed(0))
    values = assoc.normalised_singular_values(weights)
    torch.testing.assert_close(values.pow(2).mean(-1), torch.ones(3, dtype=values.dtype))
    # A square Gaussian matrix's singular values follow the quarter-circle law.
    big = assoc.normalised_singular_values(torch.randn(1, 400, 400, generator=torch.Generator().manual_seed(1)))
    assert assoc.ks_distance(big.numpy().ravel(), assoc.quarter_circle_cdf) < 0.05


def test_threshold_crossing_interpolates_and_refuses_to_extrapolate():
    alphas = np.array([0.2, 0.4, 0.6, 0.8])
    assert assoc.threshold_crossing(alphas, np.array([1, 1, 0.5, 0.1]), 0.75) == pytest.approx(0.5)
    assert math.isnan(assoc.threshold_crossing(alphas, np.array([1, 1, 1, 1.0]), 0.99))
    assert math.isnan(assoc.threshold_crossing(alphas, np.array([0.5, 0.4, 0.3, 0.2]), 0.99))


@settings(deadline=None)
@given(intercept=st.floats(0.2, 1.0), slope=st.floats(-2, 5))
def test_extrapolation_recovers_a_known_intercept(intercept, slope):
    p = np.array([100.0, 500.0, 3000.0])
    fitted, fitted_slope = assoc.extrapolate_capacity(intercept + slope / np.log(p), p)
    assert fitted == pytest.approx(intercept, abs=1e-9) and fitted_slope == pytest.approx(slope, abs=1e-9)
