"""The committee study's exact reference at small N: `committee_milp.embedding`, each instance of a
one-hidden-layer tree decided by the MILP over its internal representations
(factstore.committee.milp; the shared loop: factstore.committee.embedding_runs)."""

from __future__ import annotations

from pathlib import Path

import torch

from factstore.committee import milp
from factstore.committee.embedding_runs import check_solver, embedding_table


def _solve(architecture, weights, x, y, mask, params: dict, generator) -> dict:
    """The MILP on every instance (`committee.embedding_runs.Solve`), params["milp"] {node_limit,
    time_limit}. Adds outcome (B names): embedded, not embeddable or undecided."""
    settings = params["milp"]
    counts = mask.sum(-1).tolist()
    x, y = x.cpu().numpy(), y.cpu().numpy()
    outcomes = [milp.embed(architecture, x[b, :c], y[b, :c], settings["node_limit"], settings["time_limit"]).outcome
                for b, c in enumerate(counts)]
    embedded = torch.tensor([outcome == milp.EMBEDDED for outcome in outcomes])
    return {"embedded": embedded, "epochs": torch.zeros(len(counts), dtype=torch.long), "embedded_online": embedded,
            "lp_solves": 0, "outcome": outcomes}


def embedding(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Whether each random instance is embeddable, proven either way or undecided, over N and alpha
    (`committee.embedding_runs.embedding_table`)."""
    check_solver(params, ("milp",), "committee_milp")
    return embedding_table(params, context, _solve)
