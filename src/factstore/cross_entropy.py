"""Softmax cross-entropy, its gradient and the count of facts decoded right, in one pass.

Training a fact store on cross-entropy needs three things per step: the loss, d loss / d logits
and how many facts the current weights decode. Autograd's log_softmax forms the logits, their
log-softmax, its gradient and a separate argmax, four arrays of the logits' size, and takes the
exponential twice (forward and backward); here torch's softmax kernel runs once per chunk of
logits and its output becomes softmax - onehot, with the loss and the count taken on the way.
Both the GD-trained MLPs (`mlp.gd`) and the trained linear associative memory (`assoc`) use it;
the caller maps the logits' gradient back to its own parameters (one matmul).
"""

from __future__ import annotations

import torch
from torch import Tensor

from factstore.facts import target_and_best_other


def cross_entropy_gradient(
    logits: Tensor, target: Tensor, out: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(d(sum of the n losses) / d logits = softmax - onehot (n, C), the sum of the n losses, the
    number of rows decoded right).

    logits: (n, C); target: (n, 1) int64 class of each row; out: where the gradient goes (n, C),
    a tensor other than `logits` (None: a new one). The loss sum is a float64 0-dim tensor and the
    count an int64 one, both on the logits' device (no host sync). A row is decoded right when
    its target logit beats every other one strictly (a tie counts as wrong:
    `facts.target_and_best_other`, as in every decoding of the package); `logits` holds its own
    values again on return.

    The loss of a row is log sum_j exp(l_j - m) - (l_target - m), m the row's largest logit. The
    softmax's largest entry is exp(0) / sum_j exp(l_j - m), so the log-normaliser is minus its
    log: no second exponential, and no underflow (that entry is at least 1 / C).
    """
    target_logit, best_other = target_and_best_other(logits, target)
    n_correct = (target_logit > best_other).sum()
    row_max = torch.maximum(target_logit, best_other)
    probabilities = torch.softmax(logits, dim=1, out=out)
    largest_probability = torch.amax(probabilities, dim=1, keepdim=True)
    loss = ((row_max - target_logit) - largest_probability.log()).sum().double()
    probabilities.scatter_add_(1, target, -torch.ones_like(target_logit))
    return probabilities, loss, n_correct


def logit_workspace(n_rows: int, n_values: int, chunk_size: int, like: Tensor) -> Tensor:
    """(2, min(chunk_size, n_rows), n_values) buffers with `like`'s dtype and device for a chunk
    of logits and their gradient, made once and reused by every chunk and step: a fresh chunk of
    megabytes is fresh pages from the OS each time, and a reused one stays in the cache."""
    return like.new_empty((2, min(chunk_size, n_rows), n_values))
