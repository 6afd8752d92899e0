"""No DVC command keeps or loses a finished run by chance.

`dvc exp run` first checks every output out from dvc.lock and removes what the lock does not
record: on a workspace whose outputs have no lock entry yet (a run made with Snakemake, or by
`dvc repro` before the lock was committed) a cached output is deleted, `persist: true` or not.
dvc.yaml therefore declares every output that holds computed results `cache: false` (DVC hashes
it, never removes it). The fault, and the commands on outputs shaped like dvc.yaml's, run on a
one-stage DVC repository shaped like a stage of dvc.yaml (the config file from params.yaml, its
section as params, an output folder that the stage adds to and never clears); the smoke-scale
workflow test runs `dvc exp run` on a whole finished run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPOSITORY, run

pytestmark = pytest.mark.workflow

DVC_YAML = """stages:
  study:
    cmd: python make.py ${config}
    deps:
      - make.py
    params:
      - ${config}:
          - study.size
    outs:
      - results/study:
          persist: true{cache}
"""
MAKE = """import pathlib, sys, yaml
size = yaml.safe_load(open(sys.argv[1]))["study"]["size"]
out = pathlib.Path("results/study")
out.mkdir(parents=True, exist_ok=True)
(out / f"size{size}.txt").write_text(str(size))  # what is there stays, like Snakemake's valid outputs
"""


def dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "dvc", *args, cwd=cwd)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def results_output_settings() -> dict:
    """The settings dvc.yaml gives a study's results folder (the assoc stage's, like every other)."""
    stage = yaml.safe_load((REPOSITORY / "dvc.yaml").read_text())["stages"]["assoc"]
    return next(iter(stage["outs"][0].values()))


def make_finished(tmp_path: Path, cache: bool) -> Path:
    """A committed one-stage DVC repository whose workspace holds a finished run at a.yaml's
    size (results/study/size1.txt) with no dvc.lock entry; its output cached or not."""
    (tmp_path / "dvc.yaml").write_text(DVC_YAML.replace("{cache}", "" if cache else "\n          cache: false"))
    (tmp_path / "make.py").write_text(MAKE)
    (tmp_path / "a.yaml").write_text("study: {size: 1}\n")
    (tmp_path / "b.yaml").write_text("study: {size: 2}\n")
    (tmp_path / "params.yaml").write_text("config: a.yaml\n")
    (tmp_path / ".gitignore").write_text("/results\n")
    git("init", "-q", cwd=tmp_path)
    dvc("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "init", cwd=tmp_path)
    run(sys.executable, "make.py", "a.yaml", cwd=tmp_path)
    return tmp_path


@pytest.fixture
def finished(tmp_path) -> Path:
    """The finished run, its output shaped like dvc.yaml's results folders."""
    settings = results_output_settings()
    return make_finished(tmp_path, cache=settings.get("cache", True))


def results(root: Path) -> list[str]:
    return sorted(path.name for path in (root / "results" / "study").iterdir())


def test_the_fault_exp_run_deletes_a_cached_output_it_has_no_lock_entry_for(tmp_path):
    """Why dvc.yaml's results are not cached (DVC 3's behaviour): the finished run is gone."""
    finished = make_finished(tmp_path, cache=True)
    dvc("exp", "run", "-S", "config=b.yaml", cwd=finished)
    assert results(finished) == ["size2.txt"]


def test_every_output_holding_results_is_kept_by_dvc():
    """Every output of dvc.yaml but the figures (redrawn in a minute from the results) and the
    claims' two metrics files (rewritten in seconds from the kept results; cached so that DVC
    compares them across commits and experiments) is persisted and not cached, so no DVC command
    removes or replaces it."""
    stages = yaml.safe_load((REPOSITORY / "dvc.yaml").read_text())["stages"]
    redrawn = {"figures", "results/claims_metrics.json", "results/claims_summary.json"}
    for name, stage in stages.items():
        for output in stage.get("outs", []) + stage.get("metrics", []):
            path, settings = next(iter(output.items())) if isinstance(output, dict) else (output, {})
            if path in redrawn:
                continue
            assert settings.get("cache") is False, f"{name}: {path} is cached"
            is_folder = not Path(path).suffix
            assert settings.get("persist") or not is_folder, f"{name}: {path} is a folder DVC would clear first"


def test_exp_run_keeps_a_finished_run_it_has_no_lock_entry_for(finished):
    dvc("exp", "run", "-S", "config=b.yaml", cwd=finished)
    assert results(finished) == ["size1.txt", "size2.txt"]


def test_repro_after_editing_params_keeps_the_finished_run(finished):
    (finished / "params.yaml").write_text("config: b.yaml\n")
    dvc("repro", cwd=finished)
    assert results(finished) == ["size1.txt", "size2.txt"]


def test_commit_then_exp_run_keeps_the_finished_run(finished):
    dvc("commit", "--force", cwd=finished)
    git("add", "dvc.lock", cwd=finished)
    git("commit", "-qm", "record the finished run", cwd=finished)
    dvc("exp", "run", "-S", "config=b.yaml", cwd=finished)
    assert results(finished) == ["size1.txt", "size2.txt"]


def test_checkout_keeps_the_finished_run(finished):
    dvc("checkout", "--force", cwd=finished)
    assert results(finished) == ["size1.txt"]


# What a finished run is to every DVC command the package shows: those that run or check out
# stages are tested above; the others only read.
KEEPS_A_FINISHED_RUN = ("dvc repro", "dvc exp run", "dvc commit", "dvc checkout", "dvc status", "dvc metrics",
                        "dvc plots", "dvc exp show", "dvc dag", "dvc params", "dvc init")


def test_every_dvc_command_the_documentation_shows_keeps_a_finished_run():
    """Every DVC command line of the README's or the docs' code blocks, and every one that a
    comment of dvc.yaml or params.yaml shows, is one of those tested to keep a finished run."""
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
    blocks = [block for page in pages for block in page.read_text().split("```")[1::2]]  # the fenced blocks
    lines = [line.strip().lstrip("#").strip() for block in blocks for line in block.splitlines()]
    for name in ("dvc.yaml", "params.yaml"):
        lines += [line.lstrip("#").strip() for line in (REPOSITORY / name).read_text().splitlines()]
    commands = [part.strip().strip("`") for line in lines for part in line.replace("&&", ";").split(";")]
    shown = [command for command in commands if command.startswith("dvc ")]
    assert shown, "no DVC command found: the test reads the wrong pages"
    assert [command for command in shown if not command.startswith(KEEPS_A_FINISHED_RUN)] == []
