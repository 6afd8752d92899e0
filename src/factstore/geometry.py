"""Decodability of a value set and its margin-optimal targets U* (S0).

For value i, with unit differences d_ij = (v_i - v_j) / ||v_i - v_j||,

    rho_i = max_{||u|| <= 1} min_{j != i} <d_ij, u>,     u*_i its maximiser,

the hard-margin separation of v_i from every other value. By minimax duality rho_i is the norm
of the minimum-norm point p_i of conv{d_ij : j != i}, and u*_i = p_i / ||p_i|| when p_i != 0;
p_i = 0 (rho_i = 0) exactly when no output direction decodes v_i at all (v_i is a duplicate or
not a vertex of conv(V)). Decodability rho(V) = min_i rho_i.

The solver is batched over i and never forms F x F x d: for each block of rows it keeps a small
working set of candidate competitors j (those with the smallest margins), solves the min-norm
point over their hull (accelerated projected gradient on the simplex with restarts and an exact
polish on the identified face; rows it leaves open finish with Wolfe's exact min-norm-point
algorithm), then checks the margins against ALL values and adds the violators (constraint
generation). Every answer carries a certificate: for any p in a sub-hull and u = p / ||p||,
min_j <d_ij, u> <= rho_i <= ||p||, and the loop stops when the two agree to `tolerance`.

Whitening and its folding into an MLP live in whitening.py; the generic min-norm-point solver in
min_norm_point.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from factstore.facts import normalize_rows
from factstore.min_norm_point import min_norm_point_in_hulls


@dataclass(frozen=True)
class MarginOptimalResult:
    """The solution of the decodability problem for every value, with its certificate.

    targets: (F, d) unit rows u*_i (the margin-optimal outputs U*).
    margins: (F,) rho_i = max(0, min_{j != i} <d_ij, u*_i>): the margin u*_i achieves, a lower
        bound on the optimum (equal to it within `tolerance` where `converged`).
    upper_bounds: (F,) ||p_i|| for the min-norm point found: rho_i* <= upper_bounds_i.
    converged: (F,) bool, upper - lower <= tolerance (or rho_i = 0 certified).
    n_rounds: most constraint-generation rounds any block needed.
    """

    targets: Tensor
    margins: Tensor
    upper_bounds: Tensor
    converged: Tensor
    n_rounds: int

    @property
    def decodability(self) -> float:
        return float(self.margins.min())


def _pair_distances(
    block: Tensor, block_rows: Tensor, values: Tensor, squared_norms: Tensor
) -> Tensor:
    """(B, F): ||v_i - v_j|| for the block's rows i against all j, +inf at j = i."""
    squared = (
        squared_norms[block_rows].unsqueeze(1) + squared_norms.unsqueeze(0) - 2 * block @ values.T
    )
    distances = squared.clamp_min(0.0).sqrt()
    distances[torch.arange(len(block_rows), device=block.device), block_rows] = float("inf")
    return distances


def _all_margins(directions: Tensor, block: Tensor, values: Tensor, distances: Tensor) -> Tensor:
    """(B, F): <d_ij, u_i> = (<u_i, v_i> - <u_i, v_j>) / ||v_i - v_j||, +inf at j = i."""
    own = (directions * block).sum(dim=1, keepdim=True)
    margins = (own - directions @ values.T) / distances
    return torch.where(torch.isinf(distances), float("inf"), margins)


def _unit_differences(block: Tensor, values: Tensor, candidates: Tensor) -> Tensor:
    """(B, k, d): d_ij = (v_i - v_j) / ||v_i - v_j|| for the k candidate competitors j of row i."""
    differences = block.unsqueeze(1) - values[candidates]
    return differences / differences.norm(dim=2, keepdim=True).clamp_min(1e-300)


def _add_candidates(candidates: Tensor, margins: Tensor, n_new: int) -> Tensor:
    """(B, k + n_new): the working sets grown by the n_new smallest margins not yet in them."""
    masked = margins.scatter(1, candidates, float("inf"))
    new = masked.topk(n_new, dim=1, largest=False).indices
    return torch.cat([candidates, new], dim=1)


def _solve_block(
    values: Tensor,
    squared_norms: Tensor,
    block_rows: Tensor,
    n_candidates: int,
    n_added: int,
    max_rounds: int,
    max_iterations: int,
    tolerance: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """Constraint generation for one block of rows: (targets, lower, upper, converged, rounds)."""
    n_values = len(values)
    block = values[block_rows]
    distances = _pair_distances(block, block_rows, values, squared_norms)
    duplicated = distances.min(dim=1).values <= 1e-12 * (1.0 + block.norm(dim=1))

    targets = normalize_rows(block)
    lower = torch.zeros(len(block_rows), dtype=values.dtype, device=values.device)
    upper = torch.zeros_like(lower)
    converged = duplicated.clone()
    margins = _all_margins(targets, block, values, distances)
    candidates = margins.topk(min(n_candidates, n_values - 1), dim=1, largest=False).indices
    weights = torch.full(
        candidates.shape, 1.0 / candidates.shape[1], dtype=values.dtype, device=values.device
    )

    active = torch.nonzero(~duplicated).squeeze(1)
    rounds = 0
    while len(active) and rounds < max_rounds:
        rounds += 1
        unit_differences = _unit_differences(block[active], values, candidates[active])
        gram = unit_differences @ unit_differences.transpose(1, 2)
        new_weights = min_norm_point_in_hulls(gram, weights[active], max_iterations, tolerance / 4)
        points = (new_weights.unsqueeze(2) * unit_differences).sum(dim=1)
        norms = points.norm(dim=1)
        directions = torch.where(
            (norms > 0).unsqueeze(1), points / norms.clamp_min(1e-300).unsqueeze(1), targets[active]
        )
        active_margins = _all_margins(directions, block[active], values, distances[active])
        targets[active], upper[active] = directions, norms
        lower[active] = active_margins.min(dim=1).values
        done = (upper[active] - lower[active] <= tolerance) | (norms <= tolerance)
        converged[active] = done

        if bool(done.all()):
            break
        room = n_values - 1 - candidates.shape[1]
        if room > 0:
            candidates, weights = _grow_working_sets(
                candidates, weights, active, new_weights, active_margins, min(n_added, room)
            )
        else:  # every competitor is in the working set: solve it on, from this round's weights
            weights[active] = new_weights
        active = active[~done]
    return targets, lower.clamp_min(0.0), upper, converged, rounds


def _grow_working_sets(
    candidates: Tensor,
    weights: Tensor,
    active: Tensor,
    solved_weights: Tensor,
    active_margins: Tensor,
    n_new: int,
) -> tuple[Tensor, Tensor]:
    """Add n_new competitors (smallest margins) to the active rows' working sets.

    candidates, weights: (B, k) for the whole block; active: (A,) rows solved this round with
    solved_weights (A, k) and margins against all values (A, F). The new columns start at
    weight 0, so the next round warm-starts from this round's optimum.
    """
    grown = torch.zeros(
        len(candidates), candidates.shape[1] + n_new, dtype=torch.long, device=candidates.device
    )
    grown_weights = torch.zeros(grown.shape, dtype=weights.dtype, device=weights.device)
    grown[active] = _add_candidates(candidates[active], active_margins, n_new)
    grown_weights[active, : candidates.shape[1]] = solved_weights
    return grown, grown_weights


def solve_margin_optimal(
    values: Tensor,
    n_candidates: int | None = None,
    n_added: int | None = None,
    max_rounds: int = 50,
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    chunk_size: int = 256,
) -> MarginOptimalResult:
    """Margin-optimal targets of every value with their optimality certificate.

    values: (F, d), any scale (converted to float64). Rows are processed `chunk_size` at a time;
    each keeps `n_candidates` competitors at first (default clamp(2d, 16, 64): an optimum rests
    on at most d + 1 of them, ~45 for spherical values in d = 128) and grows by `n_added`
    (default half that) per round while some value outside its working set violates the
    margin; a row whose working set holds every competitor and whose round stopped short of the
    certificate is solved on from that round's weights. `max_iterations` projected-gradient steps
    per round before the exact Wolfe stage; `max_rounds` rounds at most (rows still open then
    have converged = False).
    Memory ~ chunk_size x (F + k^2 + k d) floats.
    """
    values = values.to(torch.float64)
    n_values, dim = values.shape
    if n_values < 2:
        raise ValueError("decodability needs at least two values")
    if n_candidates is None:
        n_candidates = min(max(2 * dim, 16), 64)
    if n_added is None:
        n_added = max(n_candidates // 2, 1)
    squared_norms = (values * values).sum(dim=1)
    targets = torch.empty_like(values)
    margins = torch.empty(n_values, dtype=values.dtype, device=values.device)
    upper_bounds = torch.empty_like(margins)
    converged = torch.empty(n_values, dtype=torch.bool, device=values.device)
    n_rounds = 0
    for start in range(0, n_values, chunk_size):
        rows = torch.arange(start, min(start + chunk_size, n_values), device=values.device)
        block_result = _solve_block(
            values,
            squared_norms,
            rows,
            n_candidates,
            n_added,
            max_rounds,
            max_iterations,
            tolerance,
        )
        targets[rows], margins[rows], upper_bounds[rows], converged[rows], rounds = block_result
        n_rounds = max(n_rounds, rounds)
    return MarginOptimalResult(targets, margins, upper_bounds, converged, n_rounds)


def margin_optimal_targets(values: Tensor, **solver_options) -> tuple[Tensor, Tensor]:
    """(U_star (F, d) unit rows, rho (F,)): u*_i = argmax_{||u||<=1} min_{j!=i} <d_ij, u>.

    See `solve_margin_optimal` for the solver and its options. rho_i = 0 marks a value no
    output can decode (then u*_i is only the best direction found).
    """
    result = solve_margin_optimal(values, **solver_options)
    return result.targets, result.margins


def decodability(values: Tensor, **solver_options) -> float:
    """rho(V) = min_i rho_i: the worst value's best achievable normalised decoding margin."""
    return solve_margin_optimal(values, **solver_options).decodability


def margin_of_targets(targets: Tensor, values: Tensor, chunk_size: int = 1024) -> Tensor:
    """(F,): min_{j != i} <d_ij, targets_i> for given output directions (e.g. V itself or U*).

    The normalised margin that emitting targets_i for value i achieves; used to compare U*
    with the naive targets V and in tests. Computed in row chunks.
    """
    values = values.to(torch.float64)
    targets = targets.to(torch.float64)
    squared_norms = (values * values).sum(dim=1)
    result = torch.empty(len(values), dtype=torch.float64, device=values.device)
    for start in range(0, len(values), chunk_size):
        rows = torch.arange(start, min(start + chunk_size, len(values)), device=values.device)
        distances = _pair_distances(values[rows], rows, values, squared_norms)
        result[rows] = (
            _all_margins(targets[rows], values[rows], values, distances).min(dim=1).values
        )
    return result


__all__ = [
    "MarginOptimalResult",
    "decodability",
    "margin_of_targets",
    "margin_optimal_targets",
    "solve_margin_optimal",
]
