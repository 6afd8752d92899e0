"""The DVC commands the README recommends keep a finished run (issue 26, item 1).

`dvc exp run` on a workspace whose outputs have no dvc.lock entry yet (a run made with Snakemake,
or by `dvc repro` before the lock was committed) deletes those outputs, `persist: true` or not,
and reruns from scratch. The fault and the two commands the README recommends instead are run on
a one-stage DVC repository shaped like a stage of dvc.yaml (the config file from params.yaml, its
section as params, a persisted output folder that the stage adds to and never clears)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
          persist: true
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


@pytest.fixture
def finished(tmp_path) -> Path:
    """A committed one-stage DVC repository whose workspace holds a finished run at a.yaml's
    size (results/study/size1.txt) with no dvc.lock entry."""
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
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


def results(root: Path) -> list[str]:
    return sorted(path.name for path in (root / "results" / "study").iterdir())


def test_the_fault_exp_run_deletes_a_finished_run_it_has_no_lock_entry_for(finished):
    """Why the README does not recommend `dvc exp run` on such a workspace (DVC 3's behaviour)."""
    dvc("exp", "run", "-S", "config=b.yaml", cwd=finished)
    assert results(finished) == ["size2.txt"]  # size1.txt, the finished run, is gone


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


def test_the_documentation_recommends_no_bare_exp_run():
    """No command line of the README's or the docs' code blocks, and no comment of dvc.yaml or
    params.yaml, starts `dvc exp run`, and no comment there shows one (the prose may mention it,
    with the `dvc commit` that must come first)."""
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
    blocks = [block for page in pages for block in page.read_text().split("```")[1::2]]  # the fenced blocks
    commands = [line.strip().lstrip("#").strip() for block in blocks for line in block.splitlines()]
    for name in ("dvc.yaml", "params.yaml"):
        commands += [line.lstrip("#").strip() for line in (REPOSITORY / name).read_text().splitlines()]
    shown = [line for line in commands if line.startswith("dvc exp run") or ("dvc exp run -S" in line and "dvc commit" not in line)]
    assert shown == []
