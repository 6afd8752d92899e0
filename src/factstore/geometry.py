"""Geometry of fact sets: ZCA whitening and its folding into an MLP, decodability, targets U*.

Whitening (SPEC S0). For embeddings E (F, d) with second moment Sigma = E^T E / F + eps I =
Q Lambda Q^T, the ZCA transform of strength alpha in [0, 1] is W_alpha = Q Lambda^{-alpha/2} Q^T
(alpha = 0: identity, alpha = 1: full ZCA). Whitened embeddings are E W_alpha (row e -> W e,
W symmetric). Two project choices, both written down here:
- No centring. Sigma is the uncentred second moment, as in SPEC, because (i) a linear map folds
  exactly into the bias-free linear layers of the MLPs while a mean shift would not, and (ii)
  for values a common shift changes no decoded fact anyway (<y, v_j - mu> = <y, v_j> - <y, mu>,
  the second term is the same for every j), while for real embeddings the large shared mean
  direction is exactly the anisotropy that uncentred whitening damps.
- Scale kept (`preserve_scale=True`, default): W_alpha is multiplied by the one scalar c that
  keeps the mean squared row norm, ||E W||_F = ||E||_F. Without it, full whitening of unit
  keys in d = 128 gives rows of norm ~sqrt(d) ~ 11, so a whitening sweep would also be an input
  scale sweep for the MLP's nonlinearity. A positive scalar changes no direction, no angle, no
  condition number and no decoded fact; pass preserve_scale=False for the literal SPEC matrix.

Folding. An MLP g_w built on whitened keys K W_k and whitened values V W_v (decoded by dot
product against V W_v) is turned into an MLP g that reads and writes the ORIGINAL basis:

    scores_ij = <g_w(W_k^T k_i), W_v^T v_j> = <W_v g_w(W_k^T k_i), v_j>,

so g(x) = W_v g_w(W_k^T x): every linear map that reads x gets W <- W W_k^T, and the last
linear map gets W <- W_v W (its bias b <- W_v b). These scores equal the whitened ones exactly,
so the same facts are decoded. Note it is W_v, not W_v^{-1}: folding the inverse would give
outputs close to the original value VECTORS (a regression view) but decode with the original,
anisotropic geometry, i.e. undo the benefit of whitening.

Decodability (SPEC S0). For value i, with unit differences d_ij = (v_i - v_j) / ||v_i - v_j||,

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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from factstore.facts import FactSet, normalize_rows

# ---------------------------------------------------------------------------------------------
# ZCA whitening
# ---------------------------------------------------------------------------------------------


def second_moment(embeddings: Tensor, eps: float = 1e-6) -> Tensor:
    """(d, d): Sigma = E^T E / F + eps I for E (F, d). Uncentred, see the module docstring."""
    n_rows, dim = embeddings.shape
    identity = torch.eye(dim, dtype=embeddings.dtype, device=embeddings.device)
    return embeddings.T @ embeddings / n_rows + eps * identity


def whitening_transform(
    embeddings: Tensor, strength: float, eps: float = 1e-6, preserve_scale: bool = True
) -> tuple[Tensor, Tensor]:
    """ZCA whitening of strength alpha: (transform (d, d), inverse (d, d)), both symmetric.

    embeddings: (F, d), rows are embeddings. transform = c Q Lambda^{-alpha/2} Q^T and
    inverse = Q Lambda^{alpha/2} Q^T / c with Sigma = Q Lambda Q^T the second moment; whitened
    rows are embeddings @ transform. c = 1 unless preserve_scale (see the module docstring).
    Computed in float64 whatever the input dtype.
    """
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"whitening strength must be in [0, 1], got {strength}")
    embeddings = embeddings.to(torch.float64)
    eigenvalues, eigenvectors = torch.linalg.eigh(second_moment(embeddings, eps))
    eigenvalues = eigenvalues.clamp_min(eps)
    transform = (eigenvectors * eigenvalues.pow(-strength / 2)) @ eigenvectors.T
    inverse = (eigenvectors * eigenvalues.pow(strength / 2)) @ eigenvectors.T
    if preserve_scale:
        scale = embeddings.norm() / (embeddings @ transform).norm()
        transform, inverse = transform * scale, inverse / scale
    return transform, inverse


def whiten(
    embeddings: Tensor, strength: float, eps: float = 1e-6, preserve_scale: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """(whitened (F, d), transform (d, d), inverse (d, d)); whitened = embeddings @ transform."""
    transform, inverse = whitening_transform(embeddings, strength, eps, preserve_scale)
    return embeddings.to(torch.float64) @ transform, transform, inverse


def whiten_fact_set(
    fact_set: FactSet,
    key_strength: float = 0.0,
    value_strength: float = 0.0,
    eps: float = 1e-6,
    preserve_scale: bool = True,
) -> tuple[FactSet, Tensor, Tensor]:
    """Whiten keys and values separately: (whitened fact set, key_transform, value_transform).

    The whitened keys are NOT renormalised to unit norm (a per-row normalisation is not linear
    and could not be folded back); with preserve_scale their mean squared norm stays 1.
    Build the MLP on the returned fact set, then `fold_into_mlp(..., key_transform,
    value_transform)` gives the MLP for the original fact set.
    """
    keys, key_transform, _ = whiten(fact_set.keys, key_strength, eps, preserve_scale)
    values, value_transform, _ = whiten(fact_set.values, value_strength, eps, preserve_scale)
    name = f"{fact_set.name}-white{key_strength:g},{value_strength:g}"
    whitened = FactSet(keys, values, fact_set.fact_map, name)
    return whitened, key_transform, value_transform


# ---------------------------------------------------------------------------------------------
# Folding whitening into linear maps
# ---------------------------------------------------------------------------------------------


def fold_key_transform(weight: Tensor, key_transform: Tensor) -> Tensor:
    """(h, d_in) -> (h, d_in): a layer reading whitened keys, made to read original keys.

    The whitened input is key_transform^T x, so weight @ (key_transform^T x) = weight' @ x with
    weight' = weight @ key_transform^T.
    """
    return weight @ key_transform.T.to(weight.dtype)


def fold_value_transform(weight: Tensor, value_transform: Tensor) -> Tensor:
    """(d_out, h) -> (d_out, h): a layer writing for whitened values, decoded against original ones.

    <y, value_transform^T v> = <value_transform y, v>, so weight' = value_transform @ weight
    (apply the same to an output bias: b' = value_transform @ b).
    """
    return value_transform.to(weight.dtype) @ weight


def fold_whitening_into_linear(
    weight: Tensor, key_transform: Tensor | None = None, value_transform: Tensor | None = None
) -> Tensor:
    """(d_out, d_in): a linear memory W built on whitened data, for the original basis.

    W' = value_transform @ W @ key_transform^T (either side skipped when None), e.g. for the
    Hebbian memory W = sum_i v_f(i) k_i^T built on whitened keys and values.
    """
    if key_transform is not None:
        weight = fold_key_transform(weight, key_transform)
    if value_transform is not None:
        weight = fold_value_transform(weight, value_transform)
    return weight


def fold_into_mlp(
    first_layer_weights: Tensor | Sequence[Tensor],
    last_layer_weight: Tensor,
    key_transform: Tensor | None = None,
    value_transform: Tensor | None = None,
) -> tuple[Tensor | tuple[Tensor, ...], Tensor]:
    """Fold key and value whitening into an MLP: (new first layer weight(s), new last weight).

    first_layer_weights: one (h, d_in) weight, or several (e.g. W_gate and W_up of a gated
        MLP): every linear map that reads the input x. Biases of these layers do not change.
    last_layer_weight: (d_out, h), the linear map that writes the output; fold an output bias
        with `fold_value_transform(bias[:, None], value_transform)[:, 0]`.
    key_transform / value_transform: the (d, d) transforms the MLP was built under (None: not
        whitened). The folded MLP on original keys gives, decoded against the ORIGINAL values,
        exactly the scores of the unfolded MLP on whitened keys decoded against whitened values.
    """

    def fold_first(weight: Tensor) -> Tensor:
        return weight if key_transform is None else fold_key_transform(weight, key_transform)

    if isinstance(first_layer_weights, Tensor):
        folded_first: Tensor | tuple[Tensor, ...] = fold_first(first_layer_weights)
    else:
        folded_first = tuple(fold_first(weight) for weight in first_layer_weights)
    folded_last = (
        last_layer_weight
        if value_transform is None
        else fold_value_transform(last_layer_weight, value_transform)
    )
    return folded_first, folded_last


# ---------------------------------------------------------------------------------------------
# Decodability and margin-optimal targets
# ---------------------------------------------------------------------------------------------


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

    gram: (B, k, k) Gram matrices of B point sets (here the unit differences d_ij of one value
    i against its k candidate competitors); initial_weights: (B, k) warm start.
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

        room = n_values - 1 - candidates.shape[1]
        if room <= 0 or bool(done.all()):
            break
        candidates, weights = _grow_working_sets(
            candidates, weights, active, new_weights, active_margins, min(n_added, room)
        )
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
    margin. `max_iterations` projected-gradient steps per round before the exact Wolfe stage.
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
    "fold_into_mlp",
    "fold_key_transform",
    "fold_value_transform",
    "fold_whitening_into_linear",
    "margin_of_targets",
    "margin_optimal_targets",
    "min_norm_point_in_hulls",
    "project_rows_to_simplex",
    "second_moment",
    "solve_margin_optimal",
    "whiten",
    "whiten_fact_set",
    "whitening_transform",
]


def per_value_targets(fact_set: FactSet, margin_optimal: bool = False, value_targets: Tensor | None = None) -> Tensor:
    """(n_values, d_out) float64: what an MLP is built to emit for each value: `value_targets` if
    given (e.g. a U* solved once and shared), else U* when margin_optimal, else V itself."""
    if value_targets is not None:
        return value_targets.to(torch.float64)
    return margin_optimal_targets(fact_set.values)[0] if margin_optimal else fact_set.values.to(torch.float64)
