"""Training the Transformer to read a frozen MLP, and the fact-adaptive ("usability") evaluation.

The protocol follows the follow-up paper's public code (HazyResearch/hebbian-mlps, its
attention training around an inserted MLP), each part a setting (`TrainingSettings`):
- only the attention's query and key maps train: AdamW (weight decay on W_q and W_k, the only
  trained weights), on the cross-entropy of the prediction at Q over the whole vocabulary;
- every update draws `batch_size` facts WITH replacement, each in fresh random junk;
- every `eval_every` updates, the FACT-ADAPTIVE accuracy is measured (the paper's criterion): the
  MLP swapped in, built the same way for a NEW random fact map on the same embeddings, replaces
  the one trained with, and recall of the new map is scored over `eval_repeats` x F fresh
  sequences (every fact in eval_repeats fresh contexts). Attention that learnt to route the key
  into the MLP transfers; attention that memorised facts around the MLP does not. The run keeps
  the maximum over these evaluations (`fact_adaptive_max`, the paper's "maximum fact-adaptive
  accuracy");
- a run stops when that maximum reaches `stop_accuracy` ('target'), or (`stop_at_ceiling`) when it
  reaches the swapped MLP's own recall with the attention entirely on the key ('ceiling': the
  most any attention can deliver from that MLP, `RunBatch.key_recall`);
- an initialisation ends when its maximum has not improved for `patience` updates (a plateau) or
  after `max_steps` updates; a run whose attention on the key is still below `restart_below`
  `restart_after` updates after its (re)start ends its initialisation there (a run stuck
  attending to junk says nothing about the MLP it hosts). An initialisation that ends below the
  target starts a new one (new query and key maps, optimizer state cleared), at most
  `max_restarts` times, so the run's maximum is over up to max_restarts + 1 initialisations and
  "usable" is decided as for the maximum over all of them; no new one starts when the ceiling is
  below the target (no initialisation could reach it). A caller that only needs to know whether a
  probe is usable may leave such a probe untrained (`skip_unreachable`).

Probes that share their shapes (one fact count, junk vocabulary and dimension) train side by side
as one RunBatch (factstore.usability.run_batch): one batched attention computation and one
optimizer step per update for all of them, each run drawing from its own generator and stopping on
its own, so a probe's result does not depend on the batch it ran in (up to summation order).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional

from factstore.training import adamw_with_warmup, check_finite
from factstore.transformer import FactTransformer, rms_normalise
from factstore.usability.run_batch import RunBatch
from factstore.usability.task import Sequences, Task, recall_sequences


@dataclass(frozen=True)
class TrainingSettings:
    """The attention-training protocol (module docstring); defaults: the follow-up code's values
    where it has one (batch 1,280, lr 2e-4, weight decay 0.1, evaluations every 100 updates, no
    positional encoding, cosine logits)."""

    learning_rate: float = 2e-4
    warmup_steps: int = 0  # the learning rate rises linearly from 0 over these first updates
    weight_decay: float = 0.1  # on W_q and W_k (the only trained weights)
    batch_size: int = 1280  # sequences per update, facts drawn with replacement
    max_steps: int = 4000  # updates per initialisation
    patience: int | None = None  # an initialisation ends when fact_adaptive_max has not improved for this many updates
    stop_accuracy: float = 1.0  # stop once fact_adaptive_max reaches it
    stop_at_ceiling: bool = True  # stop once fact_adaptive_max reaches the swapped MLP's recall with attention on the key
    eval_every: int = 100  # updates between fact-adaptive evaluations
    eval_repeats: int = 4  # fresh junk contexts per fact in every evaluation (>= 4F sequences)
    restart_after: int = 100  # updates after a (re)start at which attention on the key is checked
    restart_below: float = 0.5  # ... and the run restarted if it is below this
    max_restarts: int = 2  # new initialisations after the first (a stuck run, or one that ended below the target)
    positional: str = "none"  # 'none' (the follow-up code) or 'rope'
    output_norm: str = "unit"  # 'unit': cosine logits (the follow-up code); 'rms': sqrt(d) x cosine

    @property
    def rope_base(self) -> float | None:
        if self.positional not in ("none", "rope"):
            raise ValueError(f"positional must be 'none' or 'rope', got {self.positional!r}")
        return 10_000.0 if self.positional == "rope" else None


def build_runs(tasks: list[Task], mlps: list[nn.Module], generators: list[torch.Generator],
               device: torch.device | str = "cpu", settings: TrainingSettings = TrainingSettings(),
               swapped: list[nn.Module] | None = None, n_head: int = 1) -> RunBatch:
    """A RunBatch with one run per task, run r hosting mlps[r] (and swapped[r] for the
    fact-adaptive evaluation), its query and key maps drawn from generators[r]. The tasks must
    share their vocabulary and dimension (the batch's shapes)."""
    shapes = {(task.vocabulary, tuple(task.embeddings.shape)) for task in tasks}
    if len(shapes) != 1:
        raise ValueError(f"runs batched together need one vocabulary and embedding shape, got {sorted(map(str, shapes))}")
    model = RunBatch(torch.stack([task.embeddings for task in tasks]), torch.stack([task.decoder for task in tasks]),
                     mlps, [task.mlp_input_scale for task in tasks], generators, n_head, settings.rope_base,
                     settings.output_norm, swapped)
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


@torch.no_grad()
def batched_recall(model: RunBatch, runs: list[int], tasks: list[Task], fact_maps: list[Tensor],
                   generators: list[torch.Generator], repeats: int, swapped: bool, batch_size: int = 4096) -> list[float]:
    """Recall of `runs` (one accuracy each): every fact in `repeats` fresh contexts, through the
    MLPs trained with or (swapped) the MLPs swapped in, scored against fact_maps[run]."""
    vocabulary, device = tasks[runs[0]].vocabulary, model.embeddings.device
    correct = torch.zeros(len(runs), device=device)
    facts = torch.arange(vocabulary.n_facts).repeat(repeats)
    for batch in facts.split(batch_size):
        sequences = [recall_sequences(batch, fact_maps[run], vocabulary, tasks[run].lengths, generators[run])
                     for run in runs]
        tokens, query_positions, answers = _stacked(sequences, vocabulary.query, device)
        correct += (model(runs, tokens, query_positions, swapped).argmax(dim=2) == answers).sum(dim=1)
    return (correct / len(facts)).tolist()


def train_attention(
    model: RunBatch, tasks: list[Task], fact_maps: list[Tensor], swapped_maps: list[Tensor],
    settings: TrainingSettings, generators: list[torch.Generator], skip_unreachable: bool = False,
) -> list[dict]:
    """Train every run's query and key maps: run r to predict fact token fact_maps[r][i] at Q after
    key i, evaluating its fact-adaptive accuracy (model.swapped[r], swapped_maps[r]) every
    settings.eval_every updates and at the last update of each initialisation (module docstring).

    Run r draws its facts, junk and restarts from generators[r] only, so it makes the same draws,
    and (up to floating-point summation order) the same updates, as if it trained alone. Returns
    one record per run: {steps (updates, every initialisation included), stop ('target' |
    'ceiling' | 'plateau' | 'max_steps' | 'unreachable': why it ended), restarts (new
    initialisations), ceiling (the swapped MLP's recall with attention on the key),
    fact_adaptive_max, fact_adaptive_max_step, fact_adaptive_last (its last evaluation),
    evaluations, loss and train_accuracy (its last batch's)}. skip_unreachable: a run whose ceiling
    is below settings.stop_accuracy is not trained at all (stop 'unreachable', fact_adaptive_max
    NaN): no attention could make it reach the target.
    """
    runs = model.size
    if not (len(tasks) == len(fact_maps) == len(swapped_maps) == len(generators) == runs):
        raise ValueError(f"{runs} runs but {len(tasks)} tasks, {len(fact_maps)} + {len(swapped_maps)} fact maps and "
                         f"{len(generators)} generators")
    vocabulary, device = tasks[0].vocabulary, model.embeddings.device
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer, schedule = adamw_with_warmup(parameters, settings.learning_rate, settings.weight_decay,
                                            settings.warmup_steps)
    ceilings = [model.key_recall(run, swapped_maps[run], swapped=True) for run in range(runs)]
    records = [{"steps": 0, "stop": None, "restarts": 0, "ceiling": ceiling, "fact_adaptive_max": 0.0,
                "fact_adaptive_max_step": 0, "fact_adaptive_last": 0.0, "evaluations": 0, "loss": float("nan"),
                "train_accuracy": 0.0} for ceiling in ceilings]
    for record in records:
        if skip_unreachable and record["ceiling"] < settings.stop_accuracy:
            record |= {"stop": "unreachable", "fact_adaptive_max": math.nan, "fact_adaptive_last": math.nan}
    started_at = [0] * runs  # the update at which each run's current initialisation started
    active, steps = [run for run in range(runs) if records[run]["stop"] is None], 0
    model.train()
    while active:
        sequences = [recall_sequences(torch.randint(0, vocabulary.n_facts, (settings.batch_size,),
                                                    generator=generators[run]),
                                      fact_maps[run], vocabulary, tasks[run].lengths, generators[run])
                     for run in active]
        tokens, query_positions, answers = _stacked(sequences, vocabulary.query, device)
        logits = model(active, tokens, query_positions)
        losses = functional.cross_entropy(logits.flatten(0, 1), answers.flatten(), reduction="none")
        losses = losses.view(len(active), -1).mean(dim=1)
        check_finite(losses.detach(), None, where=f"usability.train(learning_rate={settings.learning_rate:g})", step=steps)
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        optimizer.step()
        schedule.step()
        steps += 1
        accuracies = (logits.detach().argmax(dim=2) == answers).float().mean(dim=1)
        for row, run in enumerate(active):
            records[run] |= {"steps": steps, "loss": float(losses[row].detach()), "train_accuracy": float(accuracies[row])}
        evaluated = [run for run in active if (steps - started_at[run]) % settings.eval_every == 0
                     or steps - started_at[run] == settings.max_steps]
        if evaluated:
            scores = batched_recall(model, evaluated, tasks, swapped_maps, generators, settings.eval_repeats, True)
            model.train()
            for run, score in zip(evaluated, scores):
                record = records[run]
                record["fact_adaptive_last"], record["evaluations"] = score, record["evaluations"] + 1
                if score > record["fact_adaptive_max"]:
                    record["fact_adaptive_max"], record["fact_adaptive_max_step"] = score, steps
        for run in active:
            ending = _initialisation_end(model, run, tasks[run], fact_maps[run], generators[run], settings,
                                         steps - started_at[run], steps - max(records[run]["fact_adaptive_max_step"],
                                                                              started_at[run]), records[run])
            if ending is None:
                continue
            if ending == "stuck" or (ending in ("plateau", "max_steps") and _may_reach_target(records[run], settings)):
                model.initialise(run, generators[run])
                for parameter in (model.query[run], model.key[run]):
                    optimizer.state.pop(parameter, None)
                started_at[run], records[run]["restarts"] = steps, records[run]["restarts"] + 1
            else:
                records[run]["stop"] = ending
        active = [run for run in active if records[run]["stop"] is None]
    model.eval()
    return records


def _initialisation_end(model: RunBatch, run: int, task: Task, fact_map: Tensor, generator: torch.Generator,
                        settings: TrainingSettings, updates: int, since_best: int, record: dict) -> str | None:
    """Why run `run`'s current initialisation ends after this update ('target', 'ceiling',
    'stuck', 'plateau', 'max_steps'), or None while it goes on. updates: the updates of this
    initialisation; since_best: updates since its fact-adaptive maximum last improved (or since it
    started)."""
    if record["fact_adaptive_max"] >= settings.stop_accuracy:
        return "target"
    if settings.stop_at_ceiling and record["fact_adaptive_max"] >= record["ceiling"]:
        return "ceiling"
    if updates == settings.restart_after and record["restarts"] < settings.max_restarts \
            and attention_on_key(model.run_model(run), task, fact_map, generator) < settings.restart_below:
        return "stuck"
    if settings.patience is not None and since_best >= settings.patience:
        return "plateau"
    if updates >= settings.max_steps:
        return "max_steps"
    return None


def _may_reach_target(record: dict, settings: TrainingSettings) -> bool:
    """Whether a run whose initialisation ended below the target gets a new one: a restart is left
    and (with the ceiling stop) its swapped MLP could deliver the target at all."""
    return record["restarts"] < settings.max_restarts and not (
        settings.stop_at_ceiling and record["ceiling"] < settings.stop_accuracy)


@torch.no_grad()
def recall_accuracy(
    model: FactTransformer, task: Task, fact_map: Tensor, generator: torch.Generator, repeats: int = 1,
    batch_size: int = 4096,
) -> float:
    """Fraction of (fact, context) pairs whose argmax prediction at Q is the right fact token,
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
    near 1 when the Transformer learnt to route the key into the MLP."""
    device = model.embedding.weight.device
    sequences = recall_sequences(torch.arange(task.vocabulary.n_facts), fact_map, task.vocabulary, task.lengths,
                                 generator).to(device)
    table = rms_normalise(model.embedding.weight)
    weights = model.attention.weights(table, sequences.tokens, sequences.query_positions)
    rows = torch.arange(len(sequences.tokens), device=device)
    # the key is the first fact token of a sequence (junk and Q tokens are ids >= F)
    key_positions = (sequences.tokens == sequences.facts.unsqueeze(1)).float().argmax(dim=1)
    return float(weights[rows, :, key_positions].mean())


@dataclass(frozen=True)
class Probe:
    """One usability evaluation: train around trained_mlp (which stores trained_map on the task's
    tables), evaluating swapped_mlp (storing swapped_map on the same tables) in its place.

    generator: the probe's only source of randomness (query and key maps, junk, facts, restarts).
    """

    task: Task
    trained_mlp: nn.Module
    trained_map: Tensor
    swapped_mlp: nn.Module
    swapped_map: Tensor
    generator: torch.Generator


def usability(probes: list[Probe], settings: TrainingSettings, device: torch.device | str = "cpu",
              n_head: int = 1, skip_unreachable: bool = False) -> list[dict]:
    """Run the probes (sharing one vocabulary and dimension) as one batch: train each Transformer
    around its trained MLP with fact-adaptive evaluations along the way, then measure recall with
    the trained MLP and, once more, with the swapped one, run by run.

    Returns one record per probe: train_attention's record plus plain_recall (trained MLP and map,
    fresh contexts), fact_adaptive (the swapped MLP and map after training, fresh contexts) and
    attention_on_key (after training, trained map), all NaN for a probe left untrained
    (skip_unreachable, train_attention). A probe's record does not depend on the other probes of
    its batch (up to floating-point summation order).
    """
    generators = [probe.generator for probe in probes]
    tasks = [probe.task for probe in probes]
    model = build_runs(tasks, [probe.trained_mlp for probe in probes], generators, device, settings,
                       [probe.swapped_mlp for probe in probes], n_head)
    records = train_attention(model, tasks, [probe.trained_map for probe in probes],
                              [probe.swapped_map for probe in probes], settings, generators, skip_unreachable)
    for run, (probe, record) in enumerate(zip(probes, records)):
        if record["stop"] == "unreachable":
            record |= {"plain_recall": math.nan, "attention_on_key": math.nan, "fact_adaptive": math.nan}
            continue
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
