"""Several usability runs computed as one batch: R independent one-layer Transformers whose
trained part, the attention, is one batched computation (the issue's "several runs batched where
shapes allow").

Run r is exactly the FactTransformer (factstore.transformer) with token embeddings E_r (V, d),
frozen MLP g_r and MLP-norm scale s_r, and its own query and key maps W_q[r], W_k[r] (d, d). The
runs share only their shapes: the same vocabulary size V and dimension d (so the same number of
facts and junk tokens). Their hosted MLPs may differ in size: they are frozen and applied run by
run. For active runs a (A of them) and token ids (A, B, T) with the query position of each
sequence (A, B):

    tables   = rms(E[a])                                     (A, V, d)
    keys     = RoPE(tables W_k[a]^T [tokens])                (A B, heads, T, d / heads)
    queries  = RoPE(tables W_q[a]^T [tokens at Q])           (A B, heads, 1, d / heads)
    mixed    = softmax(queries keys^T / sqrt(d_head)) rms(E[a])[tokens]   (causal: up to Q)
    logits_a = rms(g_a(s_a rms(mixed_a))) E_a^T              (B, V) per run

Training sums the runs' losses, so the gradient of each run's weights is the gradient of its own
loss, and AdamW, element-wise, updates every run as if it trained alone. A run that has stopped is
left out of the forward pass (`runs`), so its weights get no gradient and the optimizer skips them.
`run_model(r)` returns run r as a plain FactTransformer for evaluation and inspection.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from factstore.transformer import FactTransformer, attention_at, frozen_copy, rms_normalise


class RunBatch(nn.Module):
    """R one-layer Transformers on tables of one shape, trained side by side (module docstring).

    embeddings: (R, V, d) token embeddings, frozen. mlps: R modules (N, d) -> (N, d), stored as
    frozen float32 copies. mlp_input_scales: R floats. generators: R generators, run r's query
    and key maps drawn from generators[r] (N(0, 0.02^2) entries, query first).
    """

    def __init__(self, embeddings: Tensor, mlps: list[nn.Module], mlp_input_scales: list[float],
                 generators: list[torch.Generator], n_head: int = 1, rope_base: float = 10_000.0) -> None:
        super().__init__()
        runs, _, dim = embeddings.shape
        if not (len(mlps) == len(mlp_input_scales) == len(generators) == runs):
            raise ValueError(f"{runs} embedding tables but {len(mlps)} MLPs, {len(mlp_input_scales)} scales and "
                             f"{len(generators)} generators")
        if dim % n_head:
            raise ValueError(f"dimension {dim} is not divisible by {n_head} heads")
        self.n_head, self.rope_base = n_head, rope_base
        self.register_buffer("embeddings", embeddings.detach().float().clone())
        self.register_buffer("mlp_input_scales", torch.tensor(mlp_input_scales, dtype=torch.float32))
        self.mlps = nn.ModuleList(frozen_copy(mlp) for mlp in mlps)
        self.query, self.key = nn.ParameterList(), nn.ParameterList()
        for generator in generators:
            self.query.append(nn.Parameter(torch.randn(dim, dim, generator=generator) * 0.02))
            self.key.append(nn.Parameter(torch.randn(dim, dim, generator=generator) * 0.02))

    @property
    def size(self) -> int:
        return len(self.mlps)

    def forward(self, runs: list[int], tokens: Tensor, query_positions: Tensor) -> Tensor:
        """Logits (A, B, V) at the query positions (A, B) of the sequences tokens (A, B, T) of runs `runs`."""
        count, batch, length = tokens.shape
        dim = self.embeddings.shape[2]
        tables = rms_normalise(self.embeddings[runs])  # (A, V, d)
        key_tables = tables @ torch.stack([self.key[r] for r in runs]).transpose(1, 2)
        query_tables = tables @ torch.stack([self.query[r] for r in runs]).transpose(1, 2)
        run_rows = torch.arange(count, device=tokens.device).view(count, 1)
        query_tokens = tokens.gather(2, query_positions.unsqueeze(2)).squeeze(2)  # (A, B)
        mixed = attention_at(query_tables[run_rows, query_tokens].view(-1, dim),
                             key_tables[run_rows.unsqueeze(2), tokens].view(-1, length, dim),
                             tables[run_rows.unsqueeze(2), tokens].view(-1, length, dim),
                             query_positions.reshape(-1), self.n_head, self.rope_base).view(count, batch, dim)
        logits = []
        for row, run in enumerate(runs):
            stored = self.mlps[run](rms_normalise(mixed[row]) * self.mlp_input_scales[run])
            logits.append(rms_normalise(stored) @ self.embeddings[run].T)
        return torch.stack(logits)

    def run_model(self, run: int) -> FactTransformer:
        """Run `run` as a FactTransformer (a copy: same embeddings, MLP, scale and trained weights)."""
        model = FactTransformer(self.embeddings[run], self.mlps[run], float(self.mlp_input_scales[run]),
                                self.n_head, self.rope_base)
        with torch.no_grad():
            model.attention.query.weight.copy_(self.query[run])
            model.attention.key.weight.copy_(self.key[run])
        return model.to(self.embeddings.device)
