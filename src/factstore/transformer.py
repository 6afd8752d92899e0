"""A one-layer Transformer with a frozen fact-storing MLP in its MLP slot (S0 "Usability").

nanoGPT-style and small enough to read in one sitting; the usability study trains it on the
`<junk> key <junk> Q value` task (factstore.usability); the language-model study
(factstore.editing.model) reuses its attention, norms and RoPE around a two-expert MLP slot.
For a batch of token ids (B, T):

    x = E[tokens]                                   frozen token embeddings E (V, d)
    a = Attention(rms(x))                           causal, RoPE or no positional encoding; only
                                                    query and key train; value and output maps
                                                    frozen to the identity
    m = MLP(s * rms(a))                             frozen MLP, frozen scalar RMS norm before it
    logits = norm(m) D^T                            the output table D (V, d) decodes over all V
                                                    tokens (D = E when tied, the default)

with rms(z) = z / sqrt(mean(z^2)) (no gain) and no residual around the attention or the MLP
(both switchable). norm is rms (logits ~ sqrt(d) x cosine for unit-scale D) or unit, z / ||z||
(cosine logits for unit-norm D, the follow-up code's `unit_rmsnorm` before its lm_head); the
argmax, hence every accuracy, is the same under both. The MLP-norm scale s is the mean RMS of the MLP's keys, so an attention
output that copies one key embedding reaches the MLP exactly as the key the MLP was built on
(unit-norm keys: s = 1 / sqrt(d)). Nothing about the MLP is assumed but `mlp(x)`: (N, d) -> (N, d).

`forward(tokens, query_positions)` computes the output at one position per sequence only (the
query token of the task); with a one-layer model this is exact and costs O(B T d) instead of
O(B T^2 d + B T d h). Without query_positions every position is computed (language modelling).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor, nn
from torch.nn import functional


def rms_normalise(x: Tensor, eps: float = 1e-12) -> Tensor:
    """x / sqrt(mean(x^2) over the last dimension): every row gets norm sqrt(d)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


class ScalarRMSNorm(nn.Module):
    """rms_normalise(x) * scale with a frozen scalar `scale` (a buffer, not a parameter)."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(float(scale)))

    def forward(self, x: Tensor) -> Tensor:
        return rms_normalise(x) * self.scale


def rotary(x: Tensor, positions: Tensor, base: float | None = 10_000.0) -> Tensor:
    """Rotary position embedding (RoPE) of the last dimension of x at integer `positions`.

    x: (..., T, d) with d even; positions: broadcastable to (..., T). Coordinate pairs
    (x_i, x_{i + d/2}) are rotated by the angle position * base^(-2i / d), so the dot product
    of a rotated query and a rotated key depends on their positions only through their distance.
    base None: no positional encoding (x returned as it is; the follow-up code's usability protocol).
    """
    if base is None:
        return x
    half = x.shape[-1] // 2
    if 2 * half != x.shape[-1]:
        raise ValueError(f"RoPE needs an even head dimension, got {x.shape[-1]}")
    frequencies = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.to(torch.float32).unsqueeze(-1) * frequencies  # (..., T, half)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def attention_at(queries: Tensor, keys: Tensor, inputs: Tensor, query_positions: Tensor, n_head: int = 1,
                 rope_base: float | None = 10_000.0) -> Tensor:
    """Causal RoPE attention of ONE query per sequence: (N, d) mixed inputs (rope_base None: no RoPE).

    queries: (N, d), the query of sequence n at position query_positions[n]; keys, inputs: (N, T, d)
    at positions 0..T-1. Positions after the query are masked (padding there is never read). Heads
    split d into n_head equal parts.
    """
    count, length, dim = keys.shape

    def heads(x: Tensor) -> Tensor:  # (N, T', d) -> (N, n_head, T', d / n_head)
        return x.view(count, x.shape[1], n_head, dim // n_head).transpose(1, 2)

    positions = torch.arange(length, device=keys.device)
    keys = rotary(heads(keys), positions, rope_base)
    queries = rotary(heads(queries.unsqueeze(1)), query_positions.view(count, 1, 1), rope_base)
    visible = (positions.unsqueeze(0) <= query_positions.unsqueeze(1)).view(count, 1, 1, length)
    return functional.scaled_dot_product_attention(queries, keys, heads(inputs), attn_mask=visible).reshape(count, dim)


def attention_over_tables(queries: Tensor, key_tables: Tensor, input_tables: Tensor, tokens: Tensor,
                          query_positions: Tensor, n_head: int = 1) -> Tensor:
    """Causal attention of one query per sequence WITHOUT positional encoding, computed over the
    vocabulary tables instead of position by position: (A, B, d) mixed inputs.

    queries: (A, B, d), the query of each of B sequences of each of A tables; key_tables,
    input_tables: (A, V, d), the key and the input of every vocabulary entry; tokens: (A, B, T);
    query_positions: (A, B). Without RoPE a key depends on its token alone, so the scores are
    q . k_v for every entry v (one matmul) gathered at the sequence's tokens, and the mix
    sum_t p_t x_{token_t} is the weights added onto their entries times the input table (another
    matmul). The same softmax over positions as `attention_at` (a token repeated at two positions
    counts twice), so the same output up to float32 rounding; it avoids the (A B, T, d)
    per-position gathers and their gradients, which dominate a usability update while V is a
    few times T (see `table_attention_pays`).
    """
    count, batch, length = tokens.shape
    vocabulary, dim = key_tables.shape[1:]
    head_dim = dim // n_head

    def heads(x: Tensor) -> Tensor:  # (A, N, d) -> (A, n_head, N, d / n_head)
        return x.view(count, x.shape[1], n_head, head_dim).transpose(1, 2)

    scores_by_entry = heads(queries) @ heads(key_tables).transpose(-1, -2) / math.sqrt(head_dim)  # (A, H, B, V)
    index = tokens.unsqueeze(1).expand(count, n_head, batch, length)
    visible = torch.arange(length, device=tokens.device) <= query_positions.unsqueeze(-1)  # (A, B, T)
    weights = scores_by_entry.gather(3, index).masked_fill(~visible.unsqueeze(1), float("-inf")).softmax(dim=-1)
    on_entries = torch.zeros_like(scores_by_entry).scatter_add(3, index, weights)  # (A, H, B, V)
    return (on_entries @ heads(input_tables)).transpose(1, 2).reshape(count, batch, dim)


def table_attention_pays(vocabulary: int, length: int, rope_base: float | None) -> bool:
    """Whether `attention_over_tables` is the cheaper way (and a possible one: no RoPE) for sequences
    of `length` tokens over a vocabulary of `vocabulary` entries. It does V / T times the
    multiply-adds of the per-position path but no (B, T, d) gathers; on one CPU thread at
    d = 128, B = 1,024, T = 21 it is faster up to V ~ 1,000 (docs/performance.md)."""
    return rope_base is None and vocabulary <= TABLE_ATTENTION_MAX_RATIO * length


TABLE_ATTENTION_MAX_RATIO = 48
"""Vocabulary entries per sequence position up to which table attention is used (measured)."""


def projection_mlp(dim: int, hidden: int) -> nn.Sequential:
    """LayerNorm -> Linear(d, hidden) -> GELU -> Linear(hidden, d): a query or key map that is a
    small MLP (the language-model study's choice, S0 "Language modelling")."""
    return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE; value and output maps frozen to the identity.

    Only `query` and `key` are trainable, so the layer can learn WHERE to look but not to
    transform what it reads: the output at a position is a convex combination of the
    (normalised) token embeddings before it. The query and key maps are (d, d) linear maps
    without bias, or small MLPs (`projection_mlp`) when projection_hidden is given.
    """

    def __init__(self, dim: int, n_head: int = 1, rope_base: float | None = 10_000.0,
                 projection_hidden: int | None = None) -> None:
        super().__init__()
        if dim % n_head:
            raise ValueError(f"dimension {dim} is not divisible by {n_head} heads")
        self.n_head, self.rope_base = n_head, rope_base
        linear = projection_hidden is None
        self.query = nn.Linear(dim, dim, bias=False) if linear else projection_mlp(dim, projection_hidden)
        self.key = nn.Linear(dim, dim, bias=False) if linear else projection_mlp(dim, projection_hidden)
        self.value = nn.Linear(dim, dim, bias=False)
        self.output = nn.Linear(dim, dim, bias=False)
        for frozen in (self.value, self.output):
            nn.init.eye_(frozen.weight)
            frozen.weight.requires_grad_(False)
        if linear:
            for trained in (self.query, self.key):
                nn.init.normal_(trained.weight, std=0.02)

    def _heads(self, x: Tensor) -> Tensor:
        """(B, T, d) -> (B, n_head, T, d / n_head)."""
        batch, length, dim = x.shape
        return x.view(batch, length, self.n_head, dim // self.n_head).transpose(1, 2)

    def forward(self, table: Tensor, tokens: Tensor, query_positions: Tensor | None = None) -> Tensor:
        """Attention over the sequences `tokens` (B, T) whose inputs are rows of `table` (V, d).

        In a one-layer model the attention's input at a position depends on its token alone, so
        the key map is applied once per vocabulary entry and gathered, and the frozen value and
        output maps (linear) are applied after mixing: exact, and cheaper than per position.
        Returns (B, T, d), or (B, d) at query_positions (B,) when given.
        """
        batch, length = tokens.shape
        if query_positions is not None:
            rows = torch.arange(batch, device=tokens.device)
            queries = self.query(table)[tokens[rows, query_positions]]
            if table_attention_pays(len(table), length, self.rope_base):
                mixed = attention_over_tables(queries.unsqueeze(0), self.key(table).unsqueeze(0), table.unsqueeze(0),
                                              tokens.unsqueeze(0), query_positions.unsqueeze(0), self.n_head)[0]
            else:
                mixed = attention_at(queries, self.key(table)[tokens], table[tokens], query_positions, self.n_head,
                                     self.rope_base)
            return self.output(self.value(mixed))
        positions = torch.arange(length, device=tokens.device)
        keys = rotary(self._heads(self.key(table)[tokens]), positions, self.rope_base)
        queries = rotary(self._heads(self.query(table)[tokens]), positions, self.rope_base)
        mixed = functional.scaled_dot_product_attention(queries, keys, self._heads(table[tokens]), is_causal=True)
        return self.output(self.value(mixed.transpose(1, 2).reshape(batch, length, table.shape[1])))

    def weights(self, table: Tensor, tokens: Tensor, query_positions: Tensor) -> Tensor:
        """(B, n_head, T) attention weights of the query at query_positions over the positions."""
        batch, length = tokens.shape
        positions = torch.arange(length, device=tokens.device)
        keys = rotary(self._heads(self.key(table)[tokens]), positions, self.rope_base)
        rows = torch.arange(batch, device=tokens.device)
        queries = self._heads(self.query(table)[tokens[rows, query_positions]].unsqueeze(1))
        queries = rotary(queries, query_positions.view(batch, 1, 1), self.rope_base)
        scores = (queries @ keys.transpose(-1, -2)).squeeze(2) / keys.shape[-1] ** 0.5
        visible = (positions.unsqueeze(0) <= query_positions.unsqueeze(1)).unsqueeze(1)
        return scores.masked_fill(~visible, float("-inf")).softmax(dim=-1)


OUTPUT_NORMS = ("rms", "unit")


def output_normalise(x: Tensor, kind: str) -> Tensor:
    """The norm before the decoding table: rms_normalise (norm sqrt(d)) or unit L2 norm."""
    if kind == "rms":
        return rms_normalise(x)
    if kind == "unit":
        return functional.normalize(x, dim=-1)
    raise ValueError(f"output norm must be one of {OUTPUT_NORMS}, got {kind!r}")


def frozen_copy(module: nn.Module, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A copy of `module` in `dtype` with every parameter frozen (requires_grad False)."""
    module = copy.deepcopy(module).to(dtype)
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


class FactTransformer(nn.Module):
    """One Transformer layer whose MLP slot holds a frozen fact-storing MLP (module docstring).

    embeddings: (V, d) input token embeddings, frozen. output_embeddings: (V, d) the frozen
        decoding table (None: tied to the input embeddings).
    mlp: any module mapping (N, d) -> (N, d); stored as a frozen float32 copy (`swap_mlp`
        replaces it). mlp_input_scale: the frozen scale s of the RMS norm before the MLP.
    rope_base: None for no positional encoding. output_norm: 'rms' | 'unit' (module docstring).
    """

    def __init__(
        self, embeddings: Tensor, mlp: nn.Module, mlp_input_scale: float, n_head: int = 1,
        rope_base: float | None = 10_000.0, attention_residual: bool = False, mlp_residual: bool = False,
        output_embeddings: Tensor | None = None, output_norm: str = "rms",
    ) -> None:
        super().__init__()
        dim = embeddings.shape[1]
        self.embedding = nn.Embedding.from_pretrained(embeddings.detach().float().clone(), freeze=True)
        decoder = embeddings if output_embeddings is None else output_embeddings
        if decoder.shape != embeddings.shape:
            raise ValueError(f"output table {tuple(decoder.shape)} differs from input table {tuple(embeddings.shape)}")
        self.register_buffer("decoder", decoder.detach().float().clone())
        self.output_norm = output_norm
        self.attention = CausalSelfAttention(dim, n_head, rope_base)
        self.mlp_norm = ScalarRMSNorm(mlp_input_scale)
        self.mlp = frozen_copy(mlp)
        self.attention_residual, self.mlp_residual = attention_residual, mlp_residual

    def swap_mlp(self, mlp: nn.Module) -> None:
        """Put another (frozen, float32) MLP in the MLP slot, on this model's device."""
        self.mlp = frozen_copy(mlp).to(self.embedding.weight.device)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters that train: the attention's query and key maps."""
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def forward(self, tokens: Tensor, query_positions: Tensor | None = None) -> Tensor:
        """Logits over the whole vocabulary: (B, T, V), or (B, V) at query_positions (B,)."""
        table = rms_normalise(self.embedding.weight)
        mixed = self.attention(table, tokens, query_positions)
        if self.attention_residual:
            rows = torch.arange(len(tokens), device=tokens.device)
            mixed = mixed + self.embedding(tokens if query_positions is None else tokens[rows, query_positions])
        shape = mixed.shape
        stored = self.mlp(self.mlp_norm(mixed).reshape(-1, shape[-1])).reshape(shape)
        if self.mlp_residual:
            stored = stored + mixed
        return output_normalise(stored, self.output_norm) @ self.decoder.T


def attention_logit_scale(model: FactTransformer) -> float:
    """||W_q|| ||W_k|| / sqrt(d_head) (Frobenius): how sharp the attention can be (a diagnostic)."""
    attention = model.attention
    head_dim = attention.query.weight.shape[0] // attention.n_head
    return float(attention.query.weight.norm() * attention.key.weight.norm()) / math.sqrt(head_dim)
