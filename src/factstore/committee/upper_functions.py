"""Fully connected machines solved through the Boolean functions their upper layers can compute.

A fully connected machine with L hidden layers of H sign units (no biases) and a majority output
computes y = f(s), where s = sign(W_1 x) are the first layer's H signs and f is the Boolean
function its upper layers (layers 2..L and the output) compute of them. Fixing f turns the
machine into a one-layer machine with a fixed output function (the committee is f = majority, the
parity machine f = product), and least action applies to it as to the trees: for a misclassified
pattern, flip the cheapest set of first-layer units that makes f give the label (every non-empty
set is tried: 2^H - 1), each flipped unit taking a fixed perceptron step. The LP polish is the
trees': for a fixed internal representation every first-layer unit is a perceptron (one
least-slack LP each).

Which f to fix: the functions the upper layers realise with some weights. Without biases every
unit is odd (sign(w . (-s)) = -sign(w . s)), so the whole machine is odd: f(-s) = -f(s). With H = 3
one upper layer already realises all 2^(2^(H-1)) = 16 odd functions of three signs (enumerated
over small integer weights: `realisable_functions`, tested), and more layers realise no more.
Negating or permuting the first layer's units is absorbed by its weights, so one function per
class under these symmetries is enough; a function that ignores a unit (f(s) = s_1, the
perceptron) is skipped: the committee realises the same machine with three copies of one unit.
At H = 3 and L >= 2 the search therefore runs the committee and the parity machine; at L = 1 the
machine's own majority only. Each instance is tried with each function in turn (those still
unembedded), and counts as embedded when the full machine, its first layer with the found weights
and its upper layers with the function's integer weights, classifies every pattern: a proof.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from factstore.committee import least_action
from factstore.committee.architectures import Architecture
from factstore.committee.fc_least_action import fc_errors, flip_subsets
from factstore.committee.least_action import cost_factors, flip_targets, online_active_set, online_epoch_numpy, unit_signs
from factstore.committee.polish import RememberedFits
from factstore.committee.training import EmbeddingResult, online_epochs

MAX_ENUMERATED_WIDTH = 3  # the upper-layer enumeration tries |unit weights|^H layers: H <= 3 keeps it ~10^5
UNIT_WEIGHT_VALUES = (-2, -1, 0, 1, 2)  # integer weights of the enumerated upper units


@dataclass(frozen=True)
class UpperFunction:
    """A Boolean function of the first layer's H signs and upper-layer weights that compute it.

    table (2^H,) in {-1, +1}: f at the sign vector whose row in `sign_vectors(H)` has that index;
    upper_weights [(H, H)] * (L - 1): integer weights of layers 2..L (the output is their majority)."""

    name: str
    table: tuple[int, ...]
    upper_weights: tuple[np.ndarray, ...]


@functools.lru_cache(maxsize=8)
def sign_vectors(width: int) -> torch.Tensor:
    """(2^H, H): every sign vector of H units, row index = the binary number of (s > 0) (first unit most significant)."""
    return torch.tensor(list(itertools.product((-1.0, 1.0), repeat=width)))


@functools.lru_cache(maxsize=16)
def _place_values(width: int, device) -> torch.Tensor:
    """(H,) long: 2^(H-1), ..., 2, 1 (cached: read only)."""
    return 2 ** torch.arange(width - 1, -1, -1, device=device)


def table_index(signs):
    """(...) integer: the row of `sign_vectors` of each sign vector in signs (..., H), a numpy array
    or torch tensor (the index is of the same kind); a field may stand for its sign (> 0 is +1,
    <= 0 is -1, as `unit_signs`)."""
    if isinstance(signs, np.ndarray):
        return ((signs > 0) * _place_values(signs.shape[-1], None).numpy()).sum(-1)
    return ((signs > 0).long() * _place_values(signs.shape[-1], signs.device)).sum(-1)


def _nonzero_units(width: int) -> np.ndarray:
    """(U, H) integer weight vectors whose field w . s is never zero on a sign vector (no ties),
    the smallest (in |w|_1) first."""
    candidates = np.array(list(itertools.product(UNIT_WEIGHT_VALUES, repeat=width)), dtype=float)
    candidates = candidates[np.argsort(np.abs(candidates).sum(1), kind="stable")]
    fields = candidates @ sign_vectors(width).numpy().T
    return candidates[(fields != 0).all(1)]


def _canonical(table: tuple[int, ...], width: int) -> tuple[int, ...]:
    """The smallest table over every negation and permutation of the inputs (one per symmetry class)."""
    signs = sign_vectors(width)
    values = torch.tensor(table)
    forms = []
    for order in itertools.permutations(range(width)):
        for negation in itertools.product((-1.0, 1.0), repeat=width):
            moved = signs[:, list(order)] * torch.tensor(negation)
            forms.append(tuple(values[table_index(moved)].tolist()))
    return min(forms)


def _ignores_a_unit(table: tuple[int, ...], width: int) -> bool:
    signs, values = sign_vectors(width), torch.tensor(table)
    for unit in range(width):
        flipped = signs.clone()
        flipped[:, unit] *= -1
        if bool((values[table_index(flipped)] == values).all()):
            return True
    return False


@functools.lru_cache(maxsize=8)
def realisable_functions(width: int, layers: int) -> tuple[UpperFunction, ...]:
    """One function per symmetry class that L hidden layers of H units realise, each with integer
    upper-layer weights (module docstring); functions that ignore a unit are left out.

    layers = 1: the majority of the first layer. layers >= 2: every function one layer of units
    with weights in UNIT_WEIGHT_VALUES (and no ties) computes under the majority output, with
    identity layers above it (each unit copies one sign); the committee (majority) first."""
    if width > MAX_ENUMERATED_WIDTH:
        raise ValueError(f"the upper-layer functions are enumerated for H <= {MAX_ENUMERATED_WIDTH}, got H = {width}")
    if width % 2 == 0:
        raise ValueError(f"a majority output needs an odd width, got H = {width}")
    signs = sign_vectors(width).numpy()
    majority = tuple(int(v) for v in np.sign(signs.sum(1)))
    if layers == 1:
        return (UpperFunction("majority", majority, ()),)
    units = _nonzero_units(width)
    unit_outputs = np.sign(signs @ units.T)  # (2^H, U)
    # every layer of H enumerated units at once: the majority of their outputs as a 2^H-bit code
    def along(values: np.ndarray, unit: int, leading: int) -> np.ndarray:
        """values (..., U) broadcast along axis `unit` of the H unit axes after `leading` axes."""
        return np.expand_dims(values, tuple(leading + j for j in range(width) if j != unit))

    votes = sum(along(unit_outputs, i, 1) for i in range(width)).reshape(len(signs), -1)  # (2^H, U^H)
    codes = ((votes > 0) * (2 ** np.arange(len(signs)))[:, None]).sum(0)
    sizes = sum(along(np.abs(units).sum(1), i, 0) for i in range(width)).ravel()
    order = np.lexsort((sizes, codes))  # by code, then the smallest total |w|_1 first
    _, first = np.unique(codes[order], return_index=True)
    witnesses = {}
    for index in order[first]:  # one layer per realised table: its smallest
        table = tuple(int(v) for v in np.sign(votes[:, index]))
        witnesses[table] = units[list(np.unravel_index(index, (len(units),) * width))]
    classes: dict[tuple[int, ...], tuple[int, ...]] = {}
    for table in sorted(witnesses, key=lambda t: (t != majority, t)):
        if not _ignores_a_unit(table, width):
            classes.setdefault(_canonical(table, width), table)
    identity = np.eye(width)
    functions = []
    named = {_canonical(majority, width): "majority", _canonical(tuple(int(v) for v in signs.prod(1)), width): "parity"}
    for canonical, table in classes.items():
        name = named.get(canonical, "f" + "".join("+" if v > 0 else "-" for v in table))
        functions.append(UpperFunction(name, table, (witnesses[table],) + (identity,) * (layers - 2)))
    return tuple(functions)


def outputs_after_flips(table: torch.Tensor) -> torch.Tensor:
    """(2^H, 2^H - 1): f's output on each sign vector (a row of `sign_vectors`) after each non-empty
    set of its units (a row of `flip_subsets`) is flipped. table (2^H,)."""
    width = len(table).bit_length() - 1
    signs = sign_vectors(width).to(table.device)
    return table[table_index(signs[:, None, :] * (1 - 2 * flip_subsets(width, table.device)))]


def cheapest_flips(table, fields, labels, costs=None, after_flips=None, subsets=None):
    """(..., H) bool: the cheapest set of first-layer units to flip so that f gives the label; all
    False where it already does. table (2^H,), fields (..., H), labels (...), costs (..., H) (|fields|
    when None); after_flips: `outputs_after_flips(table)`, subsets: `flip_subsets(H)`, computed
    here when None (the online solver passes them once). The arrays are all numpy or all torch, and
    the mask is of the same kind: numpy is the online solver's loop on the CPU (torch's per-call
    overhead was most of a presentation), which must pass after_flips and subsets. Every non-empty
    set is tried (ties: the first in `flip_subsets` order); f is odd, so flipping all units always
    works."""
    xp = np if isinstance(fields, np.ndarray) else torch
    costs = abs(fields) if costs is None else costs
    after_flips = outputs_after_flips(table) if after_flips is None else after_flips
    subsets = flip_subsets(fields.shape[-1], fields.device) if subsets is None else subsets  # (S, H)
    index = table_index(fields)
    total = xp.where(after_flips[index] == labels[..., None], (costs[..., None, :] * subsets).sum(-1), math.inf)
    chosen = subsets[total.argmin(-1)] != 0
    return chosen & (table[index] != labels)[..., None]


def train_through_function(
    function: UpperFunction,
    weights: torch.Tensor,
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float = 1.0,
    choice_noise: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[EmbeddingResult, torch.Tensor]:
    """Online least action of B first layers (B, H, N) under the fixed output function f.

    patterns (B, P, N), labels and mask (B, P). The orders and cost factors are drawn as in
    `least_action.train_least_action` (factors (presentations, B, H)), so with f = majority the
    steps are the committee's. Returns the per-instance result and the final first-layer weights."""
    batch = patterns.shape[0]
    width = weights.shape[1]
    table = torch.tensor(function.table, dtype=patterns.dtype, device=patterns.device)
    after_flips = outputs_after_flips(table)
    result = EmbeddingResult.empty(batch, patterns.device)
    final = weights.clone()
    on_cpu = least_action.presents_in_numpy(patterns.device)
    # every unit reads the whole pattern: (B, P, 1, N), the online solvers' layout (`online_active_set`)
    active = online_active_set(batch, on_cpu, weights.clone(), patterns[:, :, None, :], labels, mask)
    if on_cpu:  # the numpy loop's repair reads numpy copies, made once (a CUDA tensor has none)
        table_np, after_np, subsets = table.numpy(), after_flips.numpy(), flip_subsets(width).numpy()

        def repair(fields, labels, costs):
            return cheapest_flips(table_np, fields, labels, costs, after_np, subsets)

    def present(order: list[int]) -> torch.Tensor:
        factors = cost_factors(len(order), len(active), width, choice_noise, generator, patterns.device)
        if on_cpu:  # the same presentations in numpy (`least_action.online_epoch_numpy`)
            return online_epoch_numpy(active, order, factors, repair, learning_rate)
        w, x, y, m = active["w"], active["x"], active["labels"], active["mask"]
        corrections = torch.zeros(len(active), dtype=torch.long, device=patterns.device)
        for step, mu in enumerate(order):
            x_mu = x[:, mu, 0]  # (b, N): the pattern every unit reads
            fields = torch.einsum("bhn,bn->bh", w, x_mu)
            costs = None if factors is None else fields.abs() * factors[step]
            flips = cheapest_flips(table, fields, y[:, mu], costs, after_flips) & m[:, mu, None]
            w.addcmul_(flip_targets(fields, flips)[..., None], x_mu[:, None, :], value=learning_rate)
            corrections += flips.any(-1)
        return corrections

    def keep_final() -> None:
        final[active.index] = active["w"]

    online_epochs(active, result, epochs, generator, present, keep_final)
    return result, final


def machine_weights(function: UpperFunction, first_layer: np.ndarray) -> list[np.ndarray]:
    """The full machine's weights [(H, N), (H, H), ...]: the first layer and f's upper layers."""
    return [first_layer] + [w.astype(float) for w in function.upper_weights]


def polish_instance(function: UpperFunction, weights: np.ndarray, inputs: np.ndarray, labels: np.ndarray, rounds: int) -> tuple[bool, np.ndarray, int]:
    """The trees' LP polish under f: weights (H, N), inputs (P, N), labels (P,). Each round: the
    noiseless cheapest repair of every misclassified pattern gives every unit's targets, then one
    least-slack LP per unit. Returns (embedded: the FULL machine classifies every pattern, weights, LPs solved)."""
    table = torch.tensor(function.table, dtype=torch.float64)
    weights = weights.astype(float).copy()
    x, y = torch.as_tensor(inputs, dtype=torch.float64), torch.as_tensor(labels, dtype=torch.float64)
    fit = RememberedFits()
    for _ in range(rounds):
        if fc_errors(machine_weights(function, weights), inputs, labels) == 0:
            return True, weights, fit.solved
        fields = x @ torch.as_tensor(weights).T
        targets = unit_signs(fields) * torch.where(cheapest_flips(table, fields, y), -1.0, 1.0).double()
        for unit in range(weights.shape[0]):
            weights[unit], _ = fit(inputs.astype(float), targets[:, unit].numpy())
    return fc_errors(machine_weights(function, weights), inputs, labels) == 0, weights, fit.solved


def polish_and_verify(
    function: UpperFunction, weights: torch.Tensor, patterns: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
    embedded: torch.Tensor, rounds: int,
) -> tuple[torch.Tensor, int]:
    """Polish every instance not yet embedded, and check every embedded one on the full machine.

    weights (B, H, N), patterns (B, P, N), labels and mask (B, P), embedded (B,) bool (online).
    Returns (embedded (B,), LPs solved). An online solution the full machine does not reproduce is
    a defect, not a capacity: it raises."""
    after = embedded.clone().cpu()
    w, x, y, counts = weights.cpu().double().numpy(), patterns.cpu().numpy(), labels.cpu().numpy(), mask.sum(-1).tolist()
    solved = 0
    for b in range(len(counts)):
        inputs, targets = x[b, : counts[b]], y[b, : counts[b]]
        if after[b]:
            if fc_errors(machine_weights(function, w[b]), inputs, targets) != 0:
                raise RuntimeError(f"instance {b}: the online solution under {function.name} is not a solution of the full machine")
            continue
        found, _, lps = polish_instance(function, w[b], inputs, targets, rounds)
        after[b] = found
        solved += lps
    return after, solved

