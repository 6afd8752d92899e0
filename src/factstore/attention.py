"""Memorisation capacity of one multi-head attention layer (S4; Mahdavi, Liao, Thrampoulidis, 2024).

The model reads a sequence X = [e; E]: a query token e (d,) and n context tokens E (n, d). Head h
attends from e over the context,

    alpha_h = E W_K,h W_Q,h^T e / sqrt(d_h)      (n,)   attention logits
    theta_h = softmax(alpha_h)                     (n,)
    z_h     = E^T theta_h                          (d,)   convex mix of the context tokens
    o       = sum_h W_O,h^T W_V,h^T z_h            (d,)   output at the query position
    y_hat   = W_D^T o                              (C,)   class logits

and the paper shows that with H heads and O(H d (d_h + d_v)) parameters it memorises
Omega(H min(n, d_h)) examples, provided every context matrix has rank n and the query vectors have
Kruskal rank >= n. Here we measure it: the memorisation capacity is the largest dataset size N
that training fits to the target accuracy, found by a search over N (`search_capacity`) whose
probes each train a fresh model (`fit_sizes`, several models side by side).

Data follow the paper's code: Uniform[0, 1] tokens, uniformly random labels over C classes, and
either one context shared by all examples ("shared") or a fresh context per example
("per_example"). Datasets of different sizes are prefixes of one pool, so a larger dataset
contains every smaller one and capacity is monotone in N up to optimisation noise.

Everything here is a plain function of tensors; nothing reads the config.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state

CONTEXT_KINDS = ("shared", "per_example")


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of the memorising layer: model dim d, H heads, head dims d_h (query/key), d_v (value)."""

    d: int = 32
    heads: int = 4
    d_head: int = 8
    d_value: int = 8
    n_classes: int = 100

    def n_params(self) -> int:
        """Trainable parameters, H d (2 d_h + 2 d_v) + d C; equals `MultiHeadAttentionMemory.n_params`."""
        return self.heads * self.d * (2 * self.d_head + 2 * self.d_value) + self.d * self.n_classes


def softmax_last(logits: Tensor) -> Tensor:
    """Softmax over the last dim. Same as logits.softmax(-1), but torch's CPU kernel is several
    times slower on rows shorter than 16 (small context sizes n), where the explicit form wins."""
    if logits.shape[-1] >= 16 or logits.device.type != "cpu":
        return logits.softmax(dim=-1)
    weights = (logits - logits.amax(dim=-1, keepdim=True).detach()).exp()
    return weights / weights.sum(dim=-1, keepdim=True)


class MultiHeadAttentionMemory(nn.Module):
    """One multi-head attention layer read at the query position, then a linear label head.

    The input sequence [e; E] comes split in two: queries e (B, d) and contexts E (B, n, d), or
    one shared context (n, d) for the whole batch (no copy per example). Returns logits (B, C).
    No biases, no residual, no normalisation: exactly the paper's layer.
    """

    def __init__(self, shape: AttentionShape, generator: torch.Generator | None = None):
        super().__init__()
        self.shape = shape
        heads, d, d_head, d_value = shape.heads, shape.d, shape.d_head, shape.d_value

        def weight(*size: int, fan_in: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*size, generator=generator) / math.sqrt(fan_in))

        self.w_query = weight(heads, d, d_head, fan_in=d)  # W_Q,h (d, d_h)
        self.w_key = weight(heads, d, d_head, fan_in=d)  # W_K,h (d, d_h)
        self.w_value = weight(heads, d, d_value, fan_in=d)  # W_V,h (d, d_v)
        self.w_out = weight(heads, d_value, d, fan_in=heads * d_value)  # W_O,h (d_v, d)
        self.w_readout = weight(d, shape.n_classes, fan_in=d)  # W_D (d, C)

    @property
    def n_params(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())

    def forward(self, queries: Tensor, contexts: Tensor) -> Tensor:
        batch, (heads, d) = queries.shape[0], self.w_query.shape[:2]
        # Per head only the products W_Q W_K^T and W_V W_O (d, d) matter; forming them first makes
        # the whole layer five large matrix products instead of many small ones (same function).
        query_key = self.w_query @ self.w_key.mT  # (H, d, d)
        value_out = self.w_value @ self.w_out  # (H, d, d)
        key_direction = queries @ query_key.transpose(0, 1).reshape(d, heads * d)  # W_K W_Q^T e: (B, H d)
        key_direction = key_direction.view(batch, heads, d)
        # matmul broadcasts a shared context (n, d) over the batch and pairs per-example ones (B, n, d).
        logits = key_direction @ contexts.mT / math.sqrt(self.shape.d_head)  # alpha_h: (B, H, n)
        attention = softmax_last(logits)  # theta_h: (B, H, n)
        mixed_context = attention @ contexts  # z_h = E^T theta_h: (B, H, d)
        output = mixed_context.reshape(batch, heads * d) @ value_out.reshape(heads * d, d)  # o: (B, d)
        return output @ self.w_readout  # W_D^T o: (B, C)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemorisationData:
    """N examples: queries (N, d), labels (N,) int64, contexts (N, n, d), or (n, d) when shared.

    A shared context is kept once, as the model takes it: (n, d), broadcast over the examples.
    """

    queries: Tensor
    contexts: Tensor
    labels: Tensor

    @property
    def size(self) -> int:
        return self.queries.shape[0]

    @property
    def shared_context(self) -> bool:
        return self.contexts.dim() == 2

    @property
    def context_size(self) -> int:
        return self.contexts.shape[-2]

    def prefix(self, size: int) -> MemorisationData:
        """The first `size` examples (a shared context stays shared)."""
        contexts = self.contexts if self.shared_context else self.contexts[:size]
        return MemorisationData(self.queries[:size], contexts, self.labels[:size])

    def context_matrices(self) -> Tensor:
        """Every distinct context matrix: (M, n, d), M = 1 when shared, N otherwise."""
        return self.contexts.reshape(-1, self.context_size, self.queries.shape[1])

    def to(self, device: torch.device | str) -> MemorisationData:
        return MemorisationData(self.queries.to(device), self.contexts.to(device), self.labels.to(device))


def make_dataset(
    size: int, d: int, n_context: int, n_classes: int, context: str, generator: torch.Generator
) -> MemorisationData:
    """Uniform[0, 1] queries (size, d) and contexts, uniformly random labels in [0, n_classes).

    context="shared" draws one context (n, d) for every example, "per_example" one per example
    (size, n, d); the queries and labels are drawn first, so both kinds share them for a seed.
    """
    if context not in CONTEXT_KINDS:
        raise ValueError(f"context must be one of {CONTEXT_KINDS}, got '{context}'")
    queries = torch.rand(size, d, generator=generator)
    labels = torch.randint(n_classes, (size,), generator=generator)
    context_shape = (n_context, d) if context == "shared" else (size, n_context, d)
    contexts = torch.rand(*context_shape, generator=generator)
    return MemorisationData(queries, contexts, labels)


# --------------------------------------------------------------------------------------------
# Training to fit: several models side by side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainSettings:
    """Adam with linear warm-up and cosine decay, full batch; stop once every model fits.

    A model "fits" when its training accuracy reaches `target_accuracy` at some step. `patience`
    (steps, after warm-up) ends a batch early when no unfitted model has gained a correct example
    for that long: the runs above capacity otherwise dominate the cost of a search.
    """

    lr: float = 1e-2
    max_steps: int = 2000
    warmup_steps: int = 100
    final_lr_fraction: float = 0.0
    target_accuracy: float = 1.0
    patience: int | None = None


@dataclass(frozen=True)
class FitResult:
    """One trained model: its dataset size, best training accuracy, and the step it fitted (or None)."""

    size: int
    best_accuracy: float
    final_accuracy: float
    fitted_at_step: int | None
    steps_run: int
    n_params: int

    @property
    def fitted(self) -> bool:
        return self.fitted_at_step is not None


def warmup_cosine(step: int, settings: TrainSettings) -> float:
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
    settings: TrainSettings,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> list[FitResult]:
    """Train one fresh model per size on the first `size` examples of `pool`, all side by side.

    The R = len(sizes) models run as one batched forward (torch.func.vmap over stacked weights) on
    the largest prefix; a mask (R, N_max) restricts each model's loss and accuracy to its own
    examples, and the loss is the sum of the per-model means, so the models do not interact
    (Adam is elementwise). Accuracy is read from the logits of each training step, before its
    update, so it costs nothing extra.
    """
    sizes = [int(size) for size in sizes]
    if not sizes or min(sizes) < 1 or max(sizes) > pool.size:
        raise ValueError(f"sizes must lie in [1, {pool.size}], got {sizes}")
    data = pool.prefix(max(sizes)).to(device)
    labels = data.labels  # (N_max,)
    size_tensor = torch.tensor(sizes, device=device)
    mask = (torch.arange(data.size, device=device)[None, :] < size_tensor[:, None]).float()  # (R, N_max)

    template, params, buffers = _stacked_models(shape, len(sizes), generator, device)

    def model_logits(model_params, model_buffers, queries, contexts):
        return functional_call(template, (model_params, model_buffers), (queries, contexts))

    batched_logits = torch.vmap(model_logits, in_dims=(0, 0, None, None))
    optimizer = torch.optim.Adam(params.values(), lr=settings.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, settings))

    best_correct = torch.zeros(len(sizes), device=device)
    final_correct = best_correct
    fitted_at = [None] * len(sizes)
    target_correct = torch.ceil(settings.target_accuracy * size_tensor - 1e-9)
    last_gain, step = 0, 0
    for step in range(settings.max_steps):
        logits = batched_logits(params, buffers, data.queries, data.contexts)  # (R, N_max, C)
        losses = F.cross_entropy(logits.flatten(0, 1), labels.repeat(len(sizes)), reduction="none")
        loss = (losses.view(len(sizes), -1) * mask).sum(dim=1).div(size_tensor).sum()
        with torch.no_grad():
            final_correct = ((logits.argmax(dim=-1) == labels).float() * mask).sum(dim=1)
            if ((final_correct > best_correct) & (best_correct < target_correct)).any():
                last_gain = step  # an unfitted model recalled more examples than ever before
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
        )
        for run, size in enumerate(sizes)
    ]


# --------------------------------------------------------------------------------------------
# Capacity search over N
# --------------------------------------------------------------------------------------------


@dataclass
class CapacitySearch:
    """Outcome of a search: the largest fitted size found, the smallest failing one, every probe."""

    capacity: int
    smallest_failure: int | None
    probes: list[tuple[int, float]] = field(default_factory=list)  # (size, accuracy), in probe order

    @property
    def memorised_examples(self) -> float:
        """max over probed N of N x training accuracy (the paper's count of memorised examples)."""
        return max((size * accuracy for size, accuracy in self.probes), default=0.0)


def search_capacity(
    fit_accuracy: Callable[[list[int]], list[float]],
    start: int,
    target_accuracy: float = 1.0,
    probes_per_round: int = 1,
    growth: float = 2.0,
    max_size: int = 10**7,
    relative_resolution: float = 0.05,
) -> CapacitySearch:
    """Largest N with fit_accuracy([N]) >= target, by geometric bracketing then subdivision.

    fit_accuracy(sizes) -> accuracies trains one model per size (all at once when it can).
    Bracketing probes `probes_per_round` sizes per round, each `growth` x the previous, upward
    from `start` until one fails (downward if `start` already fails); the bracket [fitted, failed]
    is then cut into probes_per_round + 1 equal parts per round (bisection for one probe) until
    its width is at most max(1, relative_resolution x fitted).

    The datasets must be nested (each a prefix of the next, as `fit_sizes` uses them): a model
    that fits N examples fits every prefix, so the capacity is the largest fitted N, and a
    failure below it is an optimisation failure, not a bound. The bracket is (largest fitted N,
    smallest failed N above it). Returns capacity 0 when even N = 1 fails, and smallest_failure
    None when max_size fits.
    """
    if start < 1 or probes_per_round < 1 or growth <= 1:
        raise ValueError("need start >= 1, probes_per_round >= 1 and growth > 1")
    search = CapacitySearch(capacity=0, smallest_failure=None)

    def probe(sizes: list[int]) -> None:
        sizes = sorted(set(sizes))
        accuracies = fit_accuracy(sizes)
        search.probes.extend(zip(sizes, (float(a) for a in accuracies)))
        fitted = [size for size, accuracy in search.probes if accuracy >= target_accuracy]
        search.capacity = max(fitted, default=0)
        failed_above = [size for size, accuracy in search.probes if accuracy < target_accuracy and size > search.capacity]
        search.smallest_failure = min(failed_above, default=None)

    def geometric(first: float, factor: float) -> list[int]:
        return [min(max(round(first * factor**k), 1), max_size) for k in range(probes_per_round)]

    probe(geometric(start, growth))
    while search.smallest_failure is None and max(size for size, _ in search.probes) < max_size:
        probe(geometric(max(size for size, _ in search.probes) * growth, growth))
    while search.capacity == 0 and min(size for size, _ in search.probes) > 1:
        probe(geometric(min(size for size, _ in search.probes) / growth, 1 / growth))

    while search.smallest_failure is not None:
        low, high = search.capacity, search.smallest_failure
        if high - low <= max(1, relative_resolution * low):
            break
        step = (high - low) / (probes_per_round + 1)
        inner = sorted({round(low + step * (k + 1)) for k in range(probes_per_round)} - {low, high})
        if not inner:
            break
        probe(inner)
    return search


def attention_capacity(
    pool: MemorisationData,
    shape: AttentionShape,
    settings: TrainSettings,
    generator: torch.Generator,
    start: int,
    probes_per_round: int = 2,
    growth: float = 2.0,
    relative_resolution: float = 0.05,
    device: torch.device | str = "cpu",
) -> tuple[CapacitySearch, list[FitResult]]:
    """Memorisation capacity of one attention shape on prefixes of `pool` (at most pool.size).

    Each round of the search trains `probes_per_round` fresh models side by side (`fit_sizes`).
    Returns the search and every trained model's `FitResult`, in probe order.
    """
    results: list[FitResult] = []

    def fit_accuracy(sizes: list[int]) -> list[float]:
        fits = fit_sizes(pool, sizes, shape, settings, generator, device)
        results.extend(fits)
        return [fit.best_accuracy for fit in fits]

    search = search_capacity(
        fit_accuracy,
        start=min(start, pool.size),
        target_accuracy=settings.target_accuracy,
        probes_per_round=probes_per_round,
        growth=growth,
        max_size=pool.size,
        relative_resolution=relative_resolution,
    )
    return search, results


# --------------------------------------------------------------------------------------------
# The paper's assumptions: context rank n, Kruskal rank of the queries >= n
# --------------------------------------------------------------------------------------------


def context_ranks(contexts: Tensor, rtol: float | None = None) -> Tensor:
    """Numerical rank of every context matrix: contexts (M, n, d) -> ranks (M,) int64.

    The paper assumes rank n for each (so n <= d). The default tolerance is that of the dtype
    (eps x max(n, d) relative to the largest singular value), so float32 data are judged at
    float32 precision.
    """
    return torch.linalg.matrix_rank(contexts, rtol=rtol)


def random_subset_ranks(
    vectors: Tensor, subset_size: int, n_subsets: int, generator: torch.Generator, rtol: float | None = None
) -> Tensor:
    """Ranks of `n_subsets` random subsets of `subset_size` rows of vectors (N, d) -> (n_subsets,).

    The Kruskal rank (the largest k such that EVERY k rows are independent) is NP-hard to compute;
    if all sampled subsets of size k have rank k, the Kruskal rank is at least k with high
    probability over the sampled subsets. A rank below k disproves it outright.
    """
    if subset_size > vectors.shape[0]:
        raise ValueError(f"cannot draw subsets of {subset_size} from {vectors.shape[0]} vectors")
    order = torch.rand(n_subsets, vectors.shape[0], generator=generator).argsort(dim=1)[:, :subset_size]
    return torch.linalg.matrix_rank(vectors[order], rtol=rtol)  # (n_subsets,)


def kruskal_rank_estimate(vectors: Tensor, n_subsets: int, generator: torch.Generator) -> int:
    """Randomised estimate of the Kruskal rank of the rows of vectors (N, d): the largest k such
    that `n_subsets` random k-subsets all have rank k (an upper estimate: a failing subset proves
    the Kruskal rank is below k; passing ones make >= k likely). At most min(N, d)."""
    for k in range(min(vectors.shape), 0, -1):
        if bool(random_subset_ranks(vectors, k, n_subsets, generator).eq(k).all()):
            return k
    return 0


def check_assumptions(data: MemorisationData, n_subsets: int, generator: torch.Generator) -> dict[str, float]:
    """Both assumptions of the paper's theorem on one dataset, as numbers for a table.

    context_full_rank: fraction of the context matrices with rank n; kruskal_subsets_full_rank:
    fraction of random n-subsets of the queries with rank n; kruskal_rank_estimate: the
    randomised Kruskal rank of the queries (the theorem needs >= n); plus the smallest ranks seen.
    """
    n_context = data.context_size
    ranks = context_ranks(data.context_matrices())
    subset_size = min(n_context, data.size)
    subset_ranks = random_subset_ranks(data.queries, subset_size, n_subsets, generator)
    estimate = kruskal_rank_estimate(data.queries, n_subsets, generator)
    if bool((subset_ranks < subset_size).any()):  # a dependent n-subset proves the Kruskal rank < n
        estimate = min(estimate, subset_size - 1)
    return {
        "n_contexts": ranks.numel(),
        "context_rank_min": int(ranks.min()),
        "context_full_rank": float((ranks == n_context).double().mean()),
        "kruskal_subsets": n_subsets,
        "kruskal_subset_rank_min": int(subset_ranks.min()),
        "kruskal_subsets_full_rank": float((subset_ranks == subset_size).double().mean()),
        "kruskal_rank_estimate": estimate,
    }


# --------------------------------------------------------------------------------------------
# Summaries for the claims
# --------------------------------------------------------------------------------------------


def linear_fit(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least-squares line y = slope x + intercept, with its R^2."""
    x_t, y_t = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    design = torch.stack([x_t, torch.ones_like(x_t)], dim=1)
    slope, intercept = torch.linalg.lstsq(design, y_t[:, None]).solution.flatten().tolist()
    residual = y_t - (slope * x_t + intercept)
    total = ((y_t - y_t.mean()) ** 2).sum()
    r2 = 1.0 - float((residual**2).sum() / total) if total > 0 else float("nan")
    return {"slope": slope, "intercept": intercept, "r2": r2}


def slopes_around(x: Sequence[float], y: Sequence[float], knee: float) -> dict[str, float]:
    """Slopes of linear fits on the points with x <= knee and with x >= knee (the S4.head-dim test).

    With d_h as x and knee = n, the paper predicts growth below the knee and a plateau above it.
    """
    below = [(a, b) for a, b in zip(x, y) if a <= knee]
    above = [(a, b) for a, b in zip(x, y) if a >= knee]
    if len(below) < 2 or len(above) < 2:
        raise ValueError(f"need two points on each side of the knee {knee}, got x = {list(x)}")
    return {
        "slope_below": linear_fit(*zip(*below))["slope"],
        "slope_above": linear_fit(*zip(*above))["slope"],
    }

