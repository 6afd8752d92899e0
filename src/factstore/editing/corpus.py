"""The templated corpus of the editing study as tensors: one sentence per (fact, template).

A sentence is [CLS] + template prefix + book + template middle + author, in local ids of a
FactVocabulary (factstore.editing.vocabulary); the author token is last, so the fact is the
prediction at the second-to-last position (`answer_positions`). Sentences are right-padded with
[PAD] to the longest template. The fact map `authors` (the author index of every book) is an
argument, not part of the vocabulary: the editing study permutes some of its entries and
rebuilds the corpus, which changes exactly the author tokens of those facts.

Every target position carries a kind (`target_kinds`), so a loss or an accuracy can be read on
template words, on the book or on the author (the fact) separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from factstore.editing.vocabulary import FactVocabulary

NONE = 0
"""Kind of a target that is padding (no target)."""
TEXT = 1
"""Kind of a target that is a template word (the first word after [CLS] included)."""
BOOK = 2
"""Kind of a target that is the book token."""
AUTHOR = 3
"""Kind of a target that is the author token: the fact."""


@dataclass(frozen=True)
class Corpus:
    """N sentences of at most T tokens.

    tokens: (N, T) int64 local ids, right-padded with `pad`; target_kinds: (N, T) int8, the kind
    (NONE, TEXT, BOOK, AUTHOR) of the TARGET at position t, i.e. of tokens[:, t + 1] (the last
    column is NONE); facts: (N,) int64 fact (book) index of each sentence; templates: (N,) int64
    template index; answer_positions: (N,) int64 position whose target is the author (sentence
    length - 2); pad: the local id of [PAD].
    """

    tokens: Tensor
    target_kinds: Tensor
    facts: Tensor
    templates: Tensor
    answer_positions: Tensor
    pad: int

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def targets(self) -> Tensor:
        """(N, T) the next token at every position: tokens shifted left by one, last column pad."""
        return torch.cat([self.tokens[:, 1:], torch.full_like(self.tokens[:, :1], self.pad)], dim=1)

    @property
    def answers(self) -> Tensor:
        """(N,) the author token each sentence ends with."""
        rows = torch.arange(len(self.tokens), device=self.tokens.device)
        return self.tokens[rows, self.answer_positions + 1]

    def to(self, device: torch.device | str) -> Corpus:
        return Corpus(self.tokens.to(device), self.target_kinds.to(device), self.facts.to(device),
                      self.templates.to(device), self.answer_positions.to(device), self.pad)

    def subset(self, mask: Tensor) -> Corpus:
        """The sentences selected by `mask` ((N,) bool, or indices), with the same width T."""
        return Corpus(self.tokens[mask], self.target_kinds[mask], self.facts[mask], self.templates[mask],
                      self.answer_positions[mask], self.pad)


def templated_corpus(
    vocabulary: FactVocabulary, authors: Tensor, facts: Tensor, templates: Sequence[int],
) -> Corpus:
    """Every (fact in `facts`, template in `templates`) sentence, TEMPLATE-MAJOR: all facts in
    the order of `facts` for templates[0], then all for templates[1], and so on.

    authors: (F,) int64 the author index of every book (a fact map), so the last token of a
    sentence about fact i is vocabulary.author_tokens[authors[i]]; facts: (B,) int64 fact indices.
    Returns N = B * len(templates) sentences of width T = 3 + the longest prefix + middle among
    `templates`. The sentences of one template all have the same length, so each template is
    built as one (B, length) block by broadcasting and only the blocks are padded.
    """
    n_facts = len(vocabulary.book_tokens)
    authors = torch.as_tensor(authors, dtype=torch.long).cpu()
    facts = torch.as_tensor(facts, dtype=torch.long).cpu().reshape(-1)
    if authors.shape != (n_facts,) or (n_facts and not (0 <= int(authors.min()) and int(authors.max()) < n_facts)):
        raise ValueError(f"authors must be ({n_facts},) author indices in [0, {n_facts}), got shape "
                         f"{tuple(authors.shape)}")
    if len(facts) and not (0 <= int(facts.min()) and int(facts.max()) < n_facts):
        raise ValueError(f"fact indices must lie in [0, {n_facts}), got {int(facts.min())}..{int(facts.max())}")
    bad = [index for index in templates if not 0 <= index < len(vocabulary.template_pieces)]
    if bad:
        raise ValueError(f"template index {bad[0]} is not in [0, {len(vocabulary.template_pieces)})")

    books = vocabulary.book_tokens[facts].unsqueeze(1)  # (B, 1)
    answers = vocabulary.author_tokens[authors[facts]].unsqueeze(1)  # (B, 1)
    bos = torch.full_like(books, vocabulary.bos)
    blocks, kinds = [], []
    for index in templates:
        prefix, middle = vocabulary.template_pieces[index]
        blocks.append(torch.cat([bos, prefix.expand(len(facts), -1), books,
                                 middle.expand(len(facts), -1), answers], dim=1))
        kinds.append(torch.tensor([TEXT] * len(prefix) + [BOOK] + [TEXT] * len(middle) + [AUTHOR],
                                  dtype=torch.int8))
    width = max((block.shape[1] for block in blocks), default=3)
    tokens = torch.full((len(facts) * len(blocks), width), vocabulary.pad, dtype=torch.long)
    target_kinds = torch.full(tokens.shape, NONE, dtype=torch.int8)
    answer_positions = torch.empty(len(tokens), dtype=torch.long)
    for number, (block, kind) in enumerate(zip(blocks, kinds, strict=True)):
        rows = slice(number * len(facts), (number + 1) * len(facts))
        tokens[rows, : block.shape[1]] = block
        target_kinds[rows, : len(kind)] = kind
        answer_positions[rows] = block.shape[1] - 2
    return Corpus(
        tokens=tokens,
        target_kinds=target_kinds,
        facts=facts.repeat(len(blocks)),
        templates=torch.tensor(list(templates), dtype=torch.long).repeat_interleave(len(facts)),
        answer_positions=answer_positions,
        pad=vocabulary.pad,
    )
