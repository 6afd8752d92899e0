"""Least action's attempts on a batch of committee-machine instances, merged so that an instance
counts as embedded when any attempt embeds it (each solution found is a proof, so the fraction
stays a certified lower bound): one attempt (online least action, multilayer on fully connected
machines or through a fixed upper-layer function, then the LP polish), restarts from fresh
weights on the instances left unembedded, the trajectory search on a tree's last online
weights, and the function search over the functions a fully connected machine's upper layers
realise. The committee study's least-action solvers (embedding_runs.Solve) are built from these.
"""

from __future__ import annotations

import torch

from factstore.committee import architectures, fc_least_action, least_action, polish, representation_search, upper_functions


def least_action_once(architecture, weights, x, y, mask, settings: dict, generator, function=None) -> dict[str, torch.Tensor]:
    """One attempt: online least action (multilayer for fully connected machines; through the fixed
    upper-layer function `function` when one is given), then its LP polish."""
    training = dict(epochs=settings["epochs"], learning_rate=settings["learning_rate"],
                    choice_noise=settings["choice_noise"], generator=generator)
    tree_weights = {}  # a tree's final online weights: where the trajectory search goes on from
    if function is not None:
        result, final = upper_functions.train_through_function(function, weights[0], x, y, mask, **training)
        embedded, solves = upper_functions.polish_and_verify(function, final, x, y, mask, result.embedded, settings["polish_rounds"])
    elif architecture.kind == "fc":
        result, final = fc_least_action.train_fc_least_action(architecture, weights, x, y, mask, **training)
        embedded, solves = fc_least_action.polish_fc(final, x, y, mask, result.embedded, settings["polish_rounds"])
    else:
        result, final = least_action.train_least_action(architecture, weights, x, y, mask, **training)
        embedded, solves = polish.polish(architecture, final, x, y, mask, result.embedded, settings["polish_rounds"])
        tree_weights = {"weights": final}
    return {"embedded": embedded.cpu(), "epochs": result.epochs.cpu(), "embedded_online": result.embedded.cpu(),
            "lp_solves": solves} | tree_weights


def attempts_in_turn(architecture, weights, x, y, mask, generator, attempts) -> tuple[dict, torch.Tensor]:
    """attempts[0] on every instance, then each further attempt, from fresh Gaussian weights (drawn
    from `generator`), on the instances still unembedded. Each attempt maps (weights, x, y, mask) of
    its instances to a solver's dict (`committee.embedding_runs.Solve`). Returns the merged dict (an instance is embedded when any
    attempt embeds it; epochs and LP solves add up; per-instance extras such as embedded_in_attempt
    and a tree's final online weights come from the attempt that ran last on it) and (B,) the attempt that embedded each instance (-1: none)."""
    solved = attempts[0](weights, x, y, mask)
    embedded_by = torch.where(solved["embedded"], 0, -1)
    for number, attempt in enumerate(attempts[1:], start=1):
        left = torch.nonzero(~solved["embedded"]).squeeze(1)
        if len(left) == 0:
            break
        fresh = architectures.initial_weights(architecture, len(left), generator, x.device)
        index = left.to(x.device)
        again = attempt(fresh, x[index], y[index], mask[index])
        solved["embedded"][left] = again["embedded"]
        solved["embedded_online"][left] |= again["embedded_online"]
        solved["epochs"][left] += again["epochs"]
        solved["lp_solves"] += again["lp_solves"]
        if "embedded_in_attempt" in again:
            solved["embedded_in_attempt"][left] = again["embedded_in_attempt"]
        if "weights" in again:
            solved["weights"][index] = again["weights"]
        embedded_by[left[again["embedded"]]] = number
    return solved, embedded_by


def least_action_with_restarts(architecture, weights, x, y, mask, settings: dict, generator, function=None) -> dict[str, torch.Tensor]:
    """Least action + polish, then `settings["restarts"]` further attempts on the instances still
    unembedded, each from fresh Gaussian weights and a fresh order and noise (drawn from
    `generator`, so reproducible). An instance counts as embedded when any attempt embeds it: each
    solution found is a proof, so the fraction stays a certified lower bound. Adds
    embedded_in_attempt (B,): the attempt that embedded it (0: the first), -1 if none; epochs and
    LP solves are summed over attempts."""
    def once(w, x_, y_, m_):
        return least_action_once(architecture, w, x_, y_, m_, settings, generator, function)

    solved, attempt = attempts_in_turn(architecture, weights, x, y, mask, generator, [once] * (settings["restarts"] + 1))
    solved["embedded_in_attempt"] = attempt
    if "weights" in solved and settings.get("search"):
        solved = trajectory_search(architecture, x, y, mask, solved, settings, generator)
    solved.pop("weights", None)
    return solved


def trajectory_search(architecture, x, y, mask, solved: dict, settings: dict, generator) -> dict:
    """The trajectory search (`committee.representation_search`) on the tree instances least action
    and its restarts left unembedded, from the online weights of the last attempt on each. Adds
    embedded_by_search (B,) bool: embedded by the search and by no attempt before it (the attempts'
    own column, embedded_in_attempt, keeps least action's reading alone)."""
    search = settings["search"]
    before = solved["embedded"].clone()
    after, epochs, solves, _ = representation_search.search(
        architecture, solved["weights"], x, y, mask, before, epochs=search["epochs"],
        polish_every=search["polish_every"], polish_rounds=search["polish_rounds"],
        learning_rate=settings["learning_rate"], choice_noise=settings["choice_noise"], generator=generator)
    return solved | {"embedded": after, "epochs": solved["epochs"] + epochs, "lp_solves": solved["lp_solves"] + solves,
                     "embedded_by_search": after & ~before}


def function_search(architecture, weights, x, y, mask, settings: dict, generator) -> dict[str, object]:
    """Least action + polish through each function the upper layers realise (`upper_functions`),
    the committee first, each further function on the instances still unembedded from fresh
    first-layer weights; restarts as `least_action_with_restarts` within each function. Adds
    upper_function: per instance the name of the function that embedded it ("" if none)."""
    if architecture.kind != "fc":
        raise ValueError("the function search solves fully connected machines; trees: least_action")
    functions = upper_functions.realisable_functions(architecture.hidden, architecture.layers)

    def through(function):
        return lambda w, x_, y_, m_: least_action_with_restarts(architecture, w, x_, y_, m_, settings, generator, function)

    solved, found_by = attempts_in_turn(architecture, weights, x, y, mask, generator, [through(f) for f in functions])
    return solved | {"upper_function": [functions[i].name if i >= 0 else "" for i in found_by.tolist()]}
