"""The language model that reads facts from a frozen fact-storing MLP (S0 "Language modelling").

One Transformer layer, one head, built from the pieces of factstore.transformer. For token ids
(B, T) of a templated sentence ("[CLS] The author of <book> is <author>"):

    x = E[tokens]                                 tied, frozen token embeddings E (V, d)
    a = Attention(rms(x))                         causal, RoPE; query and key maps are small MLPs
                                                  (LayerNorm -> Linear -> GELU -> Linear); value
                                                  and output frozen to the identity
    z = s * rms(a)                                frozen scalar RMS norm (s: the fact keys' RMS)
    w = sigmoid(router([z, x]))                   an MLP router reading z and the position's own
                                                  token (as a router reads the residual stream)
    m = w * fact_expert(z) + (1 - w) * language_expert(z)
    logits = exp(g) * rms(m) E^T                  g: a trained scalar log-gain of the logits

The fact expert is a fact-storing MLP built (or trained) on the book-token -> author-token
embeddings, decoding over the WHOLE vocabulary, and stays frozen; the language expert is a
trainable rank-r linear map (up @ down). A Transformer that learnt to use the fact expert routes
the book into it at the position before the author (attention on the book, w near 1 there) and
leaves the template words to the language expert (w near 0). Editing a fact then means editing
or swapping the fact expert alone (factstore.editing.editors, factstore.editing.protocol).

Everything the attention reads at a position is a function of that position's token (one
layer), so the query and key MLPs run once per vocabulary entry (CausalSelfAttention).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from factstore.transformer import CausalSelfAttention, ScalarRMSNorm, frozen_copy, rms_normalise


# The attention learns to route a book into the fact expert only through gradients scaled by w,
# and the router, reading z alone, can switch the expert off at an answer position before the
# attention has learnt to look at the book there: that position never recovers (measured with a
# router on z alone: 3 of 24 templates stuck at recall 0 with w ~ 0.001 for one initial draw, 1 of
# 24 when the router also started at w = 0.88). Hence the router also reads the position's own
# token, which tells an answer position without the attention's help, and starts out using the
# fact expert almost everywhere (w = sigmoid(2) = 0.88), learning where NOT to use it.
ROUTER_INITIAL_BIAS = 2.0


class LowRankLinear(nn.Module):
    """x -> up(down(x)): a trainable linear map of rank at most `rank`, (N, d) -> (N, d)."""

    def __init__(self, dim: int, rank: int) -> None:
        super().__init__()
        self.down = nn.Linear(dim, rank, bias=False)
        self.up = nn.Linear(rank, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.up(self.down(x))


class ExpertMixture(nn.Module):
    """w fact_expert(z) + (1 - w) language_expert(z) with an MLP router w = sigmoid(router([z, x])),
    x the embedding of the position's own token.

    fact_expert: any module (N, d) -> (N, d); kept as a frozen float32 copy (`swap_fact_expert`
    replaces it). `fact_shift` (N, d), when given, is added to the fact expert's output: the
    handle that ROME-style target optimisation uses (factstore.editing.protocol).
    """

    def __init__(self, fact_expert: nn.Module, dim: int, rank: int, router_hidden: int) -> None:
        super().__init__()
        self.fact_expert = frozen_copy(fact_expert)
        self.language_expert = LowRankLinear(dim, rank)
        self.router = nn.Sequential(nn.LayerNorm(2 * dim), nn.Linear(2 * dim, router_hidden), nn.GELU(),
                                    nn.Linear(router_hidden, 1))
        with torch.no_grad():
            self.router[-1].bias.fill_(ROUTER_INITIAL_BIAS)

    def forward(self, z: Tensor, token: Tensor, fact_shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(output (N, d), fact weight w (N,)) for inputs z (N, d) at positions whose own token
        embeddings are `token` (N, d)."""
        weight = torch.sigmoid(self.router(torch.cat([z, token], dim=-1))).squeeze(-1)
        fact = self.fact_expert(z)
        if fact_shift is not None:
            fact = fact + fact_shift
        mixed = weight.unsqueeze(-1) * fact + (1 - weight.unsqueeze(-1)) * self.language_expert(z)
        return mixed, weight


class FactLanguageModel(nn.Module):
    """The one-layer mixture-of-experts language model of the module docstring.

    embeddings: (V, d) token embeddings, tied and frozen. fact_expert: (N, d) -> (N, d), built on
    unit-norm book embeddings; mlp_input_scale: the frozen scale s (1 / sqrt(d) for unit keys),
    so an attention output that copies one book embedding reaches the expert as its key.
    rank: of the language expert. projection_hidden, router_hidden: widths of the query / key
    MLPs and of the router.
    """

    def __init__(
        self, embeddings: Tensor, fact_expert: nn.Module, mlp_input_scale: float, rank: int = 8,
        projection_hidden: int = 64, router_hidden: int = 32, rope_base: float = 10_000.0,
    ) -> None:
        super().__init__()
        dim = embeddings.shape[1]
        self.embedding = nn.Embedding.from_pretrained(embeddings.detach().float().clone(), freeze=True)
        self.attention = CausalSelfAttention(dim, 1, rope_base, projection_hidden=projection_hidden)
        self.mlp_norm = ScalarRMSNorm(mlp_input_scale)
        self.mixture = ExpertMixture(fact_expert, dim, rank, router_hidden)
        self.logit_log_gain = nn.Parameter(torch.zeros(()))

    @property
    def fact_expert(self) -> nn.Module:
        return self.mixture.fact_expert

    def swap_fact_expert(self, fact_expert: nn.Module) -> None:
        """Put another (frozen, float32) fact expert in the mixture, on this model's device."""
        self.mixture.fact_expert = frozen_copy(fact_expert).to(self.embedding.weight.device)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Query and key MLPs, router, language expert and the logit gain."""
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def expert_inputs(self, tokens: Tensor, positions: Tensor | None = None) -> Tensor:
        """z, the mixture's input: (B, T, d), or (B, d) at one position per sequence (B,)."""
        mixed = self.attention(rms_normalise(self.embedding.weight), tokens, positions)
        return self.mlp_norm(mixed)

    def forward(
        self, tokens: Tensor, positions: Tensor | None = None, fact_shift: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(logits, fact weights) for tokens (B, T): logits (B, T, V) and weights (B, T), or
        (B, V) and (B,) at `positions` (B,), one per sequence. With a one-layer model the output
        at one position needs no other position's output (the cheap path editing uses).
        fact_shift: (B, d) added to the fact expert's output (only with positions)."""
        if fact_shift is not None and positions is None:
            raise ValueError("fact_shift needs positions: one shift per sequence at one position")
        z = self.expert_inputs(tokens, positions)
        own = tokens if positions is None else tokens[torch.arange(len(tokens), device=tokens.device), positions]
        shape = z.shape
        mixed, weight = self.mixture(z.reshape(-1, shape[-1]), self.embedding(own).reshape(-1, shape[-1]), fact_shift)
        logits = rms_normalise(mixed) @ self.embedding.weight.T * self.logit_log_gain.exp()
        return logits.reshape(*shape[:-1], -1), weight.reshape(shape[:-1])
