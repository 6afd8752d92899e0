"""The committee study's embedding step solved exactly by linear programming (the perceptron,
K = 1, only): `committee_lp.embedding` (the shared loop: factstore.committee.embedding_runs)."""

from __future__ import annotations

from pathlib import Path

import torch

from factstore.committee import separability
from factstore.committee.embedding_runs import check_solver, embedding_table


def _solve(architecture, weights, x, y, mask, params: dict, generator) -> dict:
    """Linear separability of each instance's patterns (`committee.embedding_runs.Solve`): exact,
    one LP each."""
    if architecture.kind != "tree" or architecture.hidden != 1:
        raise ValueError("the LP separability test is exact for the perceptron (tree with K = 1) only")
    counts = mask.sum(-1).tolist()
    x, y = x.cpu().numpy(), y.cpu().numpy()
    embedded = torch.tensor([separability.linearly_separable(x[b, :c], y[b, :c]) for b, c in enumerate(counts)])
    return {"embedded": embedded, "epochs": torch.zeros(len(counts), dtype=torch.long), "embedded_online": embedded,
            "lp_solves": len(counts)}


def embedding(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Whether each random instance is linearly separable, over N and alpha
    (`committee.embedding_runs.embedding_table`)."""
    check_solver(params, ("lp",), "committee_lp")
    return embedding_table(params, context, _solve)
