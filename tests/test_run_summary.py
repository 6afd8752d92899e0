"""The lines a workflow run ends with (factstore.run_summary, printed by workflow/Snakefile's
onsuccess and onerror): read from a hand-made run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from factstore.run_summary import claims_line, data_origins_line, error_lines, success_lines

BEFORE = 1_000_000.0  # an mtime long before any run's start


def _source(run_dir: Path, name: str, origin: str) -> None:
    raw = run_dir / "data" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"{name}.source.json").write_text(json.dumps({"source": f"https://example.org/{name}", "origin": origin}))


def _claims(run_dir: Path, counts: dict, warnings: list[list[str] | None]) -> None:
    results = run_dir / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "claims.json").write_text(json.dumps([{"id": f"C{i}", "warnings": w} for i, w in enumerate(warnings)]))
    (results / "claims_summary.json").write_text(json.dumps(counts))


def test_data_from_the_mirror_reads_none_downloaded(tmp_path):
    _source(tmp_path, "a", "mirror:/data/a")
    _source(tmp_path, "b", "package:factstore/b")
    assert data_origins_line(tmp_path) == "factstore: data: 2 raw files, checksums verified; none downloaded"


def test_a_download_outside_the_mirror_is_named(tmp_path):
    _source(tmp_path, "a", "mirror:/data/a")
    _source(tmp_path, "b", "https://example.org/b")
    _source(tmp_path, "c", "")
    assert data_origins_line(tmp_path) == ("factstore: data: 3 raw files, checksums verified; downloaded (not in the "
                                           "mirror): https://example.org/b, https://example.org/c")


def test_no_raw_data_gives_no_line(tmp_path):
    assert data_origins_line(tmp_path) == ""
    assert success_lines(tmp_path, started=BEFORE) == []


def test_the_claims_line_counts_statuses_in_order_and_distinct_warnings(tmp_path):
    _claims(tmp_path, {"NOT RUN": 1, "FAIL": 2, "PASS": 5}, [["w1", "w2"], ["w1"], None, []])
    assert claims_line(tmp_path, started=BEFORE) == (
        f"factstore: claims: 5 PASS, 2 FAIL, 1 NOT RUN; 2 result warnings: {tmp_path / 'results' / 'claims.md'}")


def test_one_warning_is_singular(tmp_path):
    _claims(tmp_path, {"PASS": 1}, [["w1"], ["w1"]])
    assert claims_line(tmp_path, started=BEFORE).endswith(f"; 1 result warning: {tmp_path / 'results' / 'claims.md'}")


def test_a_claims_report_older_than_the_run_gives_no_line(tmp_path):
    _claims(tmp_path, {"PASS": 1}, [])
    os.utime(tmp_path / "results" / "claims_summary.json", (BEFORE, BEFORE))
    assert claims_line(tmp_path, started=time.time() - 60) == ""
    (tmp_path / "results" / "claims.json").unlink()
    assert claims_line(tmp_path, started=BEFORE) == ""


def test_a_finished_run_prints_the_data_line_then_the_claims_line(tmp_path):
    _source(tmp_path, "a", "mirror:/data/a")
    _claims(tmp_path, {"PASS": 1}, [])
    lines = success_lines(tmp_path, started=BEFORE)
    assert [line.split(":")[1] for line in lines] == [" data", " claims"]


def test_error_lines_come_from_this_runs_logs_only(tmp_path):
    logs = tmp_path / "logs"
    (logs / "assoc").mkdir(parents=True)
    (logs / "assoc" / "trained.log").write_text("progress\nfactstore: error: step assoc.trained failed\nmore\n")
    (logs / "claims.log").write_text("factstore: error: claims failed\nfactstore: warning: not an error\n")
    old = logs / "assoc" / "old.log"
    old.write_text("factstore: error: from an earlier run\n")
    os.utime(old, (BEFORE, BEFORE))
    assert error_lines(tmp_path, started=BEFORE + 1) == [
        f"{logs / 'assoc' / 'trained.log'}: factstore: error: step assoc.trained failed",
        f"{logs / 'claims.log'}: factstore: error: claims failed",
    ]
    assert error_lines(tmp_path / "missing", started=BEFORE) == []


def test_the_module_loads_without_torch():
    """The Snakemake process imports it: loading it may not import torch."""
    code = "import sys, factstore.run_summary; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
