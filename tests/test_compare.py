"""`python -m factstore compare RUN_A RUN_B` on small hand-made run directories: a path that is
not a claims report is refused in one line naming the file (exit status 2), and each run's scale,
config file and commit are read from its own files, disagreements between them shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def record(claim_id: str, status: str, value: float, run_scale: str = "smoke") -> dict:
    """A claim record as factstore.experiments.claims.report writes it (the fields compare reads)."""
    return {"id": claim_id, "work": "w", "short": "s", "status": status, "scale": "default",
            "run_scale": run_scale, "measured": {"x": value}, "standard_errors": {}, "fragile": False}


def make_run(root: Path, name: str, records: list[dict], params: dict | None = None,
             commit: str = COMMIT_A, dirty: bool = False, summary: dict | None = None) -> str:
    """A run directory `root/name` with results/claims.json, its provenance sidecar and
    claims_summary.json; returns the name to pass to compare."""
    results = root / name / "results"
    results.mkdir(parents=True)
    (results / "claims.json").write_text(json.dumps(records))
    sidecar = {"step": "claims.report", "params": params or {"scale": "smoke"},
               "git": {"commit": commit, "dirty": dirty}, "output": "json"}
    (results / "claims.json.prov.json").write_text(json.dumps(sidecar))
    counts = summary or {"PASS": sum(r["status"] == "PASS" for r in records)}
    (results / "claims_summary.json").write_text(json.dumps(counts))
    return name


def compare(root: Path, run_a: str, run_b: str) -> subprocess.CompletedProcess:
    """`python -m factstore compare RUN_A RUN_B` in `root`, as a user types it, 100 columns wide."""
    return subprocess.run([sys.executable, "-m", "factstore", "compare", run_a, run_b],
                          cwd=root, capture_output=True, text=True, env={**os.environ, "COLUMNS": "100"})


@pytest.fixture
def good(tmp_path) -> str:
    return make_run(tmp_path, "good", [record("S1.a", "PASS", 1.0), record("S1.b", "FAIL", 0.1)])


def assert_refused(done: subprocess.CompletedProcess, file: str, what: str) -> None:
    """Exit status 2, nothing on stdout, one line on stderr naming `file` and saying `what`."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert file in lines[0] and what in lines[0], lines[0]
    assert done.stdout == ""


def test_a_run_directory_that_does_not_exist_is_refused(tmp_path, good):
    assert_refused(compare(tmp_path, good, "runs/nowhere"), "runs/nowhere", "no such run directory")


def test_a_run_directory_without_claims_json_is_refused(tmp_path, good):
    (tmp_path / "unfinished" / "results").mkdir(parents=True)
    assert_refused(compare(tmp_path, "unfinished", good), "unfinished/results/claims.json", "missing")


def test_a_truncated_claims_json_is_refused(tmp_path, good):
    claims = tmp_path / good / "results/claims.json"
    (tmp_path / "cut/results").mkdir(parents=True)
    (tmp_path / "cut/results/claims.json").write_text(claims.read_text()[:40])
    assert_refused(compare(tmp_path, good, "cut"), "cut/results/claims.json", "truncated or corrupt")


def test_the_flat_metrics_file_is_refused(tmp_path, good):
    flat = tmp_path / good / "results/claims_metrics.json"
    flat.write_text(json.dumps({"S1.a": {"x": 1.0}, "S1.b": {"x": 0.1}}))
    assert_refused(compare(tmp_path, good, f"{good}/results/claims_metrics.json"),
                   "claims_metrics.json", "not a list of claim records")


def test_the_markdown_report_is_refused(tmp_path, good):
    (tmp_path / good / "results/claims.md").write_text("# Claims report\n\n| id | status |\n")
    assert_refused(compare(tmp_path, f"{good}/results/claims.md", good), "claims.md", "not JSON")


@pytest.mark.parametrize("content, what", [
    ([{"id": "S1.a", "measured": {}}], "record 1 has no 'status'"),
    ([{"status": "PASS"}], "record 1 has no 'id'"),
    (["S1.a"], "item 1 is a JSON str"),
    ([], "no claim records"),
    ("PASS", "a JSON str"),
])
def test_json_that_is_not_a_list_of_claim_records_is_refused(tmp_path, good, content, what):
    (tmp_path / "odd/results").mkdir(parents=True)
    (tmp_path / "odd/results/claims.json").write_text(json.dumps(content))
    assert_refused(compare(tmp_path, good, "odd"), "odd/results/claims.json", what)


def test_both_runs_scale_config_file_and_commit_are_shown(tmp_path):
    a = make_run(tmp_path, "a", [record("S1.a", "PASS", 1.0)],
                 params={"scale": "smoke", "config_file": "config/smoke.yaml"}, commit=COMMIT_A)
    b = make_run(tmp_path, "runs/paper", [record("S1.a", "FAIL", 0.2, run_scale="paper")],
                 params={"scale": "paper", "config_file": "config/paper.yaml"}, commit=COMMIT_B, dirty=True)
    done = compare(tmp_path, a, b)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("A = a: ") and lines[2].startswith("B = runs/paper: ")
    assert lines[1].split() == ["scale", "smoke,", "config", "file", "config/smoke.yaml,", "commit", COMMIT_A[:12]]
    assert "scale paper, config file config/paper.yaml, commit " + COMMIT_B[:12] in lines[3]
    assert "uncommitted changes" in lines[3]
    assert "different scales" in done.stdout
    row = next(line for line in lines if line.startswith("S1.a"))
    assert row.split() == ["S1.a", "PASS", "FAIL", "status"]
    assert "    A: x = 1" in lines and "    B: x = 0.2" in lines
    assert lines[-1] == "1 of 1 claims changed (1 in status, 0 in value only)."
    assert max(map(len, lines)) <= 100


def test_a_field_no_file_records_reads_unknown(tmp_path, good):
    bare = tmp_path / "bare/results"
    bare.mkdir(parents=True)
    (bare / "claims.json").write_text(json.dumps([{"id": "S1.a", "status": "PASS"}]))
    (bare / "claims.json.prov.json").write_text("{not json")  # a damaged sidecar only describes
    done = compare(tmp_path, "bare", good)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].strip() == "scale unknown, config file unknown, commit unknown"
    assert "different scales" not in done.stdout


def test_a_recorded_scale_that_disagrees_is_shown_not_relabelled(tmp_path, good):
    """claims.json says the records were judged at default scale, its sidecar that the step ran
    with smoke: both are shown, with a note, and neither replaces the other; the run directory's
    name says nothing about its scale."""
    mixed = make_run(tmp_path, "runs/paper", [record("S1.a", "PASS", 1.0, run_scale="default"),
                                              record("S1.b", "FAIL", 0.1, run_scale="default")],
                     params={"scale": "smoke", "config_file": "config/smoke.yaml"})
    done = compare(tmp_path, good, mixed)
    assert done.returncode == 0, done.stderr
    described = "\n".join(done.stdout.splitlines()[3:6])
    assert "default (claims.json)" in described and "smoke (claims.json.prov.json)" in described
    assert "config file config/smoke.yaml" in described
    assert "B's files disagree on its scale" in described
    assert "scale paper" not in done.stdout and "different scales" not in done.stdout


def test_a_scale_set_on_the_command_line_over_the_config_file_is_said(tmp_path, good):
    """`--config scale=default` with config/smoke.yaml: every file says default, the recorded
    override says where that came from."""
    overridden = make_run(tmp_path, "over", [record("S1.a", "PASS", 1.0, run_scale="default")],
                          params={"scale": "default", "config_file": "config/smoke.yaml",
                                  "config_overrides": {"scale": "default"}})
    done = compare(tmp_path, overridden, good)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "scale default, config file config/smoke.yaml" in text
    assert ("A's scale was set on the command line (--config scale=default), over its config file "
            "config/smoke.yaml") in text


def test_a_claims_json_path_is_a_run_too(tmp_path, good):
    done = compare(tmp_path, f"{good}/results/claims.json", good)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("0 of 2 claims changed (0 in status, 0 in value only).")
    assert [line.split()[0] for line in done.stdout.splitlines() if line.startswith("S")] == ["S1.a", "S1.b"]


def test_changed_only_lists_the_claims_that_changed_and_counts_all(tmp_path, good):
    other = make_run(tmp_path, "other", [record("S1.a", "PASS", 1.0), record("S1.b", "PASS", 0.9)])
    done = compare_at(tmp_path, 100, "--changed-only", good, other)
    assert done.returncode == 0, done.stderr
    rows = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("S1.")]
    assert rows == ["S1.b"]
    assert done.stdout.rstrip().endswith("1 of 2 claims changed (1 in status, 0 in value only).")


@pytest.mark.parametrize("command", [[sys.executable, "-m", "factstore"], [str(Path(sys.executable).parent / "factstore")]])
def test_the_main_help_lists_each_command_with_one_line(command):
    if not Path(command[0]).exists():
        pytest.skip("the console script is not installed")
    done = subprocess.run([*command, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    heading = next(number for number, line in enumerate(lines) if line.startswith("commands ("))
    listed = {line.split()[0]: line for line in lines[heading + 1:] if line.strip()}
    assert set(listed) == {"compare", "docs", "preflight"}
    assert "compare RUN_A RUN_B [--changed-only]" in listed["compare"] and "what changed" in listed["compare"]
    assert ("factstore" if len(command) == 1 else "python -m factstore") in lines[heading]


def compare_at(root: Path, width: int, *arguments: str) -> subprocess.CompletedProcess:
    """compare in a terminal `width` columns wide ($COLUMNS, which shutil.get_terminal_size reads first)."""
    return subprocess.run([sys.executable, "-m", "factstore", "compare", *arguments], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": str(width)})


@pytest.fixture
def wide_runs(tmp_path) -> tuple[str, str]:
    """Two runs with a long claim id, many long metric names and a long config path."""
    metrics = {f"a_rather_long_metric_name_number_{i}": 0.123456 * i for i in range(12)}
    long_id = "S2.kernel-regression-learning-curve-exponent-matches-the-spectral-prediction"
    a = make_run(tmp_path, "a", [record(long_id, "PASS", 1.0) | {"measured": metrics}, record("S1.a", "PASS", 1.0)],
                 params={"scale": "smoke", "config_file": "config/" + "very_long_folder_name/" * 6 + "smoke.yaml"})
    b = make_run(tmp_path, "b", [record(long_id, "FAIL", 1.0) | {"measured": {k: v + 1 for k, v in metrics.items()}},
                                 record("S1.a", "PASS", 1.0)])
    return a, b


@pytest.mark.parametrize("width", [50, 80, 100, 160])
def test_no_line_is_wider_than_the_terminal(tmp_path, wide_runs, width):
    done = compare_at(tmp_path, width, *wide_runs)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= width, max(lines, key=len)
    row = next(line for line in lines if line.startswith("S2."))
    assert row.split()[-3:] == ["PASS", "FAIL", "status"]
    if width < 100:
        assert "…" in row.split()[0]  # the long id shortened with an ellipsis, the statuses kept whole
    values = " ".join(line.strip() for line in lines if line.startswith("    ") or line.startswith("        "))
    assert "a_rather_long_metric_name_number_11 = 2.47" in values or "a_rather_long_metric_name_number_11" in values


def test_the_width_defaults_to_100_columns_off_a_terminal(tmp_path, wide_runs):
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "factstore", "compare", *wide_runs], cwd=tmp_path,
                          capture_output=True, text=True, env=environment)
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 100 and max(map(len, lines)) > 80


def test_changed_only_keeps_value_changes_and_drops_unchanged_claims(tmp_path):
    a = make_run(tmp_path, "a", [record("S1.a", "PASS", 1.0), record("S1.b", "PASS", 0.5), record("S1.c", "FAIL", 0.1)])
    b = make_run(tmp_path, "b", [record("S1.a", "PASS", 1.0), record("S1.b", "PASS", 0.7), record("S1.c", "PASS", 0.9)])
    done = compare_at(tmp_path, 100, "--changed-only", a, b)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.startswith("S1.")}
    assert rows == {"S1.b": ["PASS", "PASS", "value"], "S1.c": ["FAIL", "PASS", "status"]}
    assert "    A: x = 0.5" in done.stdout.splitlines() and "    B: x = 0.7" in done.stdout.splitlines()
    assert done.stdout.rstrip().endswith("2 of 3 claims changed (1 in status, 1 in value only).")
