"""Fact-storing MLPs (SPEC S0): closed-form constructions, trained baselines, capacity search.

Everything that stores facts has one interface:

- constructions, in METHODS: build(fact_set, size, generator, **options) -> (module, n_params)
- trained MLPs, in TRAINERS: train(fact_set, size, generator, **options) -> (module, n_params, info)

`size` is the hidden width h (NTK, GD), the code size m (encoder-decoder), or unused (Hebbian).
`n_params` is always sum(p.numel() for p in module.parameters()) of the dense module returned.
`capacity.smallest_width(method, ...)` searches the smallest size storing a target fraction.
"""

from __future__ import annotations

from functools import partial

from factstore.mlp import encoder_decoder, gd, hebbian, ntk

METHODS = {
    "ntk": ntk.build,
    "ntk_ustar": partial(ntk.build, margin_optimal=True),
    "ntk_finite_difference": ntk.build_finite_difference,
    "encoder_decoder": encoder_decoder.build,
    "encoder_decoder_ustar": partial(encoder_decoder.build, margin_optimal=True),
    "encoder_decoder_plain": encoder_decoder.build_plain,
    "hebbian": hebbian.build,
}

TRAINERS = {
    "gd_gated": partial(gd.train, architecture="gated", activation="relu"),
    "gd_gated_linear": partial(gd.train, architecture="gated", activation="identity"),
    "gd_plain": partial(gd.train, architecture="plain", activation="relu"),
}

__all__ = ["METHODS", "TRAINERS"]
