"""Least action for fully connected (overlapping) committee machines with 1-3 trainable hidden layers.

The multilayer form of Mitchison and Durbin's least action (1989; the cheapest repair by the
smallest weight change), with the choice noise of `least_action` (its module docstring: the
2-cycle and the log-normal cost factors). The machine: L hidden layers of H sign units, layer 1
reads the N inputs, layer l the H signs of layer l - 1, the output is the majority of layer L.

For a misclassified pattern, online (each correction sees the previous ones):

1. Layer L: the cheapest set of its units to flip so that the majority gives the label
   (`least_action.least_action_flips`), costs |h_j| / |input| (the smallest weight change that flips
   unit j: |input| = sqrt(N) in layer 1, sqrt(H) above; the same for every unit of a layer, so at
   one layer the choice is the tree committee's), each times exp(sigma xi).
2. Going down, layer l's required targets t^l (its signs with the chosen units flipped) can be
   reached in two ways: the flipped units change their own weights (cost: the sum of their costs),
   or a set of layer l - 1 units flips so that layer l, with its current weights, gives exactly t^l
   (cost: the sum of the lower units' costs; every non-empty subset of the H units is tried, 2^H - 1).
   The cheaper way is taken; if it is the layer below, its flipped units are its required targets
   and the same choice is made one layer down (layer 1 can only change its own weights).
3. The units that change their own weights take a perceptron step w_j += lr t_j s (s: the layer's
   current input, x for layer 1), a fixed absolute step.

With L = 1 step 2 never runs and the rule is the tree committee's least action with each unit
reading every input (tested: the same weights as `least_action.train_least_action` on a tree
whose K receptive fields are copies of the pattern). The same repair, without noise and on every
pattern at once, gives the internal representations of the LP polish (`polish_fc`): every unit is
then a perceptron from its layer's input to its targets, fitted by one least-slack LP, bottom-up.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch

from factstore.committee.architectures import Architecture
from factstore.committee.least_action import cost_factors, least_action_flips, unit_signs
from factstore.committee.polish import RememberedFits
from factstore.committee.training import ActiveSet, EmbeddingResult, online_epochs

MAX_SUBSET_WIDTH = 10  # 2^H - 1 lower-layer flip sets per repair: H <= 10 keeps this <= 1,023


@functools.lru_cache(maxsize=16)
def flip_subsets(width: int, device=None) -> torch.Tensor:
    """(2^H - 1, H) float 0/1: every non-empty set of units of a layer of width H (cached: read only)."""
    if width > MAX_SUBSET_WIDTH:
        raise ValueError(f"the layer-by-layer repair enumerates 2^H flip sets: H = {width} > {MAX_SUBSET_WIDTH}")
    rows = [bits for bits in itertools.product((0.0, 1.0), repeat=width) if any(bits)]
    return torch.tensor(rows, device=device)


def forward_signs(weights: list[torch.Tensor], x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Unnormalised fields and signs of every hidden layer, each (..., H).

    weights [(..., H, N), (..., H, H), ...] broadcastable against x (..., N)."""
    fields, signs = [], []
    layer_input = x
    for w in weights:
        h = torch.einsum("...hn,...n->...h", w, layer_input)
        fields.append(h)
        signs.append(unit_signs(h))
        layer_input = signs[-1]
    return fields, signs


def least_action_repair(
    weights: list[torch.Tensor],
    fields: list[torch.Tensor],
    signs: list[torch.Tensor],
    labels: torch.Tensor,
    factors: torch.Tensor | None = None,
    prefer_lower: bool = True,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The cheapest repair of every misclassified pattern (module docstring, steps 1-2).

    weights as `forward_signs` (only layers 2.. are read); fields, signs [(..., H)] per layer;
    labels (...); factors (..., L, H) the cost factors (None: none). Returns (targets, steps), per
    layer (..., H): targets the signs each layer should give (its signs with the repair's flips),
    steps True on the units that change their own weights (one layer per repaired pattern; all
    False where the machine is right).
    """
    layers = len(fields)
    inputs_norm = [math.sqrt(weights[0].shape[-1])] + [math.sqrt(f.shape[-1]) for f in fields[:-1]]
    costs = [fields[l].abs() / inputs_norm[l] * (1.0 if factors is None else factors[..., l, :]) for l in range(layers)]
    targets = [s.clone() for s in signs]
    steps = [torch.zeros_like(s, dtype=torch.bool) for s in signs]
    need = least_action_flips(fields[-1], labels, (), costs[-1])  # (..., H) units of layer L to flip
    targets[-1] = torch.where(need, -signs[-1], signs[-1])
    for l in range(layers - 1, 0, -1):
        own_cost = (costs[l] * need).sum(-1)  # (...,)
        subsets = flip_subsets(signs[l - 1].shape[-1], signs[l - 1].device)  # (S, H)
        flipped_input = signs[l - 1][..., None, :] * (1 - 2 * subsets)  # (..., S, H)
        reached = unit_signs(torch.einsum("...hi,...si->...sh", weights[l], flipped_input))
        exact = (reached == targets[l][..., None, :]).all(-1)  # (..., S) the layer gives t^l
        subset_cost = torch.where(exact, (subsets * costs[l - 1][..., None, :]).sum(-1), torch.inf)
        best_cost, best = subset_cost.min(-1)
        go_down = need.any(-1) & torch.isfinite(best_cost) if prefer_lower else need.any(-1) & (best_cost < own_cost)
        steps[l] = need & ~go_down[..., None]
        need = subsets[best].bool() & go_down[..., None]
        targets[l - 1] = torch.where(need, -signs[l - 1], signs[l - 1])
    steps[0] = need
    return targets, steps


def train_fc_least_action(
    architecture: Architecture,
    weights: list[torch.Tensor],
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float = 1.0,
    choice_noise: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[EmbeddingResult, list[torch.Tensor]]:
    """Online least action for B fully connected machines (module docstring).

    weights [(B, H, N), (B, H, H), ...]; patterns (B, P, N), labels and mask (B, P). The random
    orders and cost factors are drawn from `generator` as in `least_action.train_least_action`
    (factors (presentations, B, L, H), none at sigma = 0 or H = 1). Returns the per-instance result
    and the final weights of every instance (the LP polish starts from them).
    """
    if architecture.kind != "fc":
        raise ValueError("train_fc_least_action trains fully connected machines; trees: least_action.train_least_action")
    batch, p, _ = patterns.shape
    layers, width = len(weights), architecture.hidden
    result = EmbeddingResult.empty(batch, patterns.device)
    final = [w.clone() for w in weights]
    active = ActiveSet(batch, patterns.device, x=patterns, labels=labels, mask=mask,
                       **{f"w{l}": w.clone() for l, w in enumerate(weights)})
    def present(order: list[int]) -> torch.Tensor:
        w = [active[f"w{l}"] for l in range(layers)]
        x, y, m = active["x"], active["labels"], active["mask"]
        corrections = torch.zeros(len(active), dtype=torch.long, device=patterns.device)
        factors = None
        if width > 1:  # the same draws as one (presentations, batch, L x H) block, read per layer
            factors = cost_factors(len(order), len(active), layers * width, choice_noise, generator, patterns.device)
            factors = None if factors is None else factors.view(len(order), len(active), layers, width)
        for step, mu in enumerate(order):
            x_mu = x[:, mu]  # (b, N)
            fields, signs = forward_signs(w, x_mu)
            targets, steps = least_action_repair(w, fields, signs, y[:, mu], None if factors is None else factors[step])
            layer_inputs = [x_mu] + signs[:-1]
            for l in range(layers):
                move = (targets[l] * (steps[l] & m[:, mu, None]))  # (b, H): +-1 on the units that step
                w[l].add_(learning_rate * move[..., None] * layer_inputs[l][:, None, :])
            corrections += (torch.stack(steps).any(0).any(-1) & m[:, mu])
        return corrections

    def keep_final() -> None:
        for l in range(layers):
            final[l][active.index] = active[f"w{l}"]

    online_epochs(active, result, epochs, generator, present, keep_final)
    return result, final


def fc_errors(weights: list[np.ndarray], inputs: np.ndarray, labels: np.ndarray) -> int:
    """Misclassified patterns of one machine: weights [(H, N), (H, H), ...], inputs (P, N), labels (P,)."""
    _, signs = forward_signs([torch.as_tensor(w, dtype=torch.float64) for w in weights], torch.as_tensor(inputs, dtype=torch.float64))
    return int((signs[-1].sum(-1) * torch.as_tensor(labels, dtype=torch.float64) <= 0).sum())


def polish_fc_instance(weights: list[np.ndarray], inputs: np.ndarray, labels: np.ndarray, rounds: int) -> tuple[bool, list[np.ndarray], int]:
    """Polish one fully connected machine: weights [(H, N), (H, H), ...], inputs (P, N), labels (P,).

    Each round: the internal representations (every layer's targets on every pattern: the
    noiseless least-action repair of the misclassified patterns), then one least-slack LP per unit,
    layer 1 first, each layer fitted on the signs its (new) lower layers actually give. Returns
    (embedded, weights, LPs solved); stops as soon as the machine makes no error."""
    weights = [w.astype(float).copy() for w in weights]
    x = torch.as_tensor(inputs, dtype=torch.float64)
    y = torch.as_tensor(labels, dtype=torch.float64)
    fit = RememberedFits()
    for _ in range(rounds):
        if fc_errors(weights, inputs, labels) == 0:
            return True, weights, fit.solved
        w_t = [torch.as_tensor(w) for w in weights]
        fields, signs = forward_signs(w_t, x)
        targets, _ = least_action_repair(w_t, fields, signs, y)
        layer_input = inputs.astype(float)
        for l, w in enumerate(weights):
            for unit in range(w.shape[0]):
                w[unit], _ = fit(layer_input, targets[l][:, unit].numpy())
            layer_input = unit_signs(layer_input @ w.T)
    return fc_errors(weights, inputs, labels) == 0, weights, fit.solved


def polish_fc(
    weights: list[torch.Tensor], patterns: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, embedded: torch.Tensor, rounds: int
) -> tuple[torch.Tensor, int]:
    """Polish every instance not yet embedded: weights [(B, H, N), ...], patterns (B, P, N), labels and
    mask (B, P), embedded (B,) bool. Returns (embedded after the polish (B,), LPs solved); an instance
    embedded before is never touched."""
    after = embedded.clone().cpu()
    w = [layer.cpu().double().numpy() for layer in weights]
    x, y, counts = patterns.cpu().numpy(), labels.cpu().numpy(), mask.sum(-1).tolist()
    solved = 0
    for b in np.flatnonzero(~after.numpy()):
        found, _, lps = polish_fc_instance([layer[b] for layer in w], x[b, : counts[b]], y[b, : counts[b]], rounds)
        after[b] = found
        solved += lps
    return after, solved
