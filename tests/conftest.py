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


def claim_verdict(claim_id: str, metric_rows) -> str:
    """The verdict (PASS / FAIL / NOT RUN) the claims report gives `claim_id` of config/claims.yaml
    on a hand-made metrics table: metric_rows is {name: value} or [(name, value, detail), ...]."""
    import pandas as pd

    from factstore import claims

    rows = metric_rows.items() if isinstance(metric_rows, dict) else [(name, value) for name, value, *_ in metric_rows]
    claim = next(c for c in claims.load_registry(REPOSITORY / "config/claims.yaml") if c["id"] == claim_id)
    table = pd.DataFrame([{"metric": name, "value": float(value)} for name, value in rows], columns=["metric", "value"])
    return claims.evaluate_claim(claim, {claim["result"]: table}, "smoke")["status"]
