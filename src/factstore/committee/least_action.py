"""Online least-action learning for tree committee machines (Nilsson 1965; Mitchison and Durbin 1989).

The patterns are presented one at a time (each correction sees the weights the previous ones
left). For a misclassified pattern the cheapest repair is found: the fewest first-layer units to
flip, chosen with the smallest |h_k| = |w_k . x_k| (the least action: the weight change needed to
flip unit k is |h_k| / |x_k| and |x_k| is the same for every unit). Each chosen unit takes a
perceptron step w_k += lr t_k x_k toward its target sign t_k, a fixed absolute step (not scaled by
|w|, so relative steps shrink as the weights grow and the weights settle). With K = 1 this is the
perceptron rule. With fixed majority layers above the first (`groups`), the repair is the cheapest
set of flips through the majority tree (`least_action_flips`).

The 2-cycle, and the randomised choice that breaks it. Two patterns whose receptive-field
sub-patterns coincide on unit k (frequent at N / K = 5-12 inputs per unit) can demand opposite
signs of k; when k is the cheapest flip for both, each correction undoes the other. With a fixed
absolute step the field of k on that sub-pattern stays within one step (|x_k|^2 = N / K) of zero
while every other unit's fields grow with its weights, so k stays the cheapest for both patterns
forever: an exact 2-cycle, whatever the order of presentation, and the instance is never embedded
(K = 5 at N = 60 stalled near 2 per weight; the 9 -> 3 -> 1 tree at N = 45 embedded nothing). A
deterministic step of any size (a margin, Nilsson's fractional correction) keeps the cycle: only
unit k is ever touched. So the choice is randomised (`choice_noise` = sigma): at each
presentation each unit's cost |h_k| is multiplied by an independent log-normal factor
exp(sigma xi_k), xi ~ N(0, 1), and the cheapest set under the perturbed costs is flipped. The
cheapest unit is still the likeliest choice, a unit whose cost is far above the cheapest is
almost never chosen, and a unit locked in a conflict is sometimes passed over for the next
cheapest, which resolves the conflict (Nilsson's committee procedure adjusts "the fewest units
closest to threshold"; this chooses among the near-closest). sigma = 0 is the deterministic
rule; with K = 1 there is no choice and the rule is the perceptron's, noise or not.

An instance is embedded when a whole pass over its patterns makes no correction: the weights then
classify every pattern, so the solution found is a proof that the instance is embeddable. B
instances are trained at once (the loop runs over patterns, every operation over instances), and
an embedded instance leaves the batch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from factstore.committee.architectures import Architecture
from factstore.committee.training import ActiveSet, EmbeddingResult, online_epochs


def unit_signs(fields):
    """sign(h) with h = 0 read as -1: a unit exactly at zero counts as wrong for either label.
    fields a numpy array or torch tensor; the signs are of the same kind and dtype."""
    if isinstance(fields, np.ndarray):
        return np.where(fields > 0, 1.0, -1.0).astype(fields.dtype, copy=False)
    return torch.where(fields > 0, 1.0, -1.0).to(fields.dtype)


def flip_targets(fields, flips):
    """(..., K): the sign each flipped unit should take (-sign(h), h = 0 read as -1, so +1 there), 0
    on the units not flipped; the online solvers' perceptron step is lr * flip_targets * x.
    fields and the bool mask flips numpy arrays or torch tensors; the result of the same kind."""
    return -unit_signs(fields) * flips


def least_action_flips(fields, labels, groups: tuple[int, ...] = (), costs=None):
    """Which first-layer units to flip so that the majority tree outputs the label, at least action.

    fields (..., K) unnormalised first-layer fields; labels (...) in {-1, +1}; groups the fan-ins
    of the fixed majority layers above the first (the output is the majority of the top layer);
    costs (..., K) the cost of flipping each unit, |fields| when None (the least action; the
    solver passes randomly perturbed costs to break ties and cycles). The arrays are all numpy
    or all torch, and the mask is of the same kind: numpy is the online solver's inner loop on the
    CPU (`online_epoch_numpy`), where a presentation is ~15 operations on (b, K) arrays and torch's
    per-call overhead was most of the committee runs' CPU time; torch serves the other devices.
    Returns a (..., K) bool mask, all False where the machine is already right. A majority node of
    fan-in g that outputs s flips when m = #(children at s) - (g - 1) / 2 of its children at s
    flip; its cost is the sum of the m cheapest children's costs (a first-layer unit costs |h|;
    tied children in index order), and the chosen children are flipped in turn, down to the first
    layer.
    """
    xp = np if isinstance(fields, np.ndarray) else torch
    values = unit_signs(fields)
    costs = abs(fields) if costs is None else costs
    levels = []  # per majority level: the mask (..., nodes, fan_in) of children to flip if the node flips
    fan_ins = (*groups, values.shape[-1] // math.prod(groups))
    for level, g in enumerate(fan_ins):
        children_values = values.reshape(*values.shape[:-1], -1, g)
        children_costs = costs.reshape(*costs.shape[:-1], -1, g)
        node = xp.sign(children_values.sum(-1))
        at_node = children_values == node[..., None]
        needed = at_node.sum(-1) - (g - 1) // 2  # >= 1: children at the node's sign to flip
        order = _stable_argsort(xp.where(at_node, children_costs, math.inf))
        chosen = _stable_argsort(order) < needed[..., None]  # each child's place in the order < needed
        levels.append(chosen)
        values = node
        if level < len(fan_ins) - 1:  # the node's cost of flipping, for the level above
            costs = xp.where(chosen, children_costs, 0.0).sum(-1)
    flip = (values[..., 0] != labels)[..., None]  # (..., 1): the output node must flip
    for chosen in reversed(levels):
        flip = (chosen & flip[..., None]).reshape(*chosen.shape[:-2], -1)
    return flip


def _stable_argsort(array):
    """Argsort over the last axis of a numpy array or torch tensor, ties in index order."""
    if isinstance(array, np.ndarray):
        return np.argsort(array, axis=-1, kind="stable")
    return torch.argsort(array, dim=-1, stable=True)


def sequential_fields(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(b, K) fields sum_n x w of float32 sub-patterns (n, b, K) (or (n, b, 1): every unit reads
    the same pattern) and weights (n, b, K), laid out n first (`online_active_set`), summed left to
    right as torch's CPU einsum sums them for the trees' receptive fields (its small-bmm kernel;
    tested bit for bit up to n = 120): numpy's einsum sums in another order, and a last-bit
    difference can change which unit is cheapest. x is +-1, so every product is exact; a reduction
    over the leading axis adds whole rows in turn, which is the sequential sum, except for a single
    column (b K = 1), which numpy sums pairwise: that one takes the cumulative sum."""
    products = x * w
    if products[0].size > 1:
        return np.add.reduce(products, axis=0)
    return np.cumsum(products, axis=0)[-1]


def cost_factors(
    presentations: int, batch: int, units: int, sigma: float, generator: torch.Generator | None, device
) -> torch.Tensor | None:
    """Log-normal factors exp(sigma xi), (presentations, batch, units), for one epoch's unit costs;
    None when there is no choice to randomise (sigma = 0 or a single unit)."""
    if sigma == 0 or units == 1:
        return None
    return torch.exp(sigma * torch.randn((presentations, batch, units), generator=generator)).to(device)


def online_epoch_numpy(
    active: ActiveSet, order: list[int], factors: torch.Tensor | None, repair, learning_rate: float,
) -> torch.Tensor:
    """One epoch of an online least-action solver in numpy: the CPU loop of `train_least_action`
    and of `upper_functions.train_through_function`, on views of the active set's tensors (its
    weights are updated IN PLACE). A presentation is ~15 operations on (b, K) arrays, and torch's
    per-call overhead was most of it; the fields, flips and steps are the torch loop's to the last
    bit (tested).

    active (`online_active_set`, on the CPU): w (b, K, n); x (P, n, b, K) ((P, n, b, 1) when every
    unit reads the whole pattern); labels, mask (b, P). factors (len(order), b, K) or None
    (`cost_factors`); repair(fields, labels, costs) -> (b, K) bool flips. Returns each instance's
    corrections (b,), as the torch loop does.
    """
    w, x, labels, mask = (active[name].numpy() for name in ("w", "x", "labels", "mask"))
    factors = None if factors is None else factors.numpy()
    weights = np.ascontiguousarray(w.transpose(2, 0, 1))  # (n, b, K), as the patterns
    corrections = np.zeros(len(w), dtype=np.int64)
    for step, mu in enumerate(order):
        x_mu = x[mu]
        fields = sequential_fields(x_mu, weights)
        costs = np.abs(fields) if factors is None else np.abs(fields) * factors[step]
        flips = repair(fields, labels[:, mu], costs) & mask[:, mu, None]
        weights += (learning_rate * flip_targets(fields, flips)) * x_mu
        corrections += flips.any(-1)
    w[...] = weights.transpose(1, 2, 0)
    return torch.from_numpy(corrections)


def online_active_set(batch: int, on_cpu: bool, w: torch.Tensor, x: torch.Tensor, labels: torch.Tensor,
                      mask: torch.Tensor) -> ActiveSet:
    """The active set of an online solver: weights w (B, K, n), patterns x (B, P, K, n) (the unit's
    sub-pattern; (B, P, 1, n) when every unit reads the whole pattern), labels and mask (B, P).
    For the numpy loop (on_cpu) the patterns are kept laid out (P, n, B, K), the instances on
    dimension 2: a presentation's sub-patterns x[mu] (n, b, K) are then one contiguous block and
    its fields a sum over their leading axis (`sequential_fields`; the strided cumulative sum over
    the last axis of the (b, K, n) layout was a third of the loop)."""
    if on_cpu:
        return ActiveSet(batch, x.device, batch_dims={"x": 2}, w=w, x=x.permute(1, 3, 0, 2).contiguous(), labels=labels, mask=mask)
    return ActiveSet(batch, x.device, w=w, x=x, labels=labels, mask=mask)


def presents_in_numpy(device: torch.device) -> bool:
    """Whether `train_least_action` presents the patterns with numpy (`online_epoch_numpy`):
    on the CPU; other devices take the torch path."""
    return torch.device(device).type == "cpu"


def train_least_action(
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
) -> tuple[EmbeddingResult, torch.Tensor]:
    """Online least-action learning of B tree committee machines (any fixed majority `groups`).

    weights [(B, K, N / K)]; patterns (B, P, N), labels and mask (B, P). Each epoch presents the
    patterns in a fresh random order (`generator`; shared by the instances, which are independent
    draws anyway), padding patterns (mask False) never correct anything. choice_noise: sigma of the
    log-normal factors on the units' costs (module docstring), drawn per instance, presentation and
    unit from `generator` on the CPU (reproducible on any device); none are drawn at sigma = 0 or
    K = 1, so those runs are the deterministic rule with the same random orders. Returns the per-instance
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
    on_cpu = presents_in_numpy(patterns.device)
    active = online_active_set(batch, on_cpu, final.clone(), x_all, labels, mask)

    def repair(fields, labels, costs):
        return least_action_flips(fields, labels, architecture.groups, costs)

    def present(order: list[int]) -> torch.Tensor:
        factors = cost_factors(len(order), len(active), k, choice_noise, generator, patterns.device)
        if on_cpu:  # the same presentations in numpy (`online_epoch_numpy`)
            return online_epoch_numpy(active, order, factors, repair, learning_rate)
        w, x, y, m = active["w"], active["x"], active["labels"], active["mask"]
        corrections = torch.zeros(len(active), dtype=torch.long, device=patterns.device)
        for step, mu in enumerate(order):
            x_mu = x[:, mu]  # (b, K, n / K)
            fields = torch.einsum("bkn,bkn->bk", x_mu, w)
            costs = None if factors is None else fields.abs() * factors[step]
            flips = least_action_flips(fields, y[:, mu], architecture.groups, costs) & m[:, mu, None]
            w.addcmul_(flip_targets(fields, flips)[..., None], x_mu, value=learning_rate)
            corrections += flips.any(-1)
        return corrections

    def keep_final() -> None:
        final[active.index] = active["w"]

    online_epochs(active, result, epochs, generator, present, keep_final)
    return result, final
