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

Probes that share their shapes (one fact count, junk vocabulary and dimension) train side by side
as one RunBatch (factstore.usability.run_batch): one batched attention computation and one
optimizer step per update for all of them, each run drawing from its own generator and stopping on
its own, so a probe's result does not depend on the batch it ran in.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional

from factstore.training import adamw_with_warmup, check_finite
from factstore.transformer import FactTransformer, rms_normalise
from factstore.usability.run_batch import RunBatch
from factstore.usability.task import JunkLengths, Sequences, Vocabulary, recall_sequences


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


def build_runs(tasks: list[Task], mlps: list[nn.Module], generators: list[torch.Generator],
               device: torch.device | str = "cpu", n_head: int = 1, rope_base: float = 10_000.0) -> RunBatch:
    """A RunBatch with one run per task, run r hosting mlps[r], its query and key maps drawn from
    generators[r]. The tasks must share their vocabulary and dimension (the batch's shapes)."""
    shapes = {(task.vocabulary, tuple(task.embeddings.shape)) for task in tasks}
    if len(shapes) != 1:
        raise ValueError(f"runs batched together need one vocabulary and embedding shape, got {sorted(map(str, shapes))}")
    embeddings = torch.stack([task.embeddings for task in tasks])
    model = RunBatch(embeddings, mlps, [task.mlp_input_scale for task in tasks], generators, n_head, rope_base)
    return model.to(device)


def _stacked(sequences: list[Sequences], pad_token: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """(tokens (A, B, T), query_positions (A, B), answers (A, B)) of one batch per run, right-padded
    with `pad_token` to the longest (padding lies after every query position: never attended)."""
    length = max(batch.tokens.shape[1] for batch in sequences)
    tokens = torch.stack([functional.pad(batch.tokens, (0, length - batch.tokens.shape[1]), value=pad_token)
                          for batch in sequences])
    query_positions = torch.stack([batch.query_positions for batch in sequences])
    answers = torch.stack([batch.answers for batch in sequences])
    return tokens.to(device), query_positions.to(device), answers.to(device)


def train_attention(
    model: RunBatch, tasks: list[Task], fact_maps: list[Tensor], settings: TrainingSettings,
    generators: list[torch.Generator], ceilings: list[float] | None = None,
) -> list[dict]:
    """Train every run's query and key maps: run r to predict value fact_maps[r][i] at Q after key i.

    Run r draws its epochs' orders and junk from generators[r] only, so it makes the same draws,
    and (up to floating-point summation order) the same updates, as if it trained alone. The runs
    share epoch boundaries (one fact count, one batch size). ceilings[r]: run r's hosted MLP's own
    accuracy; run r stops once an epoch's recall reaches min(settings.stop_accuracy, ceilings[r]),
    or on a plateau, and is left out of every later update. Returns one record per run: {steps,
    epochs, seconds (wall time of the batch when the run stopped), train_accuracy (its last
    epoch's, measured on the batches before each update), stop ('target' | 'plateau' |
    'max_steps'), loss (its last batch's)}.
    """
    runs = model.size
    ceilings = [1.0] * runs if ceilings is None else ceilings
    if not (len(tasks) == len(fact_maps) == len(generators) == len(ceilings) == runs):
        raise ValueError(f"{runs} runs but {len(tasks)} tasks, {len(fact_maps)} fact maps, {len(generators)} "
                         f"generators and {len(ceilings)} ceilings")
    vocabulary, device = tasks[0].vocabulary, model.embeddings.device
    optimizer, schedule = adamw_with_warmup([p for p in model.parameters() if p.requires_grad], settings.learning_rate,
                                            settings.weight_decay, settings.warmup_steps)
    stop_at = [min(settings.stop_accuracy, ceiling) for ceiling in ceilings]
    records = [{"steps": 0, "epochs": 0, "seconds": 0.0, "train_accuracy": 0.0, "stop": "max_steps",
                "loss": float("nan")} for _ in range(runs)]
    best, best_step = [-1.0] * runs, [0] * runs
    active, started, steps, epochs = list(range(runs)), time.perf_counter(), 0, 0
    model.train()
    while active and steps < settings.max_steps:
        orders = [torch.randperm(vocabulary.n_facts, generator=generators[run]) for run in active]
        correct, seen = torch.zeros(len(active), device=device), 0
        for first in range(0, vocabulary.n_facts, settings.batch_size):
            sequences = [recall_sequences(order[first:first + settings.batch_size], fact_maps[run], vocabulary,
                                          tasks[run].lengths, generators[run]) for order, run in zip(orders, active)]
            tokens, query_positions, answers = _stacked(sequences, vocabulary.query, device)
            logits = model(active, tokens, query_positions)
            losses = functional.cross_entropy(logits.flatten(0, 1), answers.flatten(), reduction="none")
            losses = losses.view(len(active), -1).mean(dim=1)
            check_finite(losses.detach(), None, where=f"usability.train(learning_rate={settings.learning_rate:g})", step=steps)
            optimizer.zero_grad(set_to_none=True)
            losses.sum().backward()
            optimizer.step()
            schedule.step()
            correct += (logits.detach().argmax(dim=2) == answers).sum(dim=1)
            seen += answers.shape[1]
            steps += 1
            if steps >= settings.max_steps:
                break
        epochs += 1
        continuing = []
        for row, run in enumerate(active):
            accuracy, stop = float(correct[row]) / seen, None
            if seen == vocabulary.n_facts and accuracy >= stop_at[run]:
                stop = "target"
            elif accuracy > best[run]:
                best[run], best_step[run] = accuracy, steps
            elif settings.patience is not None and steps - best_step[run] >= settings.patience:
                stop = "plateau"
            records[run] = {"steps": steps, "epochs": epochs, "seconds": time.perf_counter() - started,
                            "train_accuracy": accuracy, "stop": stop or "max_steps", "loss": float(losses[row].detach())}
            if stop is None and steps < settings.max_steps:
                continuing.append(run)
        active = continuing
    model.eval()
    return records


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


@dataclass(frozen=True)
class Probe:
    """One usability evaluation: train around trained_mlp (which stores trained_map on the task's
    embeddings), then swap in swapped_mlp (storing swapped_map on the same embeddings).

    generator: the probe's only source of randomness (query and key maps, junk, orders).
    trained_mlp_accuracy: the trained MLP's own accuracy (training stops at most there).
    """

    task: Task
    trained_mlp: nn.Module
    trained_map: Tensor
    swapped_mlp: nn.Module
    swapped_map: Tensor
    generator: torch.Generator
    trained_mlp_accuracy: float = 1.0


def usability(
    probes: list[Probe], settings: TrainingSettings, device: torch.device | str = "cpu", n_head: int = 1,
    rope_base: float = 10_000.0,
) -> list[dict]:
    """Run the probes (sharing one vocabulary and dimension) as one batch: train each Transformer
    around its trained MLP, then measure recall before and after the swap, run by run.

    Returns one record per probe: train_attention's record plus plain_recall (trained MLP and map,
    fresh contexts), fact_adaptive (swapped MLP and map) and attention_on_key (after training,
    trained map). A probe's record does not depend on the other probes of its batch (up to
    floating-point summation order).
    """
    generators = [probe.generator for probe in probes]
    model = build_runs([probe.task for probe in probes], [probe.trained_mlp for probe in probes], generators,
                       device, n_head, rope_base)
    records = train_attention(model, [probe.task for probe in probes], [probe.trained_map for probe in probes],
                              settings, generators, [probe.trained_mlp_accuracy for probe in probes])
    for run, (probe, record) in enumerate(zip(probes, records)):
        single = model.run_model(run)
        record["plain_recall"] = recall_accuracy(single, probe.task, probe.trained_map, probe.generator,
                                                 settings.eval_repeats)
        record["attention_on_key"] = attention_on_key(single, probe.task, probe.trained_map, probe.generator)
        single.swap_mlp(probe.swapped_mlp)
        record["fact_adaptive"] = recall_accuracy(single, probe.task, probe.swapped_map, probe.generator,
                                                  settings.eval_repeats)
    return records


def settings_record(settings: TrainingSettings) -> dict:
    """The settings as a flat dict (for tables)."""
    return asdict(settings)
