"""Turn the raw downloads into tidy tables: facts, paragraphs, relation sentences.

Functions take raw file paths (or parsed objects) and return DataFrames; they never fetch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

SERIES_SUFFIX = re.compile(r"\s*\([^()]*#\s*[\d.\-]+\)\s*$")


def goodreads_facts(book_authors_csv: Path) -> pd.DataFrame:
    """book -> author from hebbian-mlps' book_authors.csv: a bijection (one book per author).

    Columns: book, author.
    """
    table = pd.read_csv(book_authors_csv, usecols=["author", "book"], keep_default_na=False)
    table = table[["book", "author"]].astype(str)
    table["book"], table["author"] = table["book"].str.strip(), table["author"].str.strip()
    if table["book"].duplicated().any() or table["author"].duplicated().any():
        raise ValueError(f"{book_authors_csv}: expected a one-to-one book/author table")
    return table.reset_index(drop=True)


def goodbooks_facts(books_csv: Path) -> pd.DataFrame:
    """book -> first author from goodbooks-10k (many books per author).

    The title is `original_title`, or `title` where that is empty, without a series suffix
    such as " (Twilight, #1)" (some original titles carry one too). Columns: book_id, book, author.
    """
    table = pd.read_csv(books_csv, usecols=["book_id", "authors", "original_title", "title"], keep_default_na=False)
    original = table["original_title"].astype(str).str.strip()
    book = original.where(original != "", table["title"].astype(str))
    book = book.str.replace(SERIES_SUFFIX, "", regex=True).str.strip()
    author = table["authors"].astype(str).str.split(",").str[0].str.strip()
    return pd.DataFrame({"book_id": table["book_id"], "book": book, "author": author})


def wikipedia_paragraphs(summaries_json: Path) -> pd.DataFrame:
    """One row per paragraph of each lead section. Columns: title, topic, paragraph, text, words."""
    articles = json.loads(Path(summaries_json).read_text())
    rows = []
    for key in sorted(articles):
        article = articles[key]
        paragraphs = [p.strip() for p in str(article.get("extract", "")).split("\n") if p.strip()]
        for index, text in enumerate(paragraphs):
            rows.append(
                {
                    "title": article.get("title", key),
                    "topic": article.get("topic", ""),
                    "paragraph": index,
                    "text": text,
                    "words": len(text.split()),
                }
            )
    return pd.DataFrame(rows)


def fewrel_sentences(relations: dict, relation_names: dict, test_per_relation: int, seed: int) -> pd.DataFrame:
    """One row per FewRel sentence with a seeded train/test split per relation.

    relations: {relation_id: [{"tokens", "h", "t"}, ...]}; relation_names: {relation_id: [name, description]}.
    Columns: relation, relation_name, split, sentence_id, text, head, tail, head_tokens, tail_tokens.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for relation in sorted(relations):
        instances = relations[relation]
        if test_per_relation >= len(instances):
            raise ValueError(f"relation {relation} has {len(instances)} sentences, cannot hold out {test_per_relation}")
        test = set(rng.permutation(len(instances))[:test_per_relation].tolist())
        name = relation_names.get(relation, [relation])[0]
        for index, instance in enumerate(instances):
            rows.append(
                {
                    "relation": relation,
                    "relation_name": name,
                    "split": "test" if index in test else "train",
                    "sentence_id": index,
                    "text": " ".join(instance["tokens"]),
                    "head": instance["h"][0],
                    "tail": instance["t"][0],
                    "head_tokens": " ".join(map(str, instance["h"][2][0])),
                    "tail_tokens": " ".join(map(str, instance["t"][2][0])),
                }
            )
    return pd.DataFrame(rows)
