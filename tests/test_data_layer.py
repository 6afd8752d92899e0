"""Fetching (mirror, checksum, retries) and the prepared tables, on the real files of the mirror."""

from __future__ import annotations

import json
import subprocess

import pytest

from factstore.data import fetch as fetching, prepare
from factstore.data.sources import SOURCES


def test_fetch_from_mirror_verifies_sha256(tmp_path, mirror):
    report = fetching.fetch(SOURCES["goodbooks"], tmp_path / "books.csv", mirror=mirror, retries=1)
    assert report["origin"].startswith(str(mirror))
    assert report["checksum"] == f"sha256:{SOURCES['goodbooks'].sha256}"


def test_corrupted_mirror_copy_is_rejected_and_leaves_nothing(tmp_path, mirror):
    corrupted = tmp_path / "mirror"
    (corrupted / "goodbooks10k").mkdir(parents=True)
    data = bytearray((mirror / "goodbooks10k/books.csv").read_bytes())
    data[1000] ^= 0xFF
    (corrupted / "goodbooks10k/books.csv").write_bytes(bytes(data))
    target = tmp_path / "out" / "books.csv"
    with pytest.raises(fetching.ChecksumError, match="sha256 mismatch"):
        fetching.fetch(SOURCES["goodbooks"], target, mirror=corrupted, retries=1)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_unreachable_source_names_every_attempt(tmp_path, monkeypatch):
    calls = []

    def offline(url, target, timeout):
        calls.append(url)
        raise OSError("network is unreachable")

    monkeypatch.setattr(fetching, "_download", offline)
    monkeypatch.delenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, raising=False)
    target = tmp_path / "train_wiki.json"
    with pytest.raises(fetching.FetchError) as error:
        fetching.fetch(SOURCES["fewrel_train_wiki"], target, retries=3, backoff_s=0)
    assert len(calls) == 3
    assert "attempt 3/3" in str(error.value) and "FACTSTORE_DATA_MIRROR" in str(error.value)
    assert not target.exists()


def test_download_with_wrong_bytes_is_retried_then_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(fetching, "_download", lambda url, target, timeout: target.write_bytes(b"not it"))
    monkeypatch.delenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, raising=False)
    with pytest.raises(fetching.FetchError, match="sha256 mismatch"):
        fetching.fetch(SOURCES["goodbooks"], tmp_path / "b.csv", retries=2, backoff_s=0)
    assert list(tmp_path.iterdir()) == []


def test_git_blob_id_matches_git(tmp_path):
    path = tmp_path / "file.json"
    path.write_bytes(b'{"a": 1}\n')
    expected = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True).stdout.strip()
    assert fetching.git_blob_id(path) == expected


def test_mirror_that_is_not_a_directory_is_an_error(tmp_path):
    with pytest.raises(fetching.FetchError, match="is not a directory"):
        fetching.mirror_directory(tmp_path / "missing")


def test_goodreads_tables(mirror):
    facts = prepare.goodreads_facts(mirror / "hebbian-mlps/book_authors.csv")
    assert len(facts) == 63317 and facts.book.is_unique and facts.author.is_unique
    books = prepare.goodbooks_facts(mirror / "goodbooks10k/books.csv")
    assert len(books) == 10000 and books.author.nunique() == 3888
    assert not books.book.str.contains(r"#\d+\)$").any()
    assert (books.book.str.len() > 0).all()


def test_fewrel_split_is_630_70(mirror):
    relations = json.loads((mirror / "fewrel/val_wiki.json").read_text())
    names = json.loads((mirror / "fewrel/pid2name.json").read_text())
    table = prepare.fewrel_sentences(relations, names, test_per_relation=70, seed=0)
    counts = table.groupby(["relation", "split"]).size().unstack()
    assert len(counts) == 16 and (counts["train"] == 630).all() and (counts["test"] == 70).all()
    again = prepare.fewrel_sentences(relations, names, test_per_relation=70, seed=0)
    assert table.equals(again)


def test_wikipedia_paragraphs_from_the_package(tmp_path):
    from factstore.experiments.data import fetch_wikipedia

    content = fetch_wikipedia({}, {}, None)["file"]
    (tmp_path / "w.json").write_bytes(content)
    table = prepare.wikipedia_paragraphs(tmp_path / "w.json")
    assert table.title.nunique() == 10033 and 10000 < len(table) < 11000
    assert (table.words > 0).all()
