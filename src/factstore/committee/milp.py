"""The exact embedding test of a one-hidden-layer tree committee machine: a mixed-integer LP over
its internal representations (small N only).

Variables: the weights w_k (n = N / K each) of every hidden unit, and one binary tau_{mu k} per
pattern mu and unit k (1: the unit outputs +1 on the pattern). Constraints, with the field
h_{mu k} = w_k . x_{mu k} and M = 1 + n B:

    h_{mu k} >= 1 - M (1 - tau_{mu k})     (tau = 1: the unit gives +1 with margin 1)
    h_{mu k} <= -1 + M tau_{mu k}          (tau = 0: the unit gives -1 with margin 1)
    sum_k tau_{mu k} >= (K + 1) / 2 if y_mu = +1, <= (K - 1) / 2 if y_mu = -1   (the majority)
    -B <= w_{k i} <= B                     (the box; |h| <= n B, so M switches a constraint off)

No objective: any feasible point embeds the instance. The box loses no solution: every threshold
function of n variables has integer weights with |w_i| <= (n + 1)^((n + 1) / 2) / 2^n (Muroga,
Toda and Takasu 1961); a dichotomy of +-1 patterns that a unit without bias realises extends to
an odd threshold function of the whole cube, whose integer weights then give |h| >= 1 with no
bias. With B that bound, an infeasible MILP proves the instance is not embeddable. HiGHS
(scipy.optimize.milp) solves it under a limit on its branch-and-bound nodes (deterministic: the
same instance gets the same outcome on any host) and a wall-clock guard; an instance it neither
solves nor refutes within them is undecided. A solution is used only through its taus: each unit's weights are refitted by
the least-slack LP (`polish.fit_unit`) and the sign machine is checked on every pattern, so an
embedded instance is proven by the same LPs as every other solver's; a MILP point the LPs do not
confirm (a numerical tolerance) is counted undecided, never embedded.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from factstore.committee.architectures import Architecture
from factstore.committee.polish import errors_of, fit_unit

EMBEDDED, NOT_EMBEDDABLE, UNDECIDED = "embedded", "not embeddable", "undecided"


class MilpOutcome(NamedTuple):
    """outcome: EMBEDDED (weights (K, n) certified by the LPs), NOT_EMBEDDABLE (the MILP is
    infeasible) or UNDECIDED (time limit, or a point the LPs did not confirm); weights None unless embedded."""

    outcome: str
    weights: np.ndarray | None


def weight_box(n: int) -> float:
    """Muroga's bound (n + 1)^((n + 1) / 2) / 2^n on the integer weights of a threshold function of n variables."""
    return (n + 1) ** ((n + 1) / 2) / 2**n


def embed(architecture: Architecture, patterns: np.ndarray, labels: np.ndarray, node_limit: int,
          time_limit: float) -> MilpOutcome:
    """Decide whether one instance is embeddable: patterns (P, N) (real ones only), labels (P,) in
    {-1, +1}; a one-hidden-layer tree (no further majority layers). node_limit: HiGHS's
    branch-and-bound nodes; time_limit: the wall-clock guard in seconds (set well above what the
    node limit takes, so that it does not decide)."""
    if architecture.kind != "tree" or architecture.groups:
        raise ValueError("the MILP is written for one-hidden-layer tree committee machines")
    k = architecture.hidden
    p = patterns.shape[0]
    inputs = np.asarray(patterns, dtype=float).reshape(p, k, -1)  # (P, K, n)
    labels = np.asarray(labels, dtype=float)
    n = inputs.shape[2]
    box = weight_box(n)
    big = 1.0 + n * box
    # Columns: w (K n, unit-major), then tau (P K, pattern-major).
    fields = scipy.sparse.block_diag([inputs[:, unit] for unit in range(k)], format="csr")  # rows unit-major (K P, K n)
    tau_of_row = scipy.sparse.csr_matrix(  # the row (unit k, pattern mu) picks tau_{mu k}
        (np.ones(k * p), (np.arange(k * p), (np.arange(p)[None, :] * k + np.arange(k)[:, None]).ravel())), shape=(k * p, p * k))
    switch = scipy.sparse.hstack([fields, -big * tau_of_row], format="csr")  # h - M tau
    majority = scipy.sparse.hstack([scipy.sparse.csr_matrix((p, k * n)),
                                    scipy.sparse.kron(scipy.sparse.identity(p), np.ones((1, k)))], format="csr")
    half = (k - 1) / 2
    constraints = [
        LinearConstraint(switch, 1 - big, np.inf),  # tau = 1: h >= 1
        LinearConstraint(switch, -np.inf, -1.0),  # tau = 0: h <= -1
        LinearConstraint(majority, np.where(labels > 0, half + 1, 0), np.where(labels > 0, k, half)),
    ]
    variables = k * n + p * k
    integrality = np.concatenate([np.zeros(k * n), np.ones(p * k)])
    bounds = Bounds(np.concatenate([np.full(k * n, -box), np.zeros(p * k)]), np.concatenate([np.full(k * n, box), np.ones(p * k)]))
    result = milp(np.zeros(variables), constraints=constraints, integrality=integrality, bounds=bounds,
                  options={"node_limit": node_limit, "time_limit": time_limit, "presolve": True})
    if result.status == 2:
        return MilpOutcome(NOT_EMBEDDABLE, None)
    if result.x is None:
        return MilpOutcome(UNDECIDED, None)
    taus = np.where(result.x[k * n:].reshape(p, k) > 0.5, 1.0, -1.0)
    weights = np.stack([fit_unit(inputs[:, unit], taus[:, unit])[0] for unit in range(k)])
    if errors_of(weights, inputs, labels) == 0:
        return MilpOutcome(EMBEDDED, weights)
    return MilpOutcome(UNDECIDED, None)
