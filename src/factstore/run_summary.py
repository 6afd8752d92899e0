"""The lines a workflow run prints at its end: where the data came from, the claims' statuses and
the result warnings (after a finished run), or each failed step's one-line error (after a failed one).

The console is quiet (workflow/profiles/default omits Snakemake's job blocks and error block), so
workflow/Snakefile's `onsuccess` and `onerror` handlers print these lines instead. Each function
reads a run directory's files (`run_dir`: the config's `run_dir`, "." for the top run) and
returns the lines to print; `started` (seconds since the epoch, the run's start) keeps out the
files an earlier run left behind.

This module imports no torch at load time: the workflow imports it in the Snakemake process.
"""

from __future__ import annotations

import json
from pathlib import Path

STATUS_ORDER = ("PASS", "FAIL", "UNTESTABLE", "NOT RUN")
MIRRORED_ORIGINS = ("mirror:", "package:")  # a data/raw/*.source.json origin not downloaded
ERROR_PREFIX = "factstore: error:"  # how the step runner (factstore.__main__) starts an error line


def data_origins_line(run_dir: str | Path) -> str:
    """One line on the run's raw data (data/raw/*.source.json): how many files, and which of them
    were downloaded rather than read from the mirror or the package; "" when there is none."""
    reports = [json.loads(path.read_text()) for path in sorted(Path(run_dir, "data", "raw").glob("*.source.json"))]
    if not reports:
        return ""
    downloaded = [r["source"] for r in reports if not str(r.get("origin", "")).startswith(MIRRORED_ORIGINS)]
    return (f"factstore: data: {len(reports)} raw files, checksums verified; "
            + (f"downloaded (not in the mirror): {', '.join(downloaded)}" if downloaded else "none downloaded"))


def claims_line(run_dir: str | Path, started: float) -> str:
    """One line on the claims report this run made (results/claims_summary.json, claims.json): the
    count of each status, the number of distinct result warnings and the report's path; "" when
    the run made no claims report (missing, or written before `started`)."""
    summary, records = Path(run_dir, "results", "claims_summary.json"), Path(run_dir, "results", "claims.json")
    if not (summary.is_file() and records.is_file()) or summary.stat().st_mtime < started:
        return ""
    counts = json.loads(summary.read_text())
    warnings = {w for record in json.loads(records.read_text()) for w in record.get("warnings") or []}
    ordered = [status for status in STATUS_ORDER if status in counts]
    return (f"factstore: claims: {', '.join(f'{counts[status]} {status}' for status in ordered)}; "
            f"{len(warnings)} result warning{'s' if len(warnings) != 1 else ''}: {Path(run_dir, 'results', 'claims.md')}")


def success_lines(run_dir: str | Path, started: float) -> list[str]:
    """The lines a finished run ends with: the data line and the claims line, those not empty."""
    return [line for line in (data_origins_line(run_dir), claims_line(run_dir, started)) if line]


def error_lines(run_dir: str | Path, started: float) -> list[str]:
    """Each step error line (`factstore: error: ...`) in the logs (logs/**/*.log) written since
    `started`, as `<log path>: <line>`, logs in sorted order."""
    lines = []
    for path in sorted(Path(run_dir, "logs").rglob("*.log")):
        if path.stat().st_mtime >= started:
            lines += [f"{path}: {line}" for line in path.read_text(errors="replace").splitlines()
                      if line.startswith(ERROR_PREFIX)]
    return lines
