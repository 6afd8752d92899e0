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

Every fact's edit sentence is a seen template drawn at random per fact (`edit_templates`), the
follow-up code's protocol; the editors are given that sentence only.

Scores (the standard names; the paper's summary swaps efficacy and specificity), first
per fact (`fact_outcomes`), then averaged (`summarise_outcomes`): efficacy = recall of the NEW
author of an edited fact on its edit sentence; paraphrase = the same through the other SEEN
templates (the follow-up code's paraphrase: rephrasings the model was trained on, so it measures
whether the edit reached the fact, not whether the model generalises to new wording);
unseen_template = the same through the held-out templates, never trained on (reported apart:
the unedited model's own recall there is well below 1); specificity = recall of unedited facts
through the seen templates; score = harmonic mean of efficacy, paraphrase and specificity;
perplexity_ratio (r_NF) = perplexity of the template words after / before the edit, on a fixed
random sample of the sentences.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy.stats import hmean
from torch import Tensor, nn
from torch.nn import functional

from factstore.editing.corpus import Corpus
from factstore.editing.model import FactLanguageModel
from factstore.editing.training import answer_recall, evaluate, perplexity
from factstore.training import check_finite


def block_size(n_facts: int, fraction: float) -> int:
    """How many facts one edit of `fraction` of n_facts changes: round(fraction * n_facts), at least 2
    (a permutation without a fixed point needs two)."""
    return max(2, round(fraction * n_facts))


def edit_block(n_facts: int, fraction: float, generator: torch.Generator, exclude: Tensor | None = None) -> Tensor:
    """(n,) sorted indices of round(fraction * n_facts) facts (at least 2) drawn without replacement,
    none of them in `exclude` (e.g. the validation block)."""
    candidates = torch.arange(n_facts)
    if exclude is not None:
        candidates = candidates[~torch.isin(candidates, exclude)]
    size = block_size(n_facts, fraction)
    if size > len(candidates):
        raise ValueError(f"cannot edit {size} of {len(candidates)} available facts (fraction {fraction})")
    return candidates[torch.randperm(len(candidates), generator=generator)[:size]].sort().values


def disjoint_blocks(n_facts: int, fraction: float, min_facts: int, generator: torch.Generator,
                    exclude: Tensor | None = None) -> list[Tensor]:
    """Disjoint edit blocks of `edit_block`'s size (round(fraction * n_facts), at least 2), as many
    as it takes to edit at least `min_facts` facts in all, none of them in `exclude`: each block is
    one edit of `fraction` of the facts, and pooling the blocks gives every score enough facts."""
    size = block_size(n_facts, fraction)
    count = max(1, math.ceil(min_facts / size))
    candidates = torch.arange(n_facts)
    if exclude is not None:
        candidates = candidates[~torch.isin(candidates, exclude)]
    if count * size > len(candidates):
        raise ValueError(f"{count} disjoint blocks of {size} facts (>= {min_facts} edited facts at fraction "
                         f"{fraction}) need {count * size} facts, but only {len(candidates)} are available")
    order = candidates[torch.randperm(len(candidates), generator=generator)]
    return [order[number * size:(number + 1) * size].sort().values for number in range(count)]


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


def edit_templates(n_facts: int, seen: list[int], generator: torch.Generator) -> Tensor:
    """(F,) int64: the edit sentence of every fact, a seen template drawn uniformly at random per
    fact (the follow-up code shuffles each fact's sentences and edits through the first)."""
    seen = torch.as_tensor(seen, dtype=torch.long)
    return seen[torch.randint(len(seen), (n_facts,), generator=generator)]


def edit_sentences(corpus: Corpus, templates: Tensor) -> Corpus:
    """The sentences of `corpus` written through their fact's edit template; templates: (F,)."""
    return corpus.subset(corpus.templates == templates[corpus.facts])


def fact_outcomes(correct: Tensor, corpus: Corpus, edited: Tensor, templates: Tensor,
                  held_out: list[int]) -> pd.DataFrame:
    """Per fact, the recall of its (edited) author, one row per fact of `corpus`.

    correct: (N,) bool, sentence n of `corpus` (the EDITED fact map) recalled its author;
    edited: (F,) bool, the facts whose author changed; templates: (F,) each fact's edit sentence.
    Columns: fact, edited, and (NaN where a column does not apply)
    efficacy (edited facts: recall on the edit sentence), paraphrase (edited facts: mean recall
    through the OTHER seen templates, the follow-up code's paraphrase), unseen_template (edited
    facts: mean recall through the held-out templates, never trained on: generalisation to
    unseen phrasing, reported apart), specificity (unedited facts: mean recall through the seen
    templates) and unseen_specificity (unedited facts, held-out templates)."""
    facts = corpus.facts.cpu()
    held = torch.isin(corpus.templates.cpu(), torch.as_tensor(held_out, dtype=torch.long))
    frame = pd.DataFrame({"fact": facts.numpy(), "correct": correct.cpu().double().numpy(),
                          "kind": np.select([(corpus.templates.cpu() == templates[facts]).numpy(), held.numpy()],
                                            ["edit", "unseen"], "seen_other")})
    recall = frame.pivot_table(index="fact", columns="kind", values="correct", aggfunc="mean").reindex(
        columns=["edit", "seen_other", "unseen"])
    is_edited = edited.cpu().numpy()[recall.index.to_numpy()]
    seen_mean = frame[frame.kind != "unseen"].groupby("fact").correct.mean()
    return pd.DataFrame({
        "fact": recall.index.to_numpy(), "edited": is_edited,
        "efficacy": np.where(is_edited, recall["edit"], np.nan),
        "paraphrase": np.where(is_edited, recall["seen_other"], np.nan),
        "unseen_template": np.where(is_edited, recall["unseen"], np.nan),
        "specificity": np.where(is_edited, np.nan, seen_mean.reindex(recall.index)),
        "unseen_specificity": np.where(is_edited, np.nan, recall["unseen"]),
    })


SCORES = ("efficacy", "paraphrase", "specificity")
"""The three scores whose harmonic mean is the edit's score (the claim's); unseen_template is reported."""


def summarise_outcomes(outcomes: pd.DataFrame) -> dict[str, float]:
    """Efficacy, paraphrase, unseen_template (means over the edited facts), specificity and
    unseen_specificity (over the unedited facts) of `fact_outcomes` rows (one edit, or several
    pooled), and `score`: the harmonic mean of efficacy, paraphrase, specificity (0 when one is 0)."""
    means = {column: float(outcomes[column].mean()) for column in
             ("efficacy", "paraphrase", "unseen_template", "specificity", "unseen_specificity")}
    scores = [means[column] for column in SCORES]
    return {**means, "score": float(hmean(scores)) if min(scores) > 0 else 0.0}


def edit_outcomes(model: FactLanguageModel, corpus: Corpus, edited: Tensor, templates: Tensor,
                  held_out: list[int]) -> pd.DataFrame:
    """`fact_outcomes` of `model` on `corpus` (recall at the answer positions only)."""
    return fact_outcomes(answer_recall(model, corpus), corpus, edited, templates, held_out)


def perplexity_ratio(model: FactLanguageModel, text_sample: Corpus, perplexity_before: float) -> float:
    """r_NF: the template-word perplexity of `model` on `text_sample` (a fixed sample of sentences;
    template-word targets do not depend on the fact map) over the unedited model's, perplexity_before."""
    return perplexity(evaluate(model, text_sample)) / perplexity_before
