"""The study's fact sets: synthetic ones on the sphere (spherical or conditioned values) and the
real MiniLM one (Goodreads titles -> authors), with U* and rho(V) of their values.

Random streams come from `derived_generator(seed, stream, ...)`: the fact set of (d, F, kappa,
replicate) is the same for every method and job, and a job's numbers do not depend on which other
jobs ran.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from factstore.device import derived_generator
from factstore.embeddings import load_embeddings
from factstore.facts import FactSet, make_fact_set, real_fact_set
from factstore.geometry import margin_optimal_targets
from factstore.whitening import principal_projection


def synthetic_fact_set(seed: int, dim: int, n_facts: int, kappa: float, replicate: int,
                       spectrum: str = "linspace") -> FactSet:
    """Spherical keys; spherical (kappa = 1) or conditioned values (singular values of the family
    `spectrum`, facts.singular_value_profile); a random permutation map.

    The same (seed, d, F, kappa, replicate) gives the same set in every job and experiment; the
    two spectra share the random draws (the same keys, map and singular vectors: a paired comparison).
    """
    return make_fact_set(n_facts, dim, derived_generator(seed, "mlp-facts", dim, n_facts, float(kappa), replicate),
                         value_condition_number=float(kappa), value_spectrum=spectrum)


def minilm_fact_set(embeddings: Path, seed: int, dim: int | None = None) -> FactSet:
    """The real MiniLM fact set of the embeddings step (each book to its own author); with `dim`,
    keys and values projected onto their top dim principal directions (whitening.principal_projection)."""
    archive = load_embeddings(embeddings)
    keys, values = archive["keys"], archive["values"]
    if dim is not None:
        keys, values = principal_projection([torch.as_tensor(keys), torch.as_tensor(values)], dim)
    return real_fact_set(keys, values, derived_generator(seed, "mlp-real"), fact_map="aligned",
                         name="goodreads-minilm" if dim is None else f"goodreads-minilm-top{dim}")


def ustar_and_rho(facts: FactSet) -> tuple[Tensor, float]:
    """(U* (n_values, d_out), rho(V)) of the fact set's values: one solve, shared by every method."""
    targets, margins = margin_optimal_targets(facts.values)
    return targets, float(margins.min())
