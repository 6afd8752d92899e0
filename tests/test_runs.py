"""Runs side by side: a second run in its own run directory beside the session's smoke run, the
`compare` command on the two, and determinism (two clean runs, byte-identical claims and every
result table).

Both tests reuse the session's smoke run (tests/conftest.py: smoke_run) as their first run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import SMOKE, SMOKE_DIR, run, snakemake

pytestmark = pytest.mark.workflow

TIMES = {"results/runtimes.csv"}  # the one table of times


def result_tables(root: Path) -> list[Path]:
    """Every CSV under `root`/results, relative to `root`, but the one table of times."""
    return sorted(path.relative_to(root) for path in (root / "results").rglob("*.csv")
                  if path.relative_to(root).as_posix() not in TIMES)


def compare(root: Path, run_a: str, run_b: str) -> subprocess.CompletedProcess:
    """`python -m factstore compare RUN_A RUN_B` in `root`, as a user types it."""
    return run(sys.executable, "-m", "factstore", "compare", run_a, run_b, cwd=root)


def changed_config(root: Path, run_dir: str, change) -> Path:
    """The smoke config with run_dir set and `change(config)` applied, written into the run directory."""
    config = yaml.safe_load((root / SMOKE).read_text())
    config["run_dir"] = run_dir
    change(config)
    path = root / run_dir / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_compare_names_the_claims_one_changed_parameter_moved(smoke_run):
    """A second smoke run in runs/fewer_seeds with one parameter changed (the Hebbian study's seed
    count). To keep it cheap the run starts from copies of the first run's files (mtimes kept, so
    they are up to date) and `--forcerun assoc_hebbian` remakes the one table that parameter
    changes and what reads it; `compare` must then report changes in S1 (the Hebbian claims) and
    nowhere else."""
    second = smoke_run / "runs/fewer_seeds"
    for folder in ("data", "results", "figures"):
        shutil.copytree(smoke_run / SMOKE_DIR / folder, second / folder, dirs_exist_ok=True)  # copy2: mtimes kept
    config = changed_config(smoke_run, "runs/fewer_seeds",
                            lambda c: c["assoc"]["hebbian"].update(seeds=c["assoc"]["hebbian"]["seeds"] - 1))
    done = snakemake("--cores", "2", "all", "--forcerun", "assoc_hebbian", "--configfile", str(config), "--quiet", "host",
                     cwd=smoke_run)  # --quiet host: the job blocks the profile's quiet console omits
    log = done.stdout + done.stderr
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, flags=re.M))
    assert "assoc_hebbian" in ran and "mlp_capacity" not in ran, sorted(ran)
    assert (second / "results/assoc/hebbian.csv").stat().st_mtime > (smoke_run / SMOKE_DIR / "results/assoc/hebbian.csv").stat().st_mtime

    shown = compare(smoke_run, SMOKE_DIR, "runs/fewer_seeds").stdout
    records = json.loads((smoke_run / SMOKE_DIR / "results/claims.json").read_text())
    rows = {line.split()[0]: line for line in shown.splitlines() if line.startswith("S")}
    assert set(rows) == {r["id"] for r in records}  # every claim of both runs, one row each
    changed = {claim_id for claim_id, line in rows.items() if line.rstrip().endswith(("status", "value"))}
    assert changed and {claim_id[:2] for claim_id in changed} == {"S1"}, shown
    assert "S1.hebbian-all" in changed or "S1.hebbian-typical" in changed
    assert shown.startswith(f"A = {SMOKE_DIR}: ") and "\nB = runs/fewer_seeds: " in shown


def test_two_clean_runs_give_byte_identical_claims_and_tables(smoke_run):
    """The README's promise (same seed, same machine, same numbers) at smoke scale: a second clean
    run of the same config, in its own run directory, writes the same bytes to claims.json,
    claims_metrics.json and every CSV under results/ (every study's metrics and intermediate
    tables, so no rule writes a wall-clock column), except results/runtimes.csv, the one table
    of times (read from the sidecars). Every rule runs again here, so this also covers a forced
    rerun of any single rule."""
    config = changed_config(smoke_run, "runs/again", lambda c: None)
    snakemake("--cores", "2", "all", "--configfile", str(config), cwd=smoke_run)
    again = smoke_run / "runs/again"
    first = smoke_run / SMOKE_DIR
    tables = result_tables(first)
    assert len(tables) >= 60 and len([path for path in tables if path.name == "metrics.csv"]) >= 8
    assert result_tables(again) == tables, "the two runs wrote different sets of tables"
    different = [str(path) for path in [Path("results/claims.json"), Path("results/claims_metrics.json"), *tables]
                 if (first / path).read_bytes() != (again / path).read_bytes()]
    assert not different, f"differ between two clean runs: {different}"
    claims = len(json.loads((again / "results/claims.json").read_text()))
    assert compare(smoke_run, SMOKE_DIR, "runs/again").stdout.rstrip().endswith(
        f"0 of {claims} claims changed (0 in status, 0 in value only).")


def planned_outputs(root: Path, *args: str, extra_env: dict | None = None) -> set[str]:
    """Every output path a dry run of the assoc target plans."""
    # the profile's quiet console omits the job blocks: `--quiet host` (replacing its list) shows them
    done = snakemake("-n", "--nolock", "assoc", *args, "--quiet", "host", cwd=root, extra_env=extra_env)
    lines = (done.stdout + done.stderr).splitlines()
    return {path for line in lines if line.strip().startswith("output:")
            for path in line.split("output:", 1)[1].replace(",", " ").split()}


def test_a_paper_run_lives_in_runs_paper_and_the_default_run_at_the_top(workspace):
    """config/paper.yaml's run_dir puts every file of its run under runs/paper; the default run's
    files stay where the README says; under DVC (which sets $DVC_STAGE) every run is at the top."""
    paper = planned_outputs(workspace, "--configfile", "config/paper.yaml")
    default = planned_outputs(workspace)
    under_dvc = planned_outputs(workspace, "--configfile", "config/paper.yaml", extra_env={"DVC_STAGE": "assoc"})
    assert "results/assoc/metrics.csv" in default and all(path.startswith("results/") for path in default)
    assert paper == {f"runs/paper/{path}" for path in under_dvc}
    assert "results/assoc/metrics.csv" in under_dvc


def test_each_scale_has_its_own_run_directory(workspace):
    """The smoke run never writes over the default run (nor the paper run over either), and the
    dilution pretraining's checkpoint, a path passed as a parameter, is inside its run too."""
    smoke = planned_outputs(workspace, "--forceall", "--configfile", "config/smoke.yaml")  # the session's smoke run may be done
    assert smoke and all(path.startswith("runs/smoke/") for path in smoke)
    plan = snakemake("-n", "--nolock", "-p", "--forcerun", "dilution_pretrain", "runs/smoke/results/dilution/pretrain_log_many.csv",
                     "--configfile", "config/smoke.yaml", "--quiet", "host", cwd=workspace).stdout
    assert "runs/smoke/results/dilution/checkpoints/pretrain_many.pt" in plan
    assert '"results/dilution/checkpoints' not in plan
