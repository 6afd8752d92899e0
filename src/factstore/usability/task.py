"""The recall task `<junk prefix> key <junk suffix> Q value` (S0 "Usability"; the paper's SSFR).

Vocabulary layout for F facts and J junk tokens (`Vocabulary`), keys and values TIED into one
set of fact tokens as in the follow-up paper's code (vocabulary F + J + 1):

    [0, F)            fact tokens       [F, F + J)        junk tokens       F + J     the query token Q

Fact token i is read through its key embedding k_i (the input table) and written through its
value embedding v_i (the output table, which decodes): a sequence for key i is a junk prefix
(length uniform in [prefix_min, prefix_max]), fact token i, a junk suffix (length uniform in
[suffix_min, suffix_max]), Q, then fact token f(i).
The model is scored only on its prediction AT Q (the next token is the value): the loss mask
(`targets` != IGNORE) is True at exactly that position. Sequences of a batch are right-padded
with Q tokens after the value; padding comes after the scored position, so a causal model never
sees it.

Embeddings (`token_embeddings`): an input table [keys; junk; Q] and an output table
[values; junk; Q], both (V, d). The MLP the Transformer hosts is built, searched and checked on
`mlp_fact_set`: keys = the key embeddings projected to the unit sphere, values = the WHOLE output
table the Transformer decodes over (so the MLP's standalone accuracy is the accuracy a
Transformer attending one-hot on the key gets, not an accuracy over the F values alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from factstore.facts import FactSet, conditioned_embeddings, normalize_rows
from factstore.io import load_arrays
from factstore.whitening import principal_projection

IGNORE = -100
"""Target of every position that is not scored (torch's cross-entropy ignore_index)."""


@dataclass(frozen=True)
class Vocabulary:
    """Token ids of the task for `n_facts` facts and `n_junk` junk tokens (module docstring)."""

    n_facts: int
    n_junk: int

    @property
    def size(self) -> int:
        return self.n_facts + self.n_junk + 1

    @property
    def query(self) -> int:
        return self.n_facts + self.n_junk

    def key(self, index: Tensor) -> Tensor:
        """The fact token read as key `index` (tied: fact token i)."""
        return index

    def value(self, index: Tensor) -> Tensor:
        """The fact token written as value `index` (tied: the same fact token i)."""
        return index

    def junk(self, index: Tensor) -> Tensor:
        return index + self.n_facts


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
class Task:
    """One instance of the recall task: the vocabulary, its token tables and the junk lengths.

    embeddings: (vocabulary.size, d) float32, the frozen input table; decoder: (vocabulary.size,
    d) float32, the frozen output table the Transformer decodes over (token_embeddings).
    mlp_input_scale: the frozen scale of the RMS norm before the MLP (the mean RMS of the MLP's
    keys: 1 / sqrt(d) for unit keys).
    """

    vocabulary: Vocabulary
    embeddings: Tensor
    decoder: Tensor
    lengths: JunkLengths
    mlp_input_scale: float


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


def token_embeddings(keys: Tensor, values: Tensor, junk: Tensor, query: Tensor) -> tuple[Tensor, Tensor]:
    """(input table, output table), each (F + J + 1, d) float32 in the Vocabulary's order: the
    input table [keys (F, d) as they are (the Transformer's key tokens are NOT normalised; the
    MLP's keys are); junk (J, d); query (d,)], the output table [values (F, d); junk; query]."""
    rest = [junk, query.reshape(1, -1)]
    return torch.cat([keys, *rest]).to(torch.float32), torch.cat([values, *rest]).to(torch.float32)


def mlp_fact_set(keys: Tensor, decoding_table: Tensor, fact_map: Tensor, name: str = "") -> FactSet:
    """The facts the hosted MLP stores: the key embeddings (F, d) projected to the unit sphere,
    and as values the whole decoding table (V, d) the Transformer decodes over (token_embeddings'
    output table: fact i's value is row i, junk and Q rows compete in every argmax), in float64
    (constructions run in float64). fact_map: (F,) fact tokens in [0, F)."""
    return FactSet(normalize_rows(keys.to(torch.float64)), decoding_table.to(torch.float64), fact_map.to(torch.long),
                   name)


def gaussian_embeddings(n: int, dim: int, generator: torch.Generator) -> Tensor:
    """(n, dim) float64 with i.i.d. N(0, 1 / dim) entries: random Gaussian embeddings whose rows
    have norm about 1 (the task's keys, values, junk and Q on synthetic data)."""
    return torch.randn(n, dim, generator=generator, dtype=torch.float64) / dim**0.5


def make_task(keys: Tensor, values: Tensor, junk: Tensor, query: Tensor, lengths: JunkLengths):
    """(task, decoding table): the recall task on these embeddings (keys, values (F, d), junk
    (J, d), query (d,)); the MLP-norm scale is the mean RMS of the unit keys. The decoding table
    (V, d) float64 is the output table, the values every hosted MLP is built against."""
    inputs, outputs = token_embeddings(keys, values, junk, query)
    unit_keys = normalize_rows(keys.to(torch.float64))
    scale = float(unit_keys.pow(2).mean(dim=1).sqrt().mean())
    return Task(Vocabulary(len(keys), len(junk)), inputs, outputs, lengths, scale), outputs.to(torch.float64)


def two_maps(n_facts: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The map the Transformer trains with and the NEW map of the swapped MLP (random permutations)."""
    return torch.randperm(n_facts, generator=generator), torch.randperm(n_facts, generator=generator)


def probe_task(keys: Tensor, values: Tensor, junk: Tensor, query: Tensor, lengths: JunkLengths,
               maps: tuple[Tensor, Tensor], name: str = ""):
    """(task, (fact set trained with, fact set swapped in)) on these embeddings: both fact sets
    share the unit keys and the whole decoding table, and differ in their map (maps)."""
    task, table = make_task(keys, values, junk, query, lengths)
    return task, tuple(mlp_fact_set(keys, table, fact_map, name) for fact_map in maps)


def gaussian_probe_task(n_facts: int, dim: int, n_junk: int, lengths: JunkLengths, generator: torch.Generator):
    """probe_task on Gaussian keys, values, junk and Q (gaussian_embeddings) with two random maps."""
    keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(n_junk, dim, generator), gaussian_embeddings(1, dim, generator)
    return probe_task(keys, values, junk, query[0], lengths, two_maps(n_facts, generator), "spherical")


def real_embeddings(path, n_junk: int, dim: int, n_facts: int | None) -> tuple[Tensor, ...]:
    """(keys, values, junk, query) from the MiniLM archive of the fact-storing-MLP study.

    Facts are the sampled books with an author no other sampled book has (so no two value rows
    coincide); junk and Q are further book-title embeddings (the real distribution, not isotropic
    noise). All rows are projected on the top `dim` principal directions (principal_projection).
    """
    archive = load_arrays(path)  # an archive holding pickled objects: UnsafeFile naming it
    keys, values, authors = torch.as_tensor(archive["keys"]), torch.as_tensor(archive["values"]), archive["authors"]
    _, first, counts = np.unique(authors, return_index=True, return_counts=True)
    unique = np.sort(first[counts == 1])
    extra = np.setdiff1d(np.arange(len(keys)), unique)
    if len(extra) < n_junk + 1:  # not enough spare titles: take the last facts' titles
        extra, unique = np.concatenate([extra, unique[-(n_junk + 1 - len(extra)):]]), unique[:-(n_junk + 1 - len(extra))]
    facts = unique if n_facts is None else unique[:n_facts]
    spare = extra[: n_junk + 1]
    projected = principal_projection([keys[facts], values[facts], keys[spare]], dim)
    return projected[0], projected[1], projected[2][:n_junk], projected[2][n_junk]


def anisotropic_embeddings(n_facts: int, dim: int, kappa: float, n_junk: int,
                           generator: torch.Generator) -> tuple[Tensor, ...]:
    """(keys, values, junk, query): anisotropic keys and values (condition number kappa,
    facts.conditioned_embeddings, rows of norm ~1 like the Gaussian ones), isotropic Gaussian junk
    and Q."""
    keys = conditioned_embeddings(n_facts, dim, kappa, generator)
    values = conditioned_embeddings(n_facts, dim, kappa, generator)
    junk, query = gaussian_embeddings(n_junk, dim, generator), gaussian_embeddings(1, dim, generator)
    return keys, values, junk, query[0]
