"""Back-propagation with tanh(beta h) in place of sign, beta annealed upward (the paper's solver).

The smooth machine (architectures.output_field with a beta) is trained full batch on the logistic
loss of its output tanh(beta S): softplus(-2 beta y S) averaged over the real patterns, with Adam
(written out here so its moments can be compacted with the instances) and a cosine decay of
its learning rate. beta grows geometrically
from beta_start to beta_end over the run, so early epochs see a smooth landscape and late ones
approach the sign machine. Every `check_every` epochs the *sign* machine is evaluated; an instance
with zero training error is embedded and leaves the batch.
"""

from __future__ import annotations

import math

import torch

from factstore.committee.architectures import (
    Architecture,
    output_field,
    training_errors,
)
from factstore.committee.training import ActiveSet, EmbeddingResult
from factstore.training import check_finite


def beta_schedule(epoch: int, epochs: int, beta_start: float, beta_end: float) -> float:
    """Geometric annealing: beta_start at epoch 0, beta_end at the last epoch."""
    fraction = epoch / max(1, epochs - 1)
    return beta_start * (beta_end / beta_start) ** fraction


def learning_rate_schedule(epoch: int, epochs: int, learning_rate: float, floor: float = 0.01) -> float:
    """Cosine decay from learning_rate to floor x learning_rate: Adam's steps are ~lr per weight
    whatever the gradient, so without decay the weights keep rotating by a few percent per epoch
    and never settle into the narrow solution region near capacity."""
    fraction = epoch / max(1, epochs - 1)
    return learning_rate * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * fraction)))


def train_backprop(
    architecture: Architecture,
    weights: list[torch.Tensor],
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float,
    beta_start: float,
    beta_end: float,
    check_every: int = 10,
) -> EmbeddingResult:
    """Train B instances (weights as from initial_weights; patterns (B, P, N), labels and mask (B, P)).

    Returns per-instance embedding results. The weights are not returned (only whether a
    zero-error solution was reached matters for the capacity).
    """
    batch, device = patterns.shape[0], patterns.device
    result = EmbeddingResult.empty(batch, device)
    tensors = {f"w{i}": w.clone() for i, w in enumerate(weights)}
    tensors |= {f"m{i}": torch.zeros_like(w) for i, w in enumerate(weights)}
    tensors |= {f"v{i}": torch.zeros_like(w) for i, w in enumerate(weights)}
    active = ActiveSet(batch, device, patterns=patterns, labels=labels, mask=mask, **tensors)
    layers = len(weights)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for epoch in range(epochs):
        if epoch % check_every == 0 or epoch == epochs - 1:
            current = [active[f"w{i}"] for i in range(layers)]
            errors = training_errors(architecture, current, active["patterns"], active["labels"], active["mask"])
            active.record(result, errors, epoch)
            if len(active) == 0:
                break
        beta = beta_schedule(epoch, epochs, beta_start, beta_end)
        rate = learning_rate_schedule(epoch, epochs, learning_rate)
        current = [active[f"w{i}"].requires_grad_(True) for i in range(layers)]
        field = output_field(architecture, current, active["patterns"], beta)
        margins = active["labels"] * field
        per_pattern = torch.nn.functional.softplus(-2 * beta * margins) * active["mask"]
        loss = (per_pattern.sum(-1) / active["mask"].sum(-1)).sum()
        check_finite(loss, None, where=f"committee.train_backprop(beta={beta:g}, learning_rate={rate:g})", step=epoch)
        gradients = torch.autograd.grad(loss, current)
        with torch.no_grad():
            correction1, correction2 = 1 - beta1 ** (epoch + 1), 1 - beta2 ** (epoch + 1)
            for i, gradient in enumerate(gradients):
                m = active[f"m{i}"].mul_(beta1).add_(gradient, alpha=1 - beta1)
                v = active[f"v{i}"].mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
                step = rate * (m / correction1) / ((v / correction2).sqrt() + eps)
                active[f"w{i}"] = current[i].detach() - step
    # Instances still active after the last check keep embedded = False.
    if len(active) and epochs > 0:
        result.epochs[active.index] = epochs
    return result

