"""The committee study's embedding step solved by back-propagation (the paper's solver):
`committee_backprop.embedding` (the shared loop: factstore.committee.embedding_runs)."""

from __future__ import annotations

from pathlib import Path

from factstore.committee import backprop
from factstore.committee.embedding_runs import check_solver, embedding_table


def _solve(architecture, weights, x, y, mask, params: dict, generator) -> dict:
    """Back-propagation on every instance of the batch (`committee.embedding_runs.Solve`);
    params["backprop"] its settings. The generator is not used: the initial weights are drawn already."""
    settings = params["backprop"]
    result = backprop.train_backprop(
        architecture, weights, x, y, mask, epochs=settings["epochs"], learning_rate=settings["learning_rate"],
        beta_start=settings["beta_start"], beta_end=settings["beta_end"], check_every=settings["check_every"],
    )
    embedded = result.embedded.cpu()
    return {"embedded": embedded, "epochs": result.epochs.cpu(), "embedded_online": embedded, "lp_solves": 0}


def embedding(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Whether each random instance is embedded, over N and alpha
    (`committee.embedding_runs.embedding_table`)."""
    check_solver(params, ("backprop",), "committee_backprop")
    return embedding_table(params, context, _solve)
