"""Embedding steps shared by the studies that store real facts (the fact-storing MLP study now;
the Transformer studies read the same file): MiniLM embeddings of Goodreads titles and authors.

A step module of its own so that the embeddings (a minute of MiniLM) are recomputed only when
their own code changes, not when a study's code does.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd


def goodreads_minilm(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """MiniLM embeddings of a seeded sample of n_facts Goodreads facts: keys = titles, values = authors.

    inputs: facts (data/processed/goodreads_facts.csv, columns book, author). params: seed,
    n_facts, batch_size. Returns {"embeddings": bytes of an .npz} with keys (n, 384) float32,
    values (n, 384) float32, rows (n,) row numbers in the facts table, books, authors (str).
    Row i of keys and of values is one fact (book i -> author i). No two sampled titles, and no
    two sampled authors, have the same MiniLM tokens (`factstore.data.sample`): the seeded sample,
    with each colliding fact replaced by a fresh draw.
    """
    from factstore.data.sample import sample_distinct_rows
    from factstore.embeddings import embed_texts, token_ids

    table = pd.read_csv(inputs["facts"], keep_default_na=False)
    all_books, all_authors = table["book"].astype(str).to_numpy(), table["author"].astype(str).to_numpy()

    def model_texts(rows: np.ndarray) -> list[tuple]:
        return list(zip(token_ids(all_books[rows].tolist()), token_ids(all_authors[rows].tolist())))

    n_facts = min(params["n_facts"], len(table))
    rows = sample_distinct_rows(len(table), n_facts, model_texts, np.random.default_rng(params["seed"]))
    sample = table.iloc[rows]
    books, authors = sample["book"].astype(str).tolist(), sample["author"].astype(str).tolist()
    keys = embed_texts(books, batch_size=params["batch_size"])
    values = embed_texts(authors, batch_size=params["batch_size"])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, keys=keys, values=values, rows=rows.astype(np.int64),
                        books=np.array(books, dtype=str), authors=np.array(authors, dtype=str))
    return {"embeddings": buffer.getvalue()}
