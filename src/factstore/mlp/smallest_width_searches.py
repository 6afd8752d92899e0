"""The smallest-width searches behind the width-search strategies (width_search.py), and their
result, `WidthSearch`: one pass over an NTK's units (`ntk_smallest_widths`), the encoder-decoder's
code size searched on the codes (`code_size_search`), bracketing and bisection over trained MLPs
(`trained_smallest_widths`). All assume accuracy is monotone non-decreasing in the width (true on
average, not for every draw): the width found is the smallest one the search SAW pass with every
narrower probe failing, and `evaluations` record every probe so non-monotone cases are visible.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet, dot_product_accuracy
from factstore.mlp import encoder_decoder, ntk
from factstore.mlp.modules import module_accuracy, parameter_count, parameters_per_unit
from factstore.search import binary_search_smallest, bracket_search_smallest

if TYPE_CHECKING:
    from factstore.mlp.methods import Method


@dataclass
class WidthSearch:
    """Result of a capacity search for one target.

    width / n_params / accuracy are None when nothing up to the cap passed; then params_at_cap
    is the cap's parameter count (a lower bound on the W the method needs), and module is None
    except for an NTK search asked to build modules (see smallest_widths).
    """

    method: str
    target: float
    width: int | None
    n_params: int | None
    accuracy: float | None
    evaluations: dict[int, float]
    seconds: float
    steps: int = 0  # training steps over all probes (GD only)
    params_at_cap: int | None = None
    module: nn.Module | None = field(default=None, repr=False)

    @property
    def best_accuracy(self) -> float:
        """The highest accuracy any probe reached (NaN without probes)."""
        return max(self.evaluations.values()) if self.evaluations else math.nan


def ntk_smallest_widths(
    fact_set: FactSet, targets: list[float], generator: torch.Generator, low: int = 1, high: int = 2**20,
    chunk_size: int = DEFAULT_CHUNK_SIZE, checkpoints_per_doubling: int = 8, **options,
) -> tuple[dict[float, int | None], dict[int, float]]:
    """({target: smallest NTK width, None past `high`}, {width: accuracy}) from ONE pass over units.

    Doubling from `low` until the highest target passes (or `high`); along each doubling step the
    running sum is checkpointed every 1/checkpoints_per_doubling of the step (at least 32 units),
    and the checkpoints of a step are kept where a target first passes. Then, per target,
    bisection between its last failing and first passing doubling width, each probe continuing a
    copy of the nearest checkpoint below it (a failing probe becomes one), so the bisection
    computes about 1/checkpoints_per_doubling of a doubling step instead of the whole step again.
    Memory: about (checkpoints_per_doubling + 1) x len(targets) copies of the (F, d_out) sum.
    Widths are those of ntk.build with the same generator state (up to float64 summation order).
    options: activation, degree, value_targets, block_size (of ntk.PrefixAccumulator).
    """
    running = ntk.PrefixAccumulator(fact_set, generator, **options)
    evaluations: dict[int, float] = {}

    def evaluate(accumulator: ntk.PrefixAccumulator, width: int) -> float:
        accumulator.advance(width)
        evaluations[width] = dot_product_accuracy(accumulator.outputs(), fact_set.values, fact_set.fact_map, chunk_size)
        return evaluations[width]

    kept: dict[int, ntk.PrefixAccumulator] = {}  # width -> the running sum there, never mutated
    doubling: list[int] = []
    start_checkpoint, width = None, low
    while True:
        step = max(32, (width - running.width) // checkpoints_per_doubling)
        along = {}
        for stop in range(running.width + step, width, step):
            running.advance(stop)
            along[stop] = running.copy()
        accuracy = evaluate(running, width)
        passed_here = any(evaluations[width] >= target and all(evaluations[w] < target for w in doubling) for target in targets)
        if passed_here:
            kept.update(along)
            if start_checkpoint is not None:
                kept[start_checkpoint.width] = start_checkpoint
        doubling.append(width)
        start_checkpoint = running.copy()
        if accuracy >= max(targets) or width >= high:
            break
        width = min(2 * width, high)

    widths: dict[float, int | None] = {}
    for target in sorted(targets):
        passing = [w for w in doubling if evaluations[w] >= target]
        if not passing:
            widths[target] = None
            continue
        index = doubling.index(passing[0])
        hi = passing[0]
        if index == 0:  # widths below `low` are out of the search by contract
            widths[target] = hi
            continue
        lo = doubling[index - 1]
        while hi - lo > 1:
            middle = (lo + hi) // 2
            if middle in evaluations:  # probed by an earlier target's bisection, or a doubling width
                accuracy = evaluations[middle]
            else:
                base = kept[max(w for w in kept if lo <= w <= middle)]
                probe = base if base.width == middle else base.copy()
                accuracy = evaluate(probe, middle)
                kept[middle] = probe
            if accuracy >= target:
                hi = middle
            else:
                lo = middle
        widths[target] = hi
    return widths, evaluations


def code_size_search(
    method: Method, fact_set: FactSet, target: float, generator: torch.Generator, value_targets: Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE, built: dict[int, tuple[nn.Module, int, float]] | None = None, **options,
) -> tuple[int | None, dict[int, float], nn.Module | None, int | None]:
    """Smallest code size m of an encoder-decoder method: (m, {m: code accuracy}, module, n_params).

    value_targets: (n_values, d_out) float64, what the codes encode (method.value_targets).
    The codes are checked directly (D_m D_m^T t_f(i) against all values) on the same decoder
    draw `build` will make, since the decoder is the first thing drawn; then the module is built
    at m and its accuracy verified (the encoder solve is exact up to rounding, but if it ever
    falls short, m grows until the module passes). built: {m: (module, n_params, accuracy)} of
    modules already built from the same generator state (filled here), so several targets that
    land on the same m solve the encoder once. options go to the builder.
    """
    start_state = generator.get_state()
    decoder = encoder_decoder.random_orthogonal(fact_set.value_dim, generator)
    size, evaluations = binary_search_smallest(
        lambda m: encoder_decoder.code_accuracy(fact_set, decoder[:, :m], value_targets, chunk_size),
        target, 1, fact_set.value_dim,
    )
    built = {} if built is None else built
    while size is not None and size <= fact_set.value_dim:
        if size not in built:
            generator.set_state(start_state)
            module, n_params = method.make(fact_set, size, generator, value_targets, **options)
            built[size] = (module, n_params, module_accuracy(module, fact_set, chunk_size))
        module, n_params, accuracy = built[size]
        if accuracy >= target:
            return size, evaluations, module, n_params
        size += 1
    return None, evaluations, None, None


def trained_smallest_widths(
    method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator, guess: int | None = None,
    low: int = 1, high: int = 2**14, growth: float = 2.0, resolution: float = 0.0, warm_start: bool = True,
    first_growth: float | None = None, **options,
) -> dict[float, WidthSearch]:
    """Smallest width of a trained method per target, the targets in increasing order sharing models.

    Bracketing from `guess` (default `low`: doubling), then bisection to `resolution`; each
    probe trains with early stopping (options go to gd.train, e.g. protocol=gd.PAPER_PROTOCOL).
    warm_start: start each probe from the trained MLP of the nearest width that passed this
    target (else the nearest trained one), resized by gd.resize_hidden -- pruning a passing wider
    MLP is the fastest route to a narrower one. A width already trained to a target is not
    retrained, and a width that failed a lower target fails every higher one without training
    (training towards the higher target would have had to pass the lower one on the way): the
    next target's search starts from the previous answer, and its bracket's lower end from the
    widest such failure below the width it finds passing (`known_failing`), so the widths between
    are never trained. first_growth: the first bracketing step's factor for the first target
    (bracket_search_smallest), for a guess scaled from a neighbouring answer; later targets bracket
    by `growth` (their failing widths below the previous answer are mostly known already).
    """
    trained: dict[int, tuple[nn.Module, float]] = {}
    failed_target: dict[int, float] = {}  # width -> the lowest target it was trained towards and failed
    guess = low if guess is None else guess
    results = {}
    for target in sorted(targets):
        started, steps = time.perf_counter(), 0

        def accuracy_at(width: int, target: float = target) -> float:
            nonlocal steps
            if width in trained and (trained[width][1] >= target or failed_target.get(width, math.inf) <= target):
                return trained[width][1]
            init = None
            if warm_start and trained:
                nearest = min(trained, key=lambda w: (trained[w][1] < target, abs(w - width)))
                init = trained[nearest][0]
            module, _, info = method.make(fact_set, width, generator, target=target, init=init, **options)
            steps += info["steps"]
            if width not in trained or info["accuracy"] >= trained[width][1]:
                trained[width] = (module, info["accuracy"])
            if info["accuracy"] < target:
                failed_target[width] = min(target, failed_target.get(width, math.inf))
            return info["accuracy"]

        width, evaluations = bracket_search_smallest(
            accuracy_at, target, guess, low, high, growth, resolution, first_growth if target == min(targets) else None,
            known_failing=[w for w, failed in failed_target.items() if failed <= target])
        module = trained[width][0] if width is not None else None
        n_params = parameter_count(module) if module is not None else None
        params_at_cap = None if module is not None else high * parameters_per_unit(
            method.architecture, fact_set.key_dim, fact_set.value_dim)
        results[target] = WidthSearch(
            method=method.name, target=target, width=width, n_params=n_params,
            accuracy=evaluations.get(width) if width is not None else None,
            evaluations=dict(sorted(evaluations.items())), seconds=time.perf_counter() - started, steps=steps,
            params_at_cap=params_at_cap, module=module,
        )
        if width is not None:
            guess = width
    return results


def finished_search(
    method: str, target: float, width: int | None, n_params: int | None, evaluations: dict[int, float],
    started: float, module: nn.Module | None, params_at_cap: int | None = None,
) -> WidthSearch:
    """The WidthSearch of one target: its accuracy read from `evaluations` at the width found, the
    time since `started`, the cap's parameter count kept only when nothing passed."""
    return WidthSearch(
        method=method, target=target, width=width, n_params=n_params,
        accuracy=None if width is None else evaluations.get(width),
        evaluations=dict(sorted(evaluations.items())), seconds=time.perf_counter() - started,
        params_at_cap=params_at_cap if width is None else None, module=module,
    )
