"""The Hebbian linear memory W = sum_i v_f(i) k_i^T (S0 construction 3; baseline of S1).

It stores every fact only at tiny load (about p ln p / d^2 < 1/8 for Gaussian embeddings), so it
is the floor every MLP is compared against. It has no width: `size` is accepted for the common
`build` interface and must be None or d_in.
"""

from __future__ import annotations

import torch

from factstore.facts import FactSet
from factstore.mlp.modules import LinearMemory, parameter_count


def build(
    fact_set: FactSet, size: int | None = None, generator: torch.Generator | None = None
) -> tuple[LinearMemory, int]:
    """(LinearMemory with W = Y^T K (d_out, d_in), d_out d_in); Y = values[fact_map] (F, d_out).

    `generator` is unused (the rule is deterministic) but kept for the common interface.
    """
    if size is not None and size != fact_set.key_dim:
        raise ValueError(f"the Hebbian memory has no width to choose: size must be None or d_in = {fact_set.key_dim}")
    weight = fact_set.targets.to(torch.float64).T @ fact_set.keys.to(torch.float64)
    module = LinearMemory(weight)
    return module, parameter_count(module)
