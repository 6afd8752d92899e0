"""Run directories: where a run's files may go, and the folders that can never hold a run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPOSITORY
from factstore.run_directory import PACKAGE_FOLDERS, TOP_RUN_FOLDERS, in_run, run_dir_problem


@pytest.mark.parametrize("run_dir", [".", "runs/paper", "runs/smoke", "scratch", "runs/results"])
def test_a_folder_of_its_own_is_a_run_directory(run_dir):
    assert run_dir_problem(run_dir) is None


@pytest.mark.parametrize("run_dir", sorted(PACKAGE_FOLDERS | TOP_RUN_FOLDERS) + ["src/factstore", "results/mine"])
def test_a_package_folder_or_the_top_runs_output_folder_is_refused(run_dir):
    problem = run_dir_problem(run_dir)
    assert problem and repr(run_dir) in problem and "runs/" in problem


def test_in_run_prefixes_every_run_but_the_top_one():
    assert in_run(".", "results/x.pt") == "results/x.pt"
    assert in_run("runs/paper", "results/x.pt") == "runs/paper/results/x.pt"


def test_snakemake_refuses_a_package_folder_as_run_directory_in_one_line():
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", "--configfile", "config/smoke.yaml",
                           "--config", "run_dir=src"], cwd=REPOSITORY, capture_output=True, text=True)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("factstore:")]
    assert len(lines) == 1 and "'src'" in lines[0] and "Traceback" not in done.stderr, done.stderr[-2000:]
