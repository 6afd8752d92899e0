"""Fetching (mirror, checksum, retries) and the prepared tables, on the real files of the mirror."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from factstore.data import fetch as fetching, prepare
from factstore.data.sources import SOURCES, Source


@pytest.fixture
def fake_network(monkeypatch):
    """The network replaced, with no data mirror set: `fake_network(*answers)` makes the i-th
    download give answers[i] (the last one repeats): bytes are written to the target, an exception
    is raised after writing part of a file. Returns the list of URLs asked for."""

    def install(*answers):
        calls = []

        def download(url, target, timeout):
            calls.append(url)
            answer = answers[min(len(calls), len(answers)) - 1]
            target.write_bytes(answer if isinstance(answer, bytes) else b"partial")
            if isinstance(answer, Exception):
                raise answer

        monkeypatch.setattr(fetching, "_download", download)
        monkeypatch.delenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, raising=False)
        return calls

    return install


def test_fetch_from_mirror_verifies_sha256(tmp_path, mirror):
    report = fetching.fetch(SOURCES["goodbooks"], tmp_path / "books.csv", mirror=mirror, retries=1)
    assert report["origin"] == "mirror:goodbooks10k/books.csv"
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


def test_unreachable_source_says_so_in_one_line_and_leaves_nothing(tmp_path, fake_network):
    calls = fake_network(OSError("network is unreachable"))
    target = tmp_path / "out" / "train_wiki.json"
    with pytest.raises(fetching.SourceUnavailable) as error:
        fetching.fetch(SOURCES["fewrel_train_wiki"], target, mirror=tmp_path / "mirror", retries=3, backoff_s=0)
    assert len(calls) == 3
    message = str(error.value)
    assert "\n" not in message
    for named in ("fewrel/train_wiki.json", str(tmp_path / "mirror"), SOURCES["fewrel_train_wiki"].url,
                  "3 attempts", "network is unreachable", "FACTSTORE_DATA_MIRROR"):
        assert named in message, named
    assert not target.parent.exists() or list(target.parent.iterdir()) == []


def test_download_with_wrong_bytes_is_not_retried_and_names_the_url(tmp_path, fake_network):
    calls = fake_network(b"not it")
    with pytest.raises(fetching.ChecksumError, match="sha256 mismatch for https://raw.githubusercontent.com/") as error:
        fetching.fetch(SOURCES["goodbooks"], tmp_path / "b.csv", retries=3, backoff_s=0)
    assert len(calls) == 1, "a deterministic mismatch is not retried"
    assert "factstore-tmp" not in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_truncated_download_is_retried(tmp_path, fake_network, mirror):
    import http.client

    calls = fake_network(http.client.IncompleteRead(b"partial"), (mirror / "goodbooks10k/books.csv").read_bytes())
    report = fetching.fetch(SOURCES["goodbooks"], tmp_path / "b.csv", retries=2, backoff_s=0)
    assert len(calls) == 2 and report["origin"] == SOURCES["goodbooks"].url


def test_checksum_error_names_the_mirror_file_not_a_temporary_file(tmp_path):
    corrupted = tmp_path / "mirror" / "goodbooks10k" / "books.csv"
    corrupted.parent.mkdir(parents=True)
    corrupted.write_bytes(b"book_id,authors\n1,x\n")
    with pytest.raises(fetching.ChecksumError) as error:
        fetching.fetch(SOURCES["goodbooks"], tmp_path / "out" / "books.csv", mirror=tmp_path / "mirror", retries=1)
    message = str(error.value)
    assert f"sha256 mismatch for {corrupted}:" in message and "factstore-tmp" not in message
    assert message.count("mismatch") == 1


def test_git_blob_id_matches_git(tmp_path):
    path = tmp_path / "file.json"
    path.write_bytes(b'{"a": 1}\n')
    expected = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True).stdout.strip()
    assert fetching.git_blob_id(path) == expected


HELLO = Source(name="hello", path="greetings/hello.txt", url="https://example.org/hello.txt", license="none",
               description="a hand-made file", sha256=hashlib.sha256(b"hello\n").hexdigest())


@pytest.fixture
def fake_download(fake_network):
    """The network replaced: every download writes hello.txt's bytes and is counted."""
    return fake_network(b"hello\n")


@pytest.mark.parametrize("mirror_kind, said", [
    ("unset", "no data mirror is set (FACTSTORE_DATA_MIRROR)"),
    ("missing folder", "is not a directory"),
    ("empty folder", "has no greetings/hello.txt"),
])
def test_a_mirror_that_lacks_the_file_falls_back_to_the_verified_download_in_one_line(
        tmp_path, monkeypatch, capsys, fake_download, mirror_kind, said):
    folder = tmp_path / "mirror"
    if mirror_kind == "empty folder":
        folder.mkdir()
    if mirror_kind != "unset":
        monkeypatch.setenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, str(folder))
    report = fetching.fetch(HELLO, tmp_path / "out" / "hello.txt", retries=1)
    assert (tmp_path / "out" / "hello.txt").read_bytes() == b"hello\n"
    assert report == {"origin": HELLO.url, "checksum": f"sha256:{HELLO.sha256}"}
    assert fake_download == [HELLO.url]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert "greetings/hello.txt" in lines[0] and said in lines[0] and f"downloading it from {HELLO.url}" in lines[0]
    if mirror_kind != "unset":
        assert str(folder) in lines[0]


def test_a_fallback_download_with_the_wrong_bytes_is_refused(tmp_path, capsys, fake_download):
    changed = Source(**{**HELLO.__dict__, "sha256": "0" * 64})
    with pytest.raises(fetching.ChecksumError, match="sha256 mismatch for https://example.org/hello.txt"):
        fetching.fetch(changed, tmp_path / "out" / "hello.txt", mirror=tmp_path / "empty", retries=1)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_mirror_holding_the_file_is_used_silently(tmp_path, capsys, fake_download):
    (tmp_path / "mirror" / "greetings").mkdir(parents=True)
    (tmp_path / "mirror" / "greetings" / "hello.txt").write_bytes(b"hello\n")
    report = fetching.fetch(HELLO, tmp_path / "hello.txt", mirror=tmp_path / "mirror", retries=1)
    assert report["origin"] == "mirror:greetings/hello.txt" and fake_download == []
    assert capsys.readouterr().err == ""


@pytest.fixture
def fewrel_mirror(tmp_path, mirror, monkeypatch, fake_network):
    """A mirror with val_wiki and pid2name but no train_wiki, and no network."""
    folder = tmp_path / "mirror" / "fewrel"
    folder.mkdir(parents=True)
    for name in ("val_wiki.json", "pid2name.json"):
        (folder / name).symlink_to(mirror / "fewrel" / name)
    fake_network(OSError("network is unreachable"))
    monkeypatch.setenv(fetching.MIRROR_ENVIRONMENT_VARIABLE, str(folder.parent))
    return folder


FETCH_PARAMS = {"retries": 1, "timeout_s": 1, "fewrel_source": "train_wiki"}


def test_unavailable_train_wiki_is_an_error_naming_the_file_the_mirror_and_the_url(fewrel_mirror, tmp_path, capsys):
    from factstore.__main__ import main

    outputs = {"relations": tmp_path / "out" / "relations.json", "report": tmp_path / "out" / "relations.json.source.json"}
    code = main(["fetch.fewrel", "--params", json.dumps(FETCH_PARAMS)]
                + [f"--output={name}={path}" for name, path in outputs.items()])
    err = capsys.readouterr().err
    assert code == 1
    for named in ("fewrel/train_wiki.json", str(fewrel_mirror.parent), SOURCES["fewrel_train_wiki"].url, "val_wiki"):
        assert named in err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_val_wiki_is_read_from_the_mirror_without_a_word(fewrel_mirror, capsys):
    from factstore.experiments.fetch import fewrel as fetch_fewrel

    fetched = fetch_fewrel(FETCH_PARAMS | {"fewrel_source": "val_wiki"}, {}, None)
    assert fetched["report"]["source"] == "fewrel_val_wiki" and fetched["report"]["origin"] == "mirror:fewrel/val_wiki.json"
    assert len(json.loads(fetched["relations"])) == 16 and capsys.readouterr().err == ""


def test_the_fewrel_source_is_val_wiki_at_default_and_smoke_scale_and_train_wiki_in_the_paper_config():
    import yaml

    sources = {name: yaml.safe_load(open(Path(__file__).parents[1] / "config" / f"{name}.yaml"))["dilution"]["fewrel"]["source"]
               for name in ("config", "smoke", "paper")}
    assert sources == {"config": "val_wiki", "smoke": "val_wiki", "paper": "train_wiki"}


def test_corrupt_train_wiki_is_an_error_never_a_fallback(fewrel_mirror, tmp_path, capsys):
    from factstore.__main__ import main

    (fewrel_mirror / "train_wiki.json").write_text('{"P1": []}')
    outputs = {"relations": tmp_path / "out" / "relations.json", "report": tmp_path / "out" / "relations.json.source.json"}
    code = main(["fetch.fewrel", "--params", json.dumps(FETCH_PARAMS)]
                + [f"--output={name}={path}" for name, path in outputs.items()])
    err = capsys.readouterr().err
    assert code == 1
    assert f"git blob id mismatch for {fewrel_mirror / 'train_wiki.json'}" in err and "WARNING" not in err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


# Raw files are re-verified before preparing; bad rows are named by file, line and field.


def test_prepare_rejects_a_raw_file_changed_after_its_fetch(tmp_path, mirror, capsys):
    from factstore.__main__ import main

    raw = tmp_path / "raw"
    raw.mkdir()
    for name, source in (("book_authors.csv", "hebbian-mlps/book_authors.csv"), ("goodbooks.csv", "goodbooks10k/books.csv")):
        (raw / name).write_bytes((mirror / source).read_bytes())
    text = (raw / "book_authors.csv").read_text().splitlines(keepends=True)
    text[5] = ",".join(text[5].split(",")[:2]) + ",\n"  # the title of line 6 emptied
    (raw / "book_authors.csv").write_text("".join(text))
    out = tmp_path / "processed"
    code = main(["prepare.goodreads", f"--input=book_authors={raw / 'book_authors.csv'}",
                 f"--input=goodbooks={raw / 'goodbooks.csv'}", f"--output=facts={out / 'facts.csv'}",
                 f"--output=goodbooks={out / 'goodbooks.csv'}"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"sha256 mismatch for {raw / 'book_authors.csv'}" in err and "changed after it was fetched" in err
    assert not out.exists()


def _csv(tmp_path, text: str, name: str = "bad.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        (",author,book\n0,Ann,Alpha\n1,Bob,\n", r"bad.csv:3: field 'book' is empty"),
        (",author,book\n0,Ann,Alpha\n1,  ,Beta\n", r"bad.csv:3: field 'author' is empty"),
        (",author,book\n0,Ann,Alpha\n1,Bob\n", r"bad.csv:3: malformed row: 2 fields, the header has 3"),
        (",author,book\n0,Ann,Alpha\n1,Bob,Beta\n2,Cy,Alpha\n", r"bad.csv:4: field 'book' = 'Alpha' repeats line 2"),
        (',author,book\n0,Ann,"Alpha\nand more"\n1,Bob,Alpha\n2,Ann,Gamma\n', r"bad.csv:5: field 'author' = 'Ann' repeats line 2"),
        (",writer,book\n0,Ann,Alpha\n", r"bad.csv:1: header lacks column 'author'"),
        ("", r"bad.csv: the file is empty"),
    ],
)
def test_goodreads_bad_rows_are_named(tmp_path, text, message):
    with pytest.raises(prepare.DataError, match=message):
        prepare.goodreads_facts(_csv(tmp_path, text))


GOODBOOKS_HEADER = "book_id,authors,original_title,title\n"


@pytest.mark.parametrize(
    "rows, message",
    [
        ("1,Ann,,Alpha\n2,,Beta,Beta\n", r"bad.csv:3: field 'authors' is empty"),
        ("1,Ann,,Alpha\n2,Bob,,\n", r"bad.csv:3: field 'title' is empty"),
        ("1,Ann,,Alpha\nx,Bob,,Beta\n", r"bad.csv:3: field 'book_id' = 'x' is not an integer"),
        ("1,Ann,,Alpha\n1,Bob,,Beta\n", r"bad.csv:3: field 'book_id' = 1 repeats line 2"),
        ("1,Ann,,Alpha\n2,Bob,\"(Saga, #2)\",Beta\n", r"bad.csv:3: field 'original_title' .* no title besides the series"),
        ("1,Ann,,Alpha\n2,\", Bob\",,Beta\n", r"bad.csv:3: field 'authors' .* names no first author"),
    ],
)
def test_goodbooks_bad_rows_are_named(tmp_path, rows, message):
    with pytest.raises(prepare.DataError, match=message):
        prepare.goodbooks_facts(_csv(tmp_path, GOODBOOKS_HEADER + rows))


def test_goodbooks_good_rows(tmp_path):
    table = prepare.goodbooks_facts(_csv(tmp_path, GOODBOOKS_HEADER + '1,"Ann, Bob",,Alpha (Saga #1)\n2,Cy, Beta ,x\n'))
    assert table.to_dict("list") == {"book_id": [1, 2], "book": ["Alpha", "Beta"], "author": ["Ann", "Cy"]}


@pytest.mark.parametrize(
    "articles, message",
    [
        ({"a": {"title": "A", "topic": "t", "extract": "x"}, "b": {"title": "B", "topic": "t"}},
         r"w.json: article 'b': field 'extract' is missing"),
        ({"a": {"title": " ", "topic": "t", "extract": "x"}}, r"w.json: article 'a': field 'title' is empty"),
        ({"a": {"title": "A", "topic": 3, "extract": "x"}}, r"w.json: article 'a': field 'topic' is empty or not text"),
        ({"a": ["A", "x"]}, r"w.json: article 'a' is a list, not an object"),
    ],
)
def test_wikipedia_bad_articles_are_named(tmp_path, articles, message):
    with pytest.raises(prepare.DataError, match=message):
        prepare.wikipedia_paragraphs(_csv(tmp_path, json.dumps(articles), "w.json"))


def test_wikipedia_invalid_json_names_the_line(tmp_path):
    with pytest.raises(prepare.DataError, match=r"w.json:2: not valid JSON"):
        prepare.wikipedia_paragraphs(_csv(tmp_path, '{"a":\n  {"title": }}', "w.json"))


def _sentence(tokens=("Ann", "wrote", "Alpha"), h=("Ann", "Q1", [[0]]), t=("Alpha", "Q2", [[2]])):
    return {"tokens": list(tokens), "h": [h[0], h[1], h[2]], "t": [t[0], t[1], t[2]]}


@pytest.mark.parametrize(
    "bad, message",
    [
        (_sentence(tokens=()), r"relation P50, sentence 1: field 'tokens' is missing, empty"),
        (_sentence(h=("", "Q1", [[0]])), r"relation P50, sentence 1: field 'h' is not \[name, id"),
        (_sentence(t=("Alpha", "Q2", [[7]])), r"relation P50, sentence 1: field 't' has token positions \[7\] outside"),
        ({"tokens": ["a"], "h": ["a", "Q", [[0]]]}, r"relation P50, sentence 1: field 't' is not"),
    ],
)
def test_fewrel_bad_sentences_are_named(bad, message):
    relations = {"P50": [_sentence(), bad, _sentence()]}
    with pytest.raises(prepare.DataError, match=r"^rel.json: " + message):
        prepare.fewrel_sentences(relations, {"P50": ["author", ""]}, 1, 0, source="rel.json")
