"""Softmax cross-entropy, its gradient and the count of facts decoded right, in one pass.

Training a fact store on cross-entropy needs three things per step: the loss, d loss / d logits
and how many facts the current weights decode. Autograd's log_softmax forms the logits, their
log-softmax, its gradient and a separate argmax, four arrays of the logits' size; here one chunk
of logits is turned in place into softmax - onehot, with the loss and the count taken on the
way. Both the GD-trained MLPs (`mlp.gd`) and the trained linear associative memory (`assoc`)
use it; the caller maps the logits' gradient back to its own parameters (one matmul).
"""

from __future__ import annotations

import torch
from torch import Tensor


def cross_entropy_gradient_(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Turn `logits` (n, C) IN PLACE into d(sum of the n losses) / d logits = softmax - onehot.

    target: (n, 1) int64 class of each row. Returns (the sum of the n cross-entropy losses as a
    float64 0-dim tensor, the number of rows whose target logit beats every other one strictly:
    a tie counts as wrong, as in `facts.py`). Both stay on the logits' device (no host sync).
    The target's logit is set aside so that one amax gives the best competitor; then the row is
    shifted by its maximum, exponentiated and normalised.
    """
    target_logit = logits.gather(1, target)
    best_other = torch.amax(logits.scatter_(1, target, float("-inf")), dim=1, keepdim=True)
    n_correct = (target_logit > best_other).sum()
    row_max = torch.maximum(target_logit, best_other)
    # Clamp before exp: exp of float32 inputs below ~-87 underflows through a slow scalar path
    # (~10-25x slower than the vector path, with or without flush_denormal), which made late
    # training steps 5-10x slower. exp(-80) ~ 2e-35 changes no loss or gradient at float32
    # precision (the normaliser is >= 1).
    exponentials = logits.scatter_(1, target, target_logit).sub_(row_max).clamp_min_(-80.0).exp_()
    normaliser = exponentials.sum(dim=1, keepdim=True)
    loss = (normaliser.log() - (target_logit - row_max)).sum().double()
    exponentials.div_(normaliser).scatter_add_(1, target, -torch.ones_like(target_logit))
    return loss, n_correct
