"""The study's width searches with its configuration: one method on one fact set, with the config's
caps, GD protocol, NTK degrees and GD guess (capacity.smallest_widths underneath).

Every search assumes accuracy grows with width and returns the smallest width it saw pass with a
narrower one failing; `evaluations` keep every probe. NTK: one pass over units; encoder-decoder:
code sizes checked on the codes; GD: bracketing from a guess (the 2-bits-per-parameter width, or
the previous F's width scaled by log2 F!, `scaled_guess`), bisection to a relative resolution,
warm starts, targets sharing the trained models. A search that fails at its width cap leaves
width / n_params empty and records the best accuracy reached and the cap's parameter count
(`params_at_cap`, a lower bound on W). Each method's strategy (width_search.py) reads the
settings it needs and ignores the others.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from factstore.device import derived_generator
from factstore.facts import FactSet
from factstore.mlp import gd
from factstore.mlp.methods import Method, get_method
from factstore.mlp.modules import parameters_per_unit
from factstore.mlp.scaling import permutation_bits
from factstore.mlp.smallest_width_searches import WidthSearch
from factstore.mlp.width_search import SearchSettings


def search_method(
    method: str, fact_set: FactSet, targets: list[float], seed_parts: tuple, params: dict,
    ustar: Tensor | None = None, gd_guess: int | None = None, build_modules: bool = False,
    device: torch.device | str = "cpu", degree: int | None = None,
) -> dict[float, WidthSearch]:
    """{target: the strategy's configured search result} for one study method, with the study's config.

    params: the study's config section (search settings, GD protocol, NTK degrees). degree: the
    Hermite degree of an NTK method (default: the first of params["ntk_degrees"]). ustar: U* of
    fact_set.values, solved once per value set by the caller and shared by the U* methods (None:
    solved here if the method emits U*). gd_guess: where the GD bracketing starts (default: the
    2-bits-per-parameter width); a given guess's first step is search["first_growth"].
    build_modules: also build the NTK module at the width found (the other methods always return
    theirs). device: where GD trains (the step's device: CUDA when present); the constructions run
    on the CPU, whose float64 solves and one-pass unit sums are not the bottleneck.
    """
    entry = get_method(method)
    settings = SearchSettings.from_config(params["search"])
    return entry.search.smallest_widths(
        entry, fact_set, targets, derived_generator(*seed_parts), settings,
        protocol=gd.Protocol.from_config(params["gd"]),
        degree=int(params["ntk_degrees"][0] if degree is None else degree),
        value_targets=entry.value_targets(fact_set, ustar),
        guess=gd_guess or default_gd_guess(entry, fact_set),
        first_growth=settings.first_growth if gd_guess else None,
        build_modules=build_modules, device=device)


def search_degrees(
    method: str, fact_set: FactSet, targets: list[float], seed_parts: tuple, params: dict, **options,
) -> list[tuple[float, dict[float, WidthSearch]]]:
    """[(degree, search_method's result)]: a method whose strategy sweeps degrees (the NTK) once per
    Hermite degree of params["ntk_degrees"] (the same random units for every degree: a paired
    comparison; the summary keeps the best degree per setting), any other method once with degree
    NaN. options go to search_method."""
    if not get_method(method).search.sweeps_degrees:
        return [(math.nan, search_method(method, fact_set, targets, seed_parts, params, **options))]
    return [(float(degree), search_method(method, fact_set, targets, seed_parts, params, degree=int(degree), **options))
            for degree in params["ntk_degrees"]]


def default_gd_guess(method: Method, fact_set: FactSet) -> int:
    """The width at which the MLP would hold log2(F!) bits at 2 bits per parameter."""
    bits = float(permutation_bits(fact_set.n_facts))
    return max(1, math.ceil(bits / 2 / parameters_per_unit(method.architecture, fact_set.key_dim, fact_set.value_dim)))


def scaled_guess(previous: tuple[int, int] | None, n_facts: int) -> int | None:
    """Where a trained method's search at F = n_facts starts: the width that stored the previous
    (F, width) scaled by log2 F! (None without a previous answer: search_method's default guess)."""
    if previous is None:
        return None
    return max(1, round(previous[1] * float(permutation_bits(n_facts) / permutation_bits(previous[0]))))


def with_section_ntk(params: dict, section: dict) -> dict:
    """params with a whitening section's NTK width cap and Hermite degrees: its own cap (at d = 384
    a unit costs 6x more than at d = 64) and degrees (the whitening claim is a trend of one
    construction along alpha)."""
    return params | {"search": params["search"] | {"ntk_max_width": section["ntk_max_width"]},
                     "ntk_degrees": section["ntk_degrees"]}
