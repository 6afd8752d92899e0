"""benchmarks/gpu_check.sh's pieces that run without a GPU: the CPU-vs-CUDA table comparison
(benchmarks/gpu_compare.py) and the `gpu` profile."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPOSITORY, SMOKE, snakemake

sys.path.insert(0, str(REPOSITORY / "benchmarks"))
from gpu_compare import disagreements  # noqa: E402

values = st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=20)


def table(accuracy, width=None, seconds=None) -> pd.DataFrame:
    n = len(accuracy)
    return pd.DataFrame({"method": ["ntk"] * n, "width": width if width is not None else list(range(n)),
                         "accuracy": np.asarray(accuracy, float),
                         "seconds": seconds if seconds is not None else np.ones(n)})


@given(values)
def test_a_table_agrees_with_itself_and_with_drift_inside_the_tolerance(accuracy):
    drifted = np.asarray(accuracy) * 1.04 + 0.01
    assert disagreements(table(accuracy), table(accuracy), rtol=0.05, atol=0.02) == []
    assert disagreements(table(accuracy), table(drifted), rtol=0.05, atol=0.02) == []


@given(values, st.integers(0, 19))
def test_drift_beyond_the_tolerance_is_reported(accuracy, row):
    row %= len(accuracy)
    moved = np.asarray(accuracy, float).copy()
    moved[row] += 0.03 + 0.06 * abs(moved[row])
    found = disagreements(table(accuracy), table(moved), rtol=0.05, atol=0.02)
    assert len(found) == 1 and found[0].startswith("accuracy: 1 of")


def test_integers_found_by_a_search_must_be_equal_and_timings_are_left_out():
    cpu, cuda = table([0.5, 0.9], width=[10, 20]), table([0.5, 0.9], width=[10, 21], seconds=[9.0, 9.0])
    assert [line.split(":")[0] for line in disagreements(cpu, cuda, rtol=0.05, atol=0.02)] == ["width"]
    assert disagreements(table([0.5]), table([0.5, 0.6]), rtol=0.05, atol=0.02)[0].startswith("shape")


def test_gpu_check_is_documented_as_not_yet_run():
    assert "benchmarks/gpu_check.sh" in (REPOSITORY / "docs/performance.md").read_text()
    assert "not been run" in (REPOSITORY / "docs/performance.md").read_text()


@pytest.mark.workflow
def test_the_gpu_profile_resolves_the_workflow(workspace):
    done = snakemake("-n", "--nolock", "--forceall", "all", "--configfile", SMOKE, "--profile", "workflow/profiles/gpu",
                     cwd=workspace)  # --forceall: the workspace may hold a finished run
    assert "Job stats" in done.stdout
