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

The text fits the terminal's width (shutil.get_terminal_size; 100 columns where the output is not
a terminal, never under MINIMUM_WIDTH): a table cell too long for its column is shortened with an
ellipsis, other lines are wrapped, so no line is wider.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

from factstore import claims_report, io

Record = dict[str, Any]
WIDTH = 100  # output lines wrap here where the output is not a terminal
MINIMUM_WIDTH = 40
UNKNOWN = "unknown"
HINT = "give a run directory ('.', runs/paper) or its results/claims.json"


def terminal_width() -> int:
    """The terminal's width in columns ($COLUMNS first), WIDTH where the output is not a terminal."""
    return max(shutil.get_terminal_size((WIDTH, 24)).columns, MINIMUM_WIDTH)


def shorten(cell: str, width: int) -> str:
    """`cell` cut to `width` characters, its last one an ellipsis where it was cut."""
    return cell if len(cell) <= width else cell[:width - 1] + "…"


def column_widths(table: list[list[str]], width: int, gap: int = 2) -> list[int]:
    """Each column's width: its longest cell, the widest column narrowed one character at a time
    (down to 4) until a row of all columns and their gaps fits `width`."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    while sum(widths) + gap * (len(widths) - 1) > width and max(widths) > 4:
        widths[widths.index(max(widths))] -= 1
    return widths


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


def description_lines(label: str, description: dict[str, Any], width: int = WIDTH) -> list[str]:
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
    return [wrapped for line in lines for wrapped in _wrap(line, "    ", width)]


def _wrap(text: str, indent: str, width: int = WIDTH) -> list[str]:
    """`text` wrapped at `width`, continuation lines indented four more than the first (a word
    longer than a line, a path, is broken)."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_on_hyphens=False)


def _wrap_values(which: str, measured: str, width: int = WIDTH) -> list[str]:
    """'    A: x = 1; y = 2' wrapped at `width` between values, inside a 'metric = value' only where
    that alone is wider than a line."""
    lines = [f"    {which}: "]
    for number, part in enumerate(measured.split("; ")):
        piece = part if number == 0 else "; " + part
        if number and len(lines[-1]) + len(piece) > width:
            lines[-1] += ";"
            lines.append("        " + part)
        else:
            lines[-1] += piece
    fitted = []
    for line in lines:
        indent = line[:len(line) - len(line.lstrip())]
        fitted += [line] if len(line) <= width else _wrap(line.lstrip(), indent, width)
    return fitted


def comparison_lines(name_a: str, before: list[Record], description_a: dict[str, Any],
                     name_b: str, after: list[Record], description_b: dict[str, Any],
                     changed_only: bool = False, width: int = WIDTH) -> list[str]:
    """The comparison, no line wider than `width`: each run's counts and what its files record,
    one row per claim (both statuses and what changed, the measured values indented below where
    they differ; with `changed_only`, only the claims whose status or values changed) and the
    count of changes."""
    lines = [*_wrap(f"A = {name_a}: {claims_report.count_line(before)}", "", width),
             *description_lines("A", description_a, width),
             *_wrap(f"B = {name_b}: {claims_report.count_line(after)}", "", width),
             *description_lines("B", description_b, width)]
    scales_a, scales_b = set(description_a["scales"].values()), set(description_b["scales"].values())
    if len(scales_a) == len(scales_b) == 1 and scales_a != scales_b:  # each run's files agree on one
        scale_a, scale_b = scales_a.pop(), scales_b.pop()
        lines += _wrap(f"A and B ran at different scales ({scale_a}, {scale_b}): a change may be a scale effect.", "", width)
    every_row = claims_report.changes(before, after)
    rows = [row for row in every_row if row["changed"]] if changed_only else every_row
    table = [["id", "A: status", "B: status", "changed"]]
    table += [[r["id"], r["status_a"], r["status_b"], r["changed"]] for r in rows]
    widths = column_widths(table, width)
    lines += ["", *_wrap("Measured values are shown below a claim where the two runs' values differ.", "", width), ""]
    for number, cells in enumerate(table):
        lines.append("  ".join(shorten(cell, column).ljust(column) for cell, column in zip(cells, widths)).rstrip())
        row = rows[number - 1] if number else None
        if row and row["measured_a"] != row["measured_b"]:
            lines += _wrap_values("A", row["measured_a"], width) + _wrap_values("B", row["measured_b"], width)
    changed = [r for r in every_row if r["changed"]]
    statuses = sum(r["changed"] == "status" for r in changed)
    values = sum(r["changed"] == "value" for r in changed)
    lines += ["", *_wrap(f"{len(changed)} of {len(every_row)} claims changed ({statuses} in status, "
                         f"{values} in value only).", "", width)]
    return lines


def compare_runs(run_a: str, run_b: str, changed_only: bool = False, width: int | None = None) -> str:
    """The comparison text of two runs, no line wider than `width` (default: the terminal's,
    terminal_width); RunError (one line) when either is not a claims report."""
    path_a, path_b = claims_path(run_a), claims_path(run_b)
    before, after = load_records(path_a), load_records(path_b)
    lines = comparison_lines(run_a, before, describe(path_a, before), run_b, after, describe(path_b, after),
                             changed_only, width or terminal_width())
    return "\n".join(lines) + "\n"
