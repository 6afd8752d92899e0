"""Memorisation capacity of one attention layer: training to fit, and the search over N.

`fit_sizes` trains one fresh model per dataset size, all side by side (one batched forward over
stacked weights), and reports whether each fitted its examples; `attention_capacity` searches the
largest size that fits with `factstore.search.search_largest`, each round of probes one call of
`fit_sizes`; `budget_check_sizes` and `budget_rise` say whether a capacity is a limit of the
layer or of the training budget (the sizes bracketing it retrained with more steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, stack_module_state
from tqdm import tqdm

from factstore.attention.model import AttentionShape, MemorisationData, MultiHeadAttentionMemory
from factstore.search import LargestSearch, search_largest
from factstore.training import check_finite


# --------------------------------------------------------------------------------------------
# Training to fit: several models side by side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSettings:
    """Adam with linear warm-up and cosine decay; stop once every model fits.

    Full batch, or `batch_size` examples a step per model (the paper's 256): each model draws its
    batch from its own examples, and its training accuracy is read over all of them once per
    epoch (ceil(N_max / batch_size) steps), in chunks of batch_size, so memory grows with the
    batch, not with N.

    A model "fits" when its training accuracy reaches `target_accuracy` at some step. `patience`
    (steps, after warm-up) ends a batch early when no unfitted model has gained a correct example
    for that long: the runs above capacity otherwise dominate the cost of a search.
    """

    learning_rate: float = 1e-2
    max_steps: int = 2000
    warmup_steps: int = 100
    final_lr_fraction: float = 0.0
    target_accuracy: float = 1.0
    patience: int | None = None
    batch_size: int | None = None  # examples per step and model; None (or >= N): full batch

    @classmethod
    def from_config(cls, training: dict) -> TrainingSettings:
        """The config's training section {learning_rate, max_steps, warmup_steps, target_accuracy,
        patience?, batch_size?} (final_lr_fraction keeps its default 0; batch_size null or absent:
        full batch)."""
        return cls(learning_rate=training["learning_rate"], max_steps=training["max_steps"],
                   warmup_steps=training["warmup_steps"], target_accuracy=training["target_accuracy"],
                   patience=training.get("patience"), batch_size=training.get("batch_size"))

    def larger(self, steps_factor: int, learning_rate: float) -> TrainingSettings:
        """The budget check's training: steps_factor x the steps (and of the warm-up) at `learning_rate`."""
        return replace(self, learning_rate=learning_rate, max_steps=steps_factor * self.max_steps,
                       warmup_steps=steps_factor * self.warmup_steps)


@dataclass(frozen=True)
class FitResult:
    """One trained model: its dataset size, best training accuracy, and the step it fitted (or None)."""

    size: int
    best_accuracy: float
    final_accuracy: float
    fitted_at_step: int | None
    steps_run: int
    n_params: int
    last_gain_step: int | None = None  # the last step at which it recalled more examples than ever before

    @property
    def fitted(self) -> bool:
        return self.fitted_at_step is not None

    def still_gaining(self, last_fraction: float = 0.5) -> bool:
        """Whether an unfitted model recalled a new example in the last `last_fraction` of its
        steps: its training had not stopped improving when the budget ran out."""
        if self.fitted or self.last_gain_step is None:
            return False
        return self.last_gain_step >= self.steps_run * (1.0 - last_fraction)


def warmup_cosine(step: int, settings: TrainingSettings) -> float:
    """Learning-rate factor: linear 0 -> 1 over the warm-up, then cosine 1 -> final_lr_fraction."""
    if step < settings.warmup_steps:
        return (step + 1) / settings.warmup_steps
    decay_steps = max(settings.max_steps - settings.warmup_steps, 1)
    progress = min((step - settings.warmup_steps) / decay_steps, 1.0)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return settings.final_lr_fraction + (1.0 - settings.final_lr_fraction) * cosine


def _stacked_models(shape: AttentionShape, n_models: int, generator: torch.Generator, device) -> tuple:
    """n_models independently initialised models as one set of stacked parameters (leading dim R).

    Returns (template on the meta device, {name: (R, ...) leaf tensor}, buffers) for functional_call.
    """
    models = [MultiHeadAttentionMemory(shape, generator) for _ in range(n_models)]
    params, buffers = stack_module_state(models)
    params = {name: value.to(device).detach().requires_grad_() for name, value in params.items()}
    with torch.device("meta"):
        template = MultiHeadAttentionMemory(shape)  # structure only: no memory, no random draws
    return template, params, buffers


def fit_sizes(
    pool: MemorisationData,
    sizes: Sequence[int],
    shape: AttentionShape,
    settings: TrainingSettings,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> list[FitResult]:
    """Train one fresh model per size on the first `size` examples of `pool`, all side by side.

    The R = len(sizes) models run as one batched forward (torch.func.vmap over stacked weights) on
    the largest prefix; a mask (R, N_max) restricts each model's loss and accuracy to its own
    examples, and the loss is the sum of the per-model means, so the models do not interact
    (Adam is elementwise). Full batch: accuracy is read from the logits of each training step,
    before its update, so it costs nothing extra. With settings.batch_size below N_max each model
    trains on its own mini-batches (`_minibatch_loss`) and its accuracy over all its examples is
    read once per epoch and at the last step (`_correct_counts`).
    """
    sizes = [int(size) for size in sizes]
    if not sizes or min(sizes) < 1 or max(sizes) > pool.size:
        raise ValueError(f"sizes must lie in [1, {pool.size}], got {sizes}")
    data = pool.prefix(max(sizes)).to(device)
    labels = data.labels  # (N_max,)
    size_tensor = torch.tensor(sizes, device=device)
    mask = (torch.arange(data.size, device=device)[None, :] < size_tensor[:, None]).float()  # (R, N_max)
    batch = settings.batch_size if settings.batch_size and settings.batch_size < data.size else None

    template, params, buffers = _stacked_models(shape, len(sizes), generator, device)

    def model_logits(model_params, model_buffers, queries, contexts):
        return functional_call(template, (model_params, model_buffers), (queries, contexts))

    batched_logits = torch.vmap(model_logits, in_dims=(0, 0, None, None))  # every model on the same examples
    optimizer = torch.optim.Adam(params.values(), lr=settings.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, settings))

    best_correct = torch.zeros(len(sizes), device=device)
    final_correct = best_correct
    gain_step = torch.full((len(sizes),), -1, dtype=torch.long, device=device)  # per model: last step with a new best
    fitted_at = [None] * len(sizes)
    target_correct = torch.ceil(settings.target_accuracy * size_tensor - 1e-9)
    last_gain, step = 0, 0
    epoch_steps = math.ceil(data.size / batch) if batch else 1
    for step in tqdm(range(settings.max_steps), desc=f"fitting N = {sizes}", mininterval=5, leave=False):
        if batch is None:
            logits = batched_logits(params, buffers, data.queries, data.contexts)  # (R, N_max, C)
            losses = F.cross_entropy(logits.flatten(0, 1), labels.repeat(len(sizes)), reduction="none")
            loss = (losses.view(len(sizes), -1) * mask).sum(dim=1).div(size_tensor).sum()
            correct = ((logits.argmax(dim=-1) == labels).float() * mask).sum(dim=1).detach()
        else:
            loss = _minibatch_loss(template, params, buffers, data, size_tensor, batch, generator)
            correct = _correct_counts(batched_logits, params, buffers, data, mask, batch) \
                if step % epoch_steps == 0 or step == settings.max_steps - 1 else None
        check_finite(loss, None, where=f"attention.fit_sizes(sizes={sizes}, {shape}, learning_rate="
                     f"{settings.learning_rate})", step=step)
        if correct is not None:
            final_correct = correct
            gained = (final_correct > best_correct) & (best_correct < target_correct)
            if gained.any():
                last_gain = step  # an unfitted model recalled more examples than ever before
                gain_step.masked_fill_(gained, step)
            best_correct = torch.maximum(best_correct, final_correct)
            for run in torch.nonzero(best_correct >= target_correct).flatten().tolist():
                fitted_at[run] = step if fitted_at[run] is None else fitted_at[run]
        if all(at is not None for at in fitted_at):
            break
        if settings.patience and step >= settings.warmup_steps and step - last_gain > settings.patience:
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()

    n_params = shape.n_params()
    return [
        FitResult(
            size=size,
            best_accuracy=float(best_correct[run] / size),
            final_accuracy=float(final_correct[run] / size),
            fitted_at_step=fitted_at[run],
            steps_run=step + 1,
            n_params=n_params,
            last_gain_step=int(gain_step[run]) if gain_step[run] >= 0 else None,
        )
        for run, size in enumerate(sizes)
    ]


def _minibatch_loss(template, params, buffers, data: MemorisationData, sizes: Tensor, batch: int,
                    generator: torch.Generator) -> Tensor:
    """Sum over the R models of the mean cross-entropy on `batch` examples each model draws
    uniformly, without replacement within the step, from its own first sizes[r] examples (a model
    with fewer examples than the batch uses each once). Returns a scalar."""
    n_models, n_max = sizes.shape[0], data.size
    keys = torch.rand(n_models, n_max, generator=generator).to(sizes.device)
    keys = keys.masked_fill(torch.arange(n_max, device=sizes.device)[None, :] >= sizes[:, None], 2.0)
    picked = keys.topk(batch, dim=1, largest=False).indices  # (R, B): own examples first, in random order
    valid = (picked < sizes[:, None]).float()
    contexts = data.contexts if data.shared_context else data.contexts[picked]  # (n, d) or (R, B, n, d)

    def model_logits(model_params, model_buffers, queries, model_contexts):
        return functional_call(template, (model_params, model_buffers), (queries, model_contexts))

    logits = torch.vmap(model_logits, in_dims=(0, 0, 0, None if data.shared_context else 0))(
        params, buffers, data.queries[picked], contexts)  # (R, B, C)
    losses = F.cross_entropy(logits.flatten(0, 1), data.labels[picked].flatten(), reduction="none").view(n_models, batch)
    return ((losses * valid).sum(dim=1) / valid.sum(dim=1)).sum()


@torch.no_grad()
def _correct_counts(batched_logits, params, buffers, data: MemorisationData, mask: Tensor, chunk: int) -> Tensor:
    """Per model, how many of its own examples it decodes right (R,), read over the whole prefix in
    chunks of `chunk` examples (memory of one chunk's logits, not of N's)."""
    correct = torch.zeros(mask.shape[0], device=mask.device)
    for start in range(0, data.size, chunk):
        part = data.prefix(min(start + chunk, data.size))
        queries = part.queries[start:]
        contexts = part.contexts if part.shared_context else part.contexts[start:]
        logits = batched_logits(params, buffers, queries, contexts)  # (R, chunk, C)
        hits = (logits.argmax(dim=-1) == part.labels[start:]).float()
        correct += (hits * mask[:, start:start + queries.shape[0]]).sum(dim=1)
    return correct


# --------------------------------------------------------------------------------------------
# Capacity search over N
# --------------------------------------------------------------------------------------------


def attention_capacity(
    pool: MemorisationData,
    shape: AttentionShape,
    settings: TrainingSettings,
    generator: torch.Generator,
    start: int,
    probes_per_round: int = 2,
    growth: float = 2.0,
    relative_resolution: float = 0.05,
    device: torch.device | str = "cpu",
    known: Sequence[tuple[int, float]] = (),
) -> tuple[LargestSearch, list[FitResult]]:
    """Memorisation capacity of one attention shape on prefixes of `pool` (at most pool.size).

    Each round of the search trains `probes_per_round` fresh models side by side (`fit_sizes`).
    `known`: (size, best accuracy) of models already trained with these settings (a budget
    check's): the search continues from them. Returns the search and every model it trained's
    `FitResult`, in probe order.
    """
    results: list[FitResult] = []

    def fit_accuracy(sizes: list[int]) -> list[float]:
        fits = fit_sizes(pool, sizes, shape, settings, generator, device)
        results.extend(fits)
        return [fit.best_accuracy for fit in fits]

    search = search_largest(
        fit_accuracy,
        start=min(start, pool.size),
        target_accuracy=settings.target_accuracy,
        probes_per_round=probes_per_round,
        growth=growth,
        max_size=pool.size,
        relative_resolution=relative_resolution,
        known=known,
    )
    return search, results


# --------------------------------------------------------------------------------------------
# Budget check: is a capacity a limit of the layer or of the training budget?
# --------------------------------------------------------------------------------------------


def grid_step(smallest_failure: int, relative_resolution: float) -> int:
    """One step of the capacity search's grid at its bracket: max(1, ceil(resolution x failure))
    examples, the widest bracket [fitted, failed] the search accepts there."""
    return max(1, math.ceil(relative_resolution * smallest_failure))


def budget_check_sizes(search: LargestSearch, relative_resolution: float, max_size: int,
                       steps_above: int = 1) -> list[int]:
    """The sizes retrained with a larger budget: the bracket [capacity, smallest failure] and the
    sizes 1..steps_above grid steps above the smallest failure (capped at max_size). If the first
    of those fits, the capacity rose by more than one grid step; the others bracket how far, so a
    budget-limited capacity's search at the larger budget usually starts bracketed (the models
    train side by side: a few more sizes cost little). Empty when the search found no failure."""
    if search.smallest_failure is None:
        return []
    step = grid_step(search.smallest_failure, relative_resolution)
    above = [min(search.smallest_failure + k * step, max_size) for k in range(1, steps_above + 1)]
    return sorted({size for size in (search.capacity, search.smallest_failure, *above) if size >= 1})


def budget_rise(capacity: int, step: int, fits: Sequence[FitResult]) -> float:
    """How far, in grid steps, a larger training budget raises a capacity: (largest fitted size of
    `fits` - capacity) / step, the capacity itself standing when none fits (a fit found is a fit).
    0 means the budget changed nothing; above 1, the capacity was a budget limit."""
    best = max([capacity] + [fit.size for fit in fits if fit.fitted])
    return (best - capacity) / step


def best_budget_runs(runs: dict[str, list[FitResult]]) -> str | None:
    """The key of the budget-check runs (one per learning rate) that fitted the largest size, the
    first listed on a tie; None when no run fitted any size."""
    best, key = 0, None
    for name, fits in runs.items():
        largest = max([fit.size for fit in fits if fit.fitted], default=0)
        if largest > best:
            best, key = largest, name
    return key


def budget_name(factor: int, lr: float) -> str:
    """The probes table's name of a budget: 'x<factor> lr <lr>'."""
    return f"x{factor} lr {lr:g}"


def budget_check_fits(
    data: MemorisationData, shape: AttentionShape, settings: TrainingSettings, search: LargestSearch,
    relative_resolution: float, steps_factor: int, learning_rates: Sequence[float], steps_above: int,
    generator_for: Callable[[float], torch.Generator], device,
) -> dict[str, list[FitResult]]:
    """The sizes bracketing a capacity and `steps_above` grid steps above it (`budget_check_sizes`)
    retrained side by side with steps_factor x the steps (and of the warm-up) at each learning rate,
    from fresh initialisations (`generator_for(lr)`). Returns {budget_name: [FitResult per size]}
    (empty lists when the search found no failure)."""
    sizes = budget_check_sizes(search, relative_resolution, data.size, steps_above)
    return {budget_name(steps_factor, lr): fit_sizes(data, sizes, shape, settings.larger(steps_factor, lr),
                                                     generator_for(lr), device) if sizes else []
            for lr in learning_rates}


def memorised_count(fits: Sequence[FitResult]) -> float:
    """The paper's count over trained models: max of N x best training accuracy (nan for none)."""
    return max((fit.size * fit.best_accuracy for fit in fits), default=math.nan)
