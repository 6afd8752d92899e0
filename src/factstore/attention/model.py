"""The memorising layer of the S4 study and the data it memorises.

Data follow the paper's code: Uniform[0, 1] tokens, uniformly random labels over C classes, and
either one context shared by all examples ("shared") or a fresh context per example
("per_example"). Datasets of different sizes are prefixes of one pool (`MemorisationData.prefix`),
so a larger dataset contains every smaller one and capacity is monotone in N up to optimisation
noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

CONTEXT_KINDS = ("shared", "per_example")
SCORE_SCALES = ("model_dim", "head_dim")


# --------------------------------------------------------------------------------------------
# The layer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of the memorising layer: model dim d, H heads, head dims d_h (query/key), d_v (value)."""

    d: int = 32
    heads: int = 4
    d_head: int = 8
    d_value: int = 8
    n_classes: int = 100
    score_scale: str = "model_dim"  # scores / sqrt(d) as the paper's code ("model_dim"), or / sqrt(d_h) ("head_dim")
    biases: bool = True  # the paper's code's biases: its input embedding's (d) and its decoder's (C)

    def __post_init__(self):
        if self.score_scale not in SCORE_SCALES:
            raise ValueError(f"score_scale must be one of {SCORE_SCALES}, got '{self.score_scale}'")

    @classmethod
    def from_layer(cls, layer: dict, n_classes: int, score_scale: str = "model_dim", biases: bool = True) -> AttentionShape:
        """The config's layer sizes {d, heads, d_head, d_value} (n_context is the data's) and its
        options (score scale, biases) as a shape."""
        return cls(d=layer["d"], heads=layer["heads"], d_head=layer["d_head"], d_value=layer["d_value"],
                   n_classes=n_classes, score_scale=score_scale, biases=biases)

    def score_divisor(self) -> float:
        """What the attention scores are divided by: sqrt(d) (the paper's code) or sqrt(d_h)."""
        return math.sqrt(self.d if self.score_scale == "model_dim" else self.d_head)

    def n_params(self) -> int:
        """Trainable parameters, H d (2 d_h + 2 d_v) + d C (+ d + C with biases); equals
        `MultiHeadAttentionMemory.n_params`."""
        weights = self.heads * self.d * (2 * self.d_head + 2 * self.d_value) + self.d * self.n_classes
        return weights + (self.d + self.n_classes if self.biases else 0)


def softmax_last(logits: Tensor) -> Tensor:
    """Softmax over the last dim. Same as logits.softmax(-1), but torch's CPU kernel is several
    times slower on rows shorter than 16 (small context sizes n), where the explicit form wins."""
    if logits.shape[-1] >= 16 or logits.device.type != "cpu":
        return logits.softmax(dim=-1)
    weights = (logits - logits.amax(dim=-1, keepdim=True).detach()).exp()
    return weights / weights.sum(dim=-1, keepdim=True)


class MultiHeadAttentionMemory(nn.Module):
    """One multi-head attention layer read at the query position, then a linear label head.

    The input sequence [e; E] comes split in two: queries e (B, d) and contexts E (B, n, d), or
    one shared context (n, d) for the whole batch (no copy per example). Returns logits (B, C).
    No residual, no normalisation. With `shape.biases` it has the paper's code's two biases: its
    input embedding's, a vector b (d) added to every token (the embedding's weight is absorbed
    into W_Q, W_K, W_V, which are its only readers), and its decoder's (C). Its attention has no
    biases. Biases start at 0.
    """

    def __init__(self, shape: AttentionShape, generator: torch.Generator | None = None):
        super().__init__()
        self.shape = shape
        heads, d, d_head, d_value = shape.heads, shape.d, shape.d_head, shape.d_value

        def weight(*size: int, fan_in: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*size, generator=generator) / math.sqrt(fan_in))

        self.w_query = weight(heads, d, d_head, fan_in=d)  # W_Q,h (d, d_h)
        self.w_key = weight(heads, d, d_head, fan_in=d)  # W_K,h (d, d_h)
        self.w_value = weight(heads, d, d_value, fan_in=d)  # W_V,h (d, d_v)
        self.w_out = weight(heads, d_value, d, fan_in=heads * d_value)  # W_O,h (d_v, d)
        self.w_readout = weight(d, shape.n_classes, fan_in=d)  # W_D (d, C)
        if shape.biases:
            self.token_bias = nn.Parameter(torch.zeros(d))  # the input embedding's bias b (d)
            self.readout_bias = nn.Parameter(torch.zeros(shape.n_classes))  # the decoder's bias (C)

    @property
    def n_params(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())

    def forward(self, queries: Tensor, contexts: Tensor) -> Tensor:
        batch, (heads, d) = queries.shape[0], self.w_query.shape[:2]
        if self.shape.biases:
            queries, contexts = queries + self.token_bias, contexts + self.token_bias
        # Per head only the products W_Q W_K^T and W_V W_O (d, d) matter; forming them first makes
        # the whole layer five large matrix products instead of many small ones (same function).
        query_key = self.w_query @ self.w_key.mT  # (H, d, d)
        value_out = self.w_value @ self.w_out  # (H, d, d)
        key_direction = queries @ query_key.transpose(0, 1).reshape(d, heads * d)  # W_K W_Q^T e: (B, H d)
        key_direction = key_direction.view(batch, heads, d)
        # matmul broadcasts a shared context (n, d) over the batch and pairs per-example ones (B, n, d).
        logits = key_direction @ contexts.mT / self.shape.score_divisor()  # alpha_h: (B, H, n)
        attention = softmax_last(logits)  # theta_h: (B, H, n)
        mixed_context = attention @ contexts  # z_h = E^T theta_h: (B, H, d)
        output = mixed_context.reshape(batch, heads * d) @ value_out.reshape(heads * d, d)  # o: (B, d)
        logits = output @ self.w_readout  # W_D^T o: (B, C)
        return logits + self.readout_bias if self.shape.biases else logits


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemorisationData:
    """N examples: queries (N, d), labels (N,) int64, contexts (N, n, d), or (n, d) when shared.

    A shared context is kept once, as the model takes it: (n, d), broadcast over the examples.
    """

    queries: Tensor
    contexts: Tensor
    labels: Tensor

    @property
    def size(self) -> int:
        return self.queries.shape[0]

    @property
    def shared_context(self) -> bool:
        return self.contexts.dim() == 2

    @property
    def context_size(self) -> int:
        return self.contexts.shape[-2]

    def prefix(self, size: int) -> MemorisationData:
        """The first `size` examples (a shared context stays shared)."""
        contexts = self.contexts if self.shared_context else self.contexts[:size]
        return MemorisationData(self.queries[:size], contexts, self.labels[:size])

    def context_matrices(self) -> Tensor:
        """Every distinct context matrix: (M, n, d), M = 1 when shared, N otherwise."""
        return self.contexts.reshape(-1, self.context_size, self.queries.shape[1])

    def to(self, device: torch.device | str) -> MemorisationData:
        return MemorisationData(self.queries.to(device), self.contexts.to(device), self.labels.to(device))


def make_dataset(
    size: int, d: int, n_context: int, n_classes: int, context: str, generator: torch.Generator
) -> MemorisationData:
    """Uniform[0, 1] queries (size, d) and contexts, uniformly random labels in [0, n_classes).

    context="shared" draws one context (n, d) for every example, "per_example" one per example
    (size, n, d); the queries and labels are drawn first, so both kinds share them for a seed.
    """
    if context not in CONTEXT_KINDS:
        raise ValueError(f"context must be one of {CONTEXT_KINDS}, got '{context}'")
    queries = torch.rand(size, d, generator=generator)
    labels = torch.randint(n_classes, (size,), generator=generator)
    context_shape = (n_context, d) if context == "shared" else (size, n_context, d)
    contexts = torch.rand(*context_shape, generator=generator)
    return MemorisationData(queries, contexts, labels)
