"""Tests of factstore.spherical_spectrum: harmonic counts, the Legendre polynomials of S^{d-1}, and
the Funk-Hecke eigenvalues and ridge-function weights against closed forms and sampled inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factstore import spherical_spectrum as spectrum


def test_harmonic_counts_match_the_known_ones():
    assert spectrum.harmonic_multiplicity(3, np.arange(5)).tolist() == [1, 3, 5, 7, 9]  # 2l + 1 on S^2
    assert spectrum.harmonic_multiplicity(8, np.arange(3)).tolist() == [1, 8, 35]


@settings(max_examples=20, deadline=None)
@given(dim=st.integers(3, 12), max_degree=st.integers(1, 25))
def test_legendre_polynomials_are_orthogonal_with_norm_one_over_the_count(dim, max_degree):
    """E_t[P_l P_l'] = delta_ll' / N(d, l) under the law of a coordinate of a uniform unit vector."""
    t, weights = spectrum.angle_quadrature(dim, nodes=64)
    values = spectrum.legendre_polynomials(dim, max_degree, t)
    gram = (values * weights) @ values.T
    expected = np.diag(1 / spectrum.harmonic_multiplicity(dim, np.arange(max_degree + 1)))
    np.testing.assert_allclose(gram, expected, atol=1e-12)
    np.testing.assert_allclose(spectrum.legendre_polynomials(dim, max_degree, 1.0), 1.0)


def test_a_polynomial_kernel_has_its_closed_form_spectrum():
    """k(t) = t^2 in d dimensions: (x.x')^2 = sum of a degree-2 part and a constant; lambda_0 = E t^2 = 1/d,
    lambda_2 = 2 / (d (d + 2)), every other degree 0, and Mercer's sum N_l lambda_l = k(1) = 1."""
    dim = 6
    eigenvalues = spectrum.legendre_coefficients(lambda t: t**2, dim, 6)
    np.testing.assert_allclose(eigenvalues, [1 / dim, 0, 2 / (dim * (dim + 2)), 0, 0, 0, 0], atol=1e-14)
    counts = spectrum.harmonic_multiplicity(dim, np.arange(7))
    assert np.sum(counts * eigenvalues) == pytest.approx(1.0)


def test_ridge_target_power_sums_to_the_sampled_mean_square():
    rng = np.random.default_rng(0)
    dim, units = 5, 4
    directions = rng.standard_normal((units, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    weights = rng.standard_normal(units)
    unit = lambda t: np.tanh(3 * t)  # noqa: E731 - a smooth ridge function: its weights fall fast
    power = spectrum.ridge_target_power(spectrum.legendre_coefficients(unit, dim, 60), dim, directions, weights)
    x = rng.standard_normal((400_000, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sampled = np.mean((unit(x @ directions.T) @ weights) ** 2)
    assert power.sum() == pytest.approx(sampled, rel=0.01)
    assert power[0] == pytest.approx(np.mean(unit(x @ directions.T) @ weights) ** 2, abs=1e-3)  # odd g: ~0
