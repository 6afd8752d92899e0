"""Online least-action learning for tree committee machines (Nilsson 1965; Mitchison and Durbin 1989).

The patterns are presented one at a time (each correction sees the weights the previous ones
left). For a misclassified pattern the cheapest repair is found: the fewest first-layer units to
flip, chosen with the smallest |h_k| = |w_k . x_k| (the least action: the weight change needed to
flip unit k is |h_k| / |x_k| and |x_k| is the same for every unit). Each chosen unit takes a
perceptron step w_k += lr t_k x_k toward its target sign t_k, a fixed absolute step (not scaled by
|w|, so relative steps shrink as the weights grow and the weights settle). With K = 1 this is the
perceptron rule. With fixed majority layers above the first (`groups`), the repair is the cheapest
set of flips through the majority tree (`least_action_flips`).

An instance is embedded when a whole pass over its patterns makes no correction: the weights then
classify every pattern, so the solution found is a proof that the instance is embeddable. B
instances are trained at once (the loop runs over patterns, every operation over instances), and
an embedded instance leaves the batch.
"""

from __future__ import annotations

import torch

from factstore.committee.architectures import Architecture
from factstore.committee.training import ActiveSet, EmbeddingResult


def unit_signs(fields: torch.Tensor) -> torch.Tensor:
    """sign(h) with h = 0 read as -1: a unit exactly at zero counts as wrong for either label."""
    return torch.where(fields > 0, 1.0, -1.0).to(fields.dtype)


def least_action_flips(fields: torch.Tensor, labels: torch.Tensor, groups: tuple[int, ...] = ()) -> torch.Tensor:
    """Which first-layer units to flip so that the majority tree outputs the label, at least action.

    fields (..., K) unnormalised first-layer fields; labels (...) in {-1, +1}; groups the fan-ins
    of the fixed majority layers above the first (the output is the majority of the top layer).
    Returns a (..., K) bool mask, all False where the machine is already right. A majority node of
    fan-in g that outputs s flips when m = #(children at s) - (g - 1) / 2 of its children at s
    flip; its cost is the sum of the m cheapest children's costs (a first-layer unit costs |h|),
    and the chosen children are flipped in turn, down to the first layer.
    """
    values, costs = unit_signs(fields), fields.abs()
    levels = []  # per majority level: the mask (..., nodes, fan_in) of children to flip if the node flips
    top_width = values.shape[-1]
    for fan_in in (*groups, None):
        g = top_width if fan_in is None else fan_in
        children_values = values.unflatten(-1, (-1, g))
        children_costs = costs.unflatten(-1, (-1, g))
        node = torch.sign(children_values.sum(-1))
        at_node = children_values == node[..., None]
        needed = at_node.sum(-1) - (g - 1) // 2  # >= 1: children at the node's sign to flip
        candidate = torch.where(at_node, children_costs, torch.full_like(children_costs, float("inf")))
        order = candidate.argsort(-1)
        rank = order.argsort(-1)
        chosen = at_node & (rank < needed[..., None])
        levels.append(chosen)
        values = node
        costs = torch.where(chosen, children_costs, torch.zeros_like(children_costs)).sum(-1)
        top_width = values.shape[-1]
    flip = (values[..., 0] != labels)[..., None]  # (..., 1): the output node must flip
    for chosen in reversed(levels):
        flip = (chosen & flip[..., None]).flatten(-2)
    return flip


def train_least_action(
    architecture: Architecture,
    weights: list[torch.Tensor],
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[EmbeddingResult, torch.Tensor]:
    """Online least-action learning of B tree committee machines (any fixed majority `groups`).

    weights [(B, K, N / K)]; patterns (B, P, N), labels and mask (B, P). Each epoch presents the
    patterns in a fresh random order (`generator`; shared by the instances, which are independent
    draws anyway), padding patterns (mask False) never correct anything. Returns the per-instance
    result and the final first-layer weights (B, K, N / K) of every instance (the solution where
    embedded: the LP polish starts from the others).
    """
    if architecture.kind != "tree":
        raise ValueError("least-action learning needs fixed majority layers above the first: a tree machine")
    batch, p, n = patterns.shape
    k = architecture.hidden
    result = EmbeddingResult.empty(batch, patterns.device)
    final = weights[0].clone()
    x_all = patterns.view(batch, p, k, n // k)
    active = ActiveSet(batch, patterns.device, w=final.clone(), x=x_all, labels=labels, mask=mask)
    for epoch in range(epochs):
        order = torch.randperm(int(active["mask"].sum(-1).max()), generator=generator).tolist()
        w, x, y, m = active["w"], active["x"], active["labels"], active["mask"]
        corrections = torch.zeros(len(active), dtype=torch.long, device=patterns.device)
        for mu in order:
            x_mu = x[:, mu]  # (b, K, n / K)
            fields = torch.einsum("bkn,bkn->bk", x_mu, w)
            flips = least_action_flips(fields, y[:, mu], architecture.groups) & m[:, mu, None]
            targets = -unit_signs(fields) * flips  # the sign each flipped unit should take; 0 elsewhere
            w.add_(learning_rate * targets[..., None] * x_mu)
            corrections += flips.any(-1)
        final[active.index] = w
        active.record(result, corrections, epoch)
        if len(active) == 0:
            break
    else:
        if len(active):
            result.epochs[active.index] = epochs
    return result, final
