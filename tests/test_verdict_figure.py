"""The verdicts figure (results/claims_verdicts.png): the claims counted per work and status,
drawn from a hand-made claims table, run as a step, and planned by the workflow."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from conftest import REPOSITORY, SMOKE, run, snakemake
from test_workflow import SHOW_JOBS, planned_rules

from factstore.claims import STATUSES
from factstore.claims_report import base_status, verdict_counts
from factstore.plots import overview


def hand_made_claims() -> pd.DataFrame:
    """Seven claims of three works, with the status cells the claims table writes."""
    return pd.DataFrame({
        "id": ["A.one", "A.two", "A.three", "B.one", "B.two", "C.one", "C.two"],
        "work": ["A", "A", "A", "B", "B", "C", "C"],
        "status": ["PASS", "FAIL, fragile", "UNTESTABLE (checks: PASS)", "PASS", "PASS, fragile", "NOT RUN",
                   "UNTESTABLE (checks: FAIL)"],
    })


def test_the_counts_are_the_claims_per_work_and_status():
    counts = verdict_counts(hand_made_claims(), works=["C", "B", "A", "D"])
    assert list(counts.index) == ["C", "B", "A", "D"] and list(counts.columns) == list(STATUSES)
    assert counts.loc["A"].tolist() == [1, 1, 1, 0]
    assert counts.loc["B"].tolist() == [2, 0, 0, 0]
    assert counts.loc["C"].tolist() == [0, 0, 1, 1]
    assert counts.loc["D"].tolist() == [0, 0, 0, 0]
    assert counts.to_numpy().sum() == 7 and all(dtype.kind == "i" for dtype in counts.dtypes)


def test_a_claim_flipped_from_pass_to_fail_moves_one_count():
    claims = hand_made_claims()
    before = verdict_counts(claims)
    claims.loc[claims.id == "B.one", "status"] = "FAIL"
    after = verdict_counts(claims)
    change = after - before
    assert change.loc["B", "PASS"] == -1 and change.loc["B", "FAIL"] == 1
    assert (change.abs().to_numpy().sum()) == 2


def test_the_default_order_is_the_table_order_and_unlisted_works_are_refused():
    assert list(verdict_counts(hand_made_claims()).index) == ["A", "B", "C"]
    with pytest.raises(ValueError, match="C"):
        verdict_counts(hand_made_claims(), works=["A", "B"])


def test_a_status_cell_reads_as_its_status():
    assert base_status("FAIL, fragile") == "FAIL"
    assert base_status("UNTESTABLE (checks: PASS)") == "UNTESTABLE"
    assert base_status("NOT RUN") == "NOT RUN"
    with pytest.raises(ValueError, match="PASSED"):
        base_status("PASSED")


def test_the_figure_is_drawn_from_a_hand_made_table(tmp_path):
    fig = overview.verdicts(verdict_counts(hand_made_claims()))
    fig.savefig(tmp_path / "verdicts.png")
    assert (tmp_path / "verdicts.png").stat().st_size > 10_000
    ax = fig.axes[0]
    assert [text.get_text() for text in ax.get_legend().get_texts()] == list(STATUSES)
    assert [label.get_text() for label in ax.get_yticklabels()] == ["A", "B", "C"]


def test_the_step_draws_the_figure_from_a_claims_table_and_the_registry(tmp_path):
    """The step as the rule runs it: the works of config/claims.yaml, the statuses of the table."""
    registry = REPOSITORY / "config/claims.yaml"
    ids = pd.Series([line.removeprefix("- id:").strip() for line in registry.read_text().splitlines()
                     if line.startswith("- id:")])
    claims = pd.DataFrame({"id": ids[:5], "status": ["PASS", "FAIL", "FAIL, fragile", "NOT RUN", "PASS"]})
    claims.to_csv(tmp_path / "claims.csv", index=False)
    png, pdf = tmp_path / "results/claims_verdicts.png", tmp_path / "results/claims_verdicts.pdf"
    run(sys.executable, "-m", "factstore", "verdicts.draw", "--params", "{}",
        "--input", f"claims={tmp_path / 'claims.csv'}", "--input", f"registry={registry}",
        "--output", f"png={png}", "--output", f"pdf={pdf}", "--threads", "1", cwd=tmp_path)
    assert png.stat().st_size > 10_000 and pdf.is_file()


@pytest.mark.workflow
def test_the_claims_target_plans_the_verdicts_figure_and_figures_does_not(workspace):
    """`claims` (and so `all`) draws claims_verdicts after the claims report; `figures` plans
    neither, so it needs no more jobs than every study's figures."""
    claims = snakemake("-n", "--nolock", "--forceall", "claims", "--configfile", SMOKE, *SHOW_JOBS, cwd=workspace)
    assert planned_rules(claims.stdout).get("claims_verdicts") == 1
    assert "results/claims_verdicts.png" in claims.stdout
    figures = planned_rules(snakemake("-n", "--nolock", "--forceall", "figures", "--configfile", SMOKE, *SHOW_JOBS,
                                      cwd=workspace).stdout)
    assert "claims_verdicts" not in figures and "claims_report" not in figures
