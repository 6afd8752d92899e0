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

A long training (the paper scale's language model runs for hours) saves its state every
`checkpoint_every` updates to a `TrainingCheckpoint` and, started again with the same settings,
resumes from it: the model's trainable weights, AdamW's moments, the schedule, the shuffling
generator and the epoch's order and running sums, so a resumed training ends with the same
weights, bit for bit, as one that was never stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor
from torch.nn import functional
from tqdm import tqdm

from factstore.editing.corpus import AUTHOR, NONE, TEXT, Corpus
from factstore.editing.model import FactLanguageModel
from factstore.editing.templates import TEMPLATES
from factstore.io import load_tensors, save_tensors
from factstore.training import adamw_with_warmup, check_finite


@dataclass(frozen=True)
class TrainingSettings:
    """AdamW with a linear warm-up, early stopping at an epoch's recall (module docstring)."""

    learning_rate: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    batch_size: int = 256
    max_epochs: int = 30
    stop_recall: float = 1.0
    text_loss_tolerance: float = 0.02
    checkpoint_every: int = 0  # updates between saved states (0: none); results do not depend on it


@dataclass(frozen=True)
class TrainingCheckpoint:
    """Where a training saves its state (`path`, a torch file of tensors and plain values) and the
    fingerprint of what it trains: a saved state is resumed only when its fingerprint matches
    (other settings or data start afresh). The training removes the file when it ends."""

    path: Path
    fingerprint: str

    def load(self) -> dict | None:
        """The saved state, or None when there is none or it belongs to another training."""
        if not self.path.exists():
            return None
        saved = load_tensors(self.path)
        return saved if saved.get("fingerprint") == self.fingerprint else None

    def save(self, state: dict) -> None:
        save_tensors({**state, "fingerprint": self.fingerprint}, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def sentence_losses(logits: torch.Tensor, corpus: Corpus) -> torch.Tensor:
    """(N, T) negative log-likelihood of each target (0 where the target kind is NONE)."""
    losses = functional.cross_entropy(logits.transpose(1, 2), corpus.targets, reduction="none")
    return losses * (corpus.target_kinds != NONE)


def answer_correct(logits: torch.Tensor, corpus: Corpus) -> torch.Tensor:
    """(N,) bool: the argmax at the answer position is the author token."""
    rows = torch.arange(len(corpus.tokens), device=logits.device)
    positions = corpus.answer_positions
    return logits[rows, positions].argmax(dim=-1) == corpus.targets[rows, positions]


def train_language_model(model: FactLanguageModel, corpus: Corpus, settings: TrainingSettings,
                         generator: torch.Generator, checkpoint: TrainingCheckpoint | None = None) -> dict:
    """Train `model` on `corpus` (on the model's device). Returns {epochs, steps, seconds, loss
    (the last update's), train_recall and text_loss (the last epoch's, measured before each
    update), stop ('target' | 'max_epochs')}. With `checkpoint`, saves the state every
    settings.checkpoint_every updates and resumes from a matching saved state (module docstring)."""
    device = model.embedding.weight.device
    corpus = corpus.to(device)
    trainable = model.trainable_parameters()
    optimizer, schedule = adamw_with_warmup(trainable, settings.learning_rate,
                                            settings.weight_decay, settings.warmup_steps)
    started, stop = time.perf_counter(), "max_epochs"
    # Where the training stands: the epoch, its shuffled order, the next batch and the running sums.
    progress = {"epoch": 1, "order": None, "next_batch": 0, "steps": 0, "correct": 0, "text_nll": 0.0,
                "text_count": 0, "loss": math.nan, "previous_text_loss": math.inf}
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        with torch.no_grad():
            for parameter, value in zip(trainable, saved["trainable"], strict=True):
                parameter.copy_(value)
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        generator.set_state(saved["generator"])
        progress = saved["progress"]

    def save_state() -> None:
        checkpoint.save({"trainable": [parameter.detach().cpu() for parameter in trainable],
                         "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                         "generator": generator.get_state(), "progress": dict(progress, order=progress["order"].cpu())})

    recall, text_loss = 0.0, math.nan
    model.train()
    epochs = tqdm(range(progress["epoch"], settings.max_epochs + 1), desc="language model epochs", mininterval=5)
    for epoch in epochs:
        if progress["order"] is None:
            progress["order"] = torch.randperm(len(corpus.tokens), generator=generator)
        batches = progress["order"].to(device).split(settings.batch_size)
        for index in range(progress["next_batch"], len(batches)):
            batch = corpus.subset(batches[index])
            logits, _ = model(batch.tokens)
            losses = sentence_losses(logits, batch)
            loss = losses.sum() / (batch.target_kinds != NONE).sum()
            check_finite(loss, None, where=f"editing.train(learning_rate={settings.learning_rate:g})", step=progress["steps"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            text = batch.target_kinds == TEXT
            progress["correct"] += int(answer_correct(logits.detach(), batch).sum())
            progress["text_nll"] += float((losses.detach() * text).sum())
            progress["text_count"] += int(text.sum())
            progress["loss"] = float(loss.detach())
            progress["steps"] += 1
            progress["next_batch"] = index + 1
            if checkpoint is not None and settings.checkpoint_every and progress["steps"] % settings.checkpoint_every == 0:
                save_state()
        recall = progress["correct"] / len(corpus.tokens)
        text_loss = progress["text_nll"] / max(progress["text_count"], 1)
        if recall >= settings.stop_recall and text_loss > (1 - settings.text_loss_tolerance) * progress["previous_text_loss"]:
            stop = "target"
            break
        progress.update(epoch=epoch + 1, order=None, next_batch=0, correct=0, text_nll=0.0, text_count=0,
                        previous_text_loss=text_loss)
    model.eval()
    if checkpoint is not None:
        checkpoint.remove()
    return {"epochs": epoch, "steps": progress["steps"], "seconds": time.perf_counter() - started,
            "loss": progress["loss"], "train_recall": recall, "text_loss": text_loss, "stop": stop}


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


def per_template(measured: dict[str, Tensor], corpus: Corpus, held_out: list[int]) -> pd.DataFrame:
    """Recall, router weights and template-word perplexity per template."""
    rows = []
    for template, text in enumerate(TEMPLATES):
        mask = corpus.templates == template
        rows.append({"template": template, "text": text, "held_out": template in held_out,
                     "recall": float(measured["correct"][mask].double().mean()),
                     "fact_weight": float(measured["fact_weight"][mask].mean()),
                     "text_weight": float(measured["text_weight"][mask].mean()),
                     "perplexity": perplexity(measured, mask)})
    return pd.DataFrame(rows)
