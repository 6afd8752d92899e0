"""A verdict's robustness: an alternative declared for a free choice can flip it (the report names
the choice), resampling within the standard errors can flip it (fragile), or neither does (robust);
the registry refuses a malformed choice."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import yaml
from hypothesis import given, strategies as st

from factstore import claims, claims_report, robustness
from conftest import REPOSITORY

BUDGET = {"name": "training budget", "value": "500 updates", "decided": "before results",
          "alternatives": [{"value": "2,000 updates", "metrics": {"accuracy": "accuracy_budget_2000"}},
                           {"value": "the paper's 10^5 updates", "not_evaluated": "needs the paper's sizes"}]}


def _claim(**extra) -> dict:
    return {"id": "S9.probe", "work": "w", "statement": "s", "scale": "any", "result": "m.csv",
            "checks": [{"metric": "accuracy", "min": 0.95}], "choices": [BUDGET]} | extra


def _assessed(claim: dict, rows: dict[str, tuple[float, float]]) -> dict:
    table = pd.DataFrame([{"metric": name, "value": value, "standard_error": error}
                          for name, (value, error) in rows.items()])
    record = claims.evaluate_claim(claim, {"m.csv": table}, "default")
    return robustness.assess(claim, record, {"m.csv": table}, "default")


def test_an_alternative_that_flips_the_verdict_is_named():
    record = _assessed(_claim(), {"accuracy": (0.93, 0.001), "accuracy_budget_2000": (0.99, 0.001)})
    assert record["status"] == "FAIL"
    assert record["robustness"]["class"] == "depends on a choice"
    assert record["robustness"]["depends_on"] == ["training budget"]
    assert claims_report.robustness_text(record) == "depends on: training budget"
    lines = claims_report.choice_lines(record)
    assert lines[0] == "training budget: 500 updates -> 2,000 updates: PASS (accuracy_budget_2000 = 0.99)"
    assert lines[1] == "training budget: 500 updates -> the paper's 10^5 updates: not evaluated (needs the paper's sizes)"


def test_resampling_that_flips_the_verdict_makes_it_fragile():
    record = _assessed(_claim(), {"accuracy": (0.96, 0.02), "accuracy_budget_2000": (0.97, 0.02)})
    assert record["status"] == "PASS"
    frequency = record["robustness"]["resampling"]["frequency"]
    assert 0.6 < frequency < 0.8  # P(N(0.96, 0.02) >= 0.95) = 0.69
    assert record["robustness"]["class"] == "fragile"
    assert claims_report.status_text(record) == "PASS, fragile"
    assert claims_report.robustness_text(record) == f"fragile: {math.floor(1000 * frequency) / 10:.1f}% of resamples"
    assert claims_report._percent(0.94995) == "94.9%" and claims_report._percent(1.0) == "100%"


def test_a_verdict_that_neither_flips_is_robust():
    record = _assessed(_claim(), {"accuracy": (0.99, 0.005), "accuracy_budget_2000": (1.0, 0.0)})
    assert record["robustness"]["class"] == "robust PASS"
    assert record["robustness"]["resampling"]["frequency"] == 1.0
    assert claims_report.robustness_text(record) == "robust (1 of 2 alternatives evaluated; 100% of resamples)"


def test_an_alternative_this_run_did_not_measure_is_not_evaluated_and_flips_nothing():
    record = _assessed(_claim(), {"accuracy": (0.99, 0.005)})
    row = record["robustness"]["alternatives"][0]
    assert row["status"] == "not evaluated" and "accuracy_budget_2000 missing" in row["note"]
    assert record["robustness"]["class"] == "robust PASS"


def test_a_verdict_without_standard_errors_says_why_it_is_not_resampled():
    claim = _claim(checks=[{"metric": "accuracy", "min": 0.95, "no_standard_error": "one model, one seed"}])
    record = _assessed(claim, {"accuracy": (0.99, float("nan")), "accuracy_budget_2000": (0.99, float("nan"))})
    assert record["robustness"]["resampling"] == {"frequency": None, "why_none": "accuracy: one model, one seed"}
    assert "no resampling: accuracy: one model, one seed" in claims_report.choice_lines(record)


def test_a_gated_verdict_stays_untestable_under_its_alternatives():
    claim = _claim(gates=[{"metric": "learned", "min": 1, "why": "the model learned"}])
    record = _assessed(claim, {"accuracy": (0.99, 0.001), "accuracy_budget_2000": (0.5, 0.001), "learned": (0, 0)})
    assert record["status"] == "UNTESTABLE" and record["robustness"]["class"] == "UNTESTABLE"


@given(value=st.floats(0.0, 1.0), error=st.floats(1e-4, 0.2))
def test_the_frequency_is_the_share_of_draws_that_give_the_verdict_again(value, error):
    """Seeded: the same record gives the same frequency; a value farther inside its range never
    holds less often."""
    claim = {"checks": [{"metric": "x", "min": 0.5}]}
    status = "PASS" if value >= 0.5 else "FAIL"
    record = {"status": status, "measured": {"x": value}, "standard_errors": {"x": error}}
    frequency = robustness.verdict_frequency(claim, record)
    assert frequency == robustness.verdict_frequency(claim, record) and 0 <= frequency <= 1
    if status == "PASS":
        farther = robustness.verdict_frequency(claim, record | {"measured": {"x": value + error}})
        assert farther >= frequency


@pytest.mark.parametrize("choice, problem", [
    ({"name": "c", "value": 1, "decided": "before results", "alternatives": []}, "at least one alternative"),
    ({"name": "c", "value": 1, "decided": "later", "alternatives": [{"value": 2, "not_evaluated": "x"}]}, "decided must be"),
    ({"name": "c", "value": 1, "decided": "after results", "pre_result": 3,
      "alternatives": [{"value": 2, "not_evaluated": "x"}]}, "pre_result must be one of its alternatives"),
    ({"name": "c", "value": 1, "decided": "before results", "alternatives": [{"value": 2}]}, "either metrics or not_evaluated"),
    ({"name": "c", "value": 1, "decided": "before results",
      "alternatives": [{"value": 2, "metrics": {"other": "y"}}]}, "are not the claim's checks or gates"),
    ({"name": "c", "value": 1, "alternatives": [{"value": 2, "not_evaluated": "x"}]}, "needs name, value, decided"),
])
def test_a_malformed_choice_is_refused_naming_the_claim(tmp_path, choice, problem):
    registry = tmp_path / "claims.yaml"
    registry.write_text(yaml.safe_dump([_claim(choices=[choice])]))
    with pytest.raises(claims.ClaimsError, match=f"claim S9.probe: .*{problem}"):
        claims.load_registry(registry)


def test_every_claim_declares_its_choices_each_with_an_alternative():
    """Every claim of the registry names the free choices its verdict rests on (at least one),
    each with a reasonable alternative; a choice made after results keeps its pre-result value."""
    for claim in claims.load_registry(REPOSITORY / "config/claims.yaml"):
        assert claim.get("choices"), f"{claim['id']} declares no choice"


def test_a_verdict_nothing_could_probe_is_not_called_robust():
    record = _assessed(_claim(choices=[BUDGET | {"alternatives": BUDGET["alternatives"][1:]}]),
                       {"accuracy": (0.99, float("nan"))})
    assert record["robustness"]["class"] == "not probed"
    assert claims_report.robustness_text(record) == "not probed (0 of 1 alternatives evaluated; no resampling)"


def test_each_study_method_note_lists_its_claims_declared_choices():
    """docs/methods/<study>.md's 'Declared choices' table has a row for every choice of its claims."""
    for claim in claims.load_registry(REPOSITORY / "config/claims.yaml"):
        study = re.fullmatch(r"results/(\w+)/metrics\.csv", claim["result"]).group(1)
        note = (REPOSITORY / "docs" / "methods" / f"{study}.md").read_text()
        section = note[note.index("## Declared choices"):]
        for choice in claim["choices"]:
            assert f"| {claim['id']} | {choice['name'].replace('|', chr(92) + '|')} |" in section, (claim["id"], choice["name"])
