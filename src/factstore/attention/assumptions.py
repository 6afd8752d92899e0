"""The S4 theorem's assumptions on a dataset: every context matrix of rank n, and the query
vectors of Kruskal rank >= n (any n of them linearly independent).

Ranks are numerical, at the data's own precision. The Kruskal rank is NP-hard, so it is
estimated from random subsets (`kruskal_rank_estimate`); `check_assumptions` gives both checks as
numbers for the capacity table.
"""

from __future__ import annotations

import torch
from torch import Tensor

from factstore.attention.model import MemorisationData


def context_ranks(contexts: Tensor, rtol: float | None = None) -> Tensor:
    """Numerical rank of every context matrix: contexts (M, n, d) -> ranks (M,) int64.

    The paper assumes rank n for each (so n <= d). The default tolerance is that of the dtype
    (eps x max(n, d) relative to the largest singular value), so float32 data are judged at
    float32 precision.
    """
    return torch.linalg.matrix_rank(contexts, rtol=rtol)


def random_subset_ranks(
    vectors: Tensor, subset_size: int, n_subsets: int, generator: torch.Generator, rtol: float | None = None
) -> Tensor:
    """Ranks of `n_subsets` random subsets of `subset_size` rows of vectors (N, d) -> (n_subsets,).

    The Kruskal rank (the largest k such that EVERY k rows are independent) is NP-hard to compute;
    if all sampled subsets of size k have rank k, the Kruskal rank is at least k with high
    probability over the sampled subsets. A rank below k disproves it outright.
    """
    if subset_size > vectors.shape[0]:
        raise ValueError(f"cannot draw subsets of {subset_size} from {vectors.shape[0]} vectors")
    order = torch.rand(n_subsets, vectors.shape[0], generator=generator).argsort(dim=1)[:, :subset_size]
    return torch.linalg.matrix_rank(vectors[order], rtol=rtol)  # (n_subsets,)


def kruskal_rank_estimate(vectors: Tensor, n_subsets: int, generator: torch.Generator) -> int:
    """Randomised estimate of the Kruskal rank of the rows of vectors (N, d): the largest k such
    that `n_subsets` random k-subsets all have rank k (an upper estimate: a failing subset proves
    the Kruskal rank is below k; passing ones make >= k likely). At most min(N, d)."""
    for k in range(min(vectors.shape), 0, -1):
        if bool(random_subset_ranks(vectors, k, n_subsets, generator).eq(k).all()):
            return k
    return 0


def check_assumptions(data: MemorisationData, n_subsets: int, generator: torch.Generator) -> dict[str, float]:
    """Both assumptions of the paper's theorem on one dataset, as numbers for a table.

    context_full_rank: fraction of the context matrices with rank n; kruskal_subsets_full_rank:
    fraction of random n-subsets of the queries with rank n; kruskal_rank_estimate: the
    randomised Kruskal rank of the queries (the theorem needs >= n); plus the smallest ranks seen.
    """
    n_context = data.context_size
    ranks = context_ranks(data.context_matrices())
    subset_size = min(n_context, data.size)
    subset_ranks = random_subset_ranks(data.queries, subset_size, n_subsets, generator)
    estimate = kruskal_rank_estimate(data.queries, n_subsets, generator)
    if bool((subset_ranks < subset_size).any()):  # a dependent n-subset proves the Kruskal rank < n
        estimate = min(estimate, subset_size - 1)
    return {
        "n_contexts": ranks.numel(),
        "context_rank_min": int(ranks.min()),
        "context_full_rank": float((ranks == n_context).double().mean()),
        "kruskal_subsets": n_subsets,
        "kruskal_subset_rank_min": int(subset_ranks.min()),
        "kruskal_subsets_full_rank": float((subset_ranks == subset_size).double().mean()),
        "kruskal_rank_estimate": estimate,
    }
