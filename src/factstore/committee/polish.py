"""Exact polish of a tree committee machine: one linear programme per hidden unit.

For a fixed internal representation (the sign t_{mu k} every first-layer unit should give on
every pattern) the units decouple: unit k is a perceptron on its receptive field that must give
t_{mu k}, and whether it can is an LP (as `separability`, HiGHS through scipy.optimize.linprog).
The representation is the machine's own (the signs of its fields) with the least-action flips
applied to the misclassified patterns, so it gives the right output on every pattern. Each unit's
LP minimises the total slack of t w . x >= 1 (zero: the unit can realise its targets exactly); its
solution replaces the unit's weights, the machine is evaluated, and the flips of the new errors
give the next representation, for a few rounds. An instance the LPs embed is proven embeddable
(the sign machine is checked on every pattern); one already embedded is never touched.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

from factstore.committee.architectures import Architecture
from factstore.committee.least_action import least_action_flips, unit_signs
from factstore.committee.separability import solve_lp


def internal_representation(fields: np.ndarray, labels: np.ndarray, groups: tuple[int, ...] = ()) -> np.ndarray:
    """(P, K) target signs: sign(h) with the least-action flips on the misclassified patterns.

    fields (P, K) first-layer fields, labels (P,); the majority tree of these targets outputs the
    label on every pattern."""
    fields = np.asarray(fields, dtype=np.float64)
    flips = least_action_flips(fields, np.asarray(labels, dtype=np.float64), groups)
    return unit_signs(fields) * np.where(flips, -1.0, 1.0)


def fit_unit(inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """The least-slack perceptron for targets (P,) on inputs (P, n): (w (n,), total slack).

    minimise sum_mu s_mu subject to t_mu w . x_mu + s_mu >= 1, s >= 0 (an LP; slack 0 iff the
    targets are linearly separable, as in `separability.linearly_separable`)."""
    p, n = inputs.shape
    signed = scipy.sparse.csr_matrix(-(targets[:, None] * inputs))
    constraints = scipy.sparse.hstack([signed, -scipy.sparse.identity(p)], format="csr")
    cost = np.concatenate([np.zeros(n), np.ones(p)])
    bounds = [(None, None)] * n + [(0, None)] * p
    outcome = solve_lp(c=cost, A_ub=constraints, b_ub=-np.ones(p), bounds=bounds)
    if outcome.status != 0:  # always feasible (large slack): infeasible would be a solver fault
        raise RuntimeError(f"the least-slack LP did not solve: status {outcome.status}, {outcome.message}")
    return outcome.x[:n], float(outcome.fun)


class RememberedFits:
    """`fit_unit` for one instance's polish, each distinct LP solved once: a unit whose inputs and
    targets are those of an LP solved in an earlier round gets that LP's solution again. HiGHS is
    deterministic, so the weights are the same as solving it again (in the K = 5 tree runs 44% of
    the polish LPs repeated an earlier round's, in the function search 16%). `solved`: the LPs
    actually solved."""

    def __init__(self) -> None:
        self.solutions: dict[tuple, tuple[np.ndarray, float]] = {}
        self.solved = 0

    def __call__(self, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
        key = (inputs.shape, inputs.tobytes(), targets.tobytes())
        if key not in self.solutions:
            self.solutions[key] = fit_unit(inputs, targets)
            self.solved += 1
        return self.solutions[key]


def errors_of(weights: np.ndarray, inputs: np.ndarray, labels: np.ndarray, groups: tuple[int, ...] = ()) -> int:
    """Misclassified patterns of one tree machine: weights (K, n), inputs (P, K, n), labels (P,)."""
    fields = np.einsum("pkn,kn->pk", inputs, weights)
    flips = least_action_flips(fields, np.asarray(labels, dtype=np.float64), groups)
    return int(flips.any(-1).sum())


def polish_instance(
    architecture: Architecture, weights: np.ndarray, patterns: np.ndarray, labels: np.ndarray, rounds: int
) -> tuple[bool, np.ndarray, int]:
    """Polish one instance: weights (K, N / K), patterns (P, N) (real ones only), labels (P,).

    Returns (embedded, weights, LPs solved). Stops as soon as the machine makes no error."""
    k = architecture.hidden
    inputs = patterns.reshape(patterns.shape[0], k, -1).astype(float)
    weights = weights.astype(float).copy()
    fit = RememberedFits()
    for _ in range(rounds):
        if errors_of(weights, inputs, labels, architecture.groups) == 0:
            return True, weights, fit.solved
        fields = np.einsum("pkn,kn->pk", inputs, weights)
        targets = internal_representation(fields, labels, architecture.groups)
        for unit in range(k):
            weights[unit], _ = fit(inputs[:, unit], targets[:, unit])
    return errors_of(weights, inputs, labels, architecture.groups) == 0, weights, fit.solved


def polish(
    architecture: Architecture,
    weights: torch.Tensor,
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    embedded: torch.Tensor,
    rounds: int,
    solutions: dict[int, np.ndarray] | None = None,
) -> tuple[torch.Tensor, int]:
    """Polish every instance not yet embedded: weights (B, K, N / K), patterns (B, P, N), labels and
    mask (B, P), embedded (B,) bool. Returns (embedded after the polish (B,), LPs solved); an instance
    embedded before stays embedded. solutions (optional): filled with {instance: its LP weights
    (K, N / K)} for every instance the polish embedded."""
    after = embedded.clone().cpu()
    w, x, y, counts = weights.cpu().double().numpy(), patterns.cpu().numpy(), labels.cpu().numpy(), mask.sum(-1).tolist()
    solved = 0
    for b in np.flatnonzero(~after.numpy()):
        count = counts[b]
        found, fitted, lps = polish_instance(architecture, w[b], x[b, :count], y[b, :count], rounds)
        after[b] = found
        if found and solutions is not None:
            solutions[int(b)] = fitted
        solved += lps
    return after, solved
