"""Spectra on the uniform sphere S^{d-1}: the eigenvalues of a dot-product kernel and the weights
of ridge-function targets, degree by degree of the spherical harmonics (the Funk-Hecke formula).

On the uniform distribution over the sphere, a kernel K(x, x') = k(t), t = cos(angle between x and
x'), has the degree-l spherical harmonics as eigenfunctions (Schoenberg; Smola, Ovari and
Williamson 2001), N(d, l) of them per degree, all with the eigenvalue

    lambda_l = E_t[k(t) P_l(t)],

the expectation over t = <u, x> for x uniform and u a fixed unit vector (density proportional to
(1 - t^2)^{(d-3)/2}), and P_l the degree-l Legendre polynomial in d dimensions (P_l(1) = 1). A
ridge function g(<u, x>) has the degree-l part N(d, l) c_l P_l(<u, x>), c_l = E_t[g(t) P_l(t)], and
E_x[P_l(<u, x>) P_l(<u', x>)] = P_l(<u, u'>) / N(d, l), so the target sum_i a_i g(<u_i, x>) holds the
squared weight N(d, l) c_l^2 a^T P_l(U U^T) a in degree l. Mercer's sum gives the total:
sum_l N(d, l) lambda_l = k(1), the trace of the operator.

The expectations are integrals over the angle theta = arccos t in [0, pi] with density proportional
to sin^{d-2} theta, by Gauss-Legendre quadrature on [0, pi/2] and [pi/2, pi] (a ReLU's kink sits at
t = 0); the integrands are smooth in theta there, so the quadrature converges fast. Functions take
and return numpy float64 arrays.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.special import comb, roots_legendre


def harmonic_multiplicity(dim: int, degrees) -> np.ndarray:
    """N(d, l) = (2l + d - 2) / (l + d - 2) * binom(l + d - 2, l), the number of degree-l spherical
    harmonics on S^{d-1} (N(d, 0) = 1). degrees: (L,) -> (L,) float64 (exact integers up to 2^53)."""
    degrees = np.asarray(degrees, dtype=np.int64)
    if dim < 2:
        raise ValueError(f"the sphere S^(d-1) needs d >= 2, got {dim}")
    counts = (2 * degrees + dim - 2) / (degrees + dim - 2) * comb(degrees + dim - 2, degrees, exact=False)
    return np.where(degrees == 0, 1.0, counts)


def legendre_polynomials(dim: int, max_degree: int, t) -> np.ndarray:
    """P_l(t) for l = 0..max_degree in dimension d (Gegenbauer C_l^{(d-2)/2} normalised to P_l(1) = 1),
    by the three-term recurrence (l + d - 2) P_{l+1} = (2l + d - 2) t P_l - l P_{l-1}.
    t: (...) -> (max_degree + 1, ...)."""
    t = np.asarray(t, dtype=np.float64)
    values = np.empty((max_degree + 1, *t.shape))
    values[0] = 1.0
    if max_degree >= 1:
        values[1] = t
    for degree in range(1, max_degree):
        values[degree + 1] = ((2 * degree + dim - 2) * t * values[degree] - degree * values[degree - 1]) / (degree + dim - 2)
    return values


def angle_quadrature(dim: int, nodes: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t = cos(theta) and weights w (summing to 1) for E_t[h(t)] under the law of <u, x>, x uniform
    on S^{d-1}: Gauss-Legendre in theta on [0, pi/2] and [pi/2, pi], `nodes` each. -> (2 nodes,), (2 nodes,)"""
    points, weights = roots_legendre(nodes)
    theta = np.concatenate([(points + 1) * math.pi / 4, (points + 3) * math.pi / 4])
    weights = np.concatenate([weights, weights]) * math.pi / 4 * np.sin(theta) ** (dim - 2)
    return np.cos(theta), weights / weights.sum()


def legendre_coefficients(profile: Callable[[np.ndarray], np.ndarray], dim: int, max_degree: int,
                          nodes: int = 400) -> np.ndarray:
    """c_l = E_t[h(t) P_l(t)] for l = 0..max_degree: a dot-product kernel's eigenvalue per mode
    (h = k) or a ridge function's Legendre coefficient (h = g). profile: t (n,) -> (n,). -> (max_degree + 1,)"""
    t, weights = angle_quadrature(dim, nodes)
    return legendre_polynomials(dim, max_degree, t) @ (weights * profile(t))


def ridge_target_power(coefficients, dim: int, directions, weights) -> np.ndarray:
    """Squared weight per degree of f(x) = sum_i a_i g(<u_i, x>): N(d, l) c_l^2 a^T P_l(U U^T) a.

    coefficients: (L + 1,) c_l of g; directions: (k, d) unit vectors u_i; weights: (k,) a_i
    -> (L + 1,), summing (as L grows) to E_x f(x)^2 under the uniform sphere."""
    directions = np.asarray(directions, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    coefficients = np.asarray(coefficients, dtype=np.float64)
    max_degree = coefficients.shape[0] - 1
    cosines = np.clip(directions @ directions.T, -1.0, 1.0)
    legendre = legendre_polynomials(dim, max_degree, cosines)  # (L + 1, k, k)
    quadratic = np.einsum("i,lij,j->l", weights, legendre, weights)
    return harmonic_multiplicity(dim, np.arange(max_degree + 1)) * coefficients ** 2 * np.clip(quadratic, 0.0, None)
