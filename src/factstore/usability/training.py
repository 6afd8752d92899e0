"""Training the Transformer to read a frozen MLP, and the fact-adaptive ("usability") evaluation.

Only the attention's query and key maps train (AdamW on the cross-entropy of the prediction at Q
over the whole vocabulary). An epoch shows every fact once, each in a fresh random junk context,
in batches of `batch_size` sequences (at the default scale one batch holds a whole fact set).
Training stops at the end of the first epoch whose recall reaches the stop accuracy, capped by
what the hosted MLP stores on its own (a Transformer cannot recall more facts through an MLP
than the MLP stores, unless it memorises around it), when no epoch has beaten the best recall for
`patience` updates (a plateau), or after max_steps updates.

Usability (the seed's "fact-adaptive accuracy"): after training, an MLP built the same way for
a NEW random fact map on the same embeddings replaces the one trained with, and recall is
measured for the new map. Attention that learnt to route the key into the MLP transfers; attention
that memorised facts around the MLP does not. Plain recall (the trained MLP, the trained map,
fresh junk) is reported beside it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional

from factstore.training import check_finite
from factstore.transformer import FactTransformer, rms_normalise
from factstore.usability.task import JunkLengths, Vocabulary, recall_sequences


@dataclass(frozen=True)
class TrainingSettings:
    """AdamW on the query and key maps, early stopping at the end of an epoch (module docstring)."""

    learning_rate: float = 1e-2
    warmup_steps: int = 0  # the learning rate rises linearly from 0 over these first updates
    weight_decay: float = 0.0
    batch_size: int = 1024
    max_steps: int = 1000
    patience: int | None = None  # also stop when no epoch beat the best recall for this many updates
    stop_accuracy: float = 1.0
    eval_repeats: int = 2  # fresh junk contexts per fact when recall is measured


@dataclass(frozen=True)
class Task:
    """One instance of the recall task: the vocabulary, its token embeddings and the junk lengths.

    embeddings: (vocabulary.size, d) float32, the Transformer's tied frozen table.
    mlp_input_scale: the frozen scale of the RMS norm before the MLP (the mean RMS of the MLP's
    keys: 1 / sqrt(d) for unit keys).
    """

    vocabulary: Vocabulary
    embeddings: Tensor
    lengths: JunkLengths
    mlp_input_scale: float


def build_model(task: Task, mlp: nn.Module, device: torch.device | str = "cpu", n_head: int = 1,
                rope_base: float = 10_000.0, generator: torch.Generator | None = None) -> FactTransformer:
    """A FactTransformer for `task` hosting `mlp`, its query and key maps drawn from `generator`."""
    model = FactTransformer(task.embeddings, mlp, task.mlp_input_scale, n_head, rope_base)
    if generator is not None:
        with torch.no_grad():
            for weight in (model.attention.query.weight, model.attention.key.weight):
                weight.copy_(torch.randn(weight.shape, generator=generator) * 0.02)
    return model.to(device)


def train_attention(
    model: FactTransformer, task: Task, fact_map: Tensor, settings: TrainingSettings, generator: torch.Generator,
    ceiling: float = 1.0,
) -> dict:
    """Train the query and key maps of `model` to predict value fact_map[i] at Q after key i.

    ceiling: the hosted MLP's own accuracy; training stops once an epoch's recall reaches
    min(settings.stop_accuracy, ceiling). Returns {steps, epochs, seconds, train_accuracy (the last
    epoch's, measured on the batches before each update), stop ('target' | 'plateau' | 'max_steps'), loss}.
    """
    device = model.embedding.weight.device
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=settings.learning_rate,
                                  weight_decay=settings.weight_decay)
    warmup = max(settings.warmup_steps, 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    stop_at = min(settings.stop_accuracy, ceiling)
    started, steps, epochs, stop = time.perf_counter(), 0, 0, "max_steps"
    accuracy, loss_value = 0.0, float("nan")
    best, best_step = -1.0, 0
    model.train()
    while steps < settings.max_steps:
        order = torch.randperm(task.vocabulary.n_facts, generator=generator)
        correct = torch.zeros((), device=device)
        seen = 0
        for facts in order.split(settings.batch_size):
            sequences = recall_sequences(facts, fact_map, task.vocabulary, task.lengths, generator).to(device)
            answers = sequences.answers
            logits = model(sequences.tokens, sequences.query_positions)
            loss = functional.cross_entropy(logits, answers)
            check_finite(loss, None, where=f"usability.train(learning_rate={settings.learning_rate:g})", step=steps)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            correct += (logits.detach().argmax(dim=1) == answers).sum()
            seen += len(facts)
            steps += 1
            if steps >= settings.max_steps:
                break
        epochs += 1
        accuracy, loss_value = float(correct) / seen, float(loss.detach())
        if seen == task.vocabulary.n_facts and accuracy >= stop_at:
            stop = "target"
            break
        if accuracy > best:
            best, best_step = accuracy, steps
        elif settings.patience is not None and steps - best_step >= settings.patience:
            stop = "plateau"
            break
    model.eval()
    return {"steps": steps, "epochs": epochs, "seconds": time.perf_counter() - started,
            "train_accuracy": accuracy, "stop": stop, "loss": loss_value}


@torch.no_grad()
def recall_accuracy(
    model: FactTransformer, task: Task, fact_map: Tensor, generator: torch.Generator, repeats: int = 1,
    batch_size: int = 4096,
) -> float:
    """Fraction of (fact, context) pairs whose argmax prediction at Q is the right value token,
    over every fact in `repeats` fresh junk contexts each."""
    device = model.embedding.weight.device
    model.eval()
    correct, total = 0, 0
    facts = torch.arange(task.vocabulary.n_facts).repeat(repeats)
    for batch in facts.split(batch_size):
        sequences = recall_sequences(batch, fact_map, task.vocabulary, task.lengths, generator).to(device)
        predictions = model(sequences.tokens, sequences.query_positions).argmax(dim=1)
        correct += int((predictions == sequences.answers).sum())
        total += len(batch)
    return correct / total


@torch.no_grad()
def attention_on_key(model: FactTransformer, task: Task, fact_map: Tensor, generator: torch.Generator) -> float:
    """Mean attention weight (over heads and facts) that the query token puts on the key token:
    near 1 when the Transformer learnt to route the key into the MLP. A diagnostic."""
    device = model.embedding.weight.device
    sequences = recall_sequences(torch.arange(task.vocabulary.n_facts), fact_map, task.vocabulary, task.lengths,
                                 generator).to(device)
    table = rms_normalise(model.embedding.weight)
    weights = model.attention.weights(table, sequences.tokens, sequences.query_positions)
    rows = torch.arange(len(sequences.tokens), device=device)
    key_positions = (sequences.tokens == sequences.facts.unsqueeze(1)).float().argmax(dim=1)
    return float(weights[rows, :, key_positions].mean())


def usability(
    task: Task, trained_mlp: nn.Module, trained_map: Tensor, swapped_mlp: nn.Module, swapped_map: Tensor,
    settings: TrainingSettings, generator: torch.Generator, device: torch.device | str = "cpu",
    trained_mlp_accuracy: float = 1.0, n_head: int = 1, rope_base: float = 10_000.0,
) -> dict:
    """Train a Transformer hosting `trained_mlp` (storing `trained_map`), then measure recall
    before and after swapping in `swapped_mlp` (storing `swapped_map` on the same embeddings).

    Returns train_attention's record plus plain_recall (trained MLP and map, fresh contexts),
    fact_adaptive (swapped MLP and map) and attention_on_key (after training, trained map).
    """
    model = build_model(task, trained_mlp, device, n_head, rope_base, generator)
    record = train_attention(model, task, trained_map, settings, generator, ceiling=trained_mlp_accuracy)
    record["plain_recall"] = recall_accuracy(model, task, trained_map, generator, settings.eval_repeats)
    record["attention_on_key"] = attention_on_key(model, task, trained_map, generator)
    model.swap_mlp(swapped_mlp)
    record["fact_adaptive"] = recall_accuracy(model, task, swapped_map, generator, settings.eval_repeats)
    return record


def settings_record(settings: TrainingSettings) -> dict:
    """The settings as a flat dict (for tables)."""
    return asdict(settings)
