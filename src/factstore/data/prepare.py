"""Turn the raw downloads into tidy tables: facts, paragraphs, relation sentences.

Functions take raw file paths (or parsed objects) and return DataFrames; they never fetch.
They trust nothing: a row with a missing, empty or malformed field, or a duplicate where the table
must be one-to-one, is a DataError naming the file, the line (or JSON key) and the field. (The
experiment steps verify each raw file's checksum before calling these: see experiments/prepare.py.)
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from factstore.errors import DataProblem

SERIES_SUFFIX = re.compile(r"\s*\([^()]*#\s*[\d.\-]+\)\s*$")


class DataError(DataProblem, ValueError):
    """A raw file holds a row that cannot be used; the message names file, line and field."""


def csv_rows(path: Path, required: list[str], optional: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, {column: stripped value}) for every record of a CSV file with a header.

    Every column of `required` must be present in the header and non-empty in every row; a row
    with more or fewer fields than the header is malformed. The line number is the record's
    first line in the file (quoted fields may span lines).
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}: the file is empty (no header line)") from None
        missing = [column for column in required if column not in header]
        if missing:
            raise DataError(f"{path}:1: header lacks column {', '.join(map(repr, missing))} (has: {', '.join(header)})")
        index = {column: header.index(column) for column in [*required, *optional] if column in header}
        line = reader.line_num + 1
        for fields in reader:
            if fields:  # a blank line is no record
                if len(fields) != len(header):
                    raise DataError(f"{path}:{line}: malformed row: {len(fields)} fields, the header has {len(header)}")
                row = {column: fields[i].strip() for column, i in index.items()}
                for column in required:
                    if not row[column]:
                        raise DataError(f"{path}:{line}: field '{column}' is empty")
                yield line, row
            line = reader.line_num + 1


def goodreads_facts(book_authors_csv: Path) -> pd.DataFrame:
    """book -> author from hebbian-mlps' book_authors.csv: a bijection (one book per author).

    Columns: book, author. An empty field, a malformed row or a repeated book or author is a
    DataError naming the line (and the line it repeats).
    """
    rows, first_line = [], {"book": {}, "author": {}}
    for line, row in csv_rows(book_authors_csv, ["author", "book"]):
        for column in ("book", "author"):
            seen = first_line[column].setdefault(row[column], line)
            if seen != line:
                raise DataError(f"{book_authors_csv}:{line}: field '{column}' = {row[column]!r} repeats line {seen}"
                                " (expected a one-to-one book/author table)")
        rows.append((row["book"], row["author"]))
    if not rows:
        raise DataError(f"{book_authors_csv}: no rows")
    return pd.DataFrame(rows, columns=["book", "author"])


def goodbooks_facts(books_csv: Path) -> pd.DataFrame:
    """book -> first author from goodbooks-10k (many books per author).

    The title is `original_title`, or `title` where that is empty, without a series suffix
    such as " (Twilight, #1)" (some original titles carry one too). Columns: book_id, book, author.
    A row without book_id, authors or title, a non-integer or repeated book_id, or a title that
    is nothing but a series suffix is a DataError naming the line.
    """
    rows, first_line = [], {}
    for line, row in csv_rows(books_csv, ["book_id", "authors", "title"], optional=("original_title",)):
        try:
            book_id = int(row["book_id"])
        except ValueError:
            raise DataError(f"{books_csv}:{line}: field 'book_id' = {row['book_id']!r} is not an integer") from None
        seen = first_line.setdefault(book_id, line)
        if seen != line:
            raise DataError(f"{books_csv}:{line}: field 'book_id' = {book_id} repeats line {seen}")
        field = "original_title" if row.get("original_title") else "title"
        book = SERIES_SUFFIX.sub("", row[field]).strip()
        author = row["authors"].split(",")[0].strip()
        if not book:
            raise DataError(f"{books_csv}:{line}: field '{field}' = {row[field]!r} has no title besides the series")
        if not author:
            raise DataError(f"{books_csv}:{line}: field 'authors' = {row['authors']!r} names no first author")
        rows.append((book_id, book, author))
    if not rows:
        raise DataError(f"{books_csv}: no rows")
    return pd.DataFrame(rows, columns=["book_id", "book", "author"])


def wikipedia_paragraphs(summaries_json: Path) -> pd.DataFrame:
    """One row per paragraph of each lead section. Columns: title, topic, paragraph, text, words.

    Every article must be an object with non-empty string fields title, topic and extract; a
    DataError names the file, the article's key and the field otherwise.
    """
    try:
        articles = json.loads(Path(summaries_json).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataError(f"{summaries_json}:{error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(articles, dict) or not articles:
        raise DataError(f"{summaries_json}: expected a non-empty object of articles")
    rows = []
    for key in sorted(articles):
        article = articles[key]
        if not isinstance(article, dict):
            raise DataError(f"{summaries_json}: article {key!r} is a {type(article).__name__}, not an object")
        for field in ("title", "topic", "extract"):
            value = article.get(field)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{summaries_json}: article {key!r}: field '{field}' is "
                                + ("missing" if value is None else f"empty or not text ({value!r})"))
        paragraphs = [p.strip() for p in article["extract"].split("\n") if p.strip()]
        for index, text in enumerate(paragraphs):
            rows.append(
                {
                    "title": article["title"].strip(),
                    "topic": article["topic"].strip(),
                    "paragraph": index,
                    "text": text,
                    "words": len(text.split()),
                }
            )
    return pd.DataFrame(rows)


def _entity(instance: dict, field: str, n_tokens: int) -> tuple[str, list[int]]:
    """(surface form, token positions) of FewRel's h / t: [name, wikidata id, [[positions]]]."""
    value = instance.get(field)
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and value[0].strip()
            and isinstance(value[2], list) and value[2] and isinstance(value[2][0], list) and value[2][0]):
        raise ValueError(f"field '{field}' is not [name, id, [[token positions]]]: {value!r}"[:300])
    positions = value[2][0]
    if not all(isinstance(i, int) and 0 <= i < n_tokens for i in positions):
        raise ValueError(f"field '{field}' has token positions {positions} outside the {n_tokens} tokens")
    return value[0], positions


def fewrel_sentences(relations: dict, relation_names: dict, test_per_relation: int, seed: int,
                     source: str = "FewRel relations") -> pd.DataFrame:
    """One row per FewRel sentence with a seeded train/test split per relation.

    relations: {relation_id: [{"tokens", "h", "t"}, ...]}; relation_names: {relation_id: [name, description]}.
    Columns: relation, relation_name, split, sentence_id, text, head, tail, head_tokens, tail_tokens.
    source: the file name used in errors: a sentence without tokens, or whose head or tail is
    malformed, is a DataError naming the file, the relation and the sentence's index.
    """
    if not isinstance(relations, dict) or not relations:
        raise DataError(f"{source}: expected a non-empty object of relations")
    rng = np.random.default_rng(seed)
    rows = []
    for relation in sorted(relations):
        instances = relations[relation]
        if not isinstance(instances, list):
            raise DataError(f"{source}: relation {relation}: expected a list of sentences")
        if test_per_relation >= len(instances):
            raise ValueError(f"relation {relation} has {len(instances)} sentences, cannot hold out {test_per_relation}")
        test = set(rng.permutation(len(instances))[:test_per_relation].tolist())
        name = relation_names.get(relation, [relation])[0]
        for index, instance in enumerate(instances):
            where = f"{source}: relation {relation}, sentence {index}"
            if not isinstance(instance, dict):
                raise DataError(f"{where}: not an object")
            tokens = instance.get("tokens")
            if not (isinstance(tokens, list) and tokens and all(isinstance(t, str) and t for t in tokens)):
                raise DataError(f"{where}: field 'tokens' is missing, empty or not a list of words")
            try:
                head, head_tokens = _entity(instance, "h", len(tokens))
                tail, tail_tokens = _entity(instance, "t", len(tokens))
            except ValueError as error:
                raise DataError(f"{where}: {error}") from None
            rows.append(
                {
                    "relation": relation,
                    "relation_name": name,
                    "split": "test" if index in test else "train",
                    "sentence_id": index,
                    "text": " ".join(tokens),
                    "head": head,
                    "tail": tail,
                    "head_tokens": " ".join(map(str, head_tokens)),
                    "tail_tokens": " ".join(map(str, tail_tokens)),
                }
            )
    return pd.DataFrame(rows)
