"""Minimum-norm points of convex hulls, batched: min_w w^T G w / 2 over the probability simplex.

Given B point sets, each of k points with Gram matrix G (k, k), find convex weights w (w >= 0,
sum w = 1) minimising ||sum_j w_j x_j||^2 = w^T G w. Only the Gram matrices enter, so the points
can live in any dimension. Nothing here knows what the points mean; geometry.py uses it for the
decodability of values (the points are unit differences d_ij).

Two stages: accelerated projected gradient on the simplex with adaptive restarts and an exact
polish on the identified face solves the bulk of the rows in tens of cheap steps; rows it leaves
open (small, degenerate minima converge slowly) finish with Wolfe's (1976) exact active-set
algorithm. A row counts as solved when its Frank-Wolfe margin gap (see `_frank_wolfe_gap`) is
below the tolerance, or its min-norm point is (numerically) the origin.
"""

from __future__ import annotations

import torch
from torch import Tensor


def project_rows_to_simplex(points: Tensor) -> Tensor:
    """(B, k) -> (B, k): Euclidean projection of each row onto the probability simplex.

    Sort-based algorithm (Held et al. 1974; Duchi et al. 2008): theta is found from the sorted
    cumulative sums, then x = max(y - theta, 0). Exact zeros identify the active face.
    """
    sorted_points = points.sort(dim=1, descending=True).values
    cumulative = sorted_points.cumsum(dim=1) - 1.0
    positions = torch.arange(1, points.shape[1] + 1, dtype=points.dtype, device=points.device)
    is_active = sorted_points - cumulative / positions > 0
    n_active = is_active.sum(dim=1, keepdim=True)
    theta = cumulative.gather(1, n_active - 1) / n_active.to(points.dtype)
    return (points - theta).clamp_min(0.0)


def _quadratic(gram: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """(G w (B, k), w^T G w (B,)) for Gram matrices (B, k, k) and weights (B, k)."""
    gradient = torch.bmm(gram, weights.unsqueeze(2)).squeeze(2)
    return gradient, (gradient * weights).sum(dim=1)


def _frank_wolfe_gap(gram: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """(margin gap (B,), ||p|| (B,)) for p = sum_j w_j d_j on the working set.

    With u = p / ||p||, the working-set margins are <d_j, u> = (G w)_j / ||p||, so
    ||p|| - min_j <d_j, u> = (w^T G w - min_j (G w)_j) / ||p|| >= 0, zero exactly at the optimum.
    """
    return _gap_from_quadratic(*_quadratic(gram, weights))


def _gap_from_quadratic(gradient: Tensor, squared_norm: Tensor) -> tuple[Tensor, Tensor]:
    """_frank_wolfe_gap from an already computed (G w, w^T G w)."""
    norm = squared_norm.clamp_min(0.0).sqrt()
    gap = (squared_norm - gradient.min(dim=1).values) / norm.clamp_min(1e-300)
    return gap, norm


def _affine_minimizer(gram: Tensor, support: Tensor) -> tuple[Tensor, Tensor]:
    """Min-norm point of the affine hull of each row's support: ((B, k) weights, (B,) solved).

    Solves [G_SS 1; 1^T 0] [w_S; -mu] = [0; 1] (the KKT system of min w^T G w / 2 with
    sum w = 1 on S); coordinates off S are pinned to zero by identity rows, so one batched
    solve serves supports of every size. Weights may be negative (the affine minimum can lie
    outside the hull); `solved` is False where the system is singular or the answer not finite.
    """
    batch, k = support.shape
    mask = support.to(gram.dtype)
    system = torch.zeros(batch, k + 1, k + 1, dtype=gram.dtype, device=gram.device)
    system[:, :k, :k] = gram * mask.unsqueeze(2) * mask.unsqueeze(1) + torch.diag_embed(1.0 - mask)
    system[:, :k, k] = mask
    system[:, k, :k] = mask
    rhs = torch.zeros(batch, k + 1, dtype=gram.dtype, device=gram.device)
    rhs[:, k] = 1.0
    solution, info = torch.linalg.solve_ex(system, rhs)
    weights = solution[:, :k] * mask
    return weights, (info == 0) & torch.isfinite(weights).all(dim=1)


def _polish_on_support(gram: Tensor, weights: Tensor) -> Tensor:
    """(B, k): the exact min-norm point on each row's current support, where it is in the hull.

    Once projected gradient has found the optimal face (weights > 0 exactly there), the optimum
    is the affine minimiser of that face. Rows whose affine minimiser leaves the simplex (the
    support is not yet right) or whose system is singular come back unchanged.
    """
    affine, solved = _affine_minimizer(gram, weights > 0)
    usable = solved & (affine >= -1e-12).all(dim=1)
    affine = affine.clamp_min(0.0)
    affine = affine / affine.sum(dim=1, keepdim=True).clamp_min(1e-300)
    return torch.where(usable.unsqueeze(1), affine, weights)


def _curvature_on_simplex(gram: Tensor) -> Tensor:
    """(B,): lambda_max of P G P, P = I - 11^T / k, the curvature of w^T G w / 2 along the simplex.

    Iterates never leave {sum w = 1}, and the simplex projection ignores shifts along 1, so the
    step only has to respect the curvature on the tangent space. The unit differences d_ij of one
    value share a large common component (all point away from v_i), which puts most of G's top
    eigenvalue along 1; dropping it allows ~10-15x longer steps than 1 / lambda_max(G).
    """
    row_means = gram.mean(dim=2, keepdim=True)
    centred = gram - row_means - row_means.transpose(1, 2) + row_means.mean(dim=1, keepdim=True)
    # A step size needs no more than single precision; the margin is for its rounding.
    top = torch.linalg.eigvalsh(centred.to(torch.float32))[:, -1].to(gram.dtype)
    return (1.001 * top).clamp_min(1e-12)


def _is_solved(gram: Tensor, weights: Tensor, tolerance: float) -> Tensor:
    """(B,) bool: margin gap below tolerance, or the min-norm point is (numerically) the origin."""
    return _solved_from_gap(*_frank_wolfe_gap(gram, weights), tolerance)


def _solved_from_gap(gap: Tensor, norm: Tensor, tolerance: float) -> Tensor:
    return (gap <= tolerance) | (norm <= tolerance)


def min_norm_point_in_hulls(
    gram: Tensor,
    initial_weights: Tensor,
    max_iterations: int = 100,
    tolerance: float = 1e-10,
    polish_every: int = 20,
) -> Tensor:
    """Batched min_w 1/2 w^T G w over the simplex: (B, k) convex weights of the min-norm points.

    gram: (B, k, k) Gram matrices of B point sets (geometry.py: the unit differences d_ij of one
    value i against its k candidate competitors); initial_weights: (B, k) warm start.
    Two stages: accelerated projected gradient with support polishing solves the bulk of the
    rows in tens of cheap steps; rows it leaves open (small, degenerate margins converge slowly)
    go to Wolfe's exact active-set algorithm, which is finite but pays a linear solve per step.
    """
    weights = _accelerated_projected_gradient(
        gram, initial_weights, max_iterations, tolerance, polish_every
    )
    open_rows = torch.nonzero(~_is_solved(gram, weights, tolerance)).squeeze(1)
    if len(open_rows):
        exact = _wolfe_min_norm_point(gram[open_rows], tolerance, max_steps=20 * gram.shape[-1])
        _, current = _quadratic(gram[open_rows], weights[open_rows])
        _, improved = _quadratic(gram[open_rows], exact)
        weights[open_rows] = torch.where(
            (improved <= current).unsqueeze(1), exact, weights[open_rows]
        )
    return weights


def _accelerated_projected_gradient(
    gram: Tensor, initial_weights: Tensor, max_iterations: int, tolerance: float, polish_every: int
) -> Tensor:
    """FISTA on the simplex with adaptive restart and support polishing: (B, k) weights.

    Step 1 / lambda_max(G on the simplex's tangent space); restart when the momentum points
    uphill (O'Donoghue & Candes 2015), which gives linear convergence on these polyhedral
    problems; every `polish_every` steps the exact solve on the identified support. A row
    stops once its margin gap (see _frank_wolfe_gap) is below `tolerance`; others go on alone.
    """
    step = 1.0 / _curvature_on_simplex(gram)
    result = project_rows_to_simplex(initial_weights.to(gram.dtype))
    live = torch.arange(len(result), device=gram.device)  # rows still iterating
    weights, extrapolated = result.clone(), result.clone()
    momentum = torch.ones(len(weights), dtype=gram.dtype, device=gram.device)
    for iteration in range(1, max_iterations + 1):
        gradient, _ = _quadratic(gram, extrapolated)
        updated = project_rows_to_simplex(extrapolated - step.unsqueeze(1) * gradient)
        restart = ((extrapolated - updated) * (updated - weights)).sum(dim=1) > 0
        next_momentum = (1.0 + torch.sqrt(1.0 + 4.0 * momentum**2)) / 2.0
        beta = torch.where(restart, 0.0, (momentum - 1.0) / next_momentum)
        extrapolated = updated + beta.unsqueeze(1) * (updated - weights)
        weights, momentum = updated, torch.where(restart, 1.0, next_momentum)
        if iteration % polish_every == 0 or iteration == max_iterations:
            weights, extrapolated, momentum = _accept_polish(gram, weights, extrapolated, momentum)
            result[live] = weights
            open_rows = ~_is_solved(gram, weights, tolerance)
            if not bool(open_rows.any()):
                break
            # Drop finished rows so late iterations only pay for the slow ones.
            live, gram, step = live[open_rows], gram[open_rows], step[open_rows]
            weights, extrapolated = weights[open_rows], extrapolated[open_rows]
            momentum = momentum[open_rows]
    return result


def _accept_polish(
    gram: Tensor, weights: Tensor, extrapolated: Tensor, momentum: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Replace rows by their polished point where it lowers the norm; reset their momentum."""
    polished = _polish_on_support(gram, weights)
    _, current = _quadratic(gram, weights)
    _, candidate = _quadratic(gram, polished)
    better = candidate < current
    keep = better.unsqueeze(1)
    weights = torch.where(keep, polished, weights)
    extrapolated = torch.where(keep, polished, extrapolated)
    momentum = torch.where(better, 1.0, momentum)
    return weights, extrapolated, momentum


def _wolfe_min_norm_point(gram: Tensor, tolerance: float, max_steps: int) -> Tensor:
    """Wolfe's (1976) minimum-norm-point algorithm, batched with masks: (B, k) weights.

    Keeps a corral S (affinely independent points) and weights w > 0 on it. Major cycle: if
    some point j has (G w)_j < w^T G w (margin gap above tolerance), add the most violating one
    to S. Minor cycle: move w towards the affine minimiser a of S; if a leaves the simplex, stop
    where the first weight hits zero and drop those points. Each step is one batched solve; rows
    sit in different cycles at once. Exact up to rounding, finite in exact arithmetic.
    """
    batch, k = gram.shape[0], gram.shape[-1]
    rows = torch.arange(batch, device=gram.device)
    start = gram.diagonal(dim1=1, dim2=2).argmin(dim=1)
    weights = torch.zeros(batch, k, dtype=gram.dtype, device=gram.device)
    weights[rows, start] = 1.0
    result = weights.clone()
    corral = weights > 0
    in_major_cycle = torch.ones(batch, dtype=torch.bool, device=gram.device)
    live = rows.clone()
    for _ in range(max_steps):
        gradient, squared_norm = _quadratic(gram, weights)
        entering = gradient.argmin(dim=1)
        finished = in_major_cycle & _solved_from_gap(*_gap_from_quadratic(gradient, squared_norm), tolerance)
        result[live] = weights
        if bool(finished.all()):
            break
        keep = ~finished
        live, gram, weights, corral = live[keep], gram[keep], weights[keep], corral[keep]
        in_major_cycle, entering = in_major_cycle[keep], entering[keep]
        local = torch.arange(len(live), device=gram.device)

        corral[local[in_major_cycle], entering[in_major_cycle]] = True
        affine, solved = _affine_minimizer(gram, corral)
        inside = solved & ((affine > 0) | ~corral).all(dim=1)
        # Minor cycle: step from w towards a until the first corral weight reaches zero.
        leaving = corral & (affine <= 0)
        ratios = torch.where(leaving, weights / (weights - affine).clamp_min(1e-300), float("inf"))
        theta = ratios.min(dim=1).values.clamp(max=1.0)
        stepped = weights + theta.unsqueeze(1) * (affine - weights)
        stepped = torch.where(corral & (stepped > 1e-15 * stepped.abs().max()), stepped, 0.0)
        stepped = stepped / stepped.sum(dim=1, keepdim=True)
        new_weights = torch.where(inside.unsqueeze(1), affine, stepped)
        # A singular system (numerically dependent corral) ends that row where it stands.
        new_weights = torch.where(solved.unsqueeze(1), new_weights, weights)
        corral = new_weights > 0
        in_major_cycle = inside | ~solved
        weights = new_weights
    result[live] = weights
    return result
