"""Atomic result files and their provenance sidecars.

Every file a step produces is first written to a temporary name in the same folder and then
renamed into place (atomic: same file system), so a crash never leaves a half-written result that
a later run would trust. The file gets the mode the umask gives (e.g. 0644 or group-writable 0664
on a shared cluster file system), like any file the user creates. A temporary file is named
`.<name>.<random>.factstore-tmp<suffix>`: a process killed mid-write (SIGKILL, out of memory, a
cluster time limit) leaves it behind, and the next write of the same output deletes it first;
`.dvcignore` keeps DVC from storing one in between.
Next to each result `X` sits `X.prov.json` (see `factstore.provenance`): downstream rules never
read the sidecars, so volatile facts (commit, wall time) never trigger reruns. The sidecar also
records `X`'s sha256 when it was written; `check_unchanged` compares it before a step reads `X`.
A write that fails for want of space or permission (a full disk, a read-only folder) is
WriteFailed naming the path being written, never the temporary file; nothing is left behind.
A table under a folder with a `manifest.json` (data/processed) is also checked against the sha256
the manifest records, so deleting the sidecar does not switch the check off.
Saved tensors are read with `load_tensors` (weights_only=True) and written with `save_tensors`,
.npz archives read with `load_arrays` (allow_pickle=False): never a pickled object.
"""

from __future__ import annotations

import contextlib
import errno
import io as io_module
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from factstore.errors import DataProblem, UnsafeFile, WriteFailed

SIDECAR_SUFFIX = ".prov.json"


def sidecar_path(path: str | os.PathLike) -> Path:
    """The provenance sidecar of a result file: `results/x.csv` -> `results/x.csv.prov.json`."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


TEMPORARY_MARKER = ".factstore-tmp"


def temporary_files(path: str | os.PathLike) -> list[Path]:
    """Leftover temporary files of `path` (from a writer that was killed), oldest name first."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    return sorted(path.parent.glob(f".{_glob_escape(path.name)}.*{TEMPORARY_MARKER}*"))


def remove_temporary_files(path: str | os.PathLike) -> list[Path]:
    """Delete the leftovers of earlier, killed writes of `path`; returns what was deleted.

    Safe because one output has one writer at a time (Snakemake locks its working directory).
    """
    removed = temporary_files(path)
    for leftover in removed:
        leftover.unlink(missing_ok=True)
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
"""The errno values of a write that failed for want of space or permission: reported as WriteFailed."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success rename it to `path`, on error delete it.

    The temporary name keeps the suffix, so writers that infer the format from it still work. It is
    created with mode 0666 minus the umask (what `open(path, "w")` would give), not mkstemp's 0600.
    Leftovers of an earlier killed write of the same path are deleted first. A full disk, an
    exhausted quota or a read-only or unwritable folder, met while making the folder, writing the
    temporary file or renaming it, is WriteFailed naming `path` and the cause.
    """
    path = Path(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_temporary_files(path)
        tmp = _new_temporary(path)
        yield tmp
        os.replace(tmp, path)
    except OSError as error:
        if not _failed_writing(error, path):
            raise
        raise WriteFailed(error.errno, error.strerror or os.strerror(error.errno), str(path)) from error
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):  # the write's own error is the one to report
                tmp.unlink(missing_ok=True)


def _new_temporary(path: Path) -> Path:
    """Create `.<name>.<random>.factstore-tmp<suffix>` next to `path` (empty, mode 0666 - umask)."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMPORARY_MARKER}{path.suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def _failed_writing(error: OSError, path: Path) -> bool:
    """Whether `error` is a write of `path` failing for want of space or permission: its errno says
    so and it names no file (write() does not), or a file beside `path` (its temporary file) or a
    folder above it. An error reading some other file (a mirror's copy) keeps its own name."""
    if error.errno not in WRITE_FAILURES:
        return False
    if error.filename is None:
        return True
    named = Path(os.fsdecode(error.filename))
    return named.parent == path.parent or named in path.parents


def write_table(table: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a tidy table atomically (CSV, or Parquet when the suffix says so)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix == ".parquet":
            table.to_parquet(tmp, index=False)
        elif path.suffix == ".csv":
            table.to_csv(tmp, index=False, float_format="%.10g")
        else:
            raise ValueError(f"cannot write a table to {path}: use a .csv or .parquet file name")


class BadTable(DataProblem):
    """A table file that does not parse (binary garbage, a broken row, no header): the message
    names the file and, where it can be told, the line."""


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a table written by `write_table`; a file that does not parse is BadTable naming it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"result table {path} does not exist; run the rule that makes it first")
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except UnicodeDecodeError:
        raise BadTable(f"{path}:{_first_undecodable_line(path)}: not UTF-8 text (a damaged or binary file); "
                       "delete it and rerun the rule that makes it") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as error:
        raise BadTable(f"{path}: not a readable table ({str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__}); "
                       "delete it and rerun the rule that makes it") from None


def _first_undecodable_line(path: Path) -> int:
    """The 1-based number of the first line of `path` that is not UTF-8."""
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return 1


def concat_tables(inputs: dict[str, Path], prefix: str, empty: pd.DataFrame | None = None) -> pd.DataFrame:
    """The tables of every input whose name starts with `prefix` (in name order), stacked; `empty`
    (default: no columns) when there is none."""
    tables = [read_table(path) for name, path in sorted(inputs.items()) if name.startswith(prefix)]
    if not tables:
        return pd.DataFrame() if empty is None else empty
    return pd.concat(tables, ignore_index=True)


def write_json(data: Any, path: str | os.PathLike) -> None:
    """Write JSON atomically, with sorted keys so equal content gives equal bytes."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def read_yaml(path: str | os.PathLike) -> Any:
    """A project file in YAML (the safe subset), read with libyaml's loader where PyYAML was built
    with it: the same documents ~10x faster. Every Snakemake start reads the config schema and the
    claims registry (~140 kB), which took ~1 s with the pure-Python loader."""
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def write_figure(figure, path: str | os.PathLike) -> Path:
    """Save a matplotlib figure atomically in the format its suffix names (.png, .pdf, .svg)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        # No timestamps or software tags in the file: a rerun gives the same bytes.
        metadata = {"CreationDate": None} if path.suffix == ".pdf" else {"Software": None}
        figure.savefig(tmp, dpi=150, bbox_inches="tight", metadata=metadata)
    return path


def _json_default(value: Any) -> Any:
    """Make numpy scalars and arrays, and paths, JSON-serialisable."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"cannot store {type(value).__name__} in JSON")


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes (read in 1 MiB blocks)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


class InputChanged(DataProblem):
    """An input file whose bytes differ from those its writer recorded in the file's sidecar
    (truncated, edited or swapped after the step that made it): the message names the file, the
    step that wrote it and, for a table, the rows then and now."""


MANIFEST_NAME = "manifest.json"
"""The manifest of a folder of prepared tables (data/processed/manifest.json): under "files", each
table's path (as the workflow names it), rows and sha256."""


def manifest_record(path: str | os.PathLike) -> tuple[Path, dict] | None:
    """(the manifest, its record of `path`) when `path`'s folder has a manifest that lists a file
    of `path`'s name with a sha256, else None. An unreadable manifest is a DataProblem naming it."""
    path = Path(path)
    manifest = path.parent / MANIFEST_NAME
    if path.name == MANIFEST_NAME or not manifest.is_file():
        return None
    try:
        files = read_json(manifest).get("files", {})
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise DataProblem(f"{manifest}: not a readable manifest; delete it and rerun the rule that makes it") from None
    for record in files.values() if isinstance(files, dict) else ():
        if isinstance(record, dict) and "sha256" in record and Path(str(record.get("path", ""))).name == path.name:
            return manifest, record
    return None


def check_unchanged(path: str | os.PathLike) -> None:
    """Raise InputChanged when `path`'s sha256 differs from the one its writer recorded: in its
    sidecar, or, where the sidecar is gone, in its folder's manifest.json (a prepared table). The
    file is hashed once. The sidecar is the newer record where both exist (a rerun prepare job
    rewrites it before the manifest job runs again); a file recorded in neither is not checked."""
    path = Path(path)
    if not path.is_file():
        return
    sidecar = sidecar_path(path)
    if sidecar.is_file():
        record = read_json(sidecar)
        where, writer = sidecar.name, f"step {record.get('step', '?')}"
        remedy = "delete it and rerun the rule that makes it"
    else:
        found = manifest_record(path)
        if found is None:
            return
        manifest, record = found
        where, writer = f"{manifest}, no {sidecar.name} beside it", "the prepare step"
        remedy = f"rerun the prepare rule that makes it (snakemake --forcerun {record.get('path') or path})"
    if "sha256" not in record or sha256_file(path) == record["sha256"]:
        return
    rows = ""
    if "rows" in record:
        try:
            rows = f"; {record['rows']} rows when written, {len(read_table(path))} now"
        except DataProblem as error:
            rows = f"; {record['rows']} rows when written, now unreadable: {error}"
    raise InputChanged(f"{path}: its bytes differ from those {writer} wrote (sha256 {record['sha256'][:12]}... in "
                       f"{where}){rows}; the file changed after it was made: {remedy}")


def load_tensors(source: str | os.PathLike | bytes) -> Any:
    """Tensors and plain containers saved with torch.save, loaded with weights_only=True (onto the
    CPU): a file that holds any other pickled object (a class, a `__reduce__` payload that would run
    code) is refused with UnsafeFile naming it, before anything in it runs. `source`: a path, or
    the file's bytes."""
    import pickle

    import torch

    name = "the given bytes" if isinstance(source, bytes) else str(source)
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        buffer = io_module.BytesIO(data)
        return torch.load(buffer, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        detail = next((line for line in lines if "GLOBAL" in line or "Unsupported" in line), lines[0])
        raise UnsafeFile(f"refused to load {name}: it holds pickled objects, not only tensors and plain data "
                         f"({detail[:200]})") from None


def save_tensors(payload: Any, path: str | os.PathLike) -> None:
    """torch.save `payload` (tensors and plain containers) to `path` atomically. torch writes
    through a Python file object: given a file name, its own writer reports a full disk as a bare
    RuntimeError naming no file; this way the OSError surfaces, as WriteFailed naming `path`."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(payload, handle)


def load_arrays(path: str | os.PathLike) -> dict[str, Any]:
    """The arrays of an .npz archive by name, read with allow_pickle=False: an archive (or a file)
    holding pickled Python objects, which loading would run, is refused with UnsafeFile naming it."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as error:
        if "allow_pickle" not in str(error):
            raise
        raise UnsafeFile(f"refused to load {path}: it holds pickled Python objects, not only arrays of numbers or "
                         "text; delete it and rerun the rule that makes it") from None
