"""Fact-storing MLPs (S0): closed-form constructions, trained baselines, capacity search.

- ntk.py, encoder_decoder.py, hebbian.py: constructions, build(fact_set, size, generator, ...)
  -> (module, n_params); gd.py: the trained baseline, train(...) -> (module, n_params, info).
- methods.py: the one table of methods (builder, search strategy, architecture, label, V or U*).
- capacity.py: the smallest size at which a method stores a target fraction of the facts;
  width_search.py: the search strategies (one object per method's `search`: NTK unit prefixes,
  encoder-decoder code sizes, trained GD, doubling) and SearchSettings; configured_search.py:
  the study's searches with its config; fact_sets.py: the study's synthetic and MiniLM fact sets.
- scaling.py: bits of a fact map, the information bound, the fit W = C F (log2 F + b).
- modules.py (the dense modules and their layers), lipschitz.py (Lipschitz constants).

`size` is the hidden width h (NTK, GD), the code size m (encoder-decoder), or unused (Hebbian).
`n_params` is always sum(p.numel() for p in module.parameters()) of the dense module returned.
"""
