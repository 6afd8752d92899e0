"""The archetype toy model of capacity per label.

O random binary (+-1) archetypes of N bits, one label each; a sample of label mu is archetype mu
with each bit flipped independently with probability P_f. A feed-forward net with 1-3 tanh hidden
layers classifies the samples; its input-to-hidden weights are diluted at random (a fixed mask,
applied from initialisation through training). The test accuracy vs the dilution rate has a
plateau at the undiluted accuracy; its end is the max dilution.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils import prune

from factstore.training import check_finite


def random_archetypes(n_labels: int, n_bits: int, generator: torch.Generator) -> torch.Tensor:
    """O archetypes, shape (O, N), entries +-1 uniformly at random."""
    return torch.randint(0, 2, (n_labels, n_bits), generator=generator).float() * 2 - 1


def noisy_samples(
    archetypes: torch.Tensor, per_label: int, flip_probability: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """per_label samples of each archetype with every bit flipped with probability P_f.

    archetypes: (O, N). Returns inputs (O * per_label, N) in +-1 and labels (O * per_label,), the
    label of a sample being the index of its archetype (one label per archetype).
    """
    n_labels, n_bits = archetypes.shape
    labels = torch.arange(n_labels).repeat_interleave(per_label)
    flips = torch.rand(len(labels), n_bits, generator=generator) < flip_probability
    inputs = archetypes[labels] * torch.where(flips, -1.0, 1.0)
    return inputs, labels


class StackedLinear(nn.Module):
    """R independent linear layers applied side by side: (R, B, in) -> (R, B, out).

    weight (R, out, in), bias (R, 1, out); torch.nn.utils.prune masks `weight` like any Linear's.
    """

    def __init__(self, members: int, in_features: int, out_features: int, generator: torch.Generator):
        super().__init__()
        bound = 1 / in_features**0.5
        self.weight = nn.Parameter((torch.rand(members, out_features, in_features, generator=generator) * 2 - 1) * bound)
        self.bias = nn.Parameter(torch.zeros(members, 1, out_features))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, inputs, self.weight.transpose(1, 2))


def stacked_networks(members: int, n_bits: int, hidden: int, depth: int, n_labels: int, generator: torch.Generator) -> nn.Sequential:
    """R independent nets N -> hidden (x depth, tanh) -> O logits; layer 0 is input-to-hidden."""
    layers: list[nn.Module] = []
    width = n_bits
    for _ in range(depth):
        layers += [StackedLinear(members, width, hidden, generator), nn.Tanh()]
        width = hidden
    layers.append(StackedLinear(members, width, n_labels, generator))
    return nn.Sequential(*layers)


def dilute_members(layer: StackedLinear, rates: list[float], generator: torch.Generator) -> None:
    """Member r of the stacked layer loses a random fraction rates[r] of its weights (one fixed
    prune.custom_from_mask mask over the stack)."""
    members, rows, columns = layer.weight.shape
    mask = torch.ones(members, rows * columns)
    for member, rate in enumerate(rates):
        count = int(round(rate * rows * columns))
        mask[member, torch.randperm(rows * columns, generator=generator)[:count]] = 0
    prune.custom_from_mask(layer, "weight", mask.view(members, rows, columns))


def weight_count(n_bits: int, hidden: int, depth: int, n_labels: int) -> int:
    """Trainable parameters (weights and biases) of one net N -> hidden (x depth) -> O: the W of
    the capacity per weight P / W."""
    widths = [n_bits] + [hidden] * depth + [n_labels]
    return sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:]))


@dataclass
class ArchetypeRun:
    """One trained net: its dilution rate, test accuracy, final training accuracy, zero fraction."""

    rate: float
    test_accuracy: float
    train_accuracy: float
    zero_fraction: float


def train_diluted(
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    rates: list[float],
    hidden: int,
    depth: int,
    steps: int,
    learning_rate: float,
    batch_size: int,
    generator: torch.Generator,
) -> list[ArchetypeRun]:
    """Train one net per dilution rate (side by side, same minibatches), each with its
    input-to-hidden weights diluted at its rate by a mask fixed from initialisation.

    train, test: (inputs (P, N), labels (P,)). Adam on the summed per-net cross-entropies (so each
    net gets its own gradient), `steps` minibatches of batch_size drawn from shuffled passes over
    the training set (as many passes as the steps need; the study passes a fixed number of epochs,
    so every training-set size is trained alike).
    """
    inputs, labels = train
    members = len(rates)
    n_labels = int(max(labels.max(), test[1].max())) + 1
    nets = stacked_networks(members, inputs.shape[1], hidden, depth, n_labels, generator)
    first = nets[0]
    dilute_members(first, list(rates), generator)
    optimiser = torch.optim.Adam(nets.parameters(), lr=learning_rate)
    order, start = torch.randperm(len(labels), generator=generator), 0
    for step in range(steps):
        if start >= len(labels):
            order, start = torch.randperm(len(labels), generator=generator), 0
        batch = order[start : start + batch_size]
        start += batch_size
        logits = nets(inputs[batch].expand(members, -1, -1))  # (R, B, O)
        loss = nn.functional.cross_entropy(logits.reshape(-1, n_labels), labels[batch].repeat(members), reduction="sum") / len(batch)
        check_finite(loss, None, where=f"dilution.archetypes(learning_rate={learning_rate:g})", step=step)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        train_accuracy = (nets(inputs.expand(members, -1, -1)).argmax(-1) == labels).float().mean(-1)
        test_accuracy = (nets(test[0].expand(members, -1, -1)).argmax(-1) == test[1]).float().mean(-1)
        zeros = (first.weight == 0).float().mean(dim=(1, 2))
    return [ArchetypeRun(float(rate), float(test_accuracy[r]), float(train_accuracy[r]), float(zeros[r])) for r, rate in enumerate(rates)]
