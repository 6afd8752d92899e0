"""Training the fact language model on its templated corpus, and what is measured on it.

Next-token cross-entropy on every target of every sentence (template words, the book, the
author), AdamW on the trainable parts only (query and key MLPs, router, language expert, logit
gain); the token embeddings and the fact expert stay frozen. An epoch shows every sentence of
the corpus once in a random order. Training stops at the end of the first epoch whose author
recall (on the batches before each update) reaches `stop_recall` AND whose template-word loss
fell by less than `text_loss_tolerance` (relative) from the epoch before -- the facts are
recalled and the language part has stopped improving -- or after max_epochs. (Stopping at the
recall alone leaves the template words under-trained: the facts are learnt within a few epochs.)

`evaluate` measures, per sentence, whether the argmax at the answer position is the author
(recall), the summed negative log-likelihood of the template-word targets (the non-fact tokens
whose perplexity r_NF compares before and after an edit; the book target is a uniform draw over
the books and is left out), and the router's fact weight at the answer position and at the
template-word positions.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm
from torch.nn import functional

from factstore.editing.corpus import AUTHOR, NONE, TEXT, Corpus
from factstore.editing.model import FactLanguageModel
from factstore.training import adamw_with_warmup, check_finite


@dataclass(frozen=True)
class LanguageTraining:
    """AdamW with a linear warm-up, early stopping at an epoch's recall (module docstring)."""

    learning_rate: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    batch_size: int = 256
    max_epochs: int = 30
    stop_recall: float = 1.0
    text_loss_tolerance: float = 0.02


def sentence_losses(logits: torch.Tensor, corpus: Corpus) -> torch.Tensor:
    """(N, T) negative log-likelihood of each target (0 where the target kind is NONE)."""
    losses = functional.cross_entropy(logits.transpose(1, 2), corpus.targets, reduction="none")
    return losses * (corpus.target_kinds != NONE)


def answer_correct(logits: torch.Tensor, corpus: Corpus) -> torch.Tensor:
    """(N,) bool: the argmax at the answer position is the author token."""
    rows = torch.arange(len(corpus.tokens), device=logits.device)
    positions = corpus.answer_positions
    return logits[rows, positions].argmax(dim=-1) == corpus.targets[rows, positions]


def train_language_model(model: FactLanguageModel, corpus: Corpus, settings: LanguageTraining,
                         generator: torch.Generator) -> dict:
    """Train `model` on `corpus` (on the model's device). Returns {epochs, steps, seconds, loss,
    train_recall and text_loss (the last epoch's, measured before each update), stop ('target' |
    'max_epochs')}."""
    device = model.embedding.weight.device
    corpus = corpus.to(device)
    optimizer, schedule = adamw_with_warmup(model.trainable_parameters(), settings.learning_rate,
                                            settings.weight_decay, settings.warmup_steps)
    started, steps, stop, recall, loss_value = time.perf_counter(), 0, "max_epochs", 0.0, math.nan
    text_loss, previous_text_loss = math.nan, math.inf
    model.train()
    for epoch in tqdm(range(1, settings.max_epochs + 1), desc="language model epochs", mininterval=5):
        order = torch.randperm(len(corpus.tokens), generator=generator).to(device)
        correct, text_nll, text_count = 0, 0.0, 0
        for rows in order.split(settings.batch_size):
            batch = corpus.subset(rows)
            logits, _ = model(batch.tokens)
            losses = sentence_losses(logits, batch)
            loss = losses.sum() / (batch.target_kinds != NONE).sum()
            check_finite(loss, None, where=f"editing.train(learning_rate={settings.learning_rate:g})", step=steps)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            correct += int(answer_correct(logits.detach(), batch).sum())
            text = batch.target_kinds == TEXT
            text_nll += float((losses.detach() * text).sum())
            text_count += int(text.sum())
            steps += 1
        recall, loss_value = correct / len(corpus.tokens), float(loss.detach())
        text_loss = text_nll / max(text_count, 1)
        if recall >= settings.stop_recall and text_loss > (1 - settings.text_loss_tolerance) * previous_text_loss:
            stop = "target"
            break
        previous_text_loss = text_loss
    model.eval()
    return {"epochs": epoch, "steps": steps, "seconds": time.perf_counter() - started, "loss": loss_value,
            "train_recall": recall, "text_loss": text_loss, "stop": stop}


@torch.no_grad()
def evaluate(model: FactLanguageModel, corpus: Corpus, batch_size: int = 1024) -> dict[str, torch.Tensor]:
    """Per-sentence measurements (each (N,), on the CPU): `correct` (bool, the author at the
    answer position), `text_nll` (summed NLL of the template-word targets), `text_count`,
    `fact_weight` (router weight at the answer position), `text_weight` (mean router weight over
    the positions whose target is a template word)."""
    device = model.embedding.weight.device
    model.eval()
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in
                                            ("correct", "text_nll", "text_count", "fact_weight", "text_weight")}
    for rows in torch.arange(len(corpus.tokens)).split(batch_size):
        batch = corpus.subset(rows).to(device)
        logits, weights = model(batch.tokens)
        text = batch.target_kinds == TEXT
        answer = batch.target_kinds == AUTHOR
        parts["correct"].append(answer_correct(logits, batch).cpu())
        parts["text_nll"].append((sentence_losses(logits, batch) * text).sum(dim=1).cpu())
        parts["text_count"].append(text.sum(dim=1).cpu())
        parts["fact_weight"].append((weights * answer).sum(dim=1).cpu())
        parts["text_weight"].append(((weights * text).sum(dim=1) / text.sum(dim=1).clamp(min=1)).cpu())
    return {name: torch.cat(values) for name, values in parts.items()}


@torch.no_grad()
def answer_recall(model: FactLanguageModel, corpus: Corpus, batch_size: int = 4096) -> torch.Tensor:
    """(N,) bool on the CPU: the argmax at each sentence's answer position is its author. Computes
    the answer position only (exact for one layer: B x V logits instead of B x T x V)."""
    device = model.embedding.weight.device
    model.eval()
    correct = []
    for rows in torch.arange(len(corpus.tokens)).split(batch_size):
        batch = corpus.subset(rows).to(device)
        logits, _ = model(batch.tokens, batch.answer_positions)
        correct.append((logits.argmax(dim=-1) == batch.answers).cpu())
    return torch.cat(correct)


def perplexity(measurements: dict[str, torch.Tensor], mask: torch.Tensor | None = None) -> float:
    """exp(mean NLL per template-word target) over the sentences in `mask` (all by default)."""
    nll, count = measurements["text_nll"], measurements["text_count"]
    if mask is not None:
        nll, count = nll[mask], count[mask]
    return math.exp(float(nll.sum()) / max(int(count.sum()), 1))
