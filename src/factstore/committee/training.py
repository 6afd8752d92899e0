"""What a capacity solver returns, and the bookkeeping every batched solver shares.

A solver trains B independent instances at once and reports, per instance, whether the sign
machine classified every real pattern correctly (embedded) and at which epoch. Instances leave the
batch as soon as they are embedded (`ActiveSet`), so the cost of a batch falls as its easy
(low-load) instances finish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class EmbeddingResult:
    """Per instance (all (B,)): embedded with zero training error; the epoch it happened (or the
    last epoch run); the fewest training errors seen."""

    embedded: torch.Tensor
    epochs: torch.Tensor
    fewest_errors: torch.Tensor

    @classmethod
    def empty(cls, batch: int, device) -> "EmbeddingResult":
        return cls(
            embedded=torch.zeros(batch, dtype=torch.bool, device=device),
            epochs=torch.zeros(batch, dtype=torch.long, device=device),
            fewest_errors=torch.full((batch,), torch.iinfo(torch.long).max, dtype=torch.long, device=device),
        )


class ActiveSet:
    """The instances still training: their original indices and every per-instance tensor of the
    solver (weights, optimiser moments, patterns, ...), compacted together when some finish.
    batch_dims: the dimension that indexes the instances in a tensor laid out otherwise (e.g. the
    numpy loop's patterns, `least_action.online_active_set`); 0 for every other tensor."""

    def __init__(self, batch: int, device, batch_dims: dict[str, int] | None = None, **tensors: torch.Tensor) -> None:
        self.index = torch.arange(batch, device=device)
        self.batch_dims = batch_dims or {}
        self.tensors = tensors

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]

    def __setitem__(self, name: str, value: torch.Tensor) -> None:
        self.tensors[name] = value

    def __len__(self) -> int:
        return int(self.index.numel())

    def record(self, result: EmbeddingResult, errors: torch.Tensor, epoch: int) -> None:
        """Store the errors of the active instances at `epoch`, then drop the embedded ones."""
        result.fewest_errors[self.index] = torch.minimum(result.fewest_errors[self.index], errors)
        result.epochs[self.index] = epoch
        done = errors == 0
        if bool(done.any()):
            result.embedded[self.index[done]] = True
            keep = ~done
            self.index = self.index[keep]
            self.tensors = {name: tensor[(slice(None),) * self.batch_dims.get(name, 0) + (keep,)]
                            for name, tensor in self.tensors.items()}


def online_epochs(
    active: ActiveSet,
    result: EmbeddingResult,
    epochs: int,
    generator: torch.Generator | None,
    present: Callable[[list[int]], torch.Tensor],
    keep_final: Callable[[], None],
) -> None:
    """The epoch loop of the online solvers (one pattern at a time): each epoch draws a fresh random
    order of the pattern slots (from `generator`, shared by the instances), `present(order)` presents
    them to the active instances and returns each one's corrections (b,), `keep_final()` stores the
    active instances' weights, and an instance with no correction in the epoch is embedded and
    leaves. Instances still active after the last epoch are recorded at `epochs`."""
    for epoch in range(epochs):
        order = torch.randperm(int(active["mask"].sum(-1).max()), generator=generator).tolist()
        corrections = present(order)
        keep_final()
        active.record(result, corrections, epoch)
        if len(active) == 0:
            return
    if len(active):
        result.epochs[active.index] = epochs
