"""The fact-editing protocol: which facts change, what an editor is given, and how edits are scored.

An edit changes the authors of a block of facts: the block's authors are permuted among
themselves with no fixed point (a random cyclic shift), so every edited fact gets another
fact's author and the author set is unchanged. Weight editors (factstore.editing.editors) act
on the fact expert's output projection W (the "edit layer"), with

- keys: the expert's hidden activations (the input of W) at the answer position of a sentence,
  i.e. where the attention has routed the book into the expert. In this one-layer model that
  position (the token before the author) is where the subject is read; in a deep model ROME
  reads the key at the last subject token for the same reason: it is the MLP input that carries
  the subject. The key second moment C is estimated over the answer positions of the whole
  training corpus.
- residuals: r = v* - W k, the change of the expert's output that makes the model predict the
  new author on the edit template, found by Adam on a shift added to the expert's output at the
  answer position (ROME's "v*" optimisation; one independent shift per edited fact, optimised
  in one batch), optionally capped relative to the current output (`clamp_residuals`).

Scores (the standard names; the seed's summary swaps efficacy and specificity, SPEC S0):
efficacy = recall of the NEW authors of edited facts on the edit template; paraphrase = the same
on the held-out templates (never seen in training); specificity = recall of unedited facts on
the seen templates; score = harmonic mean of the three; perplexity_ratio (r_NF) = perplexity of
the template words after / before the edit, on a fixed random sample of the sentences.
"""

from __future__ import annotations

import torch
from scipy.stats import hmean
from torch import Tensor, nn
from torch.nn import functional

from factstore.editing.corpus import Corpus
from factstore.editing.model import FactLanguageModel
from factstore.editing.training import answer_recall, evaluate, perplexity
from factstore.training import check_finite


def edit_block(n_facts: int, fraction: float, generator: torch.Generator, exclude: Tensor | None = None) -> Tensor:
    """(n,) sorted indices of round(fraction * n_facts) facts (at least 2) drawn without replacement,
    none of them in `exclude` (e.g. the validation block)."""
    candidates = torch.arange(n_facts)
    if exclude is not None:
        candidates = candidates[~torch.isin(candidates, exclude)]
    size = max(2, round(fraction * n_facts))
    if size > len(candidates):
        raise ValueError(f"cannot edit {size} of {len(candidates)} available facts (fraction {fraction})")
    return candidates[torch.randperm(len(candidates), generator=generator)[:size]].sort().values


def permuted_authors(authors: Tensor, block: Tensor, generator: torch.Generator) -> Tensor:
    """A copy of the fact map `authors` (F,) whose entries at `block` are permuted with no fixed
    point: in a random order of the block, each fact takes the author of the next (cyclically)."""
    order = block[torch.randperm(len(block), generator=generator)]
    edited = authors.clone()
    edited[order] = authors[order.roll(-1)]
    return edited


def expert_keys(model: FactLanguageModel, corpus: Corpus, edit_layer: nn.Linear, batch_size: int = 4096) -> Tensor:
    """(N, h) float64: the input of `edit_layer` (the fact expert's output projection) at each
    sentence's answer position."""
    device = model.embedding.weight.device
    captured: list[Tensor] = []
    hook = edit_layer.register_forward_pre_hook(lambda module, inputs: captured.append(inputs[0].detach()))
    try:
        with torch.no_grad():
            for rows in torch.arange(len(corpus.tokens)).split(batch_size):
                batch = corpus.subset(rows).to(device)
                model(batch.tokens, batch.answer_positions)
    finally:
        hook.remove()
    return torch.cat(captured).to("cpu", torch.float64)


def target_residuals(model: FactLanguageModel, corpus: Corpus, steps: int, learning_rate: float) -> Tensor:
    """(N, d) float64: per sentence, the shift of the fact expert's output at the answer position
    that makes the model predict the sentence's author (Adam on the cross-entropy, `steps` updates,
    every sentence's shift independent). The residual r = v* - W k of the weight editors."""
    device = model.embedding.weight.device
    corpus = corpus.to(device)
    rows = torch.arange(len(corpus.tokens), device=device)
    answers = corpus.targets[rows, corpus.answer_positions]
    shift = torch.zeros(len(corpus.tokens), model.embedding.weight.shape[1], device=device, requires_grad=True)
    optimizer = torch.optim.Adam([shift], lr=learning_rate)
    for step in range(steps):
        logits, _ = model(corpus.tokens, corpus.answer_positions, fact_shift=shift)
        loss = functional.cross_entropy(logits, answers, reduction="sum")
        check_finite(loss, where=f"editing.target_residuals(learning_rate={learning_rate:g})", step=step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    check_finite(0.0, [shift], where=f"editing.target_residuals(learning_rate={learning_rate:g})", step=steps)
    return shift.detach().to("cpu", torch.float64)


def clamp_residuals(residuals: Tensor, outputs: Tensor, clamp: float | None) -> Tensor:
    """Residuals (n, d) with each row's norm capped at clamp x the norm of the current output W k
    (n, d) of its key; unchanged when clamp is None. Large v* shifts overwrite more of what the
    layer computes for other keys; capping them trades efficacy for specificity (MEMIT's clamp)."""
    if clamp is None:
        return residuals
    limit = clamp * outputs.norm(dim=1, keepdim=True)
    norms = residuals.norm(dim=1, keepdim=True)
    return residuals * torch.clamp(limit / norms.clamp(min=1e-30), max=1.0)


def set_weight(layer: nn.Linear, weight: Tensor) -> None:
    """Overwrite the weight of a (frozen) linear layer in place, in its dtype and device."""
    with torch.no_grad():
        layer.weight.copy_(weight.to(layer.weight.dtype))


def score_edit(correct: Tensor, corpus: Corpus, edited: Tensor, edit_template: int, held_out: list[int],
               perplexity_ratio: float) -> dict[str, float]:
    """Efficacy, paraphrase, specificity, their harmonic mean `score` (0 when one of them is 0) and
    `perplexity_ratio` from per-sentence outcomes. correct: (N,) bool, sentence n of `corpus` (every
    fact, every template, the EDITED fact map) recalled its author; edited: (F,) bool, the facts
    whose author changed."""
    correct = correct.double()
    on_edited = edited[corpus.facts]
    held = torch.isin(corpus.templates, torch.tensor(held_out, dtype=corpus.templates.dtype))
    scores = [float(correct[on_edited & (corpus.templates == edit_template)].mean()),
              float(correct[on_edited & held].mean()),
              float(correct[~on_edited & ~held].mean())]
    return {"efficacy": scores[0], "paraphrase": scores[1], "specificity": scores[2],
            "score": float(hmean(scores)) if min(scores) > 0 else 0.0, "perplexity_ratio": perplexity_ratio}


def edit_scores(model: FactLanguageModel, corpus: Corpus, edited: Tensor, edit_template: int,
                held_out: list[int], text_sample: Corpus, perplexity_before: float) -> dict[str, float]:
    """`score_edit` of `model` on `corpus` (recall at the answer positions only), with r_NF measured
    on `text_sample` (a fixed sample of sentences: the template-word targets do not depend on the
    fact map); perplexity_before: of the unedited model on the same sample."""
    return score_edit(answer_recall(model, corpus), corpus, edited, edit_template, held_out,
                      perplexity(evaluate(model, text_sample)) / perplexity_before)
