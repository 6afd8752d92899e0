"""Data-layer prepare steps: tidy tables from the raw files, and the manifest.

Nothing raw is trusted: every step first re-checks the sha256 (or git blob id) of each data/raw
file it reads against factstore.data.sources, so a file edited, truncated or swapped after its
fetch stops the step instead of reaching data/processed under a source.json that still claims the
verified checksum; then factstore.data.prepare rejects empty or malformed rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from factstore.data import prepare
from factstore.data.fetch import ChecksumError, FetchError, verify
from factstore.data.sources import SOURCES, WIKIPEDIA, Source
from factstore.io import read_json, read_table, sha256_file


def _verify_raw(path: Path, source: Source) -> None:
    """Re-check a data/raw file against its source's checksum before anything reads it."""
    try:
        verify(Path(path), source, origin=path)
    except ChecksumError as error:
        raise ChecksumError(f"{error}; {path} changed after it was fetched: delete it and rerun the workflow") from None


def goodreads(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    _verify_raw(inputs["book_authors"], SOURCES["book_authors"])
    _verify_raw(inputs["goodbooks"], SOURCES["goodbooks"])
    return {"facts": prepare.goodreads_facts(inputs["book_authors"]), "goodbooks": prepare.goodbooks_facts(inputs["goodbooks"])}


def wikipedia(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    _verify_raw(inputs["summaries"], WIKIPEDIA)
    return {"paragraphs": prepare.wikipedia_paragraphs(inputs["summaries"])}


def fewrel(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    source = read_json(inputs["report"])["source"]
    if source not in SOURCES:
        raise FetchError(f"{inputs['report']}: unknown source {source!r}")
    _verify_raw(inputs["relations"], SOURCES[source])
    _verify_raw(inputs["pid2name"], SOURCES["fewrel_pid2name"])
    relations = json.loads(inputs["relations"].read_text())
    names = json.loads(inputs["pid2name"].read_text())
    table = prepare.fewrel_sentences(relations, names, params["fewrel_test_per_relation"], params["split_seed"],
                                     source=str(inputs["relations"]))
    return {"sentences": table.assign(source=source)}


def manifest(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Counts, licenses and origins of every prepared table, and each table file's path (as the
    workflow names it, relative to its working directory), rows and sha256 (the values its prepare
    job recorded in its sidecar): data/processed/manifest.json. The runner checks a table against
    them whenever a step reads it and its sidecar is gone (factstore.io.check_unchanged)."""
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
    files = {name: {"path": _workflow_path(inputs[f"table_{name}"]), "rows": len(table),
                    "sha256": sha256_file(inputs[f"table_{name}"])} for name, table in tables.items()}
    return {"manifest": {"tables": counts, "files": files, "sources": reports}}


def _workflow_path(path: Path) -> str:
    """`path` relative to the working directory (as Snakemake names it) where it lies below it, so
    that the manifest names no folder of this machine; as given otherwise."""
    path = Path(path)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return path.as_posix()
