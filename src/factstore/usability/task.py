"""The recall task `<junk prefix> key <junk suffix> Q value` (SPEC S0 "Usability"; the seed's SSFR).

Vocabulary layout for F facts and J junk tokens (`Vocabulary`):

    [0, F)            key tokens        [F, 2F)           value tokens
    [2F, 2F + J)      junk tokens       2F + J            the query token Q

A sequence for key i is: a junk prefix (length uniform in [prefix_min, prefix_max]), key i, a
junk suffix (length uniform in [suffix_min, suffix_max]), Q, then the value token F + f(i).
The model is scored only on its prediction AT Q (the next token is the value): the loss mask
(`targets` != IGNORE) is True at exactly that position. Sequences of a batch are right-padded
with Q tokens after the value; padding comes after the scored position, so a causal model never
sees it.

Embeddings (`token_embeddings`) stack keys, values, junk and Q into one (V, d) table; the MLP the
Transformer hosts is built on `mlp_fact_set`: keys = the key embeddings projected to the unit
sphere, values = the value embeddings as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from factstore.facts import FactSet, normalize_rows

IGNORE = -100
"""Target of every position that is not scored (torch's cross-entropy ignore_index)."""


@dataclass(frozen=True)
class Vocabulary:
    """Token ids of the task for `n_facts` facts and `n_junk` junk tokens (module docstring)."""

    n_facts: int
    n_junk: int

    @property
    def size(self) -> int:
        return 2 * self.n_facts + self.n_junk + 1

    @property
    def query(self) -> int:
        return 2 * self.n_facts + self.n_junk

    def key(self, index: Tensor) -> Tensor:
        return index

    def value(self, index: Tensor) -> Tensor:
        return index + self.n_facts

    def junk(self, index: Tensor) -> Tensor:
        return index + 2 * self.n_facts


@dataclass(frozen=True)
class JunkLengths:
    """Prefix and suffix lengths, each uniform over an inclusive integer range."""

    prefix_min: int
    prefix_max: int
    suffix_min: int
    suffix_max: int

    def __post_init__(self) -> None:
        if not (0 <= self.prefix_min <= self.prefix_max and 0 <= self.suffix_min <= self.suffix_max):
            raise ValueError(f"need 0 <= min <= max for prefix and suffix lengths, got {self}")

    @property
    def max_length(self) -> int:
        """Longest sequence: prefix, key, suffix, Q, value."""
        return self.prefix_max + self.suffix_max + 3


@dataclass(frozen=True)
class Sequences:
    """A batch of task sequences.

    tokens: (B, T) int64 token ids; targets: (B, T) int64, IGNORE except at the query position,
    where it holds the value token; query_positions: (B,) index of Q; lengths: (B,) tokens
    before padding (prefix + key + suffix + Q + value); facts: (B,) the fact (key index) of each.
    """

    tokens: Tensor
    targets: Tensor
    query_positions: Tensor
    lengths: Tensor
    facts: Tensor

    @property
    def answers(self) -> Tensor:
        """(B,) the value token each sequence must predict at Q."""
        rows = torch.arange(len(self.tokens), device=self.tokens.device)
        return self.targets[rows, self.query_positions]

    def to(self, device: torch.device | str) -> Sequences:
        return Sequences(*(tensor.to(device) for tensor in
                           (self.tokens, self.targets, self.query_positions, self.lengths, self.facts)))


def recall_sequences(
    facts: Tensor, fact_map: Tensor, vocabulary: Vocabulary, lengths: JunkLengths, generator: torch.Generator,
) -> Sequences:
    """One sequence per entry of `facts` (key indices, (B,)), with fresh random junk.

    fact_map: (F,) the value index of every key. Junk tokens are i.i.d. uniform over the junk
    vocabulary. Built on the CPU with `generator` (move with `.to(device)`).
    """
    facts = facts.to(torch.long).cpu()
    batch = len(facts)
    prefix = torch.randint(lengths.prefix_min, lengths.prefix_max + 1, (batch,), generator=generator)
    suffix = torch.randint(lengths.suffix_min, lengths.suffix_max + 1, (batch,), generator=generator)
    width = int((prefix + suffix).max()) + 3 if batch else 0
    junk = vocabulary.junk(torch.randint(0, vocabulary.n_junk, (batch, width), generator=generator))
    positions = torch.arange(width).unsqueeze(0)
    key_positions = prefix.unsqueeze(1)
    query_positions = prefix + suffix + 1
    tokens = torch.where(positions < key_positions, junk, torch.full_like(junk, vocabulary.query))
    tokens = torch.where(positions == key_positions, vocabulary.key(facts).unsqueeze(1), tokens)
    suffix_span = (positions > key_positions) & (positions < query_positions.unsqueeze(1))
    tokens = torch.where(suffix_span, junk, tokens)
    answers = vocabulary.value(fact_map.cpu()[facts])
    rows = torch.arange(batch)
    tokens[rows, query_positions + 1] = answers
    targets = torch.full_like(tokens, IGNORE)
    targets[rows, query_positions] = answers
    return Sequences(tokens, targets, query_positions, query_positions + 2, facts)


def token_embeddings(keys: Tensor, values: Tensor, junk: Tensor, query: Tensor) -> Tensor:
    """(2F + J + 1, d) float32 table in the Vocabulary's order: keys (F, d) as they are (the
    Transformer's key tokens are NOT normalised; the MLP's keys are), values (F, d), junk (J, d),
    query (d,)."""
    return torch.cat([keys, values, junk, query.reshape(1, -1)]).to(torch.float32)


def mlp_fact_set(keys: Tensor, values: Tensor, fact_map: Tensor, name: str = "") -> FactSet:
    """The facts the hosted MLP stores: the key embeddings projected to the unit sphere, the value
    embeddings as they are, in float64 (constructions run in float64)."""
    return FactSet(normalize_rows(keys.to(torch.float64)), values.to(torch.float64), fact_map.to(torch.long), name)


def gaussian_embeddings(n: int, dim: int, generator: torch.Generator) -> Tensor:
    """(n, dim) float64 with i.i.d. N(0, 1 / dim) entries: random Gaussian embeddings whose rows
    have norm about 1 (the task's keys, values, junk and Q on synthetic data)."""
    return torch.randn(n, dim, generator=generator, dtype=torch.float64) / dim**0.5


def principal_projection(tables: list[Tensor], dim: int) -> list[Tensor]:
    """Every table (n_t, D) projected onto the top `dim` right singular vectors of all of them
    stacked (uncentred, like the whitening): the leading, most anisotropic part of real embeddings
    in a smaller dimension (the project's choice that lets a CPU run 384-d MiniLM facts at d = 64).
    dim >= D returns the tables unchanged (float64)."""
    tables = [table.to(torch.float64) for table in tables]
    if dim >= tables[0].shape[1]:
        return tables
    _, _, right = torch.linalg.svd(torch.cat(tables), full_matrices=False)
    basis = right[:dim].T  # (D, dim)
    return [table @ basis for table in tables]
