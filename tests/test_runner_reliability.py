"""Reliability of writes and runs the umask's mode, leftovers of killed writes,
diverging training reported in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from factstore import io
from factstore.__main__ import main, run_step


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
    from factstore.assoc import memory as assoc

    def poisoned(*args, **kwargs):  # a NaN in the data: the loss is NaN from the first step
        x, y = sample_problem(*args, **kwargs)
        x[0, 0, 0] = float("nan")
        return x, y

    sample_problem = assoc.sample_problem
    monkeypatch.setattr(assoc, "sample_problem", poisoned)
    output = tmp_path / "trained.csv"
    params = {"d": 8, "problem": "original", "alphas": [0.5], "seeds": 1, "seed": 0, "max_steps": 50,
              "learning_rate": 0.5, "patience": 10, "min_gain": 0.0}
    code = main(["assoc.trained", "--params", json.dumps(params), "--output", f"table={output}",
                 "--output", f"spectra={tmp_path / 'spectra.csv'}"])
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("factstore: error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert "step assoc.trained diverged" in lines[0] and "learning_rate=0.5" in lines[0]
    assert "at step 1" in lines[0] and '"learning_rate": 0.5' in lines[0]
    assert list(tmp_path.iterdir()) == []
