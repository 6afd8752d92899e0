"""DVC follows the config that params.yaml selects, and reports a stage changed whenever Snakemake
would rerun something in it: a parameter of that config, a core module, a figure module.

Cheap: no step runs. A fresh copy of the working tree gets placeholder outputs and a `dvc commit`
(which records deps, params and outs in dvc.lock as `dvc repro` would), then each edit is checked
with `dvc status`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPOSITORY, SMOKE, fresh_copy, run

pytestmark = pytest.mark.workflow
STAGES = set(yaml.safe_load((REPOSITORY / "dvc.yaml").read_text())["stages"])  # every stage depends on src/ and workflow/


def dvc(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "dvc", *args, cwd=cwd, **kwargs)


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    """A copy of the working tree (as a new git repository), params.yaml selecting the smoke config,
    placeholder outputs, and dvc.lock written by `dvc commit`: `dvc status` says up to date."""
    root = fresh_copy(tmp_path_factory.mktemp("dvc"), "copy",
                      before_commit=lambda root: (root / "params.yaml").write_text(f"config: {SMOKE}\n"))
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    for stage in stages.values():
        for out in stage.get("outs", []) + stage.get("metrics", []):
            path = root / (next(iter(out)) if isinstance(out, dict) else out)
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("{}\n")
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "placeholder.txt").write_text("made by tests/test_dvc.py\n")
    dvc("commit", "--force", cwd=root)
    assert "up to date" in dvc("status", cwd=root).stdout
    return root


def changed_stages(root: Path) -> dict[str, list]:
    """Stage -> what `dvc status` says changed."""
    status = json.loads(dvc("status", "--json", cwd=root).stdout or "{}")
    return {name.split(":")[-1]: changes for name, changes in status.items()}


def edited(root: Path, relative: str, change):
    """Apply `change(text) -> text` to a file, return a function that restores it."""
    path = root / relative
    original = path.read_text()
    path.write_text(change(original))
    return lambda: path.write_text(original)


def test_the_lock_records_the_selected_config(committed):
    lock = yaml.safe_load((committed / "dvc.lock").read_text())["stages"]
    assert set(lock) == STAGES
    assert lock["assoc"]["cmd"] == f"snakemake --cores all assoc --configfile {SMOKE}"
    assert lock["assoc"]["params"][SMOKE]["assoc"]["trained"]["max_steps"] == 400  # smoke's value
    assert set(lock["data"]["params"][SMOKE]) == {"data.retries", "data.timeout_s", "dilution.fewrel.source",
                                                  "data.fewrel_test_per_relation", "data.split_seed"}


def test_a_parameter_change_in_the_selected_config_marks_its_stages(committed):
    restore = edited(committed, SMOKE, lambda text: text.replace("capacity_accuracy: 0.99", "capacity_accuracy: 0.95"))
    try:
        changed = changed_stages(committed)
    finally:
        restore()
    assert set(changed) == {"assoc", "figures"}
    assert {"changed deps": {SMOKE: {"assoc": "modified"}}} in changed["assoc"]


def test_a_change_in_another_config_file_marks_nothing(committed):
    restore = edited(committed, "config/config.yaml", lambda text: text.replace("scale: default", "scale: paper"))
    try:
        assert changed_stages(committed) == {}
    finally:
        restore()


def test_the_data_mirror_is_no_parameter(committed):
    restore = edited(committed, SMOKE, lambda text: text.replace("  split_seed: 0\n", "  split_seed: 0\n  mirror: /elsewhere\n"))
    try:
        assert changed_stages(committed) == {}
    finally:
        restore()


@pytest.mark.parametrize("module", ["src/factstore/__main__.py", "src/factstore/io.py", "src/factstore/provenance.py",
                                    "src/factstore/device.py"])
def test_a_core_module_edit_marks_every_stage(committed, module):
    restore = edited(committed, module, lambda text: text + "\n# an edit\n")
    try:
        assert set(changed_stages(committed)) == STAGES
    finally:
        restore()


@pytest.mark.parametrize("module", ["src/factstore/plots/assoc.py", "workflow/rules/assoc.smk"])
def test_a_figure_module_or_rule_edit_marks_the_figures_stage(committed, module):
    restore = edited(committed, module, lambda text: text + "\n# an edit\n")
    try:
        assert "figures" in changed_stages(committed)
    finally:
        restore()


def test_selecting_another_config_marks_every_stage(committed):
    restore = edited(committed, "params.yaml", lambda text: "config: config/config.yaml\n")
    try:
        assert set(changed_stages(committed)) == STAGES
    finally:
        restore()


def test_byte_code_is_no_dependency(committed):
    cache = committed / "src/factstore/__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "io.cpython-311.pyc").write_bytes(b"\0")
    try:
        assert changed_stages(committed) == {}
    finally:
        shutil.rmtree(cache)


def test_factstore_config_disagreeing_with_dvc_stops_the_run(committed):
    env = {"DVC_STAGE": "assoc", "FACTSTORE_CONFIG": "config/config.yaml"}
    done = run(sys.executable, "-m", "snakemake", "-n", "--nolock", "assoc", "--configfile", SMOKE,
               cwd=committed, extra_env=env, check=False)
    assert done.returncode != 0
    assert "FACTSTORE_CONFIG=config/config.yaml, but DVC runs with" in done.stdout + done.stderr


def test_dvc_metrics_show_lists_a_claims_measured_value(committed):
    """The claims step (through the runner, as its rule calls it) writes claims_metrics.json, which
    dvc.yaml declares a metric: `dvc metrics show` then lists a claim's measured value by id."""
    from factstore.claims import load_registry

    claim = next(c for c in load_registry(committed / "config/claims.yaml") if c["id"] == "S1.hebbian-all")
    metric = claim["checks"][0]["metric"]
    results = committed / "results"
    saved = {path: path.read_bytes() for path in results.rglob("*") if path.is_file()}
    outputs = {"json": "claims.json", "markdown": "claims.md", "summary": "claims_summary.json", "table": "claims.csv",
               "flat": "claims_metrics.json", "html": "claims.html"}
    try:
        pd.DataFrame({"metric": [metric], "value": [0.123], "standard_error": [0.01], "detail": [""]}).to_csv(
            results / "assoc/metrics.csv", index=False)
        run(sys.executable, "-m", "factstore", "claims.report", "--params", '{"scale": "smoke"}',
            "--input", "registry=config/claims.yaml", "--input", "metrics_assoc=results/assoc/metrics.csv",
            *[f"--output={name}=results/{file}" for name, file in outputs.items()], cwd=committed)
        shown = json.loads(dvc("metrics", "show", "--json", cwd=committed).stdout)
        assert shown[""]["data"]["results/claims_metrics.json"]["data"]["S1.hebbian-all"] == {metric: 0.123}
        assert f"S1.hebbian-all.{metric}" in dvc("metrics", "show", cwd=committed).stdout
    finally:
        for path in results.rglob("*"):
            if path.is_file() and path not in saved:
                path.unlink()
        for path, content in saved.items():
            path.write_bytes(content)


def test_every_figure_of_the_workflow_is_a_dvc_plot(committed):
    """dvc.yaml's image plots are exactly the PNGs the `figures` target makes (a new figure must be
    added under `plots:` for `dvc plots diff` to show it)."""
    summary = run(sys.executable, "-m", "snakemake", "--nolock", "--summary", "all", "--configfile", SMOKE,
                  cwd=committed, extra_env={"DVC_STAGE": "figures"}).stdout  # as DVC runs it: at the top
    made = {line.split("\t")[0] for line in summary.splitlines()[1:]}
    plots = {next(iter(p)) if isinstance(p, dict) else p for p in yaml.safe_load((committed / "dvc.yaml").read_text())["plots"]}
    figures = {path for path in made if path.startswith("figures/") and path.endswith(".png")}
    assert {p for p in plots if p.endswith(".png")} == figures
    assert plots - figures <= made  # the key tables are tables the workflow makes


# The `dvc exp show` filter the docs show: the verdict counts and a few key claims' values.
EXP_SHOW_FILTER = ("--drop", ".*", "--keep", "Experiment|PASS|FAIL|UNTESTABLE|NOT RUN|S1.hebbian-all")


def claims_only_repository(root: Path) -> Path:
    """A git + DVC repository holding only dvc.yaml's `claims` stage as it declares its metrics
    (no command runs: the metrics files are written by hand, then recorded with `dvc commit`)."""
    claims = yaml.safe_load((REPOSITORY / "dvc.yaml").read_text())["stages"]["claims"]
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"claims": {"cmd": "true", "metrics": claims["metrics"]}}}))
    shutil.copy(REPOSITORY / ".gitignore", root / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    dvc("init", "-q", cwd=root)
    return root


def record_claims(root: Path, value: float, message: str) -> None:
    """Write hand-made claims metrics (S1.hebbian-all's value `value`), `dvc commit`, git commit."""
    (root / "results").mkdir(exist_ok=True)
    (root / "results/claims_metrics.json").write_text(json.dumps({"S1.hebbian-all": {"accuracy": value}}))
    (root / "results/claims_summary.json").write_text(json.dumps({"PASS": 3, "FAIL": 1, "UNTESTABLE": 0, "NOT RUN": 0}))
    (root / "results/claims.json").write_text("[]\n")
    dvc("commit", "--force", cwd=root)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message], cwd=root, check=True)


def test_dvc_metrics_diff_between_two_commits_lists_a_changed_claim_value(tmp_path):
    """dvc.yaml caches the claims' metrics, so dvc.lock's hash finds each commit's values: `dvc
    metrics diff HEAD~1 HEAD` lists the claim whose value changed (an uncached metric reads '!'),
    `dvc exp show` with the documented filter shows the counts and the claim, and recording a
    run leaves `git status` clean (the metrics files stay out of git)."""
    root = claims_only_repository(tmp_path)
    record_claims(root, 0.25, "first run")
    record_claims(root, 0.75, "second run")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    (root / "results/claims_metrics.json").unlink()  # both revisions' values come from the DVC cache
    diff = json.loads(dvc("metrics", "diff", "HEAD~1", "HEAD", "--json", cwd=root).stdout)
    change = diff["results/claims_metrics.json"]["S1.hebbian-all.accuracy"]
    assert (change["old"], change["new"]) == (0.25, 0.75)
    shown = dvc("exp", "show", "--csv", "--no-pager", *EXP_SHOW_FILTER, cwd=root).stdout
    header = shown.splitlines()[0].split(",")
    assert {"PASS", "FAIL", "UNTESTABLE", "NOT RUN", "S1.hebbian-all.accuracy"} <= set(header)
    assert not {"Created", "State"} & set(header), "the filter drops every other column"


def test_the_documented_exp_show_filter_is_the_tested_one():
    shown = (REPOSITORY / "docs/workflow.md").read_text()
    assert "dvc exp show --drop '.*' --keep '" + EXP_SHOW_FILTER[-1] + "'" in shown
