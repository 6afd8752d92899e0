"""What a capacity solver returns, and the bookkeeping every batched solver shares.

A solver trains B independent instances at once and reports, per instance, whether the sign
machine classified every real pattern correctly (embedded) and at which epoch. Instances leave the
batch as soon as they are embedded (`ActiveSet`), so the cost of a batch falls as its easy
(low-load) instances finish.
"""

from __future__ import annotations

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
    solver (weights, optimiser moments, patterns, ...), compacted together when some finish."""

    def __init__(self, batch: int, device, **tensors: torch.Tensor) -> None:
        self.index = torch.arange(batch, device=device)
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
            self.tensors = {name: tensor[keep] for name, tensor in self.tensors.items()}
