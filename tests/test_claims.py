"""The claims registry holds exactly the ids docs/science.md states; evaluation is PASS / FAIL /
UNTESTABLE / NOT RUN, with margins in standard errors; the report groups the claims by work."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from factstore import claims, claims_report, registry_docs, run_comparison
from factstore.code_dependencies import source_files
from conftest import REPOSITORY, fresh_copy, run

def test_the_registry_holds_exactly_the_claims_the_science_page_states():
    """docs/science.md, the package's statement of the science, names every claim the registry
    checks and no other (34, over the five works), and its generated sections are what the
    registry gives (`python -m factstore docs` rewrites them)."""
    ids = [claim["id"] for claim in claims.load_registry(REPOSITORY / "config/claims.yaml")]
    stated = re.findall(r"^### (S\d\.[a-z0-9-]+)$", (REPOSITORY / "docs/science.md").read_text(), flags=re.M)
    assert sorted(stated) == sorted(ids) and len(ids) == len(set(ids)) == 34
    assert {claim_id[:2] for claim_id in ids} == {"S0", "S1", "S2", "S3", "S4"}
    assert registry_docs.stale(REPOSITORY) == [], "run `python -m factstore docs`"


def test_the_generated_documents_follow_a_registry_change(tmp_path):
    """A statement edited in the registry makes docs/science.md stale until `docs` rewrites it."""
    for name in ("config/claims.yaml", "docs/science.md", *[f"docs/methods/{p.name}" for p in (REPOSITORY / "docs/methods").glob("*.md")]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((REPOSITORY / name).read_text())
    registry = tmp_path / "config/claims.yaml"
    registry.write_text(registry.read_text().replace("statement: \"", "statement: \"EDITED ", 1))
    assert registry_docs.stale(tmp_path) == [registry_docs.SCIENCE]
    assert registry_docs.write(tmp_path) == [registry_docs.SCIENCE]
    assert "EDITED " in (tmp_path / "docs/science.md").read_text() and registry_docs.stale(tmp_path) == []


def _checked_metrics():
    for claim in claims.load_registry(REPOSITORY / "config/claims.yaml"):
        for check in claim.get("checks", []):
            yield claim["id"], claim["result"], check["metric"]


@pytest.mark.parametrize("claim_id, result, metric", list(_checked_metrics()))
def test_every_metric_a_claim_reads_is_written_literally_by_its_study(claim_id, result, metric):
    """claim -> metric -> code in one grep: the metric's name appears as a string literal in the
    code of the study's steps (the step module or a module it imports)."""
    study = re.fullmatch(r"results/(\w+)/metrics\.csv", result)
    assert study, f"{claim_id}: result {result} is not a study's metrics table"
    # The study's step modules: experiments/<study>.py and experiments/<study>_*.py (e.g. mlp_summary).
    steps = sorted(p.stem for p in (REPOSITORY / "src/factstore/experiments").glob("*.py")
                   if p.stem == study.group(1) or p.stem.startswith(study.group(1) + "_"))
    files = source_files([f"factstore.experiments.{step}" for step in steps], REPOSITORY / "src")
    assert any(f'"{metric}"' in Path(file).read_text() for file in files), (
        f"{claim_id}: no literal \"{metric}\" in the code of factstore.experiments.{study.group(1)}"
    )


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
    assert records["A"]["note"] == ""  # the scale note is the header's, once
    table = claims_report.markdown(list(records.values()))
    assert "1 PASS, 2 FAIL, 0 UNTESTABLE, 2 NOT RUN" in table and "| B | FAIL |" in table
    assert table.count("this run is smoke scale") == 1


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("- {id: A, work: w, statement: s, scale: paper}\n- {id: A, work: w, statement: s, scale: paper}\n")
    with pytest.raises(claims.ClaimsError, match="appears twice"):
        claims.load_registry(path)


def test_a_range_changed_without_a_revised_record_is_caught():
    claim = {"id": "X", "work": "w", "statement": "s", "scale": "paper", "result": "r.csv",
             "checks": [{"metric": "slope", "max": -0.4}],
             "revised": [{"date": "2026-11-30", "previous_statement": "old", "reason": "statement revised",
                          "previous_checks": [{"metric": "slope", "min": -0.6, "max": -0.4}],
                          "checks": [{"metric": "slope", "max": -0.4}]}]}
    assert claims.unrecorded_range_changes([claim]) == []
    silently_changed = claim | {"checks": [{"metric": "slope", "max": -0.3}]}
    assert claims.unrecorded_range_changes([silently_changed]) == ["X"]
    record = claims.evaluate_claim(claim, {"r.csv": pd.DataFrame({"metric": ["slope"], "value": [-0.5]})}, "default")
    assert record["status"] == "PASS" and "was \"old\" (slope in [-0.6, -0.4])" in record["revised"][0]
    report = claims_report.markdown([record])
    assert "[^1]" in report.split("\n[^1]:")[0] and "\n[^1]: X revised 2026-11-30" in report  # a footnote, not a row
    assert report.count("| X |") == 1


def test_every_revised_claim_keeps_the_range_of_its_last_revision():
    registry = claims.load_registry(REPOSITORY / "config/claims.yaml")
    assert claims.unrecorded_range_changes(registry) == []


def test_an_infinite_measurement_is_reported_as_inf_and_fails_an_upper_bound():
    claim = {"id": "U", "work": "w", "statement": "s", "scale": "paper", "result": "r.csv",
             "checks": [{"metric": "gain_upper", "max": 4.0}]}
    record = claims.evaluate_claim(claim, {"r.csv": pd.DataFrame({"metric": ["gain_upper"], "value": [float("inf")]})}, "default")
    assert record["status"] == "FAIL" and record["measured"] == {"gain_upper": "inf"}
    assert "gain_upper = inf" in claims_report.markdown([record])


def _gated_claim(gate_min: float) -> dict:
    return {
        "id": "S9.gated", "work": "w", "statement": "s", "scale": "any", "result": "m.csv",
        "checks": [{"metric": "slope", "min": 1.0}],
        "gates": [{"metric": "learned_margin", "min": gate_min, "why": "the model beats its baseline"}],
    }


@pytest.mark.parametrize("slope, check_status", [(2.0, "PASS"), (0.0, "FAIL")])
def test_a_failing_gate_makes_a_verdict_untestable_and_a_passing_gate_changes_nothing(slope, check_status):
    table = pd.DataFrame({"metric": ["slope", "learned_margin"], "value": [slope, 3.0], "detail": ["", ""]})
    passing = claims.evaluate_claim(_gated_claim(gate_min=2.0), {"m.csv": table}, "default")
    failing = claims.evaluate_claim(_gated_claim(gate_min=5.0), {"m.csv": table}, "default")
    ungated = claims.evaluate_claim(_gated_claim(gate_min=0.0) | {"gates": []}, {"m.csv": table}, "default")
    assert passing["status"] == ungated["status"] == check_status
    assert failing["status"] == "UNTESTABLE"
    assert failing["check_status"] == check_status and failing["gates"] == {"learned_margin": 3.0}
    assert "learned_margin >= 5.0" in failing["note"]


def test_a_gate_on_the_claims_own_metric_is_refused(tmp_path):
    claim = _gated_claim(gate_min=1.0)
    claim["gates"][0]["metric"] = "slope"
    (tmp_path / "claims.yaml").write_text(__import__("yaml").safe_dump([claim]))
    with pytest.raises(claims.ClaimsError, match="one of the claim's own metrics"):
        claims.load_registry(tmp_path / "claims.yaml")


def test_a_gate_measuring_exactly_zero_is_read_as_zero():
    claim = _gated_claim(gate_min=0.0)
    table = pd.DataFrame({"metric": ["slope", "learned_margin"], "value": [2.0, 0.0]})
    assert claims.evaluate_claim(claim, {"m.csv": table}, "default")["status"] == "PASS"


def test_an_untestable_row_shows_the_gate_value_and_the_checks_verdict():
    table = pd.DataFrame({"metric": ["slope", "learned_margin"], "value": [0.0, 3.0]})
    record = claims.evaluate_claim(_gated_claim(gate_min=5.0), {"m.csv": table}, "default")
    row = next(line for line in claims_report.markdown([record]).splitlines() if line.startswith("| S9.gated |"))
    assert "UNTESTABLE (checks: FAIL)" in row and "learned_margin >= 5.0 (measured 3)" in row


@given(value=st.floats(-10, 10), error=st.floats(0.01, 5), low=st.floats(-5, 0), width=st.floats(0.1, 5))
def test_the_margin_is_the_distance_to_the_nearer_bound_in_standard_errors(value, error, low, width):
    check = {"metric": "x", "min": low, "max": low + width}
    margin = claims.margin_in_standard_errors(value, check, error)
    assert margin == pytest.approx(min(value - low, low + width - value) / error)
    assert (margin >= 0) == claims.in_range(value, check)


def test_a_value_outside_by_less_than_the_margin_can_show_still_has_a_negative_margin():
    """Hypothesis's case: -5e-324 below a bound at 0, over an SE of 2, divides to -0.0 (which
    compares >= 0); the margin stays below 0, as the range check decides, and reads -0.0 SE."""
    check = {"metric": "x", "min": 0.0, "max": 1.0}
    margin = claims.margin_in_standard_errors(-5e-324, check, 2.0)
    assert margin < 0 and not claims.in_range(-5e-324, check)
    assert f"{margin:+.1f}" == "-0.0"
    assert claims.margin_in_standard_errors(0.0, {"metric": "x", "min": 0.0}, 2.0) == 0.0  # on the bound: inside


@pytest.mark.parametrize("error, fragile", [(0.05, False), (0.2, True), (float("nan"), False)])
def test_a_verdict_within_one_standard_error_of_its_bound_is_fragile(error, fragile):
    claim = {"id": "S9.slope", "work": "w", "statement": "s", "scale": "any", "result": "m.csv",
             "checks": [{"metric": "slope", "max": -0.4}]}
    table = pd.DataFrame({"metric": ["slope"], "value": [-0.5], "standard_error": [error]})
    record = claims.evaluate_claim(claim, {"m.csv": table}, "default")
    assert record["status"] == "PASS" and record["fragile"] is fragile
    assert (record["margins"]["slope"] is None) == (error != error)
    assert claims_report.status_text(record) == ("PASS, fragile" if fragile else "PASS")
    if error == error:
        assert f"slope = -0.5 ± {error:.4g}" in claims_report.measured_text(record)
        assert claims_report.margin_text(record) == f"{0.1 / error:+.1f}"
        assert claims_report.check_texts(record) == [f"slope = -0.5 ± {error:.4g}, expected <= -0.4 ({0.1 / error:+.1f} SE) ✓"]


def test_every_claim_has_a_short_statement_of_at_most_twelve_words():
    for claim in claims.load_registry(REPOSITORY / "config/claims.yaml"):
        assert claim.get("short") and len(claim["short"].split()) <= 12, claim["id"]
    assert claims.short_statement({"statement": "capacity falls (at d = 64); then rises"}) == "capacity falls"


def test_the_report_is_grouped_by_work_with_a_count_line_each():
    registry = [{"id": f"S{w}.c{i}", "short": f"claim {w}{i}", "work": f"work {w}", "statement": "s", "scale": "paper",
                 "result": "m.csv", "checks": [{"metric": "x", "min": i}]} for w in (1, 0) for i in (0, 1)]
    table = pd.DataFrame({"metric": ["x"], "value": [0.5]})
    records = [claims.evaluate_claim(c, {"m.csv": table}, "default") for c in registry]
    report = claims_report.markdown(records)
    assert report.index("## S0: work 0") < report.index("## S1: work 1")
    assert report.count("1 PASS, 1 FAIL, 0 UNTESTABLE, 0 NOT RUN") == 2
    assert "**2 PASS, 2 FAIL, 0 UNTESTABLE, 0 NOT RUN** of 4 claims." in report
    assert "| S0.c1 | FAIL | - | claim 01 | x = 0.5, expected >= 1 ✗ |" in report
    assert "| S0.c0 | PASS | - | claim 00 | x = 0.5, expected >= 0 ✓ |" in report
    page = claims_report.html_page(records)
    assert page.count("<h2>") == 2 and "claim 01" in page
    assert claims_report.flat_metrics(records) == {r["id"]: {"x": 0.5} for r in records}


def test_compare_names_what_changed_between_two_runs():
    claim = {"id": "S9.c", "work": "w", "statement": "s", "scale": "any", "result": "m.csv",
             "checks": [{"metric": "x", "min": 1.0}]}
    run = {v: [claims.evaluate_claim(claim, {"m.csv": pd.DataFrame({"metric": ["x"], "value": [v]})}, "smoke")]
           for v in (0.5, 0.7, 2.0)}
    assert [r["changed"] for r in claims_report.changes(run[0.5], run[0.5])] == [""]
    assert [r["changed"] for r in claims_report.changes(run[0.5], run[0.7])] == ["value"]
    assert [r["changed"] for r in claims_report.changes(run[0.5], run[2.0])] == ["status"]
    assert [r["changed"] for r in claims_report.changes(run[0.5], [])] == ["only in A"]
    unknown = {"scales": {}, "config_file": None, "config_overrides": None, "commit": None}
    text = "\n".join(run_comparison.comparison_lines("a", run[0.5], unknown, "b", run[2.0], unknown))
    assert "1 of 1 claims changed (1 in status" in text and "x = 0.5" in text and "x = 2" in text


@pytest.mark.parametrize("text, problem", [
    ("    - metric: x\n      max: 1e3\n", "check x: max must be a finite number, got '1e3'"),
    ("    - metric: x\n      min: '0.5'\n", "check x: min must be a finite number, got '0.5'"),
    ("    - metric: x\n      min: [0, 1]\n", "check x: min must be a finite number, got \\[0, 1\\]"),
    ("    - metric: x\n      min: .nan\n", "check x: min must be a finite number, got nan"),
    ("    - metric: x\n      why: no bound\n", "check x needs a 'min' or a 'max'"),
    ("    - metric: x\n      min: 0\n      mni: 1\n", "check x: unknown key 'mni'"),
    ("    - metric: x\n      min: 2\n      max: 1\n", "check x has min > max"),
])
def test_a_malformed_check_is_refused_in_one_line_naming_the_claim_and_the_key(tmp_path, text, problem):
    registry = tmp_path / "claims.yaml"
    registry.write_text("- id: S9.c\n  work: w\n  statement: s\n  scale: any\n  result: m.csv\n  checks:\n" + text)
    with pytest.raises(claims.ClaimsError, match=f"^{re.escape(str(registry))}: claim S9.c: {problem}") as error:
        claims.load_registry(registry)
    assert "\n" not in str(error.value)


def test_a_yaml_syntax_error_names_the_file_and_the_line(tmp_path):
    registry = tmp_path / "claims.yaml"
    registry.write_text("- id: S9.c\n  work: [unclosed\n  scale: any\n")
    with pytest.raises(claims.ClaimsError, match=rf"^{re.escape(str(registry))}: not valid YAML at line \d+") as error:
        claims.load_registry(registry)
    assert "\n" not in str(error.value)


@pytest.mark.workflow
def test_a_malformed_registry_stops_the_workflow_and_keeps_the_previous_report(tmp_path):
    """The registry is read when the workflow starts: a check without a bound stops every command
    in one line naming the file and the claim, before the claims step could remove its report."""
    copy = fresh_copy(tmp_path)
    report = copy / "runs/smoke/results/claims.md"
    report.parent.mkdir(parents=True)
    report.write_text("the previous report\n")
    registry = copy / "config/claims.yaml"
    registry.write_text(registry.read_text().replace("\n      min:", "\n      lower:", 1))
    done = run(sys.executable, "-m", "snakemake", "--cores", "1", "runs/smoke/results/claims.md", "--forcerun",
               "claims_report", "--configfile", "config/smoke.yaml", cwd=copy, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "config/claims.yaml" in line]
    assert len(lines) == 1 and "unknown key 'lower'" in lines[0], done.stderr[-2000:]
    assert report.read_text() == "the previous report\n"


def test_a_studys_warnings_are_written_once_per_study_and_every_verdict_is_kept():
    """Five hand-made claims of two studies (one logging two warnings, one none) and a third study
    logging one: each study's warnings appear once, under its work's table, its claims marked with
    the warnings' label; statuses, measured values and a claim's own note stay in its row."""
    def claim(claim_id, result, low):
        return {"id": claim_id, "short": f"claim {claim_id}", "work": f"work {claim_id[:2]}", "statement": "s",
                "scale": "smoke", "result": result, "checks": [{"metric": "m", "min": low}]}

    tables = {f"results/{name}/metrics.csv": pd.DataFrame({"metric": ["m"], "value": [value]})
              for name, value in (("alpha", 0.5), ("beta", 0.25), ("gamma", 0.75))}
    logged = {"results/alpha/metrics.csv": ["search A found nothing up to 16", "training B ended far from its target"],
              "results/gamma/metrics.csv": ["search C found nothing"]}
    made = [claim("S1.a", "results/alpha/metrics.csv", 0.1), claim("S1.b", "results/alpha/metrics.csv", 0.9),
            claim("S1.c", "results/beta/metrics.csv", 0.1), claim("S2.d", "results/gamma/metrics.csv", 0.1),
            claim("S1.e", "results/alpha/metrics.csv", 0.1) | {"checks": [{"metric": "absent", "min": 0}]}]
    records = [claims.with_warnings(claims.evaluate_claim(c, tables, "smoke"), logged.get(c["result"], [])) for c in made]
    assert all("WARNING (" in r["note"] for r in records if r["result"] in logged)  # what the records carry

    report = claims_report.markdown(records)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in report.splitlines() if line.startswith("| S")}
    assert [rows[i].split(" | ")[1] for i in ("S1.a", "S1.b", "S1.c", "S2.d", "S1.e")] == ["PASS", "FAIL", "PASS", "PASS", "NOT RUN"]
    assert "m = 0.5, expected >= 0.9" in rows["S1.b"] and "m = 0.25, expected >= 0.1" in rows["S1.c"]
    assert rows["S1.a"].endswith("| ⚠ W1 |") and rows["S1.b"].endswith("| ⚠ W1 |") and rows["S1.c"].endswith("|  |")
    assert rows["S1.e"].endswith("| metric absent missing; ⚠ W1 |") and rows["S2.d"].endswith("| ⚠ W2 |")
    for message in logged["results/alpha/metrics.csv"] + logged["results/gamma/metrics.csv"]:
        assert report.count(message) == 1
    [alpha] = [line for line in report.splitlines() if line.startswith("⚠ W1:")]
    assert alpha.startswith("⚠ W1: WARNING (2 in the logs of the study behind results/alpha/metrics.csv, for its 3 "
                            "claims: S1.a, S1.b, S1.e): (1) search A")
    assert report.index(alpha) < report.index("## S2") < report.index("⚠ W2:")
    assert report.count("WARNING (") == 2  # once per study that logged warnings

    page = claims_report.html_page(records)
    for message in logged["results/alpha/metrics.csv"]:
        assert page.count(message) == 1
    assert page.count("WARNING (") == 2 and page.count("⚠ W1") == 4  # three rows and the study's line


@pytest.mark.parametrize("source, words", [("fewrel_val_wiki", "val_wiki.json (16 relations"),
                                           ("fewrel_train_wiki", "train_wiki.json (64 relations")])
def test_the_report_names_the_fewrel_set_once(source, words):
    dilution = pd.DataFrame({"metric": ["fewrel_labels_spearman", "fewrel_samples_kept_ratio", "archetype_spearman"],
                             "value": [-1.0, 1.0, -1.0],
                             "detail": [f"{source}: labels [4, 8] -> max dilution [0.9, 0.8]",
                                        f"{source}: samples per label [100, 300] -> max dilution [0.9, 0.9]", "toy"]})
    line = claims_report.data_source_line({"results/dilution/metrics.csv": dilution})
    assert line.startswith("Data: S3's FewRel results were measured on FewRel 1.0 ") and words in line
    record = {"id": "S9.a", "work": "W", "short": "s", "status": "NOT RUN", "checks": [], "scale": "any",
              "run_scale": "smoke", "figures": [], "note": ""}
    assert claims_report.markdown([record], line).count("FewRel") == 2  # one line (the set named in it)
    assert claims_report.data_source_line({}) == ""
