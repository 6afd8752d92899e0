"""No leftovers (checkpoint temporary files under the cleanup pattern,
stale sidecars), integers checked as integers, and every error the runner can name (no CUDA, no
space, no permission, a bad table, an unsafe file) printed as one line naming the step and the
file, exit 1, with no partial set of outputs."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from factstore import __main__ as runner
from factstore import config, io
from factstore.__main__ import main, run_step
from factstore.dilution import mlm
from factstore.experiments.runtimes import table as runtimes_table
from conftest import SMOKE, REPOSITORY

HEBBIAN = {"d": [8], "alphas": [0.1], "seeds": 1, "seed": 0, "chunk_size": 64}


def two_tables(params, inputs, context):
    """A step with two outputs (read its input table when given one)."""
    if "table" in inputs:
        io.read_table(inputs["table"])
    return {"first": pd.DataFrame({"a": [1]}), "second": pd.DataFrame({"b": [2]})}


@pytest.fixture
def fake_step(monkeypatch):
    monkeypatch.setattr(runner, "resolve_step", lambda name: two_tables)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ integers


@pytest.mark.parametrize("value", [2.0, True, "2"])
def test_an_integer_key_refuses_a_float_a_bool_and_a_string(value):
    smoke = config.load(REPOSITORY / SMOKE)
    smoke["assoc"]["hebbian"]["seeds"] = value
    with pytest.raises(config.ConfigError, match=r"assoc\.hebbian\.seeds = .*must be of type integer"):
        config.validate(smoke)


def test_a_number_key_still_takes_an_integer():
    smoke = config.load(REPOSITORY / SMOKE)
    smoke["assoc"]["trained"]["learning_rate"] = 1
    config.validate(smoke)


# ------------------------------------------------------------------ one-line errors


def test_no_cuda_is_one_line_naming_the_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FACTSTORE_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    status = main(["assoc.hebbian", "--params", json.dumps(HEBBIAN), "--output", f"table={tmp_path / 't.csv'}"])
    error = one_error_line(capsys)
    assert status == 1 and "assoc.hebbian" in error and "FACTSTORE_DEVICE=cuda" in error and "CUDA is not available" in error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "free space"), (errno.EACCES, "permissions"),
                                         (errno.EROFS, "read-only")])
def test_a_file_system_error_is_one_line_naming_the_file_and_leaves_no_partial_outputs(
        tmp_path, capsys, monkeypatch, fake_step, code, words):
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    real_write = io.write_table

    def failing_write(table, path):
        if Path(path) == second:
            raise OSError(code, "simulated", str(path))
        real_write(table, path)

    monkeypatch.setattr(io, "write_table", failing_write)
    status = main(["any.step", "--output", f"first={first}", "--output", f"second={second}"])
    error = one_error_line(capsys)
    assert status == 1 and "any.step" in error and str(second) in error and words in error
    assert list(tmp_path.iterdir()) == []  # the first output, written before the failure, is gone too


def test_an_unnamed_os_error_still_raises(tmp_path, monkeypatch, fake_step):
    def failing_write(table, path):
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(io, "write_table", failing_write)
    with pytest.raises(OSError):
        main(["any.step", "--output", f"first={tmp_path / 'a.csv'}", "--output", f"second={tmp_path / 'b.csv'}"])


@pytest.mark.parametrize("content, where", [
    (b"book,author\nDune,Frank Herbert\n\xff\xfe\x00garbage\x9c\n", ":3:"),
    (b"book,author\nDune,Frank Herbert\nA,B,C,D\n", "line 3"),
    (b"", "No columns"),
])
def test_a_bad_table_is_one_line_naming_the_file_and_line(tmp_path, capsys, fake_step, content, where):
    bad = tmp_path / "facts.csv"
    bad.write_bytes(content)
    status = main(["any.step", "--input", f"table={bad}", "--output", f"first={tmp_path / 'a.csv'}",
                   "--output", f"second={tmp_path / 'b.csv'}"])
    error = one_error_line(capsys)
    assert status == 1 and "any.step" in error and str(bad) in error and where in error


# ------------------------------------------------------------------ leftovers


def test_a_failed_rerun_leaves_no_stale_sidecar_and_runtimes_skips_orphans(tmp_path, monkeypatch):
    target = tmp_path / "results" / "t.csv"
    run_step("assoc.hebbian", HEBBIAN, {}, {"table": str(target)})
    assert io.sidecar_path(target).exists()
    target.unlink()  # what Snakemake does to a failed job's outputs; the sidecar stays behind
    assert runtimes_table({"folders": [str(tmp_path / "results")]}, {}, None)["runtimes"].empty
    monkeypatch.setattr(runner, "resolve_step", lambda name: lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run_step("assoc.hebbian", HEBBIAN, {}, {"table": str(target)})
    assert list(target.parent.iterdir()) == []  # the old sidecar went before the step ran


def test_a_checkpoint_save_that_fails_leaves_nothing_and_uses_the_cleanup_pattern(tmp_path, monkeypatch):
    names = []
    real_save = torch.save

    def full_disk(payload, handle):
        names.append(Path(handle.name).name)
        handle.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    checkpoint = tmp_path / "checkpoints" / "ckpt.pt"
    with pytest.raises(OSError):
        mlm.save_atomically({"step": 1}, checkpoint)
    assert list(checkpoint.parent.iterdir()) == []
    assert Path(names[0]).match(".*.factstore-tmp*")  # .dvcignore's pattern; the next write deletes a killed one's
    monkeypatch.setattr(torch, "save", real_save)
    mlm.save_atomically({"step": 2}, checkpoint)
    assert io.load_tensors(checkpoint) == {"step": 2} and [p.name for p in checkpoint.parent.iterdir()] == ["ckpt.pt"]


# ------------------------------------------------------------------ derived tables (item 5)


def facts_table(params, inputs, context):
    return {"facts": pd.DataFrame({"book": [f"book {i}" for i in range(100)], "author": [f"author {i}" for i in range(100)]})}


@pytest.fixture
def prepared(tmp_path, monkeypatch) -> Path:
    """data/processed/facts.csv made by a step (its sidecar records rows and sha256)."""
    table = tmp_path / "data" / "processed" / "facts.csv"
    monkeypatch.setattr(runner, "resolve_step", lambda name: facts_table)
    run_step("prepare.facts", {}, {}, {"facts": str(table)})
    monkeypatch.setattr(runner, "resolve_step", lambda name: two_tables)
    return table


def read_with_runner(table: Path, tmp_path: Path) -> int:
    return main(["study.train", "--input", f"table={table}", "--output", f"first={tmp_path / 'a.csv'}",
                 "--output", f"second={tmp_path / 'b.csv'}"])


def test_a_prepared_table_records_its_rows_and_sha256_and_reads_when_unchanged(prepared, tmp_path):
    record = io.read_json(io.sidecar_path(prepared))
    assert record["rows"] == 100 and record["sha256"] == io.sha256_file(prepared)
    assert read_with_runner(prepared, tmp_path) == 0


@pytest.mark.parametrize("damage, words", [
    (lambda lines: lines[:61], "100 rows when written, 60 now"),  # truncated
    (lambda lines: lines + ["book 3,another author"], "100 rows when written, 101 now"),  # a repeated book
    (lambda lines: lines[:3] + ["\udcff\udcfegarbage"] + lines[3:], ":4: not UTF-8"),  # binary garbage on line 4
])
def test_a_damaged_prepared_table_is_one_line_naming_the_file_and_rows(prepared, tmp_path, capsys, damage, words):
    lines = prepared.read_text().splitlines()
    prepared.write_bytes("\n".join(damage(lines)).encode("utf-8", "surrogateescape") + b"\n")
    status = read_with_runner(prepared, tmp_path)
    error = one_error_line(capsys)
    assert status == 1 and "study.train" in error and str(prepared) in error and "prepare.facts wrote" in error
    assert words in error and not (tmp_path / "a.csv").exists()


# ------------------------------------------------------------------ timings only in sidecars (item 7)


@pytest.mark.parametrize("column", ["seconds", "train_seconds", "wall_time_s"])
def test_a_result_table_with_a_wall_time_column_is_refused(tmp_path, monkeypatch, column):
    monkeypatch.setattr(runner, "resolve_step", lambda name: lambda *args: {"table": pd.DataFrame({column: [0.1]})})
    with pytest.raises(RuntimeError, match=f"wall-time column.*{column}"):
        run_step("study.timed", {}, {}, {"table": str(tmp_path / "t.csv")})
    assert list(tmp_path.iterdir()) == []
    run_step("runtimes.table", {}, {}, {"table": str(tmp_path / "t.csv")})  # the one table of times


def test_no_result_row_builder_writes_a_wall_time():
    from factstore.mlp.results import TABLE_COLUMNS

    assert not [column for column in TABLE_COLUMNS if runner.WALL_CLOCK_COLUMN.search(column)]
