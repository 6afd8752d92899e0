"""The ways of storing facts in an MLP (S0): one table, one entry per method.

A method's name is the one used everywhere -- in the config, tables, figures and metrics -- and
its entry says all there is to know about it: the function that builds (or trains) one MLP, how
the capacity search finds its smallest size, the architecture whose parameters are counted,
its label in figures, and whether it emits the margin-optimal targets U* or the values V.

The first seven entries are the study's methods, in the order of its figures (colours and
markers follow this order); the others are library variants used by tests and benchmarks:
  ntk, ntk_ustar      NTK MLP (Algorithm 5) emitting V or U*
  ed_gated, ed_plain  encoder-decoder MLP, gated or non-gated encoder, codes of U*
  ed_gated_v          gated encoder-decoder with codes of V itself (shows why U* matters)
  gd_gated, gd_plain  gradient descent, gated (ReLU gate) or plain ReLU MLP
  ed_plain_v, ntk_finite_difference, gd_gated_linear: non-gated encoder-decoder with codes of V,
                      the non-gated NTK MLP (finite-difference unit pairs), GD with a linear gate
  gd_swish_mse        GD, gated swish MLP trained on the MSE to the values: the fact expert of
                      the follow-up paper's editing experiment (the editing study's)
The encoder-decoder named plainly is the U* variant: the paper's construction works "for all but
a measure-zero set of output embeddings", which codes of V cannot (with anisotropic values a
value need not be the best match of itself, and then no code decodes it), and its parameter
count is predicted from rho(V), the margin U* attains.

Search strategies (width_search.py), one object per entry: UnitPrefixSearch (NTK: one pass
over units, every width a prefix of the wider ones), CodeSizeSearch (encoder-decoder: the code
size checked on the codes), TrainedSearch (bracketing and bisection over trained MLPs),
DoublingSearch (any other builder: one build per probe). What differs between kinds of method
(how one MLP is built, whether its outputs are learned) is asked of the strategy, never of its name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from factstore.facts import FactSet, per_value_targets
from factstore.geometry import margin_optimal_targets
from factstore.mlp import encoder_decoder, gd, ntk
from factstore.mlp.width_search import (
    CodeSizeSearch, DoublingSearch, TrainedSearch, UnitPrefixSearch, WidthSearchStrategy,
)

Architecture = Literal["gated", "plain"]


@dataclass(frozen=True)
class Method:
    """One way of storing facts in an MLP.

    name: the method's name everywhere (config, tables, figures, metrics).
    label: its legend label in figures.
    build: makes one MLP of a given size. Constructions: build(fact_set, size, generator,
        value_targets=..., **options) -> (module, n_params); trained methods (TrainedSearch):
        train(fact_set, size, generator, architecture=..., **options) -> (module, n_params, info).
        `size` is the hidden width (NTK, GD) or the code size (encoder-decoder).
    search: the width-search strategy (width_search.py): how the smallest storing size is found,
        and how one MLP of this kind is built (`make`, `build_at` delegate to it).
    architecture: 'gated' or 'plain', the MLP whose width is searched (the encoder for an
        encoder-decoder); it sets parameters per hidden unit (modules.parameters_per_unit) and
        is what a trained method trains.
    uses_ustar: emits the margin-optimal targets U* instead of the values V (constructions).
    options: fixed keyword arguments of `build` (e.g. the activation of a trained MLP).
    """

    name: str
    label: str
    build: Callable[..., tuple]
    search: WidthSearchStrategy
    architecture: Architecture
    uses_ustar: bool = False
    options: Mapping[str, object] = field(default_factory=dict)

    def value_targets(self, fact_set: FactSet, ustar: Tensor | None = None) -> Tensor:
        """(n_values, d_out) float64: the vector this method emits for each value, U* or V.

        ustar: U* of fact_set.values if the caller has solved it already (one solve shared by
        every method on the same value set); solved here when needed and not given. The one
        place where "V or U*" is decided. Trained methods learn their outputs (against V).
        """
        if not self.uses_ustar:
            return per_value_targets(fact_set)
        return per_value_targets(fact_set, margin_optimal_targets(fact_set.values)[0] if ustar is None else ustar)

    def make(
        self, fact_set: FactSet, size: int, generator: torch.Generator, value_targets: Tensor | None = None,
        **options,
    ) -> tuple:
        """One MLP of this method at `size` (the return value of `build`, see the class docstring).

        value_targets: what a construction emits per value (default: `self.value_targets`);
        unused by trained methods. options: further keyword arguments of `build`.
        """
        return self.search.make(self, fact_set, size, generator, value_targets, **options)

    def build_at(
        self, fact_set: FactSet, size: int, generator: torch.Generator, *, protocol=None, degree: int = 1,
        value_targets: Tensor | None = None, device: torch.device | str = "cpu", min_loss: float | None = None,
    ) -> tuple:
        """(module, n_params): one MLP of this method at `size`, whatever kind of method it is.

        A trained method trains with `protocol` (gd.Protocol) on `device` (past full accuracy
        down to a loss of `min_loss` when given); the NTK builds with Hermite `degree`; a
        construction emits `value_targets` (default: `self.value_targets`).
        The one place a caller that needs "an MLP of method m at size s" goes through.
        """
        return self.search.build(self, fact_set, size, generator, protocol=protocol, degree=degree,
                                 value_targets=value_targets, device=device, min_loss=min_loss)


METHODS: dict[str, Method] = {method.name: method for method in (
    # The study's methods, in the order of its figures.
    Method("ntk", "NTK", ntk.build, UnitPrefixSearch(), "gated"),
    Method("ntk_ustar", "NTK + U*", ntk.build, UnitPrefixSearch(), "gated", uses_ustar=True),
    Method("ed_gated", "encoder-decoder, gated", encoder_decoder.build, CodeSizeSearch(), "gated", uses_ustar=True),
    Method("ed_gated_v", "encoder-decoder, gated, codes of V", encoder_decoder.build, CodeSizeSearch(), "gated"),
    Method("ed_plain", "encoder-decoder, non-gated", encoder_decoder.build_plain, CodeSizeSearch(), "plain", uses_ustar=True),
    Method("gd_gated", "GD, gated", gd.train, TrainedSearch(), "gated", options={"activation": "relu"}),
    Method("gd_plain", "GD, plain", gd.train, TrainedSearch(), "plain", options={"activation": "relu"}),
    # Library variants (tests, benchmarks).
    Method("ed_plain_v", "encoder-decoder, non-gated, codes of V", encoder_decoder.build_plain, CodeSizeSearch(), "plain"),
    Method("ntk_finite_difference", "NTK, non-gated (finite differences)", ntk.build_finite_difference, DoublingSearch(),
           "plain"),
    Method("gd_gated_linear", "GD, gated, linear gate", gd.train, TrainedSearch(), "gated", options={"activation": "identity"}),
    Method("gd_swish_mse", "GD, gated swish, MSE", gd.train, TrainedSearch(), "gated",
           options={"activation": "silu", "loss": "mse"}),
)}


def get_method(name: str) -> Method:
    """The entry of METHODS called `name`; a ValueError naming the known methods otherwise."""
    if name not in METHODS:
        raise ValueError(f"unknown method '{name}': use one of {sorted(METHODS)}")
    return METHODS[name]
