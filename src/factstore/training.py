"""The divergence guard every training loop shares, the warm-up AdamW of the Transformer loops, and
the step count of a budget given in epochs.

A training run whose loss or weights turn NaN or infinite (too large a learning rate, an overflow
in float32) must stop at once with an error that names the setting and the step, not carry on
and report "accuracy 0" as if the model had merely failed to learn. Every loop calls

    check_finite(loss, parameters, where=f"assoc.train_optimal(d={d}, rank={rank})", step=step)

once per step, after computing the loss and before the update. The runner (`python -m factstore`)
turns a DivergenceError into one line naming the workflow step and its parameters, exit status 1,
and writes nothing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch.optim.adam import adam

from factstore.errors import ResultWarning, TrainingDiverged


class DivergenceError(TrainingDiverged):
    """Training produced a non-finite loss or parameter.

    Attributes: where (the setting, as the loop names it), step (the training step), what
    (what was found non-finite, e.g. "loss = nan" or "parameter 1 of 2").
    """

    def __init__(self, where: str, step: int, what: str):
        self.where, self.step, self.what = where, step, what
        super().__init__(f"{where}: training diverged at step {step}: {what} is not finite "
                         "(try a smaller learning rate, or float64)")


def steps_for_epochs(train_size: int, epochs: float, batch_size: int) -> int:
    """Minibatch steps that pass `epochs` times over `train_size` examples (at least one step):
    every training-set size is trained for the same number of epochs."""
    return max(1, math.ceil(epochs * train_size / batch_size))


def check_finite(
    loss: float | torch.Tensor,
    parameters: Iterable[torch.Tensor] | None = None,
    *,
    where: str,
    step: int,
) -> None:
    """Raise DivergenceError unless `loss` and every tensor of `parameters` are finite.

    loss: a Python number or a tensor (any shape; every element must be finite).
    parameters: the trained tensors, or None to check the loss only. Checking them costs one
    reduction per tensor and a single host sync; a non-finite weight makes the next loss
    non-finite anyway, so a loop that cannot afford the sync may pass None and check the
    parameters once after its last step.
    """
    if isinstance(loss, torch.Tensor):
        finite = bool(torch.isfinite(loss.detach()).all())
        shown = loss.detach().flatten()[0].item() if loss.numel() == 1 else "some element"
    else:
        finite = math.isfinite(float(loss))
        shown = loss
    if not finite:
        raise DivergenceError(where, step, f"loss = {shown}")
    if parameters is None:
        return
    tensors = [p.detach() for p in parameters]
    if not tensors:
        return
    flags = torch.stack([torch.isfinite(t).all() for t in tensors]).cpu()  # the one sync
    if not bool(flags.all()):
        bad = int((~flags).nonzero()[0, 0])
        raise DivergenceError(where, step, f"parameter {bad + 1} of {len(tensors)} (shape {tuple(tensors[bad].shape)})")


def flushing_denormals_now() -> bool:
    """Whether torch currently flushes denormal floats to zero (torch has no getter: a denormal
    times one reads as zero exactly when flushing is on)."""
    return torch.tensor([5e-324], dtype=torch.float64).mul(1.0).item() == 0.0


@contextmanager
def flushing_denormals() -> Iterator[None]:
    """Flush denormal floats to zero inside the block (softmax tails turn denormal near convergence
    and make cross-entropy training 2.5-10x slower), then restore what was set before, so callers
    (tests, property-test libraries that need subnormals) are unaffected. Usable as a decorator."""
    before = flushing_denormals_now()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


class FusedAdam:
    """torch's Adam on a fixed list of tensors: its fused kernel through `torch.optim.adam.adam`,
    the function `torch.optim.Adam(fused=True).step()` calls, with the state that optimiser keeps
    (the moments and a float32 step count per tensor): the same updates bit for bit (tested).

    Why not the optimiser object: its step() wraps that call in hooks, grad-mode and state
    look-ups that cost ~35 us per call, ~4% of a GD step at F = 512 with three small weight
    matrices; the gradients are passed in, not read from `.grad`. Defaults as torch.optim.Adam's
    (betas 0.9 / 0.999, eps 1e-8, no weight decay).
    """

    def __init__(self, parameters: list[torch.Tensor], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.parameters = list(parameters)
        self.betas, self.eps = betas, eps
        self.exp_avgs = [torch.zeros_like(parameter) for parameter in self.parameters]
        self.exp_avg_sqs = [torch.zeros_like(parameter) for parameter in self.parameters]
        self.steps = [torch.zeros((), dtype=torch.float32, device=parameter.device) for parameter in self.parameters]

    @torch.no_grad()
    def step(self, gradients: list[torch.Tensor], lr: float) -> None:
        """One update of every parameter in place, gradients[i] being d loss / d parameters[i]."""
        adam(
            self.parameters, gradients, self.exp_avgs, self.exp_avg_sqs, [], self.steps, fused=True,
            amsgrad=False, beta1=self.betas[0], beta2=self.betas[1], lr=lr, weight_decay=0.0, eps=self.eps,
            maximize=False)


def adamw_with_warmup(
    parameters, learning_rate: float, weight_decay: float, warmup_steps: int,
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """(AdamW, its schedule): the learning rate rises linearly from learning_rate / warmup_steps to
    learning_rate over the first warmup_steps updates (0 or 1: constant), then stays; call the
    schedule's step() after every optimizer step."""
    optimizer = torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=weight_decay)
    warmup = max(warmup_steps, 1)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))


FAR_FROM_TARGET = 0.1
"""How far below its target (in accuracy or recall, a fraction) a training may end before it is
reported: a trained model that stops within a few points of its target is the usual plateau, ten
points below is a model that did not learn what the study then measures on it."""


def warn_if_far_from_target(achieved: float, target: float, *, where: str, tolerance: float = FAR_FROM_TARGET) -> bool:
    """Emit a ResultWarning (and return True) when a training ended more than `tolerance` below
    its `target` (fractions, e.g. recall 0.62 for a target of 0.99)."""
    if not math.isfinite(achieved) or achieved < target - tolerance:
        warnings.warn(ResultWarning(f"{where}: training ended at {achieved:.4g}, far from its target {target:g}"), stacklevel=2)
        return True
    return False
