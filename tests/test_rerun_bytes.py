"""Identical runs write identical result tables (issue 26, item 7): the smoke run's rules that
wrote wall-clock columns before (mlp capacity searches, usability, editing) are forced to run
again, and every CSV under results/ must keep its bytes, except results/runtimes.csv, the one
table of times (read from the sidecars)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import SMOKE, run

pytestmark = pytest.mark.workflow

FORCED = ["mlp_capacity", "usability_capacity", "editing_train", "editing_edit"]
TIMES = {"results/runtimes.csv"}


def csv_bytes(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted((root / "results").rglob("*.csv"))
            if path.relative_to(root).as_posix() not in TIMES}


def changed_by_rerun(root: Path, rules: list[str], targets: tuple[str, ...] = ("all",), configfile: str = SMOKE) -> list[str]:
    """The CSVs under `root`/results whose bytes differ after `rules` (and what follows from
    them up to `targets`) run again in the finished workspace `root`; also lists CSVs that
    appeared or vanished."""
    before = csv_bytes(root)
    run(sys.executable, "-m", "snakemake", "--cores", "1", *targets, "--configfile", configfile, "--forcerun", *rules, cwd=root)
    after = csv_bytes(root)
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def test_a_forced_rerun_keeps_every_result_table_byte_identical(smoke_run):
    assert changed_by_rerun(smoke_run, FORCED) == []
