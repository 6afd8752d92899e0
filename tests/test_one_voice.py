"""The package speaks of itself only: its text files name no development history (numbered
stops, issues or sessions), no specification file, no folder outside the checkout (except CI's
own choice of data mirror in .ci/), and `seed` means a random seed, never the source paper.
Each hit is reported as file:line with the rule it breaks."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPOSITORY

SCANNED = ["README.md", "CHANGELOG.md", "docs", "config", "src", "tests", "workflow", "benchmarks", ".ci"]
THIS_FILE = "tests/test_one_voice.py"

# The patterns are assembled from pieces so that this file's own text matches none of them.
RULES = {
    "development history": re.compile(r"\b(" + "stop|stops|issue|" + "session" + r") [0-9]+", re.IGNORECASE),
    "a folder outside the checkout": re.compile(re.escape(".." + "/" + "shared")),
    "a specification file": re.compile(r"\b" + "SP" + r"EC\b"),
    "'seed' meaning the paper": re.compile(r"\bthe " + "seed" + r"'s\b", re.IGNORECASE),
}
ALLOWED = {"a folder outside the checkout": (".ci/",)}  # CI sets its own data mirror explicitly


def _tracked_text_files() -> dict[str, str]:
    """{path: text} of the tracked files under SCANNED that decode as UTF-8 (binaries left out)."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=REPOSITORY,
                                 capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"the tracked files cannot be listed (not a git checkout?): {error}")
    texts = {}
    for name in filter(None, listing.split("\0")):
        path = REPOSITORY / name
        if name == THIS_FILE or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


@pytest.fixture(scope="module")
def tracked_texts() -> dict[str, str]:
    return _tracked_text_files()


@pytest.mark.parametrize("rule", list(RULES))
def test_the_text_files_speak_of_the_package_only(tracked_texts, rule):
    pattern, allowed = RULES[rule], ALLOWED.get(rule, ())
    hits = [
        f"{name}:{number}: {line.strip()[:160]}"
        for name, text in sorted(tracked_texts.items()) if not name.startswith(allowed)
        for number, line in enumerate(text.splitlines(), start=1) if pattern.search(line)
    ]
    assert not hits, f"{len(hits)} line(s) with {rule}:\n" + "\n".join(hits)


def test_the_rules_catch_what_they_name():
    """Each rule matches its own kind of text and leaves the random-seed vocabulary alone."""
    history, outside, specification, paper_seed = RULES.values()
    assert all(history.search(f"{word.title()} {number}") for word in ("stop", "issue", "session") for number in (1, 20))
    assert outside.search("cd " + ".." + "/shared/data")
    assert specification.search("as " + "SP" + "EC.md says") and not specification.search("ProbeSpec, spectrum")
    assert paper_seed.search("The " + "seed's Fig. 7")
    for fine in ("per seed", "seeds averaged", "the seed mean over seeds", "stop at 3 steps", "config key seed: 0"):
        assert not any(rule.search(fine) for rule in RULES.values()), fine
