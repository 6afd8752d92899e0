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
Saved tensors are read with `load_tensors` (weights_only=True): never a pickled object.
"""

from __future__ import annotations

import contextlib
import io as io_module
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from factstore.errors import DataProblem, UnsafeFile

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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success rename it to `path`, on error delete it.

    The temporary name keeps the suffix, so writers that infer the format from it still work. It is
    created with mode 0666 minus the umask (what `open(path, "w")` would give), not mkstemp's 0600.
    Leftovers of an earlier killed write of the same path are deleted first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_temporary_files(path)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMPORARY_MARKER}{path.suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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


def check_unchanged(path: str | os.PathLike) -> None:
    """Raise InputChanged when `path`'s sha256 differs from the one in its sidecar; files without
    a sidecar or whose sidecar records no sha256 (written before it did) are not checked."""
    path = Path(path)
    sidecar = sidecar_path(path)
    if not path.is_file() or not sidecar.is_file():
        return
    record = read_json(sidecar)
    if "sha256" not in record or sha256_file(path) == record["sha256"]:
        return
    rows = ""
    if "rows" in record:
        try:
            rows = f"; {record['rows']} rows when written, {len(read_table(path))} now"
        except DataProblem as error:
            rows = f"; {record['rows']} rows when written, now unreadable: {error}"
    raise InputChanged(f"{path}: its bytes differ from those step {record.get('step', '?')} wrote (sha256 "
                       f"{record['sha256'][:12]}... in {sidecar.name}){rows}; the file changed after it was made: "
                       "delete it and rerun the rule that makes it")


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
