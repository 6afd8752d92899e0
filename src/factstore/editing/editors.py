"""Weight editors ROME, MEMIT and AlphaEdit, written from their update equations, on ONE linear map.

The map is the output projection W (d_out, h) of a fact-storing MLP; a key k (h,) is the MLP's
hidden activation (the input of W) and W k is the value the MLP writes. An edit asks W k_i to
become v*_i. Each method returns a new weight W + dW; none touches the model or a config.

- ROME (Meng et al. 2022, "Locating and Editing Factual Associations in GPT"): one rank-one
  update per fact, exact on its key and as small as possible in the C-weighted norm, where
  C = E[k k^T] is the second moment of the keys the layer usually sees.
- MEMIT (Meng et al. 2023, "Mass-Editing Memory in a Transformer"): all facts at once, by a
  least-squares update that trades the edits against drift on the usual keys (ridge * C).
- AlphaEdit (Fang et al. 2025, "AlphaEdit: Null-Space Constrained Knowledge Editing for
  Language Models", ICLR): the update is confined to the null space of preserved keys, so their
  outputs cannot change at all.

Convention (row convention, unlike the papers' columns): keys are ROWS, K (n, h); residuals are
rows, R (n, d_out), residual i being the wanted change of the output, r_i = v*_i - W k_i.
Everything stays in the inputs' dtype (float64 recommended: the solves are ill-conditioned when
the ridge or regulariser is small).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check_shapes(function: str, weight: Tensor, keys: Tensor, residuals: Tensor, **square: Tensor) -> None:
    """ValueError naming the shapes unless weight (d_out, h), keys (n, h), residuals (n, d_out) and
    every named square matrix is (h, h), all of one dtype."""
    named = {"weight": weight, "keys": keys, "residuals": residuals, **square}
    shapes = ", ".join(f"{name} {tuple(tensor.shape)}" for name, tensor in named.items())
    out_size, hidden_size = weight.shape if weight.ndim == 2 else (-1, -1)
    if (weight.ndim != 2 or keys.ndim != 2 or keys.shape[1] != hidden_size
            or tuple(residuals.shape) != (keys.shape[0], out_size)
            or any(tuple(matrix.shape) != (hidden_size, hidden_size) for matrix in square.values())):
        expected = ", ".join(["weight (d_out, h)", "keys (n, h)", "residuals (n, d_out)"]
                             + [f"{name} (h, h)" for name in square])
        raise ValueError(f"{function} needs {expected}; got {shapes}")
    if len({tensor.dtype for tensor in named.values()}) > 1:
        dtypes = ", ".join(f"{name} {tensor.dtype}" for name, tensor in named.items())
        raise ValueError(f"{function} needs one dtype for all its tensors; got {dtypes}")


def _solve(function: str, matrix: Tensor, right_hand_sides: Tensor, remedy: str) -> Tensor:
    """matrix^{-1} right_hand_sides, as a ValueError (with a remedy) when the matrix is singular."""
    try:
        return torch.linalg.solve(matrix, right_hand_sides)
    except torch.linalg.LinAlgError as error:
        raise ValueError(f"{function}: the {tuple(matrix.shape)} system is singular; {remedy}") from error


def key_second_moment(keys: Tensor) -> Tensor:
    """C = K^T K / n (h, h): the uncentred second moment E[k k^T] over the rows of keys (n, h).

    ROME and MEMIT measure the size of an update by how much it moves the outputs of typical keys,
    E||dW k||^2 = tr(dW C dW^T), so C is estimated from the keys the layer usually sees."""
    if keys.ndim != 2 or keys.shape[0] == 0:
        raise ValueError(f"key_second_moment needs keys (n, h) with n >= 1; got {tuple(keys.shape)}")
    return keys.T @ keys / keys.shape[0]


def rome_update(weight: Tensor, keys: Tensor, residuals: Tensor, second_moment: Tensor) -> Tensor:
    """ROME, one rank-one edit per key, each applied to the weight the previous one left.

    Targets are fixed before the loop from the ORIGINAL weight W0: v*_i = W0 k_i + r_i. Edit i is

        dW = (v*_i - W k_i) u_i^T / (u_i^T k_i),   u_i = C^{-1} k_i,

    the smallest update in the norm tr(dW C dW^T) with (W + dW) k_i = v*_i: after one edit its key
    is exact, and a key k with u_i^T k = 0 (C-orthogonal to k_i) keeps its output. Later edits may
    disturb earlier keys; only the last key is exact in general.

    weight (d_out, h), keys (n, h), residuals (n, d_out), second_moment C (h, h), invertible.
    Returns a new (d_out, h) tensor; the input weight is not modified."""
    _check_shapes("rome_update", weight, keys, residuals, second_moment=second_moment)
    targets = keys @ weight.T + residuals  # (n, d_out): v*_i as rows
    directions = _solve("rome_update", second_moment, keys.T,  # one solve, n right-hand sides
                        "the second moment C must be invertible (add a ridge: C + eps I)").T
    denominators = (directions * keys).sum(dim=1)  # u_i^T k_i = k_i^T C^{-1} k_i
    if bool((denominators <= 0).any()):
        raise ValueError("rome_update needs k^T C^{-1} k > 0 for every key: nonzero keys and a "
                         "positive definite second moment (add a ridge: C + eps I)")
    edited = weight.clone()
    for key, direction, target, denominator in zip(keys, directions, targets, denominators):
        edited += torch.outer(target - edited @ key, direction) / denominator
    return edited


def memit_update(weight: Tensor, keys: Tensor, residuals: Tensor, second_moment: Tensor,
                 ridge: float) -> Tensor:
    """MEMIT's batched least-squares update: W + dW with

        dW = R^T K (ridge C + K^T K)^{-1}        (paper, columns: dW = R K^T (lambda C + K K^T)^{-1}),

    the minimiser of ||(W + dW) K^T - V*^T||^2 + ridge tr(dW C dW^T), V* = K W^T + R: the edits
    in least squares, against the drift of the usual keys' outputs. As ridge -> 0 with n <= h and
    independent keys the batch is solved exactly, (W + dW) k_i = W k_i + r_i; a larger ridge gives
    a smaller update (a ridge far below the scale of C leaves dW ill-determined off the span of
    the keys: rounding of order eps |C| / ridge, though dW K^T stays accurate). For one key, dW = r (C^{-1} k)^T / (ridge + k^T C^{-1} k) (Sherman-Morrison):
    ROME's update in the limit ridge -> 0.

    weight (d_out, h), keys (n, h), residuals (n, d_out), second_moment C (h, h), ridge >= 0
    (ridge = 0 needs K^T K invertible, n >= h). Returns a new (d_out, h) tensor."""
    _check_shapes("memit_update", weight, keys, residuals, second_moment=second_moment)
    if ridge < 0:
        raise ValueError(f"memit_update needs ridge >= 0, got {ridge}")
    system = ridge * second_moment + keys.T @ keys  # symmetric (h, h)
    update = _solve("memit_update", system, keys.T @ residuals,  # dW^T (h, d_out)
                    "raise the ridge or use a positive definite second moment").T
    return weight + update


def null_space_projector(preserved_keys: Tensor, threshold: float) -> tuple[Tensor, int]:
    """AlphaEdit's projector P (h, h) onto the null space of the preserved keys K0 (n0, h), and its
    dimension.

    The null space is spanned by the eigenvectors of K0^T K0 (torch.linalg.eigh) whose eigenvalue
    is below threshold * (largest eigenvalue): the threshold is RELATIVE, 0 < threshold < 1. Then
    P = U U^T with U those eigenvectors, so P is symmetric, idempotent and P k0 ~ 0 for preserved
    keys. Keys spanning all of R^h leave an empty null space: P = 0, dimension 0, and AlphaEdit
    cannot edit at all (callers should report the dimension). No preserved keys (n0 = 0), or only
    zero keys, preserve nothing: P = I, dimension h."""
    if preserved_keys.ndim != 2:
        raise ValueError(f"null_space_projector needs preserved_keys (n0, h); got {tuple(preserved_keys.shape)}")
    if not 0 < threshold < 1:
        raise ValueError(f"null_space_projector needs a relative threshold in (0, 1), got {threshold}")
    hidden_size = preserved_keys.shape[1]
    identity = torch.eye(hidden_size, dtype=preserved_keys.dtype, device=preserved_keys.device)
    if preserved_keys.shape[0] == 0:
        return identity, hidden_size
    eigenvalues, eigenvectors = torch.linalg.eigh(preserved_keys.T @ preserved_keys)  # ascending
    if eigenvalues[-1] <= 0:
        return identity, hidden_size
    null_basis = eigenvectors[:, eigenvalues < threshold * eigenvalues[-1]]
    return null_basis @ null_basis.T, null_basis.shape[1]


def alphaedit_update(weight: Tensor, keys: Tensor, residuals: Tensor, projector: Tensor,
                     regulariser: float = 1.0) -> Tensor:
    """AlphaEdit's closed form without previously edited keys: W + dW with, in the paper's columns
    (K1 = K^T (h, n), alpha = regulariser),

        Delta = R K1^T P (K1 K1^T P + alpha I_h)^{-1}
              = R (K1^T P K1 + alpha I_n)^{-1} K1^T P        (push-through identity),

    i.e. in rows dW = R^T (K P K^T + alpha I)^{-1} K P. The second form is what is solved: a
    symmetric (n, n) system, and dW ends in K P, so dW k0 = R^T (...)^{-1} K P k0 = 0 holds to
    rounding for any alpha. (The first form, solved as printed, leaks rounding of order
    eps / alpha into preserved outputs.) Why preserved outputs are unchanged: if P k0 = 0 then
    (K1 K1^T P + alpha I) k0 = alpha k0, so Delta k0 = R K1^T P k0 / alpha = 0.

    On the edit keys, dW K^T = R^T (G + alpha I)^{-1} G with G = K P K^T: as alpha -> 0 with the
    projected keys P k_i independent, every edit is exact, (W + dW) k_i = W k_i + r_i; with an
    empty null space (P = 0) dW = 0: nothing can be edited.

    weight (d_out, h), keys (n, h), residuals (n, d_out), projector P (h, h) from
    null_space_projector, regulariser alpha > 0. Returns a new (d_out, h) tensor."""
    _check_shapes("alphaedit_update", weight, keys, residuals, projector=projector)
    if not regulariser > 0:
        raise ValueError(f"alphaedit_update needs regulariser > 0, got {regulariser}")
    projected_keys = keys @ projector  # (n, h): rows (P k_i)^T, P symmetric
    system = projected_keys @ keys.T + regulariser * torch.eye(keys.shape[0], dtype=keys.dtype,
                                                                  device=keys.device)
    update = residuals.T @ _solve("alphaedit_update", system, projected_keys, "raise the regulariser")
    return weight + update
