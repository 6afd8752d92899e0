"""Capacity: the smallest width (or code size) at which a method stores a target fraction of facts.

All searches assume accuracy is monotone non-decreasing in the width. That is true on average
but not exactly for one random draw (a wider NTK MLP has different noise; a GD run can be
unlucky), so the width found is the smallest one the search SAW pass with every narrower probe
failing -- the usual convention for the paper's Fig. 7 -- and the `evaluations` record every
probe so non-monotone cases are visible.

How a method's size is searched is the strategy object in the `search` of its entry in
methods.METHODS (width_search.py: UnitPrefixSearch for the NTK's one pass over units,
CodeSizeSearch for the encoder-decoder's code sizes, TrainedSearch for GD's bracketing and
bisection over trained MLPs, DoublingSearch for any other builder); each answers several targets
at once. This module is the entry point by method name with explicit caps (`smallest_widths`); a
study's settings go to the strategy's own `smallest_widths` (configured_search.search_method).

Accuracy is always dot-product decoding over ALL values, in row chunks (facts.py), so
F = 2^14 needs chunk_size x F scores at a time, never F x F.
"""

from __future__ import annotations

import torch
from torch import Tensor

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet
from factstore.mlp.methods import get_method
from factstore.mlp.smallest_width_searches import WidthSearch


def smallest_widths(
    method: str,
    fact_set: FactSet,
    targets: list[float],
    generator: torch.Generator,
    low: int = 1,
    high: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    build_modules: bool = True,
    value_targets: Tensor | None = None,
    **options,
) -> dict[float, WidthSearch]:
    """{target: the smallest size at which `method` stores at least `target` of the facts}.

    method: a name in methods.METHODS; its `search` strategy searches. low / high bound the
    search (defaults: 1 and the strategy's default_cap; d_out for code sizes). value_targets:
    (n_values, d_out), what a construction emits per value, e.g. a U* the caller solved once for
    several methods (default: Method.value_targets, which solves U* here for a U* method);
    trained methods ignore it. options go to the builder / trainer (e.g. degree=2,
    protocol=gd.PAPER_PROTOCOL; for trained methods also guess, growth, resolution, warm_start).
    build_modules (the NTK's one-pass search only; the other strategies build anyway): build the
    module at the width found, or at the cap `high` when a target is not reached (the largest MLP
    tried, e.g. for its Lipschitz constant); False skips the build (the parameter count is known
    without it).
    """
    entry = get_method(method)
    return entry.search.search(entry, fact_set, targets, generator, low, high, chunk_size, build_modules,
                               value_targets, **options)


def smallest_width(
    method: str, fact_set: FactSet, target: float, generator: torch.Generator, low: int = 1,
    high: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, **options,
) -> WidthSearch:
    """The smallest size at which `method` stores at least `target` of the facts (see smallest_widths)."""
    return smallest_widths(method, fact_set, [target], generator, low, high, chunk_size, **options)[target]
