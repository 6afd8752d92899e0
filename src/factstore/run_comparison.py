"""Two runs' claims side by side, read from each run's own files (`python -m factstore compare`).

A run is a run directory ('.', 'runs/paper') holding results/claims.json, or that claims.json
itself. What a run is (its scale, config file and commit) is read from the files the claims step
wrote, never from the name the user gives it, so a run directory called runs/paper that ran at
smoke scale is shown as smoke:

- results/claims.json: the claim records; each records the scale it was judged at (`run_scale`);
- results/claims.json.prov.json, its provenance sidecar (factstore.provenance): the step's
  parameters (`scale`, and `config_file` / `config_overrides` where the workflow passes them) and
  the git commit.

Where these files disagree (claims.json says default, the sidecar smoke), each file's value is
shown and the disagreement said; a field no file records reads "unknown".

A path that is not a claims report (missing, truncated, claims_metrics.json, claims.md) raises
RunError with one line naming the file and what is wrong.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from factstore import claims_report, io

Record = dict[str, Any]
WIDTH = 100  # output lines wrap here
UNKNOWN = "unknown"
HINT = "give a run directory ('.', runs/paper) or its results/claims.json"


class RunError(Exception):
    """A run that cannot be compared: one line naming the file and what is wrong with it."""


def claims_path(run: str | Path) -> Path:
    """The claims.json of `run` (a run directory or the file itself), which must exist."""
    path = Path(run)
    if not path.exists():
        raise RunError(f"{run}: no such run directory or file; {HINT}")
    if path.is_dir():
        claims = path / "results" / "claims.json"
        if not claims.is_file():
            raise RunError(f"{claims}: missing, so {run} is not a finished run directory; "
                           "run the workflow's claims target there first")
        return claims
    return path


def _shape_problem(data: Any) -> str | None:
    """Why `data` is not a list of claim records with an 'id' and a 'status', or None."""
    if isinstance(data, dict):
        looks_flat = bool(data) and all(isinstance(value, dict) for value in data.values())
        return ("a JSON object, not a list of claim records"
                + (" (the flat metrics, results/claims_metrics.json?)" if looks_flat else ""))
    if not isinstance(data, list):
        return f"a JSON {type(data).__name__}, not a list of claim records"
    if not data:
        return "an empty list: no claim records"
    for number, record in enumerate(data, 1):
        if not isinstance(record, dict):
            return f"item {number} is a JSON {type(record).__name__}, not a claim record"
        for key in ("id", "status"):
            if not isinstance(record.get(key), str):
                return f"record {number} has no '{key}' (a claim record has at least 'id' and 'status')"
        for key in ("measured", "standard_errors", "robustness"):
            if not isinstance(record.get(key) or {}, dict):
                return f"record {number} ({record['id']}): '{key}' is not a JSON object"
        if record["status"] == "UNTESTABLE" and not isinstance(record.get("check_status"), str):
            return f"record {number} ({record['id']}) is UNTESTABLE without the checks' own 'check_status'"
    return None


def load_records(run: str | Path) -> list[Record]:
    """The claim records of `run`, checked to be a claims report: a JSON list of records with at
    least 'id' and 'status' (what factstore.experiments.claims.report writes)."""
    path = claims_path(run)
    try:
        data = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise RunError(f"{path}: not a claims report (binary, not JSON text); {HINT}") from None
    except json.JSONDecodeError as error:
        if path.suffix != ".json":
            raise RunError(f"{path}: not a claims report: a {path.suffix or 'text'} file, not JSON; {HINT}") from None
        raise RunError(f"{path}: not a claims report: invalid JSON, truncated or corrupt ({error.msg}: line "
                       f"{error.lineno} column {error.colno}); rerun the workflow's claims target") from None
    except OSError as error:
        raise RunError(f"{path}: cannot be read ({error.strerror}); {HINT}") from None
    problem = _shape_problem(data)
    if problem:
        raise RunError(f"{path}: not a claims report: {problem}; {HINT}")
    return data


def _json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or {} when it is missing, unreadable or not an object: the side
    files only describe a run, so a damaged one leaves its fields unknown."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text(value: Any) -> str | None:
    """A recorded value as text ('a, b' for a list), None where nothing usable is recorded."""
    if isinstance(value, list):
        value = ", ".join(str(item) for item in value if item not in (None, ""))
    return str(value) if value not in (None, "", {}) else None


def describe(path: Path, records: list[Record]) -> dict[str, Any]:
    """What a run's own files record about it (`path` its claims.json, `records` what it holds):
    {'scales': {file name: scale}, 'config_file', 'config_overrides', 'commit'}, each None where no
    file records it."""
    sidecar = _json_object(io.sidecar_path(path))
    params = sidecar.get("params") if isinstance(sidecar.get("params"), dict) else {}
    scales = {
        path.name: _text(sorted({str(r["run_scale"]) for r in records if r.get("run_scale") is not None})),
        io.sidecar_path(path).name: _text(params.get("scale")),
    }
    git = sidecar.get("git") if isinstance(sidecar.get("git"), dict) else {}
    commit = _text(git.get("commit"))
    if commit:
        commit = commit[:12] + (" (with uncommitted changes)" if git.get("dirty") else "")
    overrides = params.get("config_overrides")
    return {
        "scales": {name: scale for name, scale in scales.items() if scale},
        "config_file": _text(params.get("config_file", sidecar.get("config_file"))),
        "config_overrides": overrides if isinstance(overrides, dict) and overrides else None,
        "commit": commit,
    }


def scale_of(description: dict[str, Any]) -> str:
    """The run's scale when its files agree on one, else 'unknown' (none) or each file's value."""
    values = set(description["scales"].values())
    if not values:
        return UNKNOWN
    if len(values) == 1:
        return values.pop()
    return " / ".join(f"{scale} ({name})" for name, scale in description["scales"].items())


def description_lines(label: str, description: dict[str, Any]) -> list[str]:
    """'    scale smoke, config file config/smoke.yaml, commit 412e9e3dc475', then a note where the
    run's files disagree on its scale or the scale was set on the command line."""
    lines = [f"scale {scale_of(description)}, config file {description['config_file'] or UNKNOWN}, "
             f"commit {description['commit'] or UNKNOWN}"]
    if len(set(description["scales"].values())) > 1:
        lines.append(f"note: {label}'s files disagree on its scale; each file's value is shown above")
    overrides = description["config_overrides"] or {}
    if "scale" in overrides:
        lines.append(f"note: {label}'s scale was set on the command line (--config scale={overrides['scale']}), "
                     f"over its config file {description['config_file'] or UNKNOWN}")
    return [wrapped for line in lines for wrapped in _wrap(line, "    ")]


def _wrap(text: str, indent: str) -> list[str]:
    """`text` wrapped at WIDTH, continuation lines indented four more than the first."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_long_words=False, break_on_hyphens=False)


def _wrap_values(which: str, measured: str) -> list[str]:
    """'    A: x = 1; y = 2' wrapped at WIDTH between values, never inside 'metric = value'."""
    lines = [f"    {which}: "]
    for number, part in enumerate(measured.split("; ")):
        piece = part if number == 0 else "; " + part
        if number and len(lines[-1]) + len(piece) > WIDTH:
            lines[-1] += ";"
            lines.append("        " + part)
        else:
            lines[-1] += piece
    return lines


def comparison_lines(name_a: str, before: list[Record], description_a: dict[str, Any],
                     name_b: str, after: list[Record], description_b: dict[str, Any],
                     changed_only: bool = False) -> list[str]:
    """The comparison: each run's counts and what its files record, one row per claim (both
    statuses and what changed, the measured values indented below where they differ; with
    `changed_only`, the claims that changed alone) and the count of changes."""
    lines = [f"A = {name_a}: {claims_report.count_line(before)}", *description_lines("A", description_a),
             f"B = {name_b}: {claims_report.count_line(after)}", *description_lines("B", description_b)]
    scales_a, scales_b = set(description_a["scales"].values()), set(description_b["scales"].values())
    if len(scales_a) == len(scales_b) == 1 and scales_a != scales_b:  # each run's files agree on one
        scale_a, scale_b = scales_a.pop(), scales_b.pop()
        lines += _wrap(f"A and B ran at different scales ({scale_a}, {scale_b}): a change may be a scale effect.", "")
    every_row = claims_report.changes(before, after)
    rows = [row for row in every_row if row["changed"]] if changed_only else every_row
    table = [["id", "A: status", "B: status", "changed"]]
    table += [[r["id"], r["status_a"], r["status_b"], r["changed"]] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines += ["", "Measured values are shown below a claim where the two runs' values differ.", ""]
    for number, cells in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip())
        row = rows[number - 1] if number else None
        if row and row["measured_a"] != row["measured_b"]:
            lines += _wrap_values("A", row["measured_a"]) + _wrap_values("B", row["measured_b"])
    changed = [r for r in every_row if r["changed"]]
    statuses = sum(r["changed"] == "status" for r in changed)
    values = sum(r["changed"] == "value" for r in changed)
    lines += ["", f"{len(changed)} of {len(every_row)} claims changed ({statuses} in status, {values} in value only)."]
    return lines


def compare_runs(run_a: str, run_b: str, changed_only: bool = False) -> str:
    """The comparison text of two runs; RunError (one line) when either is not a claims report."""
    path_a, path_b = claims_path(run_a), claims_path(run_b)
    before, after = load_records(path_a), load_records(path_b)
    lines = comparison_lines(run_a, before, describe(path_a, before), run_b, after, describe(path_b, after),
                             changed_only)
    return "\n".join(lines) + "\n"
