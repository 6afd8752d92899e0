"""The claims registry holds exactly SPEC.md's ids; evaluation is PASS / FAIL / NOT RUN."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from factstore import claims
from conftest import REPOSITORY

SPEC = REPOSITORY.parent / "shared" / "SPEC.md"


def test_registry_has_exactly_the_spec_ids():
    registry = claims.load_registry(REPOSITORY / "config/claims.yaml")
    ids = [claim["id"] for claim in registry]
    if not SPEC.exists():
        pytest.skip("SPEC.md is not beside the repository")
    spec_ids = re.findall(r"^\| (S\d\.[a-z0-9-]+) \|", SPEC.read_text(), flags=re.M)
    assert len(spec_ids) == 34
    assert set(spec_ids) <= set(ids)
    assert {claim_id[:2] for claim_id in ids} == {"S0", "S1", "S2", "S3", "S4"}


def test_every_check_names_a_metric_of_its_result():
    for claim in claims.load_registry(REPOSITORY / "config/claims.yaml"):
        if claim.get("checks"):
            assert claim["result"].startswith("results/") and claim["result"].endswith("metrics.csv")


def test_evaluation_statuses(tmp_path):
    registry = [
        {"id": "A", "work": "w", "statement": "s", "scale": "paper", "result": "r.csv",
         "checks": [{"metric": "x", "min": 0, "max": 1}]},
        {"id": "B", "work": "w", "statement": "s", "scale": "paper", "result": "r.csv",
         "checks": [{"metric": "y", "min": 0.4, "max": 0.6}]},
        {"id": "C", "work": "w", "statement": "s", "scale": "paper", "result": "missing.csv",
         "checks": [{"metric": "x", "min": 0}]},
        {"id": "D", "work": "w", "statement": "s", "scale": "paper"},
        {"id": "E", "work": "w", "statement": "s", "scale": "paper", "result": "r.csv",
         "checks": [{"metric": "z", "max": 1}]},
    ]
    metrics = {"r.csv": pd.DataFrame({"metric": ["x", "y", "z"], "value": [0.5, 0.9, float("nan")]})}
    records = {r["id"]: r for r in (claims.evaluate_claim(c, metrics, "smoke") for c in registry)}
    assert records["A"]["status"] == "PASS" and records["A"]["measured"] == {"x": 0.5}
    assert records["B"]["status"] == "FAIL" and records["B"]["measured"] == {"y": 0.9}
    assert records["C"]["status"] == "NOT RUN" and records["D"]["status"] == "NOT RUN"
    assert records["E"]["status"] == "FAIL"  # a NaN measurement never passes
    assert "smoke" in records["A"]["note"]
    table = claims.markdown(list(records.values()))
    assert "1 PASS, 2 FAIL, 2 NOT RUN" in table and "| B | FAIL |" in table


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("- {id: A, work: w, statement: s, scale: paper}\n- {id: A, work: w, statement: s, scale: paper}\n")
    with pytest.raises(claims.ClaimsError, match="appears twice"):
        claims.load_registry(path)
