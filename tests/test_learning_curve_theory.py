"""Tests of factstore.learning_curve_theory: the spectral theory's learning curve on cases with a known
answer (power-law spectra and targets, finite-rank kernels) and the properties of its kappa."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factstore import learning_curve_theory as theory
from factstore.statistics import power_law_fit

MODES = np.arange(1, 200_001, dtype=float)


@settings(max_examples=15, deadline=None)
@given(spectrum_decay=st.floats(1.5, 3.0), target_decay=st.floats(1.5, 3.0))
def test_power_law_spectrum_and_target_give_the_textbook_exponent(spectrum_decay, target_decay):
    """lambda_k = k^-a and target weights v_k^2 = k^-b (1 < b < 2a + 1): ridgeless regression's error
    is the target weight beyond the ~P learnt modes, E_g ~ P^-(b - 1) (Bordelon et al. 2020)."""
    eigenvalues, power = MODES ** -spectrum_decay, MODES ** -target_decay
    tail = MODES[-1] ** (1 - spectrum_decay) / (spectrum_decay - 1)  # the kernel's trace beyond the listed modes
    sizes = np.array([100, 200, 400, 800, 1600])
    errors = theory.generalisation_error(eigenvalues, power, sizes, unresolved_trace=tail)
    assert power_law_fit(sizes, errors).exponent == pytest.approx(-(target_decay - 1), abs=0.05)


@settings(max_examples=30, deadline=None)
@given(rank=st.integers(2, 40), seed=st.integers(0, 10_000))
def test_a_finite_rank_kernel_learns_a_target_in_its_span_exactly_from_rank_samples(rank, seed):
    rng = np.random.default_rng(seed)
    eigenvalues, power = rng.uniform(0.1, 2.0, rank), rng.uniform(0.1, 1.0, rank)
    sizes = np.arange(1, 2 * rank + 1)
    errors = theory.generalisation_error(eigenvalues, power, sizes)
    assert np.all(errors[: rank - 1] > 0) and np.all(errors[rank - 1:] == 0)
    # below the rank the error need not fall at every sample, nor stay under the zero predictor's
    # (interpolating few samples inflates it by 1 / (1 - gamma)): only the exact fit from P = rank on is asserted


def test_target_weight_outside_the_span_is_never_learnt_and_interpolation_inflates_it():
    """A null mode's weight stays, times 1 / (1 - gamma) = P / (P - rank) once P > rank."""
    eigenvalues, power = np.array([1.0, 0.5, 0.0]), np.array([1.0, 1.0, 0.3])
    errors = theory.generalisation_error(eigenvalues, power, [2, 4, 8])
    assert math.isinf(errors[0])
    assert errors[1:] == pytest.approx([0.3 * 4 / 2, 0.3 * 8 / 6])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.floats(1.0, 500.0), ridge=st.floats(1e-6, 10.0),
       unresolved=st.floats(0.0, 1.0))
def test_kappa_solves_its_equation_and_falls_with_samples(seed, size, ridge, unresolved):
    rng = np.random.default_rng(seed)
    eigenvalues, multiplicity = rng.uniform(0, 1, 30) ** 3, rng.integers(1, 5, 30).astype(float)
    kappa = theory.effective_regularisation(eigenvalues, size, ridge, multiplicity, unresolved)
    implied = ridge + unresolved + kappa * np.sum(multiplicity * eigenvalues / (size * eigenvalues + kappa))
    assert kappa == pytest.approx(implied, rel=1e-9)
    more = theory.effective_regularisation(eigenvalues, 2 * size, ridge, multiplicity, unresolved)
    assert ridge + unresolved <= more <= kappa  # more samples, less effective regularisation, never below the ridge


def test_multiplicity_is_the_same_as_listing_the_modes():
    eigenvalues, power, multiplicity = np.array([0.5, 0.1, 0.01]), np.array([0.3, 0.2, 0.1]), np.array([1, 3, 7])
    listed = np.repeat(eigenvalues, multiplicity), np.repeat(power / multiplicity, multiplicity)
    sizes = [2, 5, 20]
    np.testing.assert_allclose(theory.generalisation_error(eigenvalues, power, sizes, 1e-3, multiplicity),
                               theory.generalisation_error(*listed, sizes, 1e-3), rtol=1e-10)


def test_a_huge_ridge_learns_nothing():
    power = np.array([0.4, 0.3, 0.3])
    error = theory.generalisation_error(np.array([1.0, 0.1, 0.01]), power, [10], ridge=1e9)
    assert error[0] == pytest.approx(power.sum(), rel=1e-6)


def test_inputs_of_mismatched_shape_or_negative_eigenvalues_are_refused():
    with pytest.raises(ValueError, match="1-D of one length"):
        theory.generalisation_error(np.ones(3), np.ones(2), [4])
    with pytest.raises(ValueError, match=">= 0"):
        theory.generalisation_error(np.array([1.0, -0.1]), np.ones(2), [4])
