"""Predicted learning curve of kernel (ridge) regression from the kernel's spectrum and the target's
weights in its eigenbasis: the spectral theory of generalisation of Bordelon, Canatar and Pehlevan
(ICML 2020) and Canatar, Bordelon and Pehlevan (Nature Communications 12, 2914, 2021).

The kernel K(x, x') = sum_k lambda_k phi_k(x) phi_k(x') has eigenvalues lambda_k of its integral
operator on the input distribution (the phi_k orthonormal under that distribution), and the target
is f*(x) = sum_k v_k phi_k(x). The estimator is kernel regression on P samples,
f = K(x, X) (K(X, X) + ridge I)^{-1} y (ridge = 0: the interpolating, ridgeless one). In the limit
of many samples and modes the theory gives its mean test error E_g = E (f - f*)^2 through one
scalar, the effective regularisation kappa, the root of

    kappa = ridge + kappa sum_k lambda_k / (P lambda_k + kappa),

and the factor gamma = sum_k P lambda_k^2 / (P lambda_k + kappa)^2 < 1:

    E_g(P) = 1 / (1 - gamma) * sum_k v_k^2 kappa^2 / (P lambda_k + kappa)^2      (noise-free targets).

Each mode keeps the fraction kappa / (P lambda_k + kappa) of its target weight: modes with
P lambda_k >> kappa are learnt, those with P lambda_k << kappa are not; 1 / (1 - gamma) is the
variance of interpolating the finite sample. Modes whose P lambda_k << kappa at every P of interest
need not be listed one by one: their summed eigenvalue (`unresolved_trace`) enters the kappa
equation as extra ridge (kappa sum lambda_k / kappa), their gamma terms vanish, and their target
weight is not learnt (a listed mode with eigenvalue 0 and multiplicity 0 carries such weight).

Arrays in, arrays out (numpy float64); scipy's brentq finds kappa.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq


def _as_modes(eigenvalues, target_power, multiplicity) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    target_power = np.asarray(target_power, dtype=np.float64)
    multiplicity = np.ones_like(eigenvalues) if multiplicity is None else np.asarray(multiplicity, dtype=np.float64)
    if not (eigenvalues.shape == target_power.shape == multiplicity.shape and eigenvalues.ndim == 1):
        raise ValueError(f"eigenvalues, target_power and multiplicity must be 1-D of one length, got "
                         f"{eigenvalues.shape}, {target_power.shape}, {multiplicity.shape}")
    if np.any(eigenvalues < 0) or np.any(target_power < 0) or np.any(multiplicity < 0):
        raise ValueError("eigenvalues, target powers and multiplicities must be >= 0")
    return eigenvalues, target_power, multiplicity


def effective_regularisation(eigenvalues, sample_size: float, ridge: float = 0.0, multiplicity=None,
                             unresolved_trace: float = 0.0) -> float:
    """kappa, the root of kappa = ridge + unresolved_trace + kappa sum_k m_k lambda_k / (P lambda_k + kappa).

    eigenvalues: (K,) operator eigenvalues lambda_k >= 0; multiplicity: (K,) how many modes share
    each eigenvalue (default 1); sample_size P > 0. Equivalently sum_k m_k P lambda_k / (P lambda_k
    + kappa) + P (ridge + unresolved_trace) / kappa = P, whose left side falls from its kappa -> 0
    value to 0, so the root is unique. Without ridge or unresolved trace it exists only while the
    kernel's rank sum(m_k, lambda_k > 0) exceeds P; otherwise the interpolant is exact on the
    kernel's span and kappa = 0 is returned.
    """
    eigenvalues, _, multiplicity = _as_modes(eigenvalues, np.zeros_like(np.asarray(eigenvalues, float)), multiplicity)
    floor = float(ridge) + float(unresolved_trace)
    if floor < 0:
        raise ValueError("ridge and unresolved_trace must be >= 0")
    positive = eigenvalues > 0
    lam, m = eigenvalues[positive], multiplicity[positive]
    size = float(sample_size)
    if floor == 0 and m.sum() <= size:
        return 0.0

    def excess(log_kappa: float) -> float:  # (left side - P) / P, falling in kappa
        kappa = math.exp(log_kappa)
        return float(np.sum(m * lam / (size * lam + kappa))) + floor / kappa - 1.0

    upper = floor + float(np.sum(m * lam)) + 1e-300  # there the left side is <= P
    lower = floor if floor > 0 else upper
    while floor == 0 and excess(math.log(lower)) < 0:  # no ridge: walk down until the left side exceeds P
        lower /= 1e3
    low_value, high_value = excess(math.log(lower)), excess(math.log(upper))
    if low_value <= 0:  # the ridge dominates: kappa = floor up to rounding
        return lower
    if high_value >= 0:
        return upper
    return math.exp(brentq(excess, math.log(lower), math.log(upper), xtol=1e-13, rtol=1e-13))


def generalisation_error(eigenvalues, target_power, sample_sizes, ridge: float = 0.0, multiplicity=None,
                         unresolved_trace: float = 0.0) -> np.ndarray:
    """Predicted test mean squared error E_g(P) of kernel regression, noise-free target.

    eigenvalues: (K,) lambda_k; target_power: (K,) the target's squared weight in each entry,
    summed over the entry's `multiplicity` modes (sum_{modes of k} v^2); multiplicity: (K,) or None;
    sample_sizes: (S,) P values; ridge: the ridge added to K(X, X) (sum-of-squares convention,
    the same units as the eigenvalues); unresolved_trace: summed eigenvalue of modes not listed.
    Returns (S,): E_g(P) = 1 / (1 - gamma) sum_k power_k kappa^2 / (P lambda_k + kappa)^2 with
    gamma = sum_k m_k P lambda_k^2 / (P lambda_k + kappa)^2 (module docstring). When kappa = 0
    (ridgeless, P >= rank) the learnt modes carry no error and gamma = rank / P; E_g is inf where
    gamma = 1 and some target weight lies outside the kernel's span.
    """
    eigenvalues, target_power, multiplicity = _as_modes(eigenvalues, target_power, multiplicity)
    sizes = np.atleast_1d(np.asarray(sample_sizes, dtype=np.float64))
    errors = np.empty_like(sizes)
    for index, size in enumerate(sizes):
        kappa = effective_regularisation(eigenvalues, size, ridge, multiplicity, unresolved_trace)
        denominator = size * eigenvalues + kappa
        safe = denominator > 0
        kept = np.where(safe, kappa / np.where(safe, denominator, 1.0), 1.0)  # a mode's unlearnt fraction
        learnt = np.where(safe, size * eigenvalues / np.where(safe, denominator, 1.0), 0.0)
        gamma = float(np.sum(multiplicity * learnt ** 2)) / size
        bias = float(np.sum(target_power * kept ** 2))
        if gamma >= 1.0:
            errors[index] = 0.0 if bias == 0 else math.inf
        else:
            errors[index] = bias / (1.0 - gamma)
    return errors
