"""The shared fits' standard errors (factstore.statistics): calibrated, NaN where undefined, and
the fits still unpack as the three numbers their callers read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

from factstore.statistics import linear_fit, power_law_fit


def test_the_slope_standard_error_is_calibrated_on_noisy_lines():
    """Over many noisy samples of a known line, the true slope lies within t_{0.975, n-2} standard
    errors in about 95% of them (and the intercept likewise)."""
    generator = np.random.default_rng(0)
    x = np.linspace(0.0, 1.0, 12)
    fits = [linear_fit(x, 2.0 * x - 1.0 + generator.normal(0.0, 0.3, x.size)) for _ in range(2000)]
    quantile = stats.t.ppf(0.975, x.size - 2)
    slope_covered = np.mean([abs(f.slope - 2.0) < quantile * f.slope_se for f in fits])
    intercept_covered = np.mean([abs(f.intercept + 1.0) < quantile * f.intercept_se for f in fits])
    assert slope_covered == pytest.approx(0.95, abs=0.02) and intercept_covered == pytest.approx(0.95, abs=0.02)


def test_the_power_law_exponent_standard_error_is_the_log_log_slopes():
    generator = np.random.default_rng(1)
    x = np.geomspace(1.0, 1e3, 10)
    y = 3.0 * x**-0.7 * np.exp(generator.normal(0.0, 0.1, x.size))
    fit, line = power_law_fit(x, y), linear_fit(np.log(x), np.log(y))
    assert fit.exponent_se == line.slope_se > 0
    assert fit.prefactor_se == pytest.approx(fit.prefactor * line.intercept_se)


@given(slope=st.floats(-5, 5), intercept=st.floats(-5, 5), n=st.integers(3, 20))
def test_a_noiseless_line_has_zero_standard_errors_and_two_points_have_none(slope, intercept, n):
    x = np.arange(n, dtype=float)
    fit = linear_fit(x, slope * x + intercept)
    assert fit.slope_se == pytest.approx(0.0, abs=1e-6) and fit.intercept_se == pytest.approx(0.0, abs=1e-6)
    two = linear_fit([0.0, 1.0], [intercept, intercept + slope])
    assert math.isnan(two.slope_se) and math.isnan(two.intercept_se)


def test_the_fits_unpack_as_their_three_numbers():
    slope, intercept, r2 = linear_fit([0.0, 1.0, 2.0], [1.0, 3.0, 5.1])
    exponent, prefactor, power_r2 = power_law_fit([1.0, 2.0, 4.0], [5.0, 2.5, 1.25])
    assert slope == pytest.approx(2.05) and exponent == pytest.approx(-1.0) and prefactor == pytest.approx(5.0)
