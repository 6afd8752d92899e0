"""Jacobians of a module at a batch of inputs, for the Lipschitz estimates of the S0 studies.

factstore.mlp.lipschitz takes the MLP's whole Jacobian; `tangent_lipschitz` here is the estimate
both S0 studies read (the usability study's Lipschitz threshold and the fact-storing-MLP study's
whitening sweep): the Jacobian RESTRICTED TO THE TANGENT SPACE of the sphere the normalised inputs
live on. Inside the Transformer the MLP only reads s * rms(a), a point of a sphere, so the radial
direction never reaches it: the constant that matters is the spectral norm of J_g(x) P_x,
P_x = I - x x^T / ||x||^2, maximised over sampled keys (the paper samples 100), and its
scale-free version divides by the RMS output norm over all keys (decoding ignores the scale)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


def single_precision(module: nn.Module) -> nn.Module:
    """The module in float32 for its Jacobians: itself when already float32, else a copy.

    Why: the Jacobians (2 h d_in d_out FLOPs a key whole, 2 h (d_in + d_out) per product) are
    where the S0 whitening jobs' Lipschitz estimates spend their time; float32 takes ~2.8x less
    than the constructions' float64 and moves the norm by ~5e-7 relative (docs/performance.md),
    far below anything the Lipschitz claims read."""
    if next(module.parameters()).dtype == torch.float32:
        return module
    return copy.deepcopy(module).to(torch.float32)


def jacobians(module: nn.Module, inputs: Tensor) -> Tensor:
    """(n, d_out, d_in) Jacobians of `module` at each input row (inputs: (n, d_in), cast to the
    module's dtype): the module's own closed form where it has one (`input_jacobians`, e.g. the
    gated MLP's), else torch.func.jacrev vectorised over the rows with vmap (one reverse pass per
    output coordinate, batched)."""
    if hasattr(module, "input_jacobians"):
        return module.input_jacobians(inputs)
    dtype = next(module.parameters()).dtype
    return torch.func.vmap(torch.func.jacrev(module))(inputs.to(dtype)).detach()


def norms_in_float32(module: nn.Module, inputs: Tensor, norms: Callable[[nn.Module, Tensor], Tensor],
                     chunk_size: int | None = None) -> Tensor:
    """(n,) norms(single, rows) over the input rows (inputs: (n, d_in)), `chunk_size` rows at a
    time (None: all at once), `single` one float32 copy of the module (`single_precision`) made
    for all chunks. The Lipschitz estimates' shared loop: chunks bound the memory of a wide MLP's
    Jacobians; `norms` is the estimate's own norm of its Jacobians (whole, or on a tangent space)."""
    single = single_precision(module)
    chunk_size = chunk_size or len(inputs)
    return torch.cat([norms(single, inputs[start : start + chunk_size]) for start in range(0, len(inputs), chunk_size)])


def relative_to_output_rms(lipschitz: float, outputs: Tensor) -> tuple[float, float, float]:
    """(Lip, Lip / RMS output norm, RMS output norm), the RMS of ||g(k_i)|| over the rows of
    `outputs` (F, d_out): decoding does not depend on the output scale, so the ratio is the
    scale-free Lipschitz constant the S0 studies compare (NaN when every output is zero)."""
    rms = float(outputs.norm(dim=1).pow(2).mean().sqrt())
    return lipschitz, lipschitz / rms if rms > 0 else math.nan, rms


# ---------------------------------------------------------------------------------------------
# The tangent-space Lipschitz estimate shared by the S0 studies
# ---------------------------------------------------------------------------------------------


def tangent_projector(inputs: Tensor) -> Tensor:
    """(n, d, d) projectors P_x = I - x x^T / ||x||^2 onto the tangent space of the sphere through
    each input row x (inputs: (n, d)), in the inputs' dtype."""
    unit = torch.nn.functional.normalize(inputs, dim=1)
    return torch.eye(inputs.shape[1], dtype=inputs.dtype, device=inputs.device) - unit.unsqueeze(2) * unit.unsqueeze(1)


def tangent_jacobian_norms(module: nn.Module, inputs: Tensor) -> Tensor:
    """(n,) spectral norms of J_g(x) P_x at each input row x, from the whole Jacobians: the exact
    reference of `tangent_spectral_norms` (d_out x d_in per row, an SVD each).

    inputs: (n, d_in), cast to the module's dtype; Jacobians (n, d_out, d_in) from `jacobians`.
    """
    inputs = inputs.to(next(module.parameters()).dtype)
    return torch.linalg.matrix_norm(jacobians(module, inputs) @ tangent_projector(inputs), ord=2)


def jacobian_products(module: nn.Module, inputs: Tensor) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """(v -> J v, w -> J^T w) for the row-wise module at every input row at once: v (n, d_in) to
    (n, d_out) and w (n, d_out) to (n, d_in), row i through J_g(x_i) (inputs: (n, d_in), in the
    module's dtype). J^T w is one reverse pass of the saved forward; J v the reverse pass of that
    (linear) map, which costs about the same without forward-mode tracing."""
    outputs, pullback = torch.func.vjp(module, inputs)
    _, pushforward = torch.func.vjp(lambda cotangent: pullback(cotangent)[0], torch.zeros_like(outputs.detach()))
    return (lambda v: pushforward(v)[0].detach()), (lambda w: pullback(w)[0].detach())


def top_eigenvalues(operator: Callable[[Tensor], Tensor], start: Tensor, tolerance: float) -> Tensor:
    """(n,) largest eigenvalue of each of n symmetric operators applied row-wise, by Lanczos with
    full reorthogonalisation, all rows in one batch.

    operator: (n, d) -> (n, d), row i by the symmetric matrix A_i; start: (n, d) float64 start
    vectors (random: a row orthogonal to A_i's top eigenvector would miss it). Stops once every
    row's top Ritz value theta has residual ||A y - theta y|| <= tolerance * theta (some eigenvalue
    then lies that close) or the Krylov space fills the d dimensions (theta is then exact).
    Why: the whole Jacobian costs d_in times more than one product with it, and the top of a
    Jacobian's spectrum needs ~15-50 products (factstore.jacobians.tangent_spectral_norms).
    """
    basis = [start / start.norm(dim=1, keepdim=True)]
    diagonal, off_diagonal = [], []
    for step in range(start.shape[1]):
        product = operator(basis[-1])
        diagonal.append((product * basis[-1]).sum(1))
        stacked = torch.stack(basis)  # (k, n, d)
        for _ in range(2):  # twice is enough (Kahan's rule), in float64
            product = product - torch.einsum("knd,kn->nd", stacked, torch.einsum("knd,nd->kn", stacked, product))
        beta = product.norm(dim=1)
        tridiagonal = torch.diag_embed(torch.stack(diagonal, 1))
        if off_diagonal:
            band = torch.diag_embed(torch.stack(off_diagonal, 1), offset=1)
            tridiagonal = tridiagonal + band + band.mT
        values, vectors = torch.linalg.eigh(tridiagonal)
        top = values[:, -1]
        if step + 1 == start.shape[1] or bool((beta * vectors[:, -1, -1].abs() <= tolerance * top.abs()).all()):
            return top
        off_diagonal.append(beta)
        basis.append(product / beta.clamp_min(torch.finfo(product.dtype).tiny)[:, None])
    return top


def tangent_spectral_norms(module: nn.Module, inputs: Tensor, generator: torch.Generator,
                           tolerance: float = 1e-5) -> Tensor:
    """(n,) spectral norms of J_g(x) P_x at each input row x (inputs: (n, d_in)): the square root
    of the top eigenvalue of P_x J^T J P_x by `top_eigenvalues`, the products J v and J^T w taken
    in float32 (`single_precision`, `jacobian_products`), the Lanczos vectors in float64 from a
    start drawn with `generator`. Agrees with the whole-Jacobian `tangent_jacobian_norms` to
    ~tolerance / 2 (tested) at 2-5x less cost for a wide MLP."""
    single = single_precision(module)
    parameter = next(single.parameters())
    unit = torch.nn.functional.normalize(inputs.to(torch.float64), dim=1).to(parameter.device)

    def project(vectors: Tensor) -> Tensor:
        return vectors - unit * (unit * vectors).sum(1, keepdim=True)

    jvp, vjp = jacobian_products(single, inputs.to(device=parameter.device, dtype=parameter.dtype))

    def gram(vectors: Tensor) -> Tensor:
        return project(vjp(jvp(project(vectors).to(parameter.dtype))).to(torch.float64))

    start = project(torch.randn(inputs.shape, generator=generator, dtype=torch.float64).to(parameter.device))
    return top_eigenvalues(gram, start, tolerance).clamp_min(0).sqrt().cpu()


def tangent_lipschitz(module: nn.Module, keys: Tensor, n_samples: int, generator: torch.Generator,
                      chunk_size: int | None = None) -> tuple[float, float, float]:
    """(Lip, Lip / RMS output norm, RMS output norm): Lip = max of `tangent_spectral_norms` over
    min(n_samples, F) keys drawn without replacement (keys: (F, d_in), the unit keys the MLP
    reads); the RMS output norm is over all keys. chunk_size: keys taken this many at a time
    (None: all at once; memory ~ keys x hidden activations)."""
    rows = torch.randperm(len(keys), generator=generator)[: min(n_samples, len(keys))]
    chunk_size = chunk_size or len(rows)
    norms = torch.cat([tangent_spectral_norms(module, keys[rows[start : start + chunk_size]], generator)
                       for start in range(0, len(rows), chunk_size)])
    parameter = next(module.parameters())
    with torch.no_grad():
        outputs = module(keys.to(device=parameter.device, dtype=parameter.dtype)).cpu()
    return relative_to_output_rms(float(norms.max()), outputs)
