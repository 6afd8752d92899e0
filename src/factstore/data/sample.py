"""Seeded samples of a facts table in which no two facts look the same to the embedding model.

The Goodreads table is a bijection of strings, but not of what MiniLM reads: its tokenizer
lowercases, strips accents and splits on whitespace, so "Rosemary  Harris" (two spaces) and
"Rosemary Harris" are two authors of the table with one embedding. No model can store both facts,
and a capacity measured on such a sample says nothing about the construction (an
F = 2,048 sample can hold such a pair). A sample therefore draws rows as before and replaces every
row whose key or value collides with a row already kept by fresh seeded draws.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np


def sample_distinct_rows(
    population: int,
    size: int,
    keys_of: Callable[[np.ndarray], Sequence[tuple[Hashable, ...]]],
    rng: np.random.Generator,
) -> np.ndarray:
    """size distinct row numbers of range(population), sorted, no two sharing a key.

    keys_of(rows) gives, for each row, a tuple of keys (e.g. the token ids of its title and of
    its author); two rows collide when they share a key at the same position. The first draw is
    rng.choice(population, size, replace=False), so a sample without collisions is the plain
    seeded sample; each colliding row (the later one in that draw's sorted order) is replaced by
    the next row of a seeded shuffle of the rows not yet drawn. Raises ValueError when the
    population holds fewer than `size` distinct rows.
    """
    if not 0 <= size <= population:
        raise ValueError(f"cannot draw {size} rows from a population of {population}")
    drawn = np.sort(rng.choice(population, size=size, replace=False))
    spare = np.setdiff1d(np.arange(population), drawn)
    rng.shuffle(spare)
    kept: list[int] = []
    seen: set[tuple[int, Hashable]] = set()
    candidates, next_spare = drawn, 0
    while len(candidates):
        for row, keys in zip(candidates.tolist(), keys_of(candidates)):
            tagged = {(position, key) for position, key in enumerate(keys)}
            if seen.isdisjoint(tagged):
                kept.append(row)
                seen |= tagged
        missing = size - len(kept)
        if missing and next_spare >= len(spare):
            raise ValueError(f"only {len(kept)} of the {population} rows are distinct; {size} were asked for")
        candidates, next_spare = spare[next_spare:next_spare + missing], next_spare + missing
    return np.sort(np.asarray(kept, dtype=np.int64))
