"""Shared fixtures: repository paths and the offline data mirror."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPOSITORY = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("FACTSTORE_DATA_MIRROR", REPOSITORY.parent / "shared" / "data"))

torch.set_num_threads(1)


@pytest.fixture
def mirror() -> Path:
    """The offline copy of the real data sets (skips where a machine has none)."""
    if not (MIRROR / "hebbian-mlps" / "book_authors.csv").is_file():
        pytest.skip(f"no data mirror at {MIRROR}; set FACTSTORE_DATA_MIRROR")
    return MIRROR

from hypothesis import settings  # noqa: E402

# Shared 2-core machines: timing deadlines would make property tests flaky.
settings.register_profile("factstore", deadline=None, max_examples=60)
settings.load_profile("factstore")
