"""Seeded samples with no two facts that look the same to the embedding model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factstore.data.sample import sample_distinct_rows


def _keys_from(table: list[tuple[str, str]]):
    return lambda rows: [table[row] for row in rows]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.integers(0, 2**32 - 1), st.data())
def test_a_sample_has_no_shared_key_and_is_the_plain_sample_when_nothing_collides(authors, seed, data):
    table = [(f"book {row}", author) for row, author in enumerate(authors)]  # distinct titles
    size = data.draw(st.integers(0, len(table)))
    if size > len(set(authors)):
        with pytest.raises(ValueError, match="are distinct"):
            sample_distinct_rows(len(table), size, _keys_from(table), np.random.default_rng(seed))
        return
    rows = sample_distinct_rows(len(table), size, _keys_from(table), np.random.default_rng(seed))
    assert len(rows) == size and (np.diff(rows) > 0).all()
    assert len({authors[row] for row in rows}) == size
    plain = np.sort(np.random.default_rng(seed).choice(len(table), size=size, replace=False))
    if len({authors[row] for row in plain}) == size:
        np.testing.assert_array_equal(rows, plain)


def test_a_colliding_author_is_replaced_and_too_few_distinct_rows_is_an_error():
    # rows 0 and 1 hold one author to the model ("Rosemary  Harris" and "Rosemary Harris").
    table = [("a", "rosemary harris"), ("b", "rosemary harris"), ("c", "x"), ("d", "y")]
    for seed in range(20):
        rows = sample_distinct_rows(4, 3, _keys_from(table), np.random.default_rng(seed))
        assert not {0, 1} <= set(rows.tolist()) and len(rows) == 3
    with pytest.raises(ValueError, match="only 3 of the 4 rows are distinct"):
        sample_distinct_rows(4, 4, _keys_from(table), np.random.default_rng(0))
    with pytest.raises(ValueError, match="cannot draw 5 rows"):
        sample_distinct_rows(4, 5, _keys_from(table), np.random.default_rng(0))
