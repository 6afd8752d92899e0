"""benchmarks/gpu_check.sh's data preparation, on the CPU before any GPU work.

Every raw data file of the data sets (factstore.data.sources.SOURCES) is obtained once into one
folder, which both workflow runs then read as their mirror: from $FACTSTORE_DATA_MIRROR where it
holds the file, else by the verified download (factstore.data.fetch says which, in one line per
file). A file no source can give stops the check here, in one line naming the file, the mirror
and the URL, before any GPU time is spent; FewRel's train_wiki.json alone is optional (the
workflow then uses val_wiki.json, saying so). Exit status 0 when the data are ready, else 1.

    python benchmarks/gpu_prepare.py FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

from factstore.data.fetch import FetchError, SourceUnavailable, fetch
from factstore.data.sources import SOURCES

OPTIONAL = {"fewrel_train_wiki"}  # the fetch.fewrel step falls back to val_wiki without it


def prepare_data(folder: Path, retries: int = 2, timeout: float = 20.0) -> list[str]:
    """Fetch every source into `folder` (the mirror layout: folder / source.path); returns the
    names of the optional sources that could not be had. Raises FetchError for a required one.
    An optional file gets one attempt: on a machine that cannot reach its URL (GPU nodes often
    cannot) it costs at most `timeout` seconds of the check."""
    missing = []
    for name, source in SOURCES.items():
        try:
            fetch(source, folder / source.path, retries=1 if name in OPTIONAL else retries, timeout=timeout)
        except SourceUnavailable:
            if name not in OPTIONAL:
                raise
            missing.append(name)
            print(f"gpu_check: {source.path} is unavailable: the runs use FewRel's val_wiki.json instead", file=sys.stderr)
    return missing


def main(argv: list[str]) -> int:
    try:
        prepare_data(Path(argv[0]))
    except FetchError as error:
        print(f"gpu_check: the data are not ready: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
