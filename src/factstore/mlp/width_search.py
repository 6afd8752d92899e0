"""Width-search strategies: how the capacity search finds a method's smallest storing size.

Each method's entry in methods.METHODS holds one strategy object, which owns its search, its
default cap, the keys of a study's search settings it reads, and how one MLP of its kind is
built; callers ask the strategy, never its name. Each strategy answers several targets at once:
- UnitPrefixSearch (NTK): one pass over units (the prefix property, ntk.PrefixAccumulator):
  doubling widths until the highest target is met, checkpointing the running sum along the
  doubling step where a target first passes, then for each target bisection from the nearest
  checkpoint below each probe, so the whole search costs little more than one construction at
  the final doubling width.
- CodeSizeSearch (encoder-decoder): the code size is searched on the codes themselves (does
  D_m D_m^T t_f(i) decode?), nested decoders from one orthogonal draw, then one build verified
  on the module; the size is capped by d_out.
- TrainedSearch (GD): bracketing from a guess (default: `low`, i.e. doubling), then bisection to
  a relative resolution; each probe a training run with early stopping (gd.FAST_PROTOCOL),
  warm-started from the nearest trained width (a passing wider one first). Targets run in
  increasing order and share the trained MLPs, so the 1.0 search starts where 0.99 ended.
- DoublingSearch (any other builder): doubling then bisection, one build per probe.

The searches themselves live in smallest_width_searches.py (built on factstore.search's monotone
searches, shared with the other studies); this module maps a method and a study's settings to them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet
from factstore.mlp.modules import module_accuracy, parameters_per_unit
from factstore.search import doubling_search_smallest

from factstore.mlp.smallest_width_searches import (
    WidthSearch,
    code_size_search,
    finished_search,
    ntk_smallest_widths,
    trained_smallest_widths,
)

if TYPE_CHECKING:
    from factstore.mlp.methods import Method


@dataclass(frozen=True)
class SearchSettings:
    """A study's width-search settings (config: mlp.search, usability's mlp_search).

    ntk_max_width: NTK units at most (UnitPrefixSearch's cap). gd_max_width: GD hidden units at
    most (TrainedSearch's cap). growth: GD's bracketing factor. resolution: the relative width at
    which GD's bisection stops (0: the exact boundary). first_growth: the first bracketing step
    from a guess scaled from a neighbouring answer (None: `growth`).
    """

    ntk_max_width: int
    gd_max_width: int
    growth: float
    resolution: float
    first_growth: float | None = None

    @classmethod
    def from_config(cls, search: Mapping) -> SearchSettings:
        """The settings of a config's search section (further keys, e.g. usability's, are ignored)."""
        return cls(search["ntk_max_width"], search["gd_max_width"], search["growth"], search["resolution"],
                   search.get("first_growth"))


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


class WidthSearchStrategy:
    """What every strategy answers; the defaults are those of a constructed MLP (a closed-form
    builder emitting given value targets), which the strategies override where they differ.

    trains: the MLP's outputs are learned (True) or constructed to emit given value targets.
    sweeps_degrees: the builder has a Hermite degree a study sweeps (the NTK).
    one_pass: the whole search costs about one construction at its final size, so a study can
        afford it at more fact-set sizes than the others.
    capped_by_output_dim: the searched size is a code size, at most d_out (the encoder-decoder).
    default_cap: the largest size searched when the caller gives none.
    """

    trains = False
    sweeps_degrees = False
    one_pass = False
    capped_by_output_dim = False
    default_cap = 2**14

    def size_cap(self, cap: int, output_dim: int) -> int:
        """The largest size worth probing under a cap `cap`, for outputs of dimension output_dim."""
        return min(cap, output_dim) if self.capped_by_output_dim else cap

    def configured_cap(self, settings: SearchSettings, output_dim: int) -> int:
        """The largest size a study's search probes: its settings' cap for this strategy, or d_out
        where the settings have none for it."""
        return output_dim

    def make(
        self, method: Method, fact_set: FactSet, size: int, generator: torch.Generator,
        value_targets: Tensor | None = None, **options,
    ) -> tuple:
        """method.build at `size` (see Method.make): (module, n_params) emitting value_targets
        (default: method.value_targets)."""
        if value_targets is None:
            value_targets = method.value_targets(fact_set)
        return method.build(fact_set, size, generator, value_targets=value_targets, **method.options, **options)

    def build(
        self, method: Method, fact_set: FactSet, size: int, generator: torch.Generator, *, protocol=None,
        degree: int = 1, value_targets: Tensor | None = None, device: torch.device | str = "cpu",
        min_loss: float | None = None,
    ) -> tuple[nn.Module, int]:
        """(module, n_params) at `size` (see Method.build_at); a construction ignores the training
        settings protocol, device and min_loss."""
        return self.make(method, fact_set, size, generator, value_targets)

    def search(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator, low: int = 1,
        high: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, build_modules: bool = True,
        value_targets: Tensor | None = None, **options,
    ) -> dict[float, WidthSearch]:
        """{target: the smallest size storing `target` of the facts}: doubling then bisection, one
        build per probe (see capacity.smallest_widths for the arguments)."""
        started = time.perf_counter()
        if value_targets is None:
            value_targets = method.value_targets(fact_set)
        start_state, results = generator.get_state(), {}

        def accuracy_at(size: int) -> float:
            generator.set_state(start_state)
            return module_accuracy(self.make(method, fact_set, size, generator, value_targets, **options)[0],
                                   fact_set, chunk_size)

        for target in sorted(targets):
            width, evaluations = doubling_search_smallest(accuracy_at, target, low, high or self.default_cap)
            module, n_params = _build_at(method, fact_set, width, generator, start_state, value_targets, options)
            results[target] = finished_search(method.name, target, width, n_params, evaluations, started, module)
        return results

    def smallest_widths(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator,
        settings: SearchSettings, *, protocol=None, degree: int | None = None, value_targets: Tensor | None = None,
        guess: int | None = None, first_growth: float | None = None, build_modules: bool = True,
        device: torch.device | str = "cpu",
    ) -> dict[float, WidthSearch]:
        """`search` with a study's settings (see configured_search.search_method); a
        construction reads none of them and ignores the training and NTK arguments."""
        return self.search(method, fact_set, targets, generator, value_targets=value_targets)


class DoublingSearch(WidthSearchStrategy):
    """Any other builder: doubling then bisection, one build per probe (WidthSearchStrategy.search)."""


class CodeSizeSearch(WidthSearchStrategy):
    """The encoder-decoder: the code size searched on the codes, capped by d_out (code_size_search)."""

    capped_by_output_dim = True

    def search(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator, low: int = 1,
        high: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, build_modules: bool = True,
        value_targets: Tensor | None = None, **options,
    ) -> dict[float, WidthSearch]:
        """{target: the smallest code size}, every target on the same decoder draw (low and high
        unused: code sizes run from 1 to d_out)."""
        started = time.perf_counter()
        if value_targets is None:
            value_targets = method.value_targets(fact_set)
        start_state, built, results = generator.get_state(), {}, {}
        for target in sorted(targets):
            generator.set_state(start_state)  # every target sees the same decoder draw
            width, evaluations, module, n_params = code_size_search(
                method, fact_set, target, generator, value_targets, chunk_size, built, **options
            )
            results[target] = finished_search(method.name, target, width, n_params, evaluations, started, module)
        return results


class UnitPrefixSearch(WidthSearchStrategy):
    """The NTK: one pass over units, every width a prefix of the wider ones (ntk_smallest_widths)."""

    sweeps_degrees = True
    one_pass = True
    default_cap = 2**20

    def configured_cap(self, settings: SearchSettings, output_dim: int) -> int:
        return settings.ntk_max_width

    def build(
        self, method: Method, fact_set: FactSet, size: int, generator: torch.Generator, *, protocol=None,
        degree: int = 1, value_targets: Tensor | None = None, device: torch.device | str = "cpu",
        min_loss: float | None = None,
    ) -> tuple[nn.Module, int]:
        return self.make(method, fact_set, size, generator, value_targets, degree=degree)

    def search(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator, low: int = 1,
        high: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, build_modules: bool = True,
        value_targets: Tensor | None = None, **options,
    ) -> dict[float, WidthSearch]:
        """{target: the smallest NTK width} from one pass over units. build_modules: build the
        module at the width found, or at the cap `high` when a target is not reached (the largest
        MLP tried, e.g. for its Lipschitz constant); False skips the build (the parameter count is
        known without it)."""
        started = time.perf_counter()
        if value_targets is None:
            value_targets = method.value_targets(fact_set)
        high = high or self.default_cap
        start_state, results = generator.get_state(), {}
        widths, evaluations = ntk_smallest_widths(fact_set, targets, generator, low, high, chunk_size,
                                                  value_targets=value_targets, **method.options, **options)
        per_unit = parameters_per_unit(method.architecture, fact_set.key_dim, fact_set.value_dim)
        for target, width in widths.items():
            module, n_params = None, (None if width is None else width * per_unit)
            if build_modules:  # at the cap when the target is not reached: the largest MLP tried
                module, _ = _build_at(method, fact_set, width or high, generator, start_state, value_targets, options)
            results[target] = finished_search(method.name, target, width, n_params, evaluations, started, module,
                                              params_at_cap=high * per_unit)
        return results

    def smallest_widths(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator,
        settings: SearchSettings, *, protocol=None, degree: int | None = None, value_targets: Tensor | None = None,
        guess: int | None = None, first_growth: float | None = None, build_modules: bool = True,
        device: torch.device | str = "cpu",
    ) -> dict[float, WidthSearch]:
        """`search` capped at settings.ntk_max_width with Hermite `degree`."""
        return self.search(method, fact_set, targets, generator, high=settings.ntk_max_width,
                           build_modules=build_modules, value_targets=value_targets, degree=degree)


class TrainedSearch(WidthSearchStrategy):
    """Trained MLPs (GD): bracketing and bisection, the targets sharing models (trained_smallest_widths)."""

    trains = True

    def configured_cap(self, settings: SearchSettings, output_dim: int) -> int:
        return settings.gd_max_width

    def make(
        self, method: Method, fact_set: FactSet, size: int, generator: torch.Generator,
        value_targets: Tensor | None = None, **options,
    ) -> tuple:
        """method.build, the trainer, at `size`: (module, n_params, info); value_targets unused
        (a trained MLP learns its outputs)."""
        return method.build(fact_set, size, generator, architecture=method.architecture, **method.options, **options)

    def build(
        self, method: Method, fact_set: FactSet, size: int, generator: torch.Generator, *, protocol=None,
        degree: int = 1, value_targets: Tensor | None = None, device: torch.device | str = "cpu",
        min_loss: float | None = None,
    ) -> tuple[nn.Module, int]:
        """(module, n_params) trained with `protocol` on `device`, past full accuracy down to a
        loss of min_loss when given."""
        module, n_params, _ = self.make(method, fact_set, size, generator, protocol=protocol, device=device,
                                        min_loss=min_loss)
        return module, n_params

    def search(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator, low: int = 1,
        high: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, build_modules: bool = True,
        value_targets: Tensor | None = None, **options,
    ) -> dict[float, WidthSearch]:
        """trained_smallest_widths (options: guess, growth, resolution, warm_start, first_growth and
        the trainer's, e.g. protocol); chunk_size, build_modules and value_targets unused."""
        return trained_smallest_widths(method, fact_set, targets, generator, low=low, high=high or self.default_cap,
                                       **options)

    def smallest_widths(
        self, method: Method, fact_set: FactSet, targets: list[float], generator: torch.Generator,
        settings: SearchSettings, *, protocol=None, degree: int | None = None, value_targets: Tensor | None = None,
        guess: int | None = None, first_growth: float | None = None, build_modules: bool = True,
        device: torch.device | str = "cpu",
    ) -> dict[float, WidthSearch]:
        """`search` capped at settings.gd_max_width, bracketing by settings.growth from `guess` (first
        step first_growth) to settings.resolution, training with `protocol` on `device`."""
        return self.search(method, fact_set, targets, generator, high=settings.gd_max_width, guess=guess,
                           growth=settings.growth, first_growth=first_growth, resolution=settings.resolution,
                           protocol=protocol, device=device)


def _build_at(
    method: Method, fact_set: FactSet, width: int | None, generator: torch.Generator, state: Tensor,
    value_targets: Tensor, options: dict,
) -> tuple[nn.Module | None, int | None]:
    """(module, n_params) of `method` at `width` from the generator state the search began in."""
    if width is None:
        return None, None
    generator.set_state(state)
    return method.make(fact_set, width, generator, value_targets, **options)

