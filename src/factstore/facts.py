"""Fact sets: keys, values and the map between them, and THE accuracy every method is scored by.

A fact set holds F keys k_i (unit-norm rows), a table of values v_j and a fact map f: key i is
meant to produce value f(i). A model g stores fact i when dot-product decoding over ALL values
picks the right one:

    argmax_j <g(k_i), v_j> = f(i)          (S0, as softmax decoding in a language model)

Embeddings come in three kinds (S0 "Embeddings and fact sets"):
- spherical: i.i.d. Gaussian rows normalised to unit norm;
- conditioned: the singular values of a spherical set replaced by linspace(1, 1/kappa, r) (or a
  geometric profile, `singular_value_profile`) and rescaled to keep the Frobenius norm, so the
  set has condition number exactly kappa;
- real: precomputed sentence embeddings (see `factstore.embeddings`), keys renormalised.

Constructions run in float64; every function here returns float64 tensors on the CPU unless the
inputs live elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

FactMapKind = Literal["permutation", "random"]
DEFAULT_CHUNK_SIZE = 1024


@dataclass(frozen=True)
class FactSet:
    """F facts: key i (a row of `keys`) is mapped to value `fact_map[i]` (a row of `values`).

    keys: (F, d_in) float64, unit-norm rows.
    values: (n_values, d_out) float64; usually n_values = F.
    fact_map: (F,) int64 with entries in [0, n_values).
    """

    keys: Tensor
    values: Tensor
    fact_map: Tensor
    name: str = ""

    def __post_init__(self) -> None:
        if self.keys.ndim != 2 or self.values.ndim != 2:
            raise ValueError("keys and values must be 2-d tensors (rows are embeddings)")
        if self.fact_map.shape != (self.keys.shape[0],):
            raise ValueError(
                f"fact_map must have one entry per key: shape {tuple(self.fact_map.shape)} "
                f"for {self.keys.shape[0]} keys"
            )
        if self.fact_map.dtype != torch.long:
            raise ValueError("fact_map must be a LongTensor")
        if self.n_facts and (
            self.fact_map.min() < 0 or self.fact_map.max() >= self.values.shape[0]
        ):
            raise ValueError("fact_map points outside the value table")

    @property
    def n_facts(self) -> int:
        return int(self.keys.shape[0])

    @property
    def key_dim(self) -> int:
        return int(self.keys.shape[1])

    @property
    def value_dim(self) -> int:
        return int(self.values.shape[1])

    @property
    def targets(self) -> Tensor:
        """(F, d_out): the value each key must produce, values[fact_map]."""
        return self.values[self.fact_map]

    def with_values(self, values: Tensor) -> FactSet:
        """The same keys and fact map with another value table (e.g. whitened values)."""
        return FactSet(self.keys, values, self.fact_map, self.name)


def per_value_targets(fact_set: FactSet, value_targets: Tensor | None = None) -> Tensor:
    """(n_values, d_out) float64: the vector an MLP is built to emit for each value.

    value_targets: (n_values, d_out), e.g. the margin-optimal U* that the caller solved once and
    shares between methods; None means the values V themselves. Which of the two a study method
    emits is decided once, in mlp/methods.py, never by the builders.
    """
    return (fact_set.values if value_targets is None else value_targets).to(torch.float64)


# ---------------------------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------------------------


def normalize_rows(embeddings: Tensor, eps: float = 1e-12) -> Tensor:
    """(n, d) -> (n, d) with unit-norm rows (rows of norm below eps are left as they are)."""
    norms = embeddings.norm(dim=1, keepdim=True)
    return embeddings / norms.clamp_min(eps)


def spherical_embeddings(n: int, d: int, generator: torch.Generator) -> Tensor:
    """(n, d) float64: i.i.d. Gaussian rows normalised to unit norm (uniform on S^{d-1})."""
    gaussian = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return normalize_rows(gaussian)


def condition_number(embeddings: Tensor) -> float:
    """sigma_max / sigma_min over the min(n, d) singular values of an (n, d) matrix."""
    singular_values = torch.linalg.svdvals(embeddings)
    return float(singular_values.max() / singular_values.min())


SpectrumKind = Literal["linspace", "geometric"]
SPECTRA = ("linspace", "geometric")


def singular_value_profile(rank: int, condition_number: float, spectrum: SpectrumKind = "linspace",
                           dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """(rank,) decreasing singular values from 1 to 1/kappa, ratio exactly kappa.

    linspace: 1 - (1 - 1/kappa) t at t = 0 .. 1 (S0's conditioned sets): most directions
    keep a weight near the top, so rho(V) falls little even at kappa = 1000 (0.50 -> 0.37 at
    d = 32, F = 512). geometric: kappa^(-t), equal ratios between neighbours: most directions
    are small, the set is nearly low-rank and rho(V) falls far further (0.05 there).
    """
    if condition_number < 1:
        raise ValueError(f"condition number must be >= 1, got {condition_number}")
    if spectrum == "linspace":
        return torch.linspace(1.0, 1.0 / condition_number, rank, dtype=dtype, device=device)
    if spectrum == "geometric":
        return torch.logspace(0.0, -math.log10(condition_number), rank, dtype=dtype, device=device)
    raise ValueError(f"unknown spectrum '{spectrum}' (use one of {SPECTRA})")


def set_condition_number(embeddings: Tensor, condition_number: float, spectrum: SpectrumKind = "linspace") -> Tensor:
    """(n, d) -> (n, d) with singular values singular_value_profile(r, kappa, spectrum) (linspace
    (1, 1/kappa, r) by default), scaled to keep ||E||_F.

    The singular vectors of the input are kept (E = U S W^T -> U S' W^T), so a spherical input
    gives a set whose directions are random but whose spread is exactly kappa.
    """
    if condition_number < 1:
        raise ValueError(f"condition number must be >= 1, got {condition_number}")
    left, singular_values, right_t = torch.linalg.svd(embeddings, full_matrices=False)
    rank = singular_values.shape[0]
    profile = singular_value_profile(rank, condition_number, spectrum, embeddings.dtype, embeddings.device)
    profile = profile * (singular_values.norm() / profile.norm())
    return (left * profile) @ right_t


def conditioned_embeddings(
    n: int, d: int, condition_number: float, generator: torch.Generator, spectrum: SpectrumKind = "linspace"
) -> Tensor:
    """(n, d) float64 anisotropic embeddings with condition number exactly `condition_number`.

    S0: start from a spherical set E (so ||E||_F^2 = n, mean squared row norm 1), take
    E = U S W^T, replace S by linspace(1, 1/kappa, r) (or the geometric profile,
    singular_value_profile) rescaled to keep the Frobenius norm, and rebuild. Rows are NOT
    unit-norm afterwards (that is the point: values differ in scale too).
    """
    return set_condition_number(spherical_embeddings(n, d, generator), condition_number, spectrum)


def random_fact_map(
    n: int,
    generator: torch.Generator,
    kind: FactMapKind = "permutation",
    n_values: int | None = None,
) -> Tensor:
    """(n,) int64: a random permutation of [n] (default) or i.i.d. uniform draws from [n_values]."""
    if kind == "permutation":
        if n_values is not None and n_values != n:
            raise ValueError("a permutation fact map needs as many values as keys")
        return torch.randperm(n, generator=generator)
    if kind == "random":
        return torch.randint(0, n if n_values is None else n_values, (n,), generator=generator)
    raise ValueError(f"unknown fact map kind '{kind}' (use 'permutation' or 'random')")


def _embeddings_with_condition_number(
    n: int, d: int, condition_number: float, generator: torch.Generator, spectrum: SpectrumKind = "linspace"
) -> Tensor:
    """Spherical rows for kappa = 1 (the S0 default), conditioned rows otherwise."""
    if condition_number == 1.0:
        return spherical_embeddings(n, d, generator)
    return conditioned_embeddings(n, d, condition_number, generator, spectrum)


def make_fact_set(
    n_facts: int,
    dim: int,
    generator: torch.Generator,
    value_condition_number: float = 1.0,
    key_condition_number: float = 1.0,
    fact_map: FactMapKind = "permutation",
    value_spectrum: SpectrumKind = "linspace",
) -> FactSet:
    """A synthetic fact set of F = n_facts keys and values in R^dim.

    Keys are always on the unit sphere: anisotropic keys (key_condition_number > 1) are drawn
    conditioned and then renormalised row by row, which keeps their directions anisotropic.
    Values are spherical for kappa = 1 and conditioned (not renormalised) otherwise, their
    singular values following `value_spectrum` (singular_value_profile).
    Draw order (keys, values, map) is fixed so a seed gives the same set everywhere.
    """
    keys = normalize_rows(
        _embeddings_with_condition_number(n_facts, dim, key_condition_number, generator)
    )
    values = _embeddings_with_condition_number(n_facts, dim, value_condition_number, generator, value_spectrum)
    mapping = random_fact_map(n_facts, generator, fact_map)
    name = f"synthetic-F{n_facts}-d{dim}-kv{value_condition_number:g}-kk{key_condition_number:g}"
    if value_spectrum != "linspace":
        name += f"-{value_spectrum}"
    return FactSet(keys, values, mapping, name)


def real_fact_set(
    key_embeddings: Tensor | np.ndarray,
    value_embeddings: Tensor | np.ndarray,
    generator: torch.Generator,
    fact_map: FactMapKind | Literal["aligned"] | Tensor | np.ndarray = "permutation",
    n_facts: int | None = None,
    name: str = "real",
) -> FactSet:
    """A fact set from precomputed embeddings (e.g. MiniLM of book titles and author names).

    key_embeddings: (n_keys, d_in); value_embeddings: (n_values, d_out); any float dtype.
    fact_map: "permutation" / "random" for a random map (the synthetic protocol on real
        geometry), "aligned" for key i -> value i (a row-aligned table such as book -> author),
        or an explicit (n_keys,) LongTensor (e.g. book -> index of its author in a value table
        of unique authors).
    n_facts: if given, keep a random subset of n_facts keys (and, for "permutation" and
        "aligned", the same rows of the value table, so the value table stays square).
    Keys are renormalised to unit norm; values keep their scale. Both become float64.
    """
    keys = torch.as_tensor(key_embeddings).to(torch.float64)
    values = torch.as_tensor(value_embeddings).to(torch.float64)
    explicit_map = (
        None if isinstance(fact_map, str) else torch.as_tensor(fact_map, dtype=torch.long)
    )
    if explicit_map is None and fact_map in ("permutation", "aligned") and len(keys) != len(values):
        raise ValueError(f"fact_map='{fact_map}' needs as many values as keys")

    if n_facts is not None:
        rows = torch.randperm(len(keys), generator=generator)[:n_facts].sort().values
        keys = keys[rows]
        if explicit_map is not None:
            explicit_map = explicit_map[rows]
        elif fact_map in ("permutation", "aligned"):
            values = values[rows]

    if explicit_map is not None:
        mapping = explicit_map
    elif fact_map == "aligned":
        mapping = torch.arange(len(keys))
    else:
        mapping = random_fact_map(len(keys), generator, fact_map, n_values=len(values))
    return FactSet(normalize_rows(keys), values, mapping, name)


# ---------------------------------------------------------------------------------------------
# Accuracy: dot-product decoding over all values, in chunks of rows
# ---------------------------------------------------------------------------------------------


def target_and_best_other(scores: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """((n, 1) each row's score of its target, (n, 1) its best score of any other column).

    scores: (n, C); target: (n, 1) int64. Row i decodes right when the first beats the second
    strictly (a tie counts as wrong). The target column is set aside (-inf) so that one amax gives
    the best competitor, then put back: `scores` holds its own values again on return.
    """
    target_score = scores.gather(1, target)
    best_other = torch.amax(scores.scatter_(1, target, float("-inf")), dim=1, keepdim=True)
    scores.scatter_(1, target, target_score)
    return target_score, best_other


def decoding_margins(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """(F,) score of the right value minus the best score of any other value.

    outputs: (F, d_out) model outputs g(k_i); values: (n_values, d_out); fact_map: (F,).
    margin_i = <g(k_i), v_f(i)> - max_{j != f(i)} <g(k_i), v_j>; fact i is stored iff > 0.
    Scores are computed for `chunk_size` rows at a time, so memory is chunk_size x n_values
    rather than F x n_values. Outputs are cast to the values' dtype and device.
    """
    if outputs.ndim != 2 or outputs.shape[1] != values.shape[1]:
        raise ValueError(
            f"outputs {tuple(outputs.shape)} do not match values {tuple(values.shape)}"
        )
    outputs = outputs.to(dtype=values.dtype, device=values.device)
    fact_map = fact_map.to(values.device)
    margins = torch.empty(len(outputs), dtype=values.dtype, device=values.device)
    for start in range(0, len(outputs), chunk_size):
        rows = slice(start, start + chunk_size)
        target_score, best_other = target_and_best_other(outputs[rows] @ values.T, fact_map[rows].unsqueeze(1))
        margins[rows] = (target_score - best_other).squeeze(1)
    return margins


def stored_mask(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """(F,) bool: fact i is stored when argmax_j <outputs_i, values_j> == fact_map[i].

    A tie with another value counts as NOT stored (so an all-zero output stores nothing, where
    a plain torch.argmax would credit whichever fact maps to value 0).
    """
    return decoding_margins(outputs, values, fact_map, chunk_size) > 0


def dot_product_accuracy(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> float:
    """Fraction of facts stored under dot-product decoding over ALL values (see stored_mask)."""
    if len(outputs) == 0:
        return float("nan")
    return float(stored_mask(outputs, values, fact_map, chunk_size).double().mean())
