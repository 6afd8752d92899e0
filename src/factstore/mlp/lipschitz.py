"""Lipschitz constant of a fact-storing MLP over its keys from its WHOLE Jacobian (S0 "Lipschitz constant").

The paper estimates Lip(g) by the largest spectral norm of the Jacobian of g at 100 sampled keys;
a Transformer can only use an MLP whose output does not swing wildly between nearby inputs, and
whitening raises this constant. The estimate both S0 studies report restricts the Jacobian to the
tangent space of the key sphere (factstore.jacobians.tangent_lipschitz, never larger than the
whole one here); the whole-Jacobian estimate is the earlier reading of the whitening sweep. The
pairwise ratio max ||g(x) - g(y)|| / ||x - y|| is a second, derivative-free lower bound on the
same constant.

Both scale with the MLP's outputs, while dot-product decoding does not (argmax_j <c g(x), v_j>
is the same for every c > 0): an NTK MLP emits outputs of norm ~c_k / d_out and a GD MLP
trained on cross-entropy inflates its outputs to sharpen the softmax. Compare methods at a
common output scale (e.g. divide by the median ||g(k_i)||) unless the scale itself matters, as
it does for a frozen MLP inside a Transformer.
"""

from __future__ import annotations


import torch
from torch import Tensor, nn

from factstore.jacobians import jacobians, norms_in_float32, relative_to_output_rms
from factstore.mlp.modules import module_outputs


def _sample_rows(n_rows: int, n_samples: int, generator: torch.Generator | None) -> Tensor:
    """Indices of min(n_samples, n_rows) distinct rows, drawn with `generator`."""
    return torch.randperm(n_rows, generator=generator)[: min(n_samples, n_rows)]


def jacobian_norms(module: nn.Module, inputs: Tensor) -> Tensor:
    """(n,) spectral norms ||J_g(x)||_2 of the Jacobians (d_out, d_in) at each input row
    (inputs: (n, d_in)), in the module's dtype."""
    return torch.linalg.matrix_norm(jacobians(module, inputs), ord=2)


def lipschitz_estimate(
    module: nn.Module, keys: Tensor, n_samples: int = 100, generator: torch.Generator | None = None,
    chunk_size: int | None = None,
) -> float:
    """max over n_samples sampled keys k_i of ||J_g(k_i)||_2 (keys: (F, d_in)), the Jacobians
    taken in float32 (factstore.jacobians.norms_in_float32).

    chunk_size: Jacobians taken this many rows at a time (memory ~ chunk x d_out x hidden for a
    wide MLP); None: all sampled rows at once.
    """
    rows = _sample_rows(len(keys), n_samples, generator)
    return float(norms_in_float32(module, keys[rows], jacobian_norms, chunk_size).max())


def pairwise_lipschitz_estimate(
    module: nn.Module, keys: Tensor, n_pairs: int = 1000, generator: torch.Generator | None = None
) -> float:
    """max over n_pairs random pairs of distinct keys of ||g(x) - g(y)|| / ||x - y||."""
    dtype = next(module.parameters()).dtype
    first = torch.randint(0, len(keys), (n_pairs,), generator=generator)
    shift = torch.randint(1, len(keys), (n_pairs,), generator=generator)  # never pairs a key with itself
    second = (first + shift) % len(keys)
    x, y = keys[first].to(dtype), keys[second].to(dtype)
    with torch.no_grad():
        ratios = (module(x) - module(y)).norm(dim=1) / (x - y).norm(dim=1)
    return float(ratios.max())


def lipschitz_constants(
    module: nn.Module, keys: Tensor, n_samples: int, generator: torch.Generator, chunk_size: int = 4
) -> tuple[float, float, float]:
    """(Lip, Lip / RMS output norm, RMS output norm) over `n_samples` sampled keys (keys: (F, d_in)).

    Lip = max_i ||J_g(k_i)||_2 (S0: the Jacobian's spectral norm at sampled keys;
    `lipschitz_estimate`, in chunks of rows to bound memory at large widths). Decoding does not
    depend on the output scale, so Lip / RMS_i ||g(k_i)|| (over all keys) is the scale-free
    version that can be compared across methods (see the module docstring).
    """
    lipschitz = lipschitz_estimate(module, keys, n_samples, generator, chunk_size)
    return relative_to_output_rms(lipschitz, module_outputs(module, keys))
