"""benchmarks/gpu_check.sh's pieces that run without a GPU: the data preparation on a fresh
checkout (PREPARE_ONLY=1, the network replaced), the dilution benchmark's paragraphs, the
CPU-vs-CUDA table comparison (benchmarks/gpu_compare.py) and the `gpu` profile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import BIN, REPOSITORY, SMOKE, snakemake

sys.path.insert(0, str(REPOSITORY / "benchmarks"))
from gpu_compare import disagreements  # noqa: E402

values = st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=20)


def table(accuracy, width=None, seconds=None) -> pd.DataFrame:
    n = len(accuracy)
    return pd.DataFrame({"method": ["ntk"] * n, "width": width if width is not None else list(range(n)),
                         "accuracy": np.asarray(accuracy, float),
                         "seconds": seconds if seconds is not None else np.ones(n)})


@given(values)
def test_a_table_agrees_with_itself_and_with_drift_inside_the_tolerance(accuracy):
    drifted = np.asarray(accuracy) * 1.04 + 0.01
    assert disagreements(table(accuracy), table(accuracy), rtol=0.05, atol=0.02) == []
    assert disagreements(table(accuracy), table(drifted), rtol=0.05, atol=0.02) == []


@given(values, st.integers(0, 19))
def test_drift_beyond_the_tolerance_is_reported(accuracy, row):
    row %= len(accuracy)
    moved = np.asarray(accuracy, float).copy()
    moved[row] += 0.03 + 0.06 * abs(moved[row])
    found = disagreements(table(accuracy), table(moved), rtol=0.05, atol=0.02)
    assert len(found) == 1 and found[0].startswith("accuracy: 1 of")


def test_integers_found_by_a_search_must_be_equal_and_timings_are_left_out():
    cpu, cuda = table([0.5, 0.9], width=[10, 20]), table([0.5, 0.9], width=[10, 21], seconds=[9.0, 9.0])
    assert [line.split(":")[0] for line in disagreements(cpu, cuda, rtol=0.05, atol=0.02)] == ["width"]
    assert disagreements(table([0.5]), table([0.5, 0.6]), rtol=0.05, atol=0.02)[0].startswith("shape")


def test_gpu_check_is_documented_as_not_yet_run():
    assert "benchmarks/gpu_check.sh" in (REPOSITORY / "docs/performance.md").read_text()
    assert "not been run" in (REPOSITORY / "docs/performance.md").read_text()


@pytest.mark.workflow
def test_the_gpu_profile_resolves_the_workflow(workspace):
    done = snakemake("-n", "--nolock", "--forceall", "all", "--configfile", SMOKE, "--profile", "workflow/profiles/gpu",
                     cwd=workspace)  # --forceall: the workspace may hold a finished run
    assert "Job stats" in done.stdout


# The data preparation of a fresh checkout, with the network replaced in the script's Python
# processes (a sitecustomize module on PYTHONPATH): each URL gives its file's bytes from the test
# mirror, or fails as an offline machine does.
FAKE_NETWORK = """
import os, shutil
from pathlib import Path
from factstore.data import fetch, sources

def _download(url, target, timeout):
    by_url = {s.url: s.path for s in sources.SOURCES.values()}
    served = Path(os.environ["FAKE_NETWORK_FILES"]) / by_url[url]
    if os.environ.get("FAKE_NETWORK_OFFLINE") or not served.is_file():
        raise OSError("network is unreachable")
    shutil.copyfile(served, target)

fetch._download = _download
"""


def prepare_only(tmp_path, data_files, mirror: str | None, offline: bool = False) -> subprocess.CompletedProcess:
    """benchmarks/gpu_check.sh with PREPARE_ONLY=1, the mirror `mirror`, the fake network serving `data_files`."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(textwrap.dedent(FAKE_NETWORK))
    environment = {key: value for key, value in os.environ.items() if key != "FACTSTORE_DATA_MIRROR"}
    environment |= {"PREPARE_ONLY": "1", "REPORT": str(tmp_path / "report"), "PYTHONPATH": str(hook),
                    "FAKE_NETWORK_FILES": str(data_files), "PATH": BIN + os.pathsep + os.environ["PATH"],
                    "TMPDIR": str(tmp_path)}
    if mirror is not None:
        environment["FACTSTORE_DATA_MIRROR"] = mirror
    if offline:
        environment["FAKE_NETWORK_OFFLINE"] = "1"
    return subprocess.run(["bash", str(REPOSITORY / "benchmarks/gpu_check.sh")], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mirror_kind", ["empty folder", "missing folder", "unset"])
def test_a_fresh_checkout_prepares_its_data_by_the_verified_download(tmp_path, mirror, mirror_kind):
    folder = tmp_path / "empty_mirror"
    if mirror_kind == "empty folder":
        folder.mkdir()
    done = prepare_only(tmp_path, mirror, None if mirror_kind == "unset" else str(folder))
    assert done.returncode == 0, done.stderr
    assert "(4 files); PREPARE_ONLY=1: stopping here" in done.stdout
    lines = done.stderr.splitlines()
    downloads = [line for line in lines if "downloading it from https://" in line]
    assert len(downloads) == 5, lines  # one line per file: the mirror lacked it, it is downloaded
    assert sum("fewrel/train_wiki.json is unavailable" in line for line in lines) == 1
    if mirror_kind == "missing folder":
        assert sum("is not a folder: the data files are downloaded" in line for line in lines) == 1
    assert "Traceback" not in done.stderr
    assert not any(path.name.startswith("tmp.") for path in tmp_path.iterdir()), "the preparation folder is removed"


def test_an_offline_fresh_checkout_stops_in_one_line_naming_file_mirror_and_url(tmp_path, mirror):
    (tmp_path / "empty_mirror").mkdir()
    done = prepare_only(tmp_path, mirror, str(tmp_path / "empty_mirror"), offline=True)
    assert done.returncode == 1
    [failure] = [line for line in done.stderr.splitlines() if line.startswith("gpu_check: the data are not ready")]
    assert "hebbian-mlps/book_authors.csv" in failure and str(tmp_path / "empty_mirror") in failure
    assert "https://raw.githubusercontent.com/HazyResearch/hebbian-mlps/" in failure
    assert "Traceback" not in done.stderr
    assert not any(path.name.startswith("tmp.") for path in tmp_path.iterdir()), "no partial data are left"


def test_the_dilution_benchmark_prepares_its_paragraphs_where_data_processed_lacks_them(tmp_path, capsys):
    from common import synthetic_paragraphs, wikipedia_paragraph_texts

    class Tokenizer:
        def get_vocab(self):
            return {"[CLS]": 0, "##ing": 1, "apple": 2, "river": 3, "stone": 4}

    texts = wikipedia_paragraph_texts(Tokenizer(), tmp_path / "missing.csv")
    assert len(texts) > 10_000 and all(isinstance(text, str) and text for text in texts)
    assert capsys.readouterr().err.count("\n") == 1
    synthetic = synthetic_paragraphs(Tokenizer(), count=200, mean_words=75.0)
    assert len(synthetic) == 200 and set(" ".join(synthetic).split()) == {"apple", "river", "stone"}
    assert 60 < np.mean([len(text.split()) for text in synthetic]) < 90
    assert synthetic == synthetic_paragraphs(Tokenizer(), count=200, mean_words=75.0)
