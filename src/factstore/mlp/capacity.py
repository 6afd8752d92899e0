"""Capacity: the smallest width (or code size) at which a method stores a target fraction of facts.

All searches assume accuracy is monotone non-decreasing in the width. That is true on average
but not exactly for one random draw (a wider NTK MLP has different noise; a GD run can be
unlucky), so the width found is the smallest one the search SAW pass with every narrower probe
failing -- the usual convention for the seed's Fig. 7 -- and the `evaluations` record every
probe so non-monotone cases are visible.

Strategies, chosen by method (see `smallest_width`):
- NTK ('ntk', 'ntk_ustar'): one pass over units (the prefix property, ntk.PrefixAccumulator):
  doubling widths until the target is met, then bisection from a checkpoint of the running
  sum, so the whole search costs about two constructions at the final width.
- encoder-decoder: the code size is searched on the codes themselves (does D_m D_m^T t_f(i)
  decode?), nested decoders from one orthogonal draw, then one build verified on the module.
- GD ('gd_*'): doubling then bisection, each probe a training run warm-started from the nearest
  trained width (a passing wider one first), with early stopping (gd.FAST_PROTOCOL).
- anything else in METHODS: doubling then bisection, one build per probe.

Accuracy is always dot-product decoding over ALL values, in row chunks (facts.py), so
F = 2^14 needs chunk_size x F scores at a time, never F x F.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet, dot_product_accuracy
from factstore.geometry import margin_optimal_targets
from factstore.mlp import METHODS, TRAINERS, encoder_decoder, ntk
from factstore.mlp.modules import module_accuracy, parameter_count

PREFIX_METHODS = {"ntk": {}, "ntk_ustar": {"margin_optimal": True}}
CODE_SIZE_METHODS = {"encoder_decoder", "encoder_decoder_ustar", "encoder_decoder_plain"}
WIDTHLESS_METHODS = {"hebbian"}


@dataclass
class WidthSearch:
    """Result of a capacity search. width / n_params / module are None when nothing passed."""

    method: str
    target: float
    width: int | None
    n_params: int | None
    accuracy: float | None
    evaluations: dict[int, float]
    seconds: float
    steps: int = 0  # training steps over all probes (GD only)
    module: nn.Module | None = field(default=None, repr=False)


# ---------------------------------------------------------------------------------------------
# Generic searches over a monotone accuracy curve
# ---------------------------------------------------------------------------------------------


def binary_search_width(
    accuracy_at: Callable[[int], float], target: float, low: int, high: int
) -> tuple[int | None, dict[int, float]]:
    """(smallest w in [low, high] with accuracy_at(w) >= target, {w: accuracy} of every probe).

    Assumes accuracy_at is monotone non-decreasing (so the passing widths form [w*, high]).
    Probes `high` first and returns None if even it fails; then bisects keeping the invariant
    "hi passes, everything <= lo fails" (lo starts at low - 1, never probed), so it makes at
    most 1 + ceil(log2(high - low + 1)) probes. Probes are cached: no width is run twice.
    """
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got low={low}, high={high}")
    evaluations: dict[int, float] = {}

    def passes(width: int) -> bool:
        if width not in evaluations:
            evaluations[width] = accuracy_at(width)
        return evaluations[width] >= target

    if not passes(high):
        return None, evaluations
    lo, hi = low - 1, high
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if passes(middle):
            hi = middle
        else:
            lo = middle
    return hi, evaluations


def doubling_search_width(
    accuracy_at: Callable[[int], float], target: float, low: int, high: int
) -> tuple[int | None, dict[int, float]]:
    """Like binary_search_width, but first doubles from `low` (low, 2 low, ...) to bracket the
    answer: cheaper when the answer is far below `high` and probes cost ~ width."""
    evaluations: dict[int, float] = {}
    width, last_failure = low, low - 1
    while True:
        evaluations[width] = accuracy_at(width)
        if evaluations[width] >= target:
            break
        if width >= high:
            return None, evaluations
        last_failure, width = width, min(2 * width, high)
    if width - last_failure <= 1:
        return width, evaluations
    found, refined = binary_search_width(
        lambda w: evaluations[w] if w in evaluations else accuracy_at(w), target, last_failure + 1, width
    )
    evaluations.update(refined)
    return found, evaluations


# ---------------------------------------------------------------------------------------------
# Method-specific searches
# ---------------------------------------------------------------------------------------------


def ntk_smallest_width(
    fact_set: FactSet, target: float, generator: torch.Generator, low: int = 1, high: int = 2**20,
    chunk_size: int = DEFAULT_CHUNK_SIZE, **options,
) -> tuple[int | None, dict[int, float]]:
    """Smallest NTK width by one pass over units: doubling from `low`, then bisection.

    Each bisection probe continues a copy of the running sum at the largest failing width, so
    no unit is computed more than about twice. Widths are those of ntk.build with the same
    generator state. options: activation, degree, margin_optimal, value_targets, block_size.
    """
    running = ntk.PrefixAccumulator(fact_set, generator, **options)
    evaluations: dict[int, float] = {}

    def accuracy(accumulator: ntk.PrefixAccumulator, width: int) -> float:
        accumulator.advance(width)
        evaluations[width] = dot_product_accuracy(
            accumulator.outputs(), fact_set.values, fact_set.fact_map, chunk_size
        )
        return evaluations[width]

    failing, width = running.copy(), low  # `failing`: the running sum at the last failing width
    while accuracy(running, width) < target:
        if width >= high:
            return None, evaluations
        failing = running.copy()
        width = min(2 * width, high)
    if width == low:  # widths below `low` are out of the search by contract
        return low, evaluations
    lo, hi = failing.width, width
    while hi - lo > 1:
        middle = (lo + hi) // 2
        probe = failing.copy()
        if accuracy(probe, middle) >= target:
            hi = middle
        else:
            lo, failing = middle, probe
    return hi, evaluations


def code_size_search(
    method: str, fact_set: FactSet, target: float, generator: torch.Generator,
    chunk_size: int = DEFAULT_CHUNK_SIZE, **options,
) -> tuple[int | None, dict[int, float], nn.Module | None, int | None]:
    """Smallest code size m of an encoder-decoder method: (m, {m: code accuracy}, module, n_params).

    The codes are checked directly (D_m D_m^T t_f(i) against all values) on the same decoder
    draw `build` will make, since the decoder is the first thing drawn; then the module is built
    at m and its accuracy verified (the encoder solve is exact up to rounding, but if it ever
    falls short, m grows until the module passes).
    """
    builder = METHODS[method]
    value_targets = options.pop("value_targets", None)
    if value_targets is None:
        value_targets = encoder_decoder.per_value_targets(fact_set, _is_margin_optimal(method, options))
    start_state = generator.get_state()
    decoder = encoder_decoder.random_orthogonal(fact_set.value_dim, generator)
    size, evaluations = binary_search_width(
        lambda m: encoder_decoder.code_accuracy(fact_set, decoder[:, :m], value_targets, chunk_size),
        target, 1, fact_set.value_dim,
    )
    while size is not None and size <= fact_set.value_dim:
        generator.set_state(start_state)
        module, n_params = builder(fact_set, size, generator, value_targets=value_targets, **options)
        if module_accuracy(module, fact_set, chunk_size) >= target:
            return size, evaluations, module, n_params
        size += 1
    return None, evaluations, None, None


def trained_smallest_width(
    method: str, fact_set: FactSet, target: float, generator: torch.Generator, low: int = 1,
    high: int = 2**14, warm_start: bool = True, **options,
) -> tuple[int | None, dict[int, float], nn.Module | None, int]:
    """Smallest width of a GD method: (width, {width: accuracy}, module at width, total steps).

    Doubling from `low`, then bisection; each probe trains with early stopping (options go to
    gd.train, e.g. protocol=gd.PAPER_PROTOCOL). warm_start: start each probe from the trained
    MLP of the nearest width that passed (else the nearest that failed), resized by
    gd.resize_hidden -- pruning a passing wider MLP is the fastest route to a narrower one.
    """
    trainer = TRAINERS[method]
    trained: dict[int, tuple[nn.Module, float]] = {}
    total_steps = 0

    def warm_start_for(width: int) -> nn.Module | None:
        if not warm_start or not trained:
            return None
        nearest = min(trained, key=lambda w: (trained[w][1] < target, abs(w - width)))
        return trained[nearest][0]

    def accuracy_at(width: int) -> float:
        nonlocal total_steps
        module, _, info = trainer(fact_set, width, generator, target=target, init=warm_start_for(width), **options)
        trained[width] = (module, info["accuracy"])
        total_steps += info["steps"]
        return info["accuracy"]

    width, evaluations = doubling_search_width(accuracy_at, target, low, high)
    return width, evaluations, (trained[width][0] if width is not None else None), total_steps


def smallest_width(
    method: str,
    fact_set: FactSet,
    target: float,
    generator: torch.Generator,
    low: int = 1,
    high: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    **options,
) -> WidthSearch:
    """The smallest size at which `method` stores at least `target` of the facts.

    method: a key of METHODS or TRAINERS. low / high bound the search (defaults: 1 and 2^20
    units for NTK, d_out for encoder-decoder code sizes, 2^14 for GD and other builders).
    options go to the builder / trainer (e.g. degree=2, protocol=gd.PAPER_PROTOCOL). For
    margin-optimal methods U* is solved once here unless value_targets is passed.
    """
    if method in WIDTHLESS_METHODS:
        raise ValueError(f"method '{method}' has no width to search (its size is fixed by d)")
    started = time.perf_counter()
    steps = 0
    options = _with_value_targets(method, fact_set, options)
    if method in PREFIX_METHODS:
        options = {**PREFIX_METHODS[method], **options}
        start_state = generator.get_state()
        width, evaluations = ntk_smallest_width(fact_set, target, generator, low, high or 2**20, chunk_size, **options)
        module, n_params = _build_at(ntk.build, fact_set, width, generator, start_state, options)
    elif method in CODE_SIZE_METHODS:
        width, evaluations, module, n_params = code_size_search(
            method, fact_set, target, generator, chunk_size, **options
        )
    elif method in TRAINERS:
        width, evaluations, module, steps = trained_smallest_width(
            method, fact_set, target, generator, low, high or 2**14, **options
        )
        n_params = None if module is None else parameter_count(module)
    elif method in METHODS:
        builder = METHODS[method]
        start_state = generator.get_state()

        def accuracy_at(size: int) -> float:
            generator.set_state(start_state)
            return module_accuracy(builder(fact_set, size, generator, **options)[0], fact_set, chunk_size)

        width, evaluations = doubling_search_width(accuracy_at, target, low, high or 2**14)
        module, n_params = _build_at(builder, fact_set, width, generator, start_state, options)
    else:
        raise ValueError(f"unknown method '{method}': use one of {sorted(METHODS) + sorted(TRAINERS)}")
    return WidthSearch(
        method=method,
        target=target,
        width=width,
        n_params=n_params,
        accuracy=None if width is None else evaluations.get(width),
        evaluations=dict(sorted(evaluations.items())),
        seconds=time.perf_counter() - started,
        steps=steps,
        module=module,
    )


def _is_margin_optimal(method: str, options: dict) -> bool:
    """Whether `method` with `options` builds towards U* (an option, or fixed by the method)."""
    fixed = getattr(METHODS.get(method), "keywords", {})
    return bool(options.get("margin_optimal", fixed.get("margin_optimal", False)))


def _with_value_targets(method: str, fact_set: FactSet, options: dict) -> dict:
    """options with value_targets = U* solved once, for margin-optimal construction methods."""
    if method in TRAINERS or not _is_margin_optimal(method, options) or options.get("value_targets") is not None:
        return options
    return {**options, "value_targets": margin_optimal_targets(fact_set.values)[0]}


def _build_at(builder, fact_set: FactSet, width: int | None, generator: torch.Generator, state: Tensor, options: dict):
    """(module, n_params) of `builder` at `width` from the generator state the search began in."""
    if width is None:
        return None, None
    generator.set_state(state)
    return builder(fact_set, width, generator, **options)
