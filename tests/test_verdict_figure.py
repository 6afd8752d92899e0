"""The verdicts figure (results/claims_verdicts.png): the claims counted per work and status,
drawn from hand-made claims records, run as a step, and planned by the workflow."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import SMOKE, run, snakemake
from test_workflow import SHOW_JOBS, planned_rules

from factstore.claims import STATUSES
from factstore.claims_report import count_line, verdict_counts
from factstore.plots import overview


def hand_made_claims() -> list[dict]:
    """Seven claims of three works, as the claims report's records (claims.json) hold them."""
    statuses = ["PASS", "FAIL", "UNTESTABLE", "PASS", "PASS", "NOT RUN", "UNTESTABLE"]
    ids = ["A.one", "A.two", "A.three", "B.one", "B.two", "C.one", "C.two"]
    return [{"id": claim, "work": f"work {claim[0]}", "status": status, "fragile": claim == "A.two"}
            for claim, status in zip(ids, statuses)]


def test_the_counts_are_the_claims_per_work_and_status():
    counts = verdict_counts(hand_made_claims())
    assert list(counts.index) == ["A: work A", "B: work B", "C: work C"] and list(counts.columns) == list(STATUSES)
    assert counts.loc["A: work A"].tolist() == [1, 1, 1, 0]
    assert counts.loc["B: work B"].tolist() == [2, 0, 0, 0]
    assert counts.loc["C: work C"].tolist() == [0, 0, 1, 1]
    assert counts.to_numpy().sum() == 7 and all(dtype.kind == "i" for dtype in counts.dtypes)


def test_a_claim_flipped_from_pass_to_fail_moves_one_count():
    claims = hand_made_claims()
    before = verdict_counts(claims)
    next(claim for claim in claims if claim["id"] == "B.one")["status"] = "FAIL"
    change = verdict_counts(claims) - before
    assert change.loc["B: work B", "PASS"] == -1 and change.loc["B: work B", "FAIL"] == 1
    assert (change.abs().to_numpy().sum()) == 2


def test_the_counts_are_the_reports_count_lines():
    """The figure counts what each work's count line in claims.md says."""
    claims = hand_made_claims()
    for work, row in verdict_counts(claims).iterrows():
        assert count_line([c for c in claims if c["id"][0] == work[0]]).startswith(
            ", ".join(f"{n} {status}" for status, n in row.items()))


def test_the_figure_is_drawn_from_a_hand_made_table(tmp_path):
    fig = overview.verdicts(verdict_counts(hand_made_claims()))
    fig.savefig(tmp_path / "verdicts.png")
    assert (tmp_path / "verdicts.png").stat().st_size > 10_000
    ax = fig.axes[0]
    assert [text.get_text() for text in ax.get_legend().get_texts()] == list(STATUSES)
    assert [label.get_text() for label in ax.get_yticklabels()] == ["A: work A", "B: work B", "C: work C"]


def test_the_step_draws_the_figure_from_the_claims_records(tmp_path):
    """The step as the rule runs it, on claims.json records."""
    (tmp_path / "claims.json").write_text(json.dumps(hand_made_claims()))
    png, pdf = tmp_path / "results/claims_verdicts.png", tmp_path / "results/claims_verdicts.pdf"
    run(sys.executable, "-m", "factstore", "verdicts.draw", "--params", "{}",
        "--input", f"claims={tmp_path / 'claims.json'}",
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
