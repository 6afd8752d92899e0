"""Least-action learning for tree committee machines (Nilsson 1965; Mitchison and Durbin 1989).

For a misclassified pattern, the cheapest repair flips the hidden unit that votes wrong with the
smallest |h| (the least action): only that unit gets a perceptron step y x_k. With K = 1 this is
the perceptron rule. Here it runs in batch (all misclassified patterns of an epoch at once, each
adding its step to its own least-action unit), batched over instances; an instance whose sign
machine makes no error is embedded and leaves the batch. A margin kappa > 0 also corrects
patterns the unit-level vote gets right by less than kappa, which helps the batch rule converge.
Patterns are taken in `chunks` consecutive blocks per epoch, each block's step applied before
the next block is seen: between the batch rule (1 chunk) and the online rule (P chunks).
It is meant as a stronger solver than gradient descent on the smooth machine for one hidden layer.
"""

from __future__ import annotations

import torch

from factstore.committee.architectures import Architecture, first_layer_fields
from factstore.committee.training import ActiveSet, EmbeddingResult


def least_action_step(fields: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(errors (B,), updates (B, P, K) in {0, 1}): which unit each pattern asks to move.

    fields (B, P, K) normalised; a pattern is wrong when the majority of sign(h_k) disagrees with
    y. For a wrong pattern the unit is the one with y h_k < margin and the smallest |h_k|; for a
    right pattern whose deciding unit (the smallest y h_k among units voting right) is within the
    margin, that unit is pushed too.
    """
    aligned = labels[..., None] * fields  # y h_k: > 0 when unit k votes right
    votes = torch.sign(aligned).sum(-1)
    wrong = (votes <= 0) & mask
    big = torch.finfo(fields.dtype).max
    # Wrong patterns: among units voting wrong, the smallest |h| = the largest (closest to 0) y h.
    candidate = torch.where(aligned < 0, -aligned, torch.full_like(aligned, big))
    wrong_unit = candidate.argmin(-1)
    # Right patterns with a small margin: the weakest unit voting right.
    weak = torch.where(aligned > 0, aligned, torch.full_like(aligned, big))
    weakest_value, weak_unit = weak.min(-1)
    shaky = (~wrong) & mask & (weakest_value < margin) & (votes <= 1)
    unit = torch.where(wrong, wrong_unit, weak_unit)
    chosen = torch.nn.functional.one_hot(unit, fields.shape[-1]).to(fields.dtype)
    chosen = chosen * (wrong | shaky)[..., None].to(fields.dtype)
    return wrong.sum(-1), chosen


def train_least_action(
    architecture: Architecture,
    weights: list[torch.Tensor],
    patterns: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float = 1.0,
    margin: float = 0.1,
    chunks: int = 1,
) -> EmbeddingResult:
    """Least-action learning of B tree committee machines with one hidden layer (groups = ())."""
    if architecture.kind != "tree" or architecture.groups:
        raise ValueError("least-action learning is implemented for one-hidden-layer tree committee machines")
    p = patterns.shape[1]
    k = architecture.hidden
    batch = patterns.shape[0]
    result = EmbeddingResult.empty(batch, patterns.device)
    active = ActiveSet(batch, patterns.device, w=weights[0].clone(), patterns=patterns, labels=labels, mask=mask)
    bounds = torch.linspace(0, p, chunks + 1).round().long().tolist()
    for epoch in range(epochs):
        fields = first_layer_fields(architecture, [active["w"]], active["patterns"])
        errors, chosen = least_action_step(fields, active["labels"], active["mask"], margin)
        if chunks == 1:  # the batch rule: this epoch's fields give both the errors and the step
            _apply(active, chosen, slice(None), learning_rate, k)
        active.record(result, errors, epoch)  # errors of the weights at the start of the epoch
        if len(active) == 0:
            break
        if chunks > 1:  # blocks of patterns in turn, each seeing the previous blocks' steps
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                block = slice(lo, hi)
                fields = first_layer_fields(architecture, [active["w"]], active["patterns"][:, block])
                _, chosen = least_action_step(fields, active["labels"][:, block], active["mask"][:, block], margin)
                _apply(active, chosen, block, learning_rate, k)
    else:
        if len(active):
            result.epochs[active.index] = epochs
    return result


def _apply(active: ActiveSet, chosen: torch.Tensor, block: slice, learning_rate: float, k: int) -> None:
    """w_k += lr |w_k| / n_k * sum over chosen patterns y x_k / sqrt(#chosen for unit k).

    Steps scale with |w| because fields are normalised; dividing by sqrt(#chosen) keeps the batch
    step from growing linearly with the number of errors."""
    x = active["patterns"][:, block]
    batch, p, n = x.shape
    signed = chosen * active["labels"][:, block, None]  # (B, p, K)
    update = torch.einsum("bpk,bpkn->bkn", signed, x.reshape(batch, p, k, n // k))
    scale = active["w"].norm(dim=-1, keepdim=True) / (n // k)
    active["w"] = active["w"] + learning_rate * scale * update / chosen.sum(1)[..., None].clamp(min=1).sqrt()
