"""Committee machines: architectures, weight counts and forward passes, batched over instances.

A *tree* committee machine has N inputs split into K non-overlapping receptive fields of N / K
inputs and K hidden units h_k = w_k . x_k / |w_k|; above them sit fixed majority votes: `groups`
lists the fan-in of each further hidden layer (groups = (3,) with K = 9 is the paper's second
hidden layer: 9 units -> 3 majority units -> output), and the output is the sign of the sum of the
top layer. Only the first layer has weights, so W = N and alpha = P / N.

A *fully connected* (overlapping) committee machine has `layers` trainable hidden layers of width
H (the first reads all N inputs, each further one all H units below), and the output is the sign
of the sum of the top layer: W = N H + (layers - 1) H^2.

Every forward pass takes weights with a leading instance dimension B and patterns (B, P, N) and
returns the output field S (B, P): with beta None every unit is a sign (the machine itself); with a
number, tanh(beta h) replaces sign (the smooth machine back-propagation trains). Fields are
normalised by the weight norm (h has unit variance on random +-1 inputs), so beta alone sets how
sharp a unit is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Architecture:
    """kind 'tree' (hidden = K, groups = fan-ins of the fixed majority layers) or 'fc' (hidden = H, layers)."""

    kind: str
    n_inputs: int
    hidden: int
    groups: tuple[int, ...] = ()
    layers: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("tree", "fc"):
            raise ValueError(f"architecture kind must be 'tree' or 'fc', got {self.kind!r}")
        if self.n_inputs < 1 or self.hidden < 1 or self.layers < 1:
            raise ValueError(f"need n_inputs, hidden, layers >= 1, got {self}")
        if self.kind == "tree":
            if self.n_inputs % self.hidden:
                raise ValueError(f"a tree needs N divisible by K: N = {self.n_inputs}, K = {self.hidden}")
            if self.layers != 1:
                raise ValueError("a tree's further layers are fixed majority votes: give them as `groups`, not `layers`")
            if math.prod(self.groups) and self.hidden % math.prod(self.groups):
                raise ValueError(f"K = {self.hidden} is not divisible by the product of groups {self.groups}")
        elif self.groups:
            raise ValueError("a fully connected machine has no fixed groups")
        widths = [self.hidden] + [self.hidden // math.prod(self.groups[: i + 1]) for i in range(len(self.groups))]
        if any(width % 2 == 0 for width in widths[-1:]) or any(g % 2 == 0 for g in self.groups):
            raise ValueError(f"majority votes need odd fan-ins (no ties): widths {widths}, groups {self.groups}")

    @property
    def weight_count(self) -> int:
        """W, the number of trainable weights (the denominator of the capacity per weight)."""
        if self.kind == "tree":
            return self.n_inputs
        return self.n_inputs * self.hidden + (self.layers - 1) * self.hidden**2

    @property
    def hidden_layers(self) -> int:
        """Hidden layers between input and output (tree: 1 + len(groups))."""
        return 1 + len(self.groups) if self.kind == "tree" else self.layers

    def describe(self) -> str:
        if self.kind == "tree":
            return f"tree K={self.hidden}" + "".join(f" -> {self.hidden // math.prod(self.groups[: i + 1])}" for i in range(len(self.groups)))
        return f"fc H={self.hidden} x {self.layers} layers"


def initial_weights(architecture: Architecture, batch: int, generator: torch.Generator, device="cpu") -> list[torch.Tensor]:
    """Gaussian weights: tree [(B, K, N / K)]; fc [(B, H, N), (B, H, H), ...]."""
    a = architecture
    if a.kind == "tree":
        shapes = [(batch, a.hidden, a.n_inputs // a.hidden)]
    else:
        shapes = [(batch, a.hidden, a.n_inputs)] + [(batch, a.hidden, a.hidden)] * (a.layers - 1)
    return [torch.randn(shape, generator=generator).to(device) for shape in shapes]


def _unit(field: torch.Tensor, beta: float | None) -> torch.Tensor:
    return torch.sign(field) if beta is None else torch.tanh(beta * field)


def first_layer_fields(architecture: Architecture, weights: list[torch.Tensor], patterns: torch.Tensor) -> torch.Tensor:
    """Normalised fields of the first hidden layer, (B, P, K) or (B, P, H)."""
    w = weights[0]
    norms = w.norm(dim=-1)[:, None, :]
    if architecture.kind == "tree":
        batch, p, _ = patterns.shape
        x = patterns.view(batch, p, architecture.hidden, -1)
        return torch.einsum("bpkn,bkn->bpk", x, w) / norms
    return torch.einsum("bpn,bhn->bph", patterns, w) / norms


def output_field(
    architecture: Architecture, weights: list[torch.Tensor], patterns: torch.Tensor, beta: float | None = None
) -> torch.Tensor:
    """The output field S (B, P); the machine's output is sign(S). beta None: sign units; else tanh(beta h).

    With K = 1 (the perceptron) the one hidden unit is the output unit: its smooth field is h itself
    (the output's tanh(beta S) sits in the loss), not tanh(beta h), which would squash twice.
    """
    fields = first_layer_fields(architecture, weights, patterns)
    if beta is not None and architecture.kind == "tree" and architecture.hidden == 1:
        return fields[..., 0]
    units = _unit(fields, beta)
    if architecture.kind == "tree":
        for fan_in in architecture.groups:
            batch, p, width = units.shape
            votes = units.view(batch, p, width // fan_in, fan_in).sum(-1)
            units = _unit(votes / math.sqrt(fan_in), beta)
    else:
        for w in weights[1:]:
            units = _unit(torch.einsum("bpi,bhi->bph", units, w) / w.norm(dim=-1)[:, None, :], beta)
    return units.sum(-1) / math.sqrt(units.shape[-1])


def training_errors(architecture: Architecture, weights: list[torch.Tensor], patterns, labels, mask) -> torch.Tensor:
    """Misclassified real patterns per instance, (B,) long: the sign machine's output vs the labels."""
    with torch.no_grad():
        wrong = (output_field(architecture, weights, patterns) * labels <= 0) & mask
    return wrong.sum(-1)
