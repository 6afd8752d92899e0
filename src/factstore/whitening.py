"""ZCA whitening of embeddings and its exact folding into an MLP (S0 "whitening").

For embeddings E (F, d) with second moment Sigma = E^T E / F + eps I = Q Lambda Q^T, the ZCA
transform of strength alpha in [0, 1] is W_alpha = Q Lambda^{-alpha/2} Q^T (alpha = 0: identity,
alpha = 1: full ZCA). Whitened embeddings are E W_alpha (row e -> W e,
W symmetric). Two project choices, both written down here:
- No centring. Sigma is the uncentred second moment, as in S0, because (i) a linear map folds
  exactly into the bias-free linear layers of the MLPs while a mean shift would not, and (ii)
  for values a common shift changes no decoded fact anyway (<y, v_j - mu> = <y, v_j> - <y, mu>,
  the second term is the same for every j), while for real embeddings the large shared mean
  direction is exactly the anisotropy that uncentred whitening damps.
- Scale kept (`preserve_scale=True`, default): W_alpha is multiplied by the one scalar c that
  keeps the mean squared row norm, ||E W||_F = ||E||_F. Without it, full whitening of unit
  keys in d = 128 gives rows of norm ~sqrt(d) ~ 11, so a whitening sweep would also be an input
  scale sweep for the MLP's nonlinearity. A positive scalar changes no direction, no angle, no
  condition number and no decoded fact; pass preserve_scale=False for the literal S0 matrix.

Folding. An MLP g_w built on whitened keys K W_k and whitened values V W_v (decoded by dot
product against V W_v) is turned into an MLP g that reads and writes the ORIGINAL basis:

    scores_ij = <g_w(W_k^T k_i), W_v^T v_j> = <W_v g_w(W_k^T k_i), v_j>,

so g(x) = W_v g_w(W_k^T x): every linear map that reads x gets W <- W W_k^T, and the last
linear map gets W <- W_v W (its bias b <- W_v b). These scores equal the whitened ones exactly,
so the same facts are decoded. Note it is W_v, not W_v^{-1}: folding the inverse would give
outputs close to the original value VECTORS (a regression view) but decode with the original,
anisotropic geometry, i.e. undo the benefit of whitening.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from factstore.facts import FactSet

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


def principal_projection(tables: list[Tensor], dim: int) -> list[Tensor]:
    """Every table (n_t, D) projected onto the top `dim` right singular vectors of all of them
    stacked (uncentred, like the whitening): the leading, most anisotropic part of real embeddings
    in a smaller dimension (the project's choice that lets a CPU run 384-d MiniLM facts at d = 64:
    the usability study, and the mlp study's whitening sweep at F >> d). dim >= D returns the
    tables unchanged (float64)."""
    tables = [table.to(torch.float64) for table in tables]
    if dim >= tables[0].shape[1]:
        return tables
    _, _, right = torch.linalg.svd(torch.cat(tables), full_matrices=False)
    basis = right[:dim].T  # (D, dim)
    return [table @ basis for table in tables]


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
