"""Exact capacity of the perceptron (K = 1): an LP test of linear separability, and Cover's count.

A set of patterns x_mu with labels y_mu is embeddable by a perceptron sign(w . x) (no bias, as in
the committee machine) iff some w has y_mu w . x_mu >= 1 for every mu: a linear feasibility
problem, solved exactly by scipy's HiGHS. Cover (1965): for P points in general position in R^N,
the fraction of the 2^P labellings that are separable is C(P, N) = 2^{1-P} sum_{k<N} binom(P-1, k),
exactly 1/2 at P = 2N for every N. Random +-1 patterns are not quite in general position, so the
LP is the ground truth and Cover's formula the reference.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog
from scipy.special import gammaln


HIGHS_METHODS = ("highs", "highs-ds", "highs-ipm")


def solve_lp(**problem):
    """scipy.optimize.linprog with HiGHS, trying its dual simplex and interior-point solvers in turn
    when one ends undecided (status 4, a numerical difficulty: seen on +-1 patterns at N = 120).
    Returns the first outcome that is solved (status 0) or infeasible (status 2)."""
    outcome = None
    for method in HIGHS_METHODS:
        outcome = linprog(method=method, **problem)
        if outcome.status in (0, 2):
            return outcome
    raise RuntimeError(f"linprog did not decide the LP with any of {HIGHS_METHODS}: status {outcome.status}, {outcome.message}")


def linearly_separable(patterns: np.ndarray, labels: np.ndarray) -> bool:
    """patterns (P, N), labels (P,) in {-1, +1}: is there a w with sign(w . x_mu) = y_mu for all mu?"""
    patterns = np.asarray(patterns, dtype=float)
    labels = np.asarray(labels, dtype=float)
    p, n = patterns.shape
    constraints = -(labels[:, None] * patterns)  # -y x . w <= -1
    outcome = solve_lp(c=np.zeros(n), A_ub=constraints, b_ub=-np.ones(p), bounds=[(None, None)] * n)
    return outcome.status == 0


def cover_fraction(p: int, n: int) -> float:
    """Cover's fraction of separable labellings of P points in general position in R^N (no bias)."""
    if p <= n:
        return 1.0
    k = np.arange(n)
    log_terms = gammaln(p) - gammaln(k + 1) - gammaln(p - k) + (1 - p) * math.log(2)
    return float(np.exp(log_terms).sum())
