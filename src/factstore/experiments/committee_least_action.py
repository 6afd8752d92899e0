"""The committee study's embedding step solved by least action: `committee_least_action.embedding`
for the solvers least_action (online least action on trees, multilayer least action on fully
connected machines, then the LP polish, with restarts) and function_search (least action through
each function the upper layers of a fully connected machine realise). The shared loop:
factstore.committee.embedding_runs."""

from __future__ import annotations

from pathlib import Path

from factstore.committee import least_action_attempts
from factstore.committee.embedding_runs import check_solver, embedding_table


def _solve(architecture, weights, x, y, mask, params: dict, generator) -> dict:
    """Least action (`committee.embedding_runs.Solve`) with params["least_action"] its settings:
    restarts for solver least_action, the function search for function_search."""
    if params["solver"] == "least_action":
        return least_action_attempts.least_action_with_restarts(architecture, weights, x, y, mask, params["least_action"], generator)
    return least_action_attempts.function_search(architecture, weights, x, y, mask, params["least_action"], generator)


def embedding(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Whether each random instance is embedded, over N and alpha
    (`committee.embedding_runs.embedding_table`)."""
    check_solver(params, ("least_action", "function_search"), "committee_least_action")
    return embedding_table(params, context, _solve)
