"""Atomic writes, provenance sidecars and the step runner's contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from factstore import io
from factstore.__main__ import UsageError, main, run_step


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []


def test_table_round_trip_and_sidecar_name(tmp_path):
    table = pd.DataFrame({"metric": ["a", "b"], "value": [0.5, 1.25]})
    io.write_table(table, tmp_path / "t.csv")
    pd.testing.assert_frame_equal(io.read_table(tmp_path / "t.csv"), table)
    assert io.sidecar_path(tmp_path / "t.csv").name == "t.csv.prov.json"


def test_run_step_writes_outputs_with_provenance(tmp_path):
    outputs = {"table": str(tmp_path / "hebbian.csv")}
    params = {"d": [8], "alphas": [0.1, 0.3], "seeds": 2, "seed": 3, "chunk_size": 64}
    run_step("assoc.hebbian", params, {}, outputs)
    sidecar = json.loads(io.sidecar_path(outputs["table"]).read_text())
    assert sidecar["params"] == params and sidecar["seed"] == 3
    assert {"commit", "dirty"} <= set(sidecar["git"])
    assert {"python", "torch", "numpy"} <= set(sidecar["versions"])
    assert sidecar["device"] == "cpu" and sidecar["wall_time_s"] >= 0


def test_same_seed_same_numbers(tmp_path):
    params = {"d": [8], "alphas": [0.2], "seeds": 2, "seed": 1, "chunk_size": 64}
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    run_step("assoc.hebbian", params, {}, {"table": str(first)})
    run_step("assoc.hebbian", params, {}, {"table": str(second)})
    assert first.read_bytes() == second.read_bytes()


def test_failing_step_writes_nothing(tmp_path):
    with pytest.raises(KeyError):
        run_step("assoc.hebbian", {"d": [8]}, {}, {"table": str(tmp_path / "x.csv")})
    assert list(tmp_path.iterdir()) == []


def test_missing_input_is_named(tmp_path):
    with pytest.raises(UsageError, match="input 'capacity' is missing"):
        run_step("assoc.figure_rank", {}, {"capacity": str(tmp_path / "nope.csv")}, {})


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["nosuch.step"], "no experiment module"),
        (["assoc.nosuch"], "experiment module 'assoc' has no step 'nosuch'"),
        (["assoc.hebbian", "--params", "{not json"], "--params is not valid JSON"),
        (["assoc.hebbian", "--output", "table"], "--output expects NAME=PATH"),
        (["assoc.hebbian", "--threads", "0"], "--threads must be at least 1"),
    ],
)
def test_command_line_errors_are_clear(arguments, message, capsys):
    assert main(arguments) == 2
    assert f"factstore: error: {message}" in capsys.readouterr().err


def test_the_real_command_line_exits_2_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "factstore", "assoc.nosuch"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "has no step 'nosuch'" in done.stderr and "Traceback" not in done.stderr


# Reliability (issue 10): modes, leftovers of killed writes, diverging training.


def test_outputs_get_the_umask_mode_not_0600(tmp_path):
    import os

    previous = os.umask(0o002)  # a shared cluster file system: group-writable
    try:
        io.write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.csv")
        io.write_json({"a": 1}, tmp_path / "t.json")
    finally:
        os.umask(previous)
    for name in ("t.csv", "t.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o664, name


def test_a_killed_write_leaves_a_temporary_file_the_next_run_removes(tmp_path):
    import os
    import signal

    target = tmp_path / "results" / "table.csv"
    target.parent.mkdir()
    # A writer killed by SIGKILL mid-write: its temporary file stays behind.
    child = subprocess.run(
        [sys.executable, "-c",
         "import os, signal, sys\nfrom factstore import io\n"
         "with io.atomic_path(sys.argv[1]) as tmp:\n"
         "    tmp.write_text('half')\n"
         "    os.kill(os.getpid(), signal.SIGKILL)\n", str(target)],
        capture_output=True, text=True,
    )
    assert child.returncode == -signal.SIGKILL
    leftovers = io.temporary_files(target)
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".table.csv.") and not target.exists()
    assert leftovers[0].match(".*.factstore-tmp*")  # the pattern .dvcignore keeps out of DVC
    # The next run of the step that makes it deletes the leftover first, then writes atomically.
    run_step("assoc.hebbian", {"d": [8], "alphas": [0.1, 0.2], "seeds": 1, "seed": 0, "chunk_size": 64},
             {}, {"table": str(target)})
    assert sorted(p.name for p in target.parent.iterdir()) == ["table.csv", "table.csv.prov.json"]
    assert os.access(target, os.R_OK)


def test_dvcignore_names_the_temporary_files():
    from conftest import REPOSITORY

    assert ".*.factstore-tmp*" in (REPOSITORY / ".dvcignore").read_text().split()


def test_a_diverging_training_run_is_one_line_exit_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from factstore import assoc

    def poisoned(*args, **kwargs):  # a NaN in the data: the loss is NaN from the first step
        x, y = sample_problem(*args, **kwargs)
        x[0, 0, 0] = float("nan")
        return x, y

    sample_problem = assoc.sample_problem
    monkeypatch.setattr(assoc, "sample_problem", poisoned)
    output = tmp_path / "trained.csv"
    params = {"d": 8, "problem": "original", "alphas": [0.5], "seeds": 1, "seed": 0, "max_steps": 50,
              "learning_rate": 0.5, "patience": 10}
    code = main(["assoc.trained", "--params", json.dumps(params), "--output", f"table={output}",
                 "--output", f"spectra={tmp_path / 'spectra.csv'}"])
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("factstore: error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert "step assoc.trained diverged" in lines[0] and "learning_rate=0.5" in lines[0]
    assert "at step 1" in lines[0] and '"learning_rate": 0.5' in lines[0]
    assert list(tmp_path.iterdir()) == []
