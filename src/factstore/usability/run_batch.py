"""Several usability runs computed as one batch: R independent one-layer Transformers whose
trained part, the attention, is one batched computation (the issue's "several runs batched where
shapes allow").

Run r is exactly the FactTransformer (factstore.transformer) with input table E_r (V, d), output
table D_r (V, d), frozen MLP g_r (or, for the fact-adaptive evaluation, the MLP swapped in, h_r)
and MLP-norm scale s_r, and its own query and key maps W_q[r], W_k[r] (d, d). The
runs share only their shapes: the same vocabulary size V and dimension d (so the same number of
facts and junk tokens). Their hosted MLPs may differ in size: they are frozen and applied run by
run. For active runs a (A of them) and token ids (A, B, T) with the query position of each
sequence (A, B):

    tables   = rms(E[a])                                     (A, V, d)
    keys     = RoPE(tables W_k[a]^T [tokens])                (A B, heads, T, d / heads; RoPE optional)
    queries  = RoPE(tables W_q[a]^T [tokens at Q])           (A B, heads, 1, d / heads)
    mixed    = softmax(queries keys^T / sqrt(d_head)) rms(E[a])[tokens]   (causal: up to Q)

(without RoPE and for a vocabulary of a few times T, the same attention is computed over the
tables: transformer.attention_over_tables).
    logits_a = norm(g_a(s_a rms(mixed_a))) D_a^T             (B, V) per run (norm: rms or unit)

Training sums the runs' losses, so the gradient of each run's weights is the gradient of its own
loss, and AdamW, element-wise, updates every run as if it trained alone. A run that has stopped is
left out of the forward pass (`runs`), so its weights get no gradient and the optimizer skips them.
`run_model(r)` returns run r as a plain FactTransformer for evaluation and inspection.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from factstore.transformer import (
    FactTransformer, attention_at, attention_over_tables, frozen_copy, output_normalise, rms_normalise, table_attention_pays,
)


class RunBatch(nn.Module):
    """R one-layer Transformers on tables of one shape, trained side by side (module docstring).

    embeddings: (R, V, d) input tables, decoders: (R, V, d) output tables, frozen. mlps: R modules
    (N, d) -> (N, d), stored as frozen float32 copies; swapped: R more (the MLPs of the
    fact-adaptive evaluation; None: none). mlp_input_scales: R floats. generators: R generators,
    run r's query and key maps drawn from generators[r] (`initialise`). rope_base None: no
    positional encoding. output_norm: 'rms' | 'unit' (factstore.transformer.output_normalise).
    """

    def __init__(self, embeddings: Tensor, decoders: Tensor, mlps: list[nn.Module], mlp_input_scales: list[float],
                 generators: list[torch.Generator], n_head: int = 1, rope_base: float | None = None,
                 output_norm: str = "unit", swapped: list[nn.Module] | None = None) -> None:
        super().__init__()
        runs, _, dim = embeddings.shape
        if not (len(mlps) == len(mlp_input_scales) == len(generators) == runs == len(decoders)):
            raise ValueError(f"{runs} embedding tables but {len(decoders)} output tables, {len(mlps)} MLPs, "
                             f"{len(mlp_input_scales)} scales and {len(generators)} generators")
        if dim % n_head:
            raise ValueError(f"dimension {dim} is not divisible by {n_head} heads")
        self.n_head, self.rope_base, self.output_norm = n_head, rope_base, output_norm
        self.register_buffer("embeddings", embeddings.detach().float().clone())
        self.register_buffer("decoders", decoders.detach().float().clone())
        self.register_buffer("mlp_input_scales", torch.tensor(mlp_input_scales, dtype=torch.float32))
        self.mlps = nn.ModuleList(frozen_copy(mlp) for mlp in mlps)
        self.swapped = nn.ModuleList(frozen_copy(mlp) for mlp in swapped) if swapped is not None else None
        self.query = nn.ParameterList(nn.Parameter(torch.empty(dim, dim)) for _ in range(runs))
        self.key = nn.ParameterList(nn.Parameter(torch.empty(dim, dim)) for _ in range(runs))
        for run, generator in enumerate(generators):
            self.initialise(run, generator)

    @torch.no_grad()
    def initialise(self, run: int, generator: torch.Generator) -> None:
        """Draw run `run`'s query and key maps afresh from `generator`: N(0, 0.02^2) entries, query
        first (drawn on the CPU, so a run's draw does not depend on the device)."""
        dim = self.query[run].shape[0]
        self.query[run].copy_(torch.randn(dim, dim, generator=generator) * 0.02)
        self.key[run].copy_(torch.randn(dim, dim, generator=generator) * 0.02)

    @property
    def size(self) -> int:
        return len(self.mlps)

    def forward(self, runs: list[int], tokens: Tensor, query_positions: Tensor, swapped: bool = False) -> Tensor:
        """Logits (A, B, V) at the query positions (A, B) of the sequences tokens (A, B, T) of runs
        `runs`, through the MLPs trained with, or (swapped) the MLPs swapped in."""
        count, batch, length = tokens.shape
        dim = self.embeddings.shape[2]
        tables = rms_normalise(self.embeddings[runs])  # (A, V, d)
        key_tables = tables @ torch.stack([self.key[r] for r in runs]).transpose(1, 2)
        query_tables = tables @ torch.stack([self.query[r] for r in runs]).transpose(1, 2)
        run_rows = torch.arange(count, device=tokens.device).view(count, 1)
        query_tokens = tokens.gather(2, query_positions.unsqueeze(2)).squeeze(2)  # (A, B)
        queries = query_tables[run_rows, query_tokens]  # (A, B, d)
        if table_attention_pays(tables.shape[1], length, self.rope_base):
            mixed = attention_over_tables(queries, key_tables, tables, tokens, query_positions, self.n_head)
        else:
            mixed = attention_at(queries.view(-1, dim),
                                 key_tables[run_rows.unsqueeze(2), tokens].view(-1, length, dim),
                                 tables[run_rows.unsqueeze(2), tokens].view(-1, length, dim),
                                 query_positions.reshape(-1), self.n_head, self.rope_base).view(count, batch, dim)
        hosted = self.swapped if swapped else self.mlps
        logits = []
        for row, run in enumerate(runs):
            stored = hosted[run](rms_normalise(mixed[row]) * self.mlp_input_scales[run])
            logits.append(output_normalise(stored, self.output_norm) @ self.decoders[run].T)
        return torch.stack(logits)

    @torch.no_grad()
    def key_recall(self, run: int, fact_map: Tensor, swapped: bool = False) -> float:
        """Recall of fact_map (F,) by run `run` with its attention entirely on the key: the MLP (or,
        swapped, the one swapped in) applied to the key's own normalised embedding, decoded over the
        whole output table. No attention can deliver more from that MLP: any weight elsewhere
        only mixes junk into the MLP's input (the ceiling of the fact-adaptive accuracy)."""
        keys = torch.arange(len(fact_map), device=self.embeddings.device)  # fact token i is key i
        mixed = rms_normalise(self.embeddings[run])[keys]
        hosted = (self.swapped if swapped else self.mlps)[run]
        stored = hosted(rms_normalise(mixed) * self.mlp_input_scales[run])
        logits = output_normalise(stored, self.output_norm) @ self.decoders[run].T
        return int((logits.argmax(dim=1) == fact_map.to(keys.device)).sum()) / len(fact_map)

    def run_model(self, run: int) -> FactTransformer:
        """Run `run` as a FactTransformer (a copy: same tables, MLP, scale and trained weights)."""
        model = FactTransformer(self.embeddings[run], self.mlps[run], float(self.mlp_input_scales[run]),
                                self.n_head, self.rope_base, output_embeddings=self.decoders[run],
                                output_norm=self.output_norm)
        with torch.no_grad():
            model.attention.query.weight.copy_(self.query[run])
            model.attention.key.weight.copy_(self.key[run])
        return model.to(self.embeddings.device)
