"""A write that fails for want of space or permission is one line naming the path being written
and the cause, and leaves no partial file behind: the atomic writers, checkpoints and the runner."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from factstore import __main__ as runner
from factstore import io
from factstore.dilution import mlm
from factstore.errors import WriteFailed

TABLE = pd.DataFrame({"book": ["Dune"], "author": ["Frank Herbert"]})


def _full_disk(*args, **kwargs):
    """What write() raises on a full disk: errno ENOSPC and no file name."""
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_writing_a_table_names_the_path_and_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "results" / "x.csv"
    monkeypatch.setattr(pd.DataFrame, "to_csv", _full_disk)
    with pytest.raises(WriteFailed) as error:
        io.write_table(TABLE, target)
    assert str(error.value) == f"no space left on device writing {target}"
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(target)
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize("code, cause", [(errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied"),
                                         (errno.EPERM, "operation not permitted")])
def test_an_unwritable_folder_names_the_path_not_the_temporary_file(tmp_path, monkeypatch, code, cause):
    target = tmp_path / "x.json"
    real_open = os.open

    def refuse(file, *args, **kwargs):
        if Path(file).parent == tmp_path:
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(WriteFailed) as error:
        io.write_json({"a": 1}, target)
    assert str(error.value).lower() == f"{cause} writing {target}"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rename_removes_the_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "figure.txt"
    def refuse(source, destination):
        raise OSError(errno.EACCES, "Permission denied", str(source), str(destination))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(WriteFailed, match=f"^permission denied writing {target}$"):
        io.write_text("text", target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_for_real(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(WriteFailed, match=f"^permission denied writing {folder / 'x.csv'}$"):
            io.write_table(TABLE, folder / "x.csv")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_reading_another_file_keeps_its_own_error(tmp_path):
    unreadable = tmp_path / "elsewhere" / "source.csv"
    with pytest.raises(FileNotFoundError):  # not a write failure: no WriteFailed
        with io.atomic_path(tmp_path / "out" / "copy.csv") as tmp:
            tmp.write_bytes(unreadable.read_bytes())
    assert list((tmp_path / "out").iterdir()) == []


def test_a_checkpoint_on_a_full_disk_names_its_path_and_leaves_nothing(tmp_path, monkeypatch):
    checkpoint = tmp_path / "checkpoints" / "pretrain.pt"
    real_save = torch.save

    def half_then_full(payload, handle):
        handle.write(b"half a checkpoint")
        _full_disk()

    monkeypatch.setattr(torch, "save", half_then_full)
    with pytest.raises(WriteFailed, match=f"^no space left on device writing {checkpoint}$"):
        mlm.save_atomically({"step": 1}, checkpoint)
    assert list(checkpoint.parent.iterdir()) == []
    monkeypatch.setattr(torch, "save", real_save)
    mlm.save_atomically({"step": 2, "weights": torch.ones(3)}, checkpoint)
    assert io.load_tensors(checkpoint)["step"] == 2


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_torch_writing_to_a_full_device_raises_an_os_error():
    """The reason save_tensors hands torch a Python file: ENOSPC surfaces as an OSError."""
    with pytest.raises(OSError) as error, open("/dev/full", "wb") as handle:
        torch.save({"weights": torch.zeros(100_000)}, handle)
    assert error.value.errno == errno.ENOSPC


def _table_step(params, inputs, context):
    return {"table": TABLE}


def test_the_runner_prints_a_full_disk_as_one_line_naming_the_output(tmp_path, capsys, monkeypatch):
    target = tmp_path / "results" / "x.csv"
    monkeypatch.setattr(runner, "resolve_step", lambda name: _table_step)
    monkeypatch.setattr(pd.DataFrame, "to_csv", _full_disk)
    status = runner.main(["any.step", "--output", f"table={target}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(lines) == 1
    assert lines[0] == (f"factstore: error: step any.step failed (nothing written): no space left on device writing "
                        f"{target}; {runner.FILE_SYSTEM_ERRORS[errno.ENOSPC]}")
    assert list(target.parent.iterdir()) == []


def test_an_unnamed_file_system_error_names_the_outputs(tmp_path, capsys, monkeypatch):
    target = tmp_path / "x.csv"
    monkeypatch.setattr(runner, "resolve_step", lambda name: _full_disk)
    status = runner.main(["any.step", "--output", f"table={target}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(lines) == 1
    assert f"No space left on device (writing {target})" in lines[0] and "(a file)" not in lines[0]
