"""Jacobians of a module at a batch of inputs, for the Lipschitz estimates of the S0 studies
(factstore.mlp.lipschitz: the MLP's Jacobian; factstore.usability.lipschitz: its restriction to
the tangent space of the sphere the Transformer feeds it)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


def single_precision(module: nn.Module) -> nn.Module:
    """The module in float32 for its Jacobians: itself when already float32, else a copy.

    Why: an exact spectral norm needs the whole Jacobian, 2 h d_in d_out FLOPs a key, which is
    where the S0 whitening jobs spend most of their time; float32 takes ~2.8x less than the
    constructions' float64 and moves the norm by ~5e-7 relative (docs/performance.md), far below
    anything the Lipschitz claims read."""
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
