"""The errors a step reports as one line instead of a traceback (`python -m factstore` exits 1).

Their classes live where they are raised (factstore.data.fetch, factstore.data.prepare,
factstore.training) and derive from these bases, so the runner needs to import only this module:
editing the data layer or a training loop then reruns only the rules whose steps use them.
"""

from __future__ import annotations


class DataProblem(Exception):
    """Bad or missing data: a failed fetch, a wrong checksum, a malformed row (the message names
    the file, line and field)."""


class TrainingDiverged(RuntimeError):
    """A training run produced a non-finite loss or parameter (the message names the setting and
    the training step)."""


class UnsafeFile(DataProblem):
    """A saved model or checkpoint that holds pickled objects (code that loading would run) rather
    than only tensors and plain data: refused, never executed (the message names the file)."""


class DeviceUnavailable(RuntimeError):
    """The requested device (--device or $FACTSTORE_DEVICE) is not on this machine."""


class ResultWarning(UserWarning):
    """A step finished, but a result needs a reader's eye: every probe of a capacity search failed
    (the capacity lies outside the searched range), or a training ended far from its target. The
    runner prints each in the job's log and keeps it in the outputs' sidecars; the claims report
    notes it beside the study's claims."""


class WriteFailed(OSError):
    """A file that could not be written: a full disk, an exhausted quota, a read-only or
    unwritable folder. `errno` and `strerror` are the cause's, `filename` the path being written
    (never the temporary file); the message says both in one line, e.g.
    "no space left on device writing results/x.csv"."""

    def __str__(self) -> str:
        cause = self.strerror or "error"
        return f"{cause[:1].lower()}{cause[1:]} writing {self.filename}"
