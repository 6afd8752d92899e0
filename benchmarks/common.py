"""What every benchmark shares: the peak memory of a run, writing its report with a sidecar, and
the Wikipedia paragraphs a benchmark trains on (prepared where a fresh checkout has none).

Benchmarks are scripts (`python benchmarks/bench_<study>.py`); this folder is on their import
path, so they `from common import ...`.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import numpy as np
import torch

from factstore import io, provenance
from factstore.data import prepare
from factstore.data.fetch import FetchError, installed_wikipedia

WIKIPEDIA_PARAGRAPHS = "data/processed/wikipedia_paragraphs.csv"


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory in MiB: the CUDA allocator's peak on a GPU, the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_report(report: object, path: str, script: str, params: dict, device: torch.device, threads: int,
                 wall_time_s: float) -> None:
    """Write a benchmark's JSON report atomically, with its provenance sidecar (as a workflow step's)."""
    io.write_json(report, path)
    io.write_json(provenance.collect(step=script, params=params, inputs={}, device=device, threads=threads,
                                     wall_time_s=wall_time_s), io.sidecar_path(path))


def wikipedia_paragraph_texts(tokenizer, table: str | Path = WIKIPEDIA_PARAGRAPHS) -> list[str]:
    """The texts of the prepared Wikipedia paragraphs: the workflow's table where it exists, else
    prepared from the installed package as the data layer prepares it (checksum verified), else
    synthetic paragraphs of the same shapes (synthetic_paragraphs). Each fallback says so in one line."""
    if Path(table).is_file():
        return io.read_table(table)["text"].astype(str).tolist()
    try:
        summaries, _ = installed_wikipedia()
    except FetchError as error:
        print(f"{table} is missing and the Wikipedia data cannot be prepared ({error}): timing synthetic "
              "paragraphs of the same shapes instead", file=sys.stderr)
        return synthetic_paragraphs(tokenizer)
    print(f"{table} is missing: preparing the Wikipedia paragraphs from the installed package (checksum verified)",
          file=sys.stderr)
    return prepare.wikipedia_paragraphs(summaries)["text"].astype(str).tolist()


def synthetic_paragraphs(tokenizer, count: int = 10365, mean_words: float = 75.0, seed: int = 0) -> list[str]:
    """`count` paragraphs of whole words drawn uniformly from the tokenizer's vocabulary, their
    lengths Poisson around `mean_words` (at least 1): the prepared table's count and mean length
    (10,365 paragraphs, 75 words on average), so the model's vocabulary and the batches have the
    real corpus's sizes. The timing only; no study reads them."""
    words = sorted(token for token in tokenizer.get_vocab() if token.isalpha() and token.islower())
    generator = np.random.default_rng(seed)
    lengths = np.maximum(generator.poisson(mean_words, size=count), 1)
    return [" ".join(words[i] for i in generator.integers(len(words), size=n)) for n in lengths]
