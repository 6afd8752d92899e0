"""Monotone searches: the boundary of a pass / fail property along the integers.

Every capacity in this package is such a boundary: the smallest MLP width that stores the facts
(accuracy non-decreasing in width), the largest dataset a model fits (accuracy non-increasing in
the dataset size). The searches take the expensive evaluation as a callable and never evaluate a
point twice; each returns every probe so non-monotone cases stay visible.

- `binary_search_smallest`, `bracket_search_smallest`, `doubling_search_smallest`: the smallest
  passing integer, one probe at a time (bracketing from a guess, then bisection);
  `bracket_search_smallest_together`: several such searches in lockstep, one call per round for
  the next probe of each (the models of a round train side by side).
- `search_largest`: the largest passing integer, several probes per round (the models of one
  round train side by side).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

from factstore.errors import ResultWarning


def _check_range(low: int, high: int) -> None:
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got low={low}, high={high}")


SearchSteps = Generator[int, float, "int | None"]
"""A search written as a generator: it yields each width to probe, is sent that width's accuracy,
and returns the smallest passing width (None when none passes). Drivers run it one probe at a
time (`_drive`) or several searches in lockstep (`bracket_search_smallest_together`)."""


def _passes(width: int, target: float, evaluations: dict[int, float]) -> Generator[int, float, bool]:
    """Whether `width` reaches the target, probing it only if it was never evaluated."""
    if width not in evaluations:
        evaluations[width] = yield width
    return evaluations[width] >= target


def _bisect(target: float, evaluations: dict[int, float], lo: int, hi: int, resolution: float = 0.0) -> SearchSteps:
    """Bisection of (lo, hi], hi passing and lo failing (or below the range), until
    hi - lo <= max(1, resolution * hi); returns hi."""
    while hi - lo > max(1, resolution * hi):
        middle = (lo + hi) // 2
        if (yield from _passes(middle, target, evaluations)):
            hi = middle
        else:
            lo = middle
    return hi


def _binary_steps(target: float, evaluations: dict[int, float], low: int, high: int) -> SearchSteps:
    """The steps of `binary_search_smallest`."""
    if not (yield from _passes(high, target, evaluations)):
        return None
    return (yield from _bisect(target, evaluations, low - 1, high))


def _bracket_steps(target: float, evaluations: dict[int, float], guess: int, low: int, high: int, growth: float,
                   resolution: float, first_growth: float | None = None, known_failing: Sequence[int] = ()) -> SearchSteps:
    """The steps of `bracket_search_smallest` (its docstring)."""

    def largest_known_failing_below(width: int) -> int:
        return max((w for w in known_failing if low <= w < width), default=low - 1)

    width = min(max(int(guess), low), high)
    factor = first_growth or growth
    if (yield from _passes(width, target, evaluations)):
        lo, hi = low - 1, width
        while hi > low:
            # no lower than the widest known failure: every width under it fails too
            below = max(low, min(hi - 1, math.floor(hi / factor)), largest_known_failing_below(hi))
            factor = growth
            if (yield from _passes(below, target, evaluations)):
                hi = below
            else:
                lo = below
                break
    else:
        lo = width
        while True:
            if lo >= high:
                return None
            above = min(high, max(lo + 1, math.ceil(lo * factor)))
            factor = growth
            if (yield from _passes(above, target, evaluations)):
                hi = above
                break
            lo = above
    known = largest_known_failing_below(hi)
    if known > lo:  # the bracket's lower end moves up to it (a cheap probe that confirms it fails)
        if (yield from _passes(known, target, evaluations)):
            hi = known
        else:
            lo = known
    return (yield from _bisect(target, evaluations, lo, hi, resolution))


def warn_if_every_probe_failed(answer: int | None, target: float, evaluations: dict[int, float]) -> None:
    """A ResultWarning when a smallest-passing search found nothing (answer None): its result is
    censored at the top of the searched range, which a table or a fit must not read as a size."""
    if answer is None and evaluations:
        best = max(evaluations, key=lambda width: (evaluations[width], width))
        warnings.warn(ResultWarning(
            f"every probe of a capacity search failed the target {target:g} ({len(evaluations)} probes up to "
            f"{max(evaluations)}; best {evaluations[best]:.4g} at {best}): the capacity lies above the searched range"),
            stacklevel=3)


def _drive(steps: SearchSteps, accuracy_at: Callable[[int], float], target: float, evaluations: dict[int, float]) -> int | None:
    """Run a search one probe at a time; returns its answer (warning when every probe failed)."""
    try:
        width = next(steps)
        while True:
            width = steps.send(accuracy_at(width))
    except StopIteration as done:
        warn_if_every_probe_failed(done.value, target, evaluations)
        return done.value


def binary_search_smallest(
    accuracy_at: Callable[[int], float], target: float, low: int, high: int
) -> tuple[int | None, dict[int, float]]:
    """(smallest w in [low, high] with accuracy_at(w) >= target, {w: accuracy} of every probe).

    Assumes accuracy_at is monotone non-decreasing (so the passing widths form [w*, high]).
    Probes `high` first and returns None if even it fails; then bisects keeping the invariant
    "hi passes, everything <= lo fails" (lo starts at low - 1, never probed), so it makes at
    most 1 + ceil(log2(high - low + 1)) probes. Probes are cached: no width is run twice.
    """
    _check_range(low, high)
    evaluations: dict[int, float] = {}
    return _drive(_binary_steps(target, evaluations, low, high), accuracy_at, target, evaluations), evaluations


def bracket_search_smallest(
    accuracy_at: Callable[[int], float], target: float, guess: int, low: int = 1, high: int = 2**14,
    growth: float = 2.0, resolution: float = 0.0, first_growth: float | None = None, known_failing: Sequence[int] = (),
) -> tuple[int | None, dict[int, float]]:
    """(smallest passing width found, {width: accuracy}) by bracketing from `guess`, then bisection.

    From the guess, steps down (divide by `growth`) while it passes or up (multiply) until it
    passes, so the answer lies in (lo, hi] with lo failing (or below `low`) and hi passing; then
    bisects until hi - lo <= max(1, resolution * hi). resolution = 0 gives the exact boundary
    (for a monotone curve); 0.05 gives hi within ~5% above it with fewer probes. None if `high`
    fails. Probes are cached. A good guess (e.g. the previous F's answer) saves most probes;
    first_growth (default `growth`) is the factor of the first step from the guess, the guess's
    expected error (e.g. 1.1 for a guess scaled from a neighbouring answer): later steps grow by
    `growth`, so a poor guess costs one extra probe. known_failing: widths expected to fail whose probes
    cost nothing (e.g. widths that failed a lower target, which `accuracy_at` answers from what it
    kept): below the passing width found, the bracket's lower end is the widest of them (probed:
    its failure confirmed and recorded), since every width under it fails too on a monotone curve,
    and the widths between are never probed.
    """
    _check_range(low, high)
    evaluations: dict[int, float] = {}
    steps = _bracket_steps(target, evaluations, guess, low, high, growth, resolution, first_growth, known_failing)
    return _drive(steps, accuracy_at, target, evaluations), evaluations


def bracket_search_smallest_together(
    accuracies_at: Callable[[list[tuple[int, int]]], list[float]], target: float, guesses: list[int], low: int = 1,
    high: int = 2**14, growth: float = 2.0, resolution: float = 0.0,
) -> list[tuple[int | None, dict[int, float]]]:
    """`bracket_search_smallest` for several independent curves at once, in lockstep.

    Search i follows exactly the probes it would make alone (from guesses[i]); each round, the
    next probe of every unfinished search is evaluated in ONE call
    accuracies_at([(i, width), ...]) -> [accuracy, ...] (e.g. one batched training of a model per
    probe). Returns [(answer, {width: accuracy})] in the order of `guesses`.
    """
    _check_range(low, high)
    evaluations: list[dict[int, float]] = [{} for _ in guesses]
    searches = [_bracket_steps(target, evaluations[i], guess, low, high, growth, resolution)
                for i, guess in enumerate(guesses)]
    answers: list[int | None] = [None] * len(guesses)
    pending: dict[int, int] = {}
    for i, steps in enumerate(searches):
        try:
            pending[i] = next(steps)
        except StopIteration as done:
            answers[i] = done.value
    while pending:
        accuracies = accuracies_at(list(pending.items()))
        if len(accuracies) != len(pending):
            raise ValueError(f"accuracies_at returned {len(accuracies)} accuracies for {len(pending)} probes")
        following: dict[int, int] = {}
        for (i, _), accuracy in zip(pending.items(), accuracies):
            try:
                following[i] = searches[i].send(float(accuracy))
            except StopIteration as done:
                answers[i] = done.value
        pending = following
    for answer, evaluated in zip(answers, evaluations):
        warn_if_every_probe_failed(answer, target, evaluated)
    return list(zip(answers, evaluations))


def doubling_search_smallest(
    accuracy_at: Callable[[int], float], target: float, low: int, high: int
) -> tuple[int | None, dict[int, float]]:
    """Doubling from `low` (low, 2 low, ...) to bracket the answer, then exact bisection: cheaper
    than binary_search_smallest when the answer is far below `high` and probes cost ~ width."""
    return bracket_search_smallest(accuracy_at, target, guess=low, low=low, high=high)


@dataclass
class LargestSearch:
    """Outcome of a search: the largest fitted size found, the smallest failing one, every probe."""

    capacity: int
    smallest_failure: int | None
    probes: list[tuple[int, float]] = field(default_factory=list)  # (size, accuracy), in probe order

    @property
    def memorised_examples(self) -> float:
        """max over probed N of N x training accuracy (the paper's count of memorised examples)."""
        return max((size * accuracy for size, accuracy in self.probes), default=0.0)


def search_largest(
    fit_accuracy: Callable[[list[int]], list[float]],
    start: int,
    target_accuracy: float = 1.0,
    probes_per_round: int = 1,
    growth: float = 2.0,
    max_size: int = 10**7,
    relative_resolution: float = 0.05,
    known: Sequence[tuple[int, float]] = (),
) -> LargestSearch:
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
    None when max_size fits. `known`: (size, accuracy) probes already made with the same training
    (e.g. a budget check's): the search continues from them instead of probing from `start`.
    """
    if start < 1 or probes_per_round < 1 or growth <= 1:
        raise ValueError("need start >= 1, probes_per_round >= 1 and growth > 1")
    search = LargestSearch(capacity=0, smallest_failure=None)

    def probe(sizes: list[int]) -> None:
        sizes = sorted(set(sizes))
        probe_results(sizes, fit_accuracy(sizes))

    def probe_results(sizes: list[int], accuracies: list[float]) -> None:
        search.probes.extend(zip(sizes, (float(a) for a in accuracies)))
        fitted = [size for size, accuracy in search.probes if accuracy >= target_accuracy]
        search.capacity = max(fitted, default=0)
        failed_above = [size for size, accuracy in search.probes if accuracy < target_accuracy and size > search.capacity]
        search.smallest_failure = min(failed_above, default=None)

    def geometric(first: float, factor: float) -> list[int]:
        return [min(max(round(first * factor**k), 1), max_size) for k in range(probes_per_round)]

    if known:
        probe_results([size for size, _ in known], [accuracy for _, accuracy in known])
    else:
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
    if search.capacity == 0:
        warnings.warn(ResultWarning(
            f"every probe of a capacity search failed the target {target_accuracy:g} (down to size "
            f"{min(size for size, _ in search.probes)}): capacity 0 means the model fitted nothing"), stacklevel=2)
    return search
