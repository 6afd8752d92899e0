"""The Lipschitz constant of a hosted MLP as the Transformer sees it (S0, the paper's Fig. 8b).

Inside the Transformer the MLP only ever reads normalised inputs: its input is s * rms(a), a
point of the sphere of radius sqrt(d) s (the unit sphere for unit keys). The radial direction
never reaches it, so the constant that matters is the Jacobian RESTRICTED TO THE TANGENT SPACE of
that sphere at the key, J_g(x) (I - x x^T / ||x||^2), and its spectral norm, maximised over
sampled keys (the paper samples 100). Decoding does not depend on the output scale, so the
scale-free version divides by the RMS output norm over all keys.
"""

from __future__ import annotations


import torch
from torch import Tensor, nn

from factstore.jacobians import jacobians, norms_in_float32, relative_to_output_rms


def tangent_jacobian_norms(module: nn.Module, inputs: Tensor) -> Tensor:
    """(n,) spectral norms of J_g(x) P_x at each input row x, P_x = I - x x^T / ||x||^2.

    inputs: (n, d_in), cast to the module's dtype; Jacobians (n, d_out, d_in) from
    factstore.jacobians.jacobians.
    """
    dtype = next(module.parameters()).dtype
    inputs = inputs.to(dtype)
    unit = torch.nn.functional.normalize(inputs, dim=1)
    projector = torch.eye(inputs.shape[1], dtype=dtype) - unit.unsqueeze(2) * unit.unsqueeze(1)  # (n, d_in, d_in)
    return torch.linalg.matrix_norm(jacobians(module, inputs) @ projector, ord=2)


def tangent_lipschitz(module: nn.Module, keys: Tensor, n_samples: int, generator: torch.Generator,
                      chunk_size: int = 4) -> tuple[float, float, float]:
    """(Lip, Lip / RMS output norm, RMS output norm): Lip = max of tangent_jacobian_norms over
    min(n_samples, F) keys drawn without replacement (keys: (F, d_in), the unit keys the MLP
    reads); the RMS output norm is over all keys. The Jacobians are taken in float32
    (factstore.jacobians.norms_in_float32); chunk_size rows at a time bound the memory of a
    wide MLP's Jacobians."""
    rows = torch.randperm(len(keys), generator=generator)[: min(n_samples, len(keys))]
    norms = norms_in_float32(module, keys[rows], tangent_jacobian_norms, chunk_size)
    dtype = next(module.parameters()).dtype
    with torch.no_grad():
        return relative_to_output_rms(float(norms.max()), module(keys.to(dtype)))
