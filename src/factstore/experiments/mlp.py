"""Experiment steps of the fact-storing MLP study (S0): capacity scaling, anisotropy, whitening.

Rules in workflow/rules/mlp.smk call these through `python -m factstore mlp.<step>` (the MiniLM
embeddings of Goodreads titles and authors come from `embeddings.goodreads_minilm`):

- `capacity` (one job per method): the smallest parameter count W storing a target fraction of
  F random facts on the sphere, for every F, seed and target (the paper's Fig. 7).
- `anisotropy` (one job per value condition number kappa): the same search for every method on
  conditioned values, with the decodability rho(V) of each value set (the paper's Fig. 5).
- `anisotropy_regime`, `robust_regime` (one job each, every kappa): the NTK methods' and the
  encoder-decoder's kappa sweeps at the paper's d = 128, on every family of singular values of
  their section's `spectra` (rows with their `spectrum`; kappa = 1, the same value set in every
  family, searched once).
- `whitening` (one job per strength alpha): the search on the real MiniLM fact set whitened with
  strength alpha (keys and values), the transform folded back into the MLP so it reads the ORIGINAL
  keys and writes in the original embedding basis (the paper's W_alpha^-1 on the output), and the
  Lipschitz constant of that folded MLP, measured as the usability study measures it.
- `whitening_regime` (one job, every alpha): the same search at F >> d, the fact set on its top d
  principal directions (S0.whitening-capacity in the paper's regime).
- `mlp_summary.summary` (its own step module): fits W = C F (log2 F + b), the information bound,
  and every metric; the figures (factstore.plots.mlp) draw its tables.

NTK methods run once per Hermite degree of the config's `ntk_degrees` (configured_search.search_degrees,
rows with their `degree`), so the summary can compare methods through the best NTK, not a handicapped
one. Methods are the study's entries of factstore.mlp.methods.METHODS (names, builders, width-search
strategies, labels, V or U*). Where several methods run on one value set, U* is solved once and
shared; what each method emits is `Method.value_targets`. The searches, all targets of one
(method, fact set) at once, are factstore.mlp.configured_search's; the fact sets (the same for
every method and job) factstore.mlp.fact_sets'.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import torch

from factstore.device import derived_generator
from factstore.jacobians import tangent_lipschitz
from factstore.mlp.configured_search import scaled_guess, search_degrees, with_section_ntk
from factstore.mlp.fact_sets import minilm_fact_set, synthetic_fact_set, ustar_and_rho
from factstore.mlp.methods import METHODS
from factstore.mlp.modules import fold_module
from factstore.mlp.results import result_row, tidy_table
from factstore.whitening import whiten_fact_set

# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------


def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Smallest W of one method for every F = 2^log2_facts, replicate and target (spherical facts).

    params: method, seed, ntk_degrees, search, gd, capacity section (d, log2_facts, seeds, targets).
    NTK methods run once per degree of ntk_degrees (rows with their `degree`).
    Returns {"table": tidy rows, results.TABLE_COLUMNS}.
    """
    method, section = params["method"], params["capacity"]
    entry = METHODS[method]
    rows = []
    for replicate in range(section["seeds"]):
        previous = None  # (F, width) of the last F that stored, for the GD guess
        for log2_facts in sorted(section["log2_facts"]):
            n_facts = 2**log2_facts
            facts = synthetic_fact_set(params["seed"], section["d"], n_facts, 1.0, replicate)
            # rho is recorded where the method needs the U* solve anyway (it is the costly part).
            ustar, rho = ustar_and_rho(facts) if entry.uses_ustar else (None, math.nan)
            searches = search_degrees(method, facts, section["targets"],
                                      (params["seed"], "mlp-method", method, section["d"], n_facts, replicate),
                                      params, ustar=ustar, gd_guess=scaled_guess(previous, n_facts),
                                      device=context.device)
            for degree, results in searches:
                for target, result in results.items():
                    rows.append(result_row(result, facts, experiment="capacity", method=method, degree=degree,
                                           replicate=replicate, kappa=1.0, alpha=math.nan, target=target, rho=rho))
                first = results[min(results)]
                if first.width is not None:
                    previous = (n_facts, first.width)
                print(f"{method} F={n_facts} replicate {replicate}" + ("" if math.isnan(degree) else f" degree {degree:g}")
                      + ": " + ", ".join(f"t={t}: W={r.n_params} ({r.seconds:.1f} s)" for t, r in results.items()), flush=True)
    return {"table": tidy_table(rows)}


def ntk_regime(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The NTK's capacity search (`capacity`, the one-pass unit-prefix search) in the paper's
    regime, d = 128 (S0.ntk-stores): at the capacity sweep's small d the degree-2 kernel runs out
    of capacity (~d^4 / (60 ln F) facts) inside the F range, which says nothing about the paper's claim.

    params: as `capacity`, with an ntk_regime section (d, log2_facts, seeds, targets, ntk_degrees)
    in place of the capacity section. Returns {"table": rows with experiment 'ntk_regime'}.
    """
    section = params["ntk_regime"]
    searched = params | {"ntk_degrees": section["ntk_degrees"],
                         "capacity": {key: section[key] for key in ("d", "log2_facts", "seeds", "targets")}}
    return {"table": capacity(searched, inputs, context)["table"].assign(experiment="ntk_regime")}


def anisotropy(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Every method's smallest W at one value condition number kappa, with rho(V) of each set.

    params: kappa, seed, ntk_degrees, search, gd, anisotropy section (d, n_facts, ntk_facts, seeds,
    target, methods, spectrum: the family of the values' singular values, written in each row's
    `spectrum`). Every method runs at
    every F of n_facts (two or more: robustness is a claim about scaling); the one-pass
    (search.one_pass: NTK) methods also at every F of ntk_facts (cheap), which measures the U* gain
    where the plain NTK still stores, and once per NTK degree. U* and rho are solved once per
    value set and shared by the U* methods.
    """
    section, kappa = params["anisotropy"], float(params["kappa"])
    sizes = sorted(set(section["ntk_facts"]) | set(section["n_facts"]))
    rows = []
    for replicate in range(section["seeds"]):
        for n_facts in sizes:
            facts = synthetic_fact_set(params["seed"], section["d"], n_facts, kappa, replicate, section["spectrum"])
            ustar, rho = ustar_and_rho(facts)
            for method in section["methods"]:
                if n_facts not in section["n_facts"] and not METHODS[method].search.one_pass:
                    continue
                seed_parts = (params["seed"], "mlp-method", method, section["d"], n_facts, replicate, kappa)
                for degree, results in search_degrees(method, facts, [section["target"]], seed_parts, params,
                                                      ustar=ustar, device=context.device):
                    for target, result in results.items():
                        rows.append(result_row(result, facts, experiment="anisotropy", method=method, degree=degree,
                                               replicate=replicate, kappa=kappa, spectrum=section["spectrum"],
                                               alpha=math.nan, target=target, rho=rho))
                        print(f"kappa={kappa:g} F={n_facts} replicate {replicate} {method} degree {degree:g}: "
                              f"W={result.n_params}, best accuracy {result.best_accuracy:.4f} ({result.seconds:.1f} s)",
                              flush=True)
    return {"table": tidy_table(rows)}


def robust_regime(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The encoder-decoder's kappa sweep in the paper's regime, d = 128 (S0.others-robust): at the
    anisotropy sweep's d = 32 its code size m <= d caps the cost ratio it can show near 2, so the
    check could hardly fail; at d = 128 the cap sits far above. Closed-form constructions only, on
    every family of singular values of the section's `spectra` (the claim reads each family's W
    against the paper's cost law in rho(V)).

    params: as `anisotropy`, with a robust_regime section (d, n_facts, kappas, seeds, target,
    methods, spectra) in place of the anisotropy section and kappa. Returns {"table": rows with
    experiment 'robust_regime', every family and kappa}.
    """
    return _kappa_sweep("robust_regime", params, inputs, context)


def _kappa_sweep(name: str, params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """`anisotropy` at every kappa of the section params[name] (d, n_facts, kappas, seeds, target,
    methods, spectra: the families of singular values), every F for every method and family; rows
    with experiment `name` and their `spectrum`.

    kappa = 1 is the same value set in every family (spherical values, not conditioned; the keys
    and the map are the families' shared draws), so it is searched once, for the first family, and
    its rows are written again under each other family."""
    section = params[name]
    sweep = {key: section[key] for key in ("d", "n_facts", "seeds", "target", "methods")} | {"ntk_facts": []}
    tables, isotropic = [], None
    for spectrum in section["spectra"]:
        for kappa in section["kappas"]:
            if float(kappa) == 1.0 and isotropic is not None:
                tables.append(isotropic.assign(spectrum=spectrum))
                continue
            table = anisotropy(params | {"kappa": float(kappa), "anisotropy": sweep | {"spectrum": spectrum}},
                               inputs, context)["table"]
            if float(kappa) == 1.0:
                isotropic = table
            tables.append(table)
    return {"table": pd.concat(tables, ignore_index=True).assign(experiment=name)}


def anisotropy_regime(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """The NTK methods' kappa sweep in the paper's regime, d = 128 (S0.ntk-anisotropy-breaks,
    S0.ntk-ustar-gain): the anisotropy sweep runs at d = 32 so that GD's width searches fit the
    CPU budget, but the paper makes its NTK claims at d = 128; the one-pass NTK searches are cheap
    there. Every family of the section's `spectra` and every kappa in one job (~160 CPU-s for the
    geometric family at the default scale, ~80 more for linspace).

    params: as `anisotropy`, with an anisotropy_regime section (d, n_facts, kappas, seeds, target,
    methods: unit-prefix methods only, spectra) in place of the anisotropy section and kappa.
    Returns {"table": rows with experiment 'anisotropy_regime', every family and kappa}.
    """
    return _kappa_sweep("anisotropy_regime", params, inputs, context)


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Capacity and Lipschitz constant at one whitening strength alpha on the MiniLM fact set.

    inputs: embeddings (.npz of the `embeddings` step). params: alpha, seed, search, gd,
    whitening section (seeds, target, methods, lipschitz_samples, ntk_max_width, ntk_degrees). Keys and
    values are whitened with the same alpha (ZCA on the uncentred second moment, scale kept;
    factstore.whitening) and each MLP is built, and its capacity measured, on the whitened set.
    For its Lipschitz constant it is folded back with the usability study's (the paper's) fold: it
    reads the ORIGINAL keys (W_alpha^T on the input) and writes in the original embedding basis
    (W_alpha^-1 on the output, so an output near a whitened value lands near the original one);
    the constant is factstore.jacobians.tangent_lipschitz on the original unit keys (the Jacobian
    on the sphere's tangent space, max over lipschitz_samples keys, over the RMS output norm), the
    estimate of S0.lipschitz-threshold. Fact map: each book to its own author (the real one-to-one
    map). The data are fixed, so `seeds` replicates redraw only the MLPs' randomness (and the
    sampled keys).
    """
    section, alpha = params["whitening"], float(params["alpha"])
    original = minilm_fact_set(inputs["embeddings"], params["seed"])
    params = with_section_ntk(params, section)
    facts, key_transform, value_transform = whiten_fact_set(original, alpha, alpha)
    ustar, rho = ustar_and_rho(facts)
    rows = []
    for replicate in range(section["seeds"]):  # the fact set is the data; replicates redraw the MLPs
        for method in section["methods"]:
            seed_parts = (params["seed"], "mlp-method", method, "whitening", facts.n_facts, alpha, replicate)
            for degree, results in search_degrees(method, facts, [section["target"]], seed_parts, params, ustar=ustar,
                                                  build_modules=True, device=context.device):
                for target, result in results.items():
                    row = result_row(result, facts, experiment="whitening", method=method, degree=degree, replicate=replicate,
                                     kappa=math.nan, alpha=alpha, target=target, rho=rho)
                    if result.module is not None:
                        folded = fold_module(result.module, key_transform, torch.linalg.inv(value_transform))
                        lipschitz, relative, rms = tangent_lipschitz(
                            folded, original.keys, section["lipschitz_samples"],
                            derived_generator(params["seed"], "mlp-lipschitz", alpha, replicate))
                        row |= {"lipschitz": lipschitz, "lipschitz_relative": relative, "output_rms": rms}
                    rows.append(row)
                    print(f"alpha={alpha:g} replicate {replicate} {method}: W={result.n_params}, Lip={row['lipschitz']:.4g}, "
                          f"Lip/rms={row['lipschitz_relative']:.4g} ({result.seconds:.1f} s)", flush=True)
    return {"table": tidy_table(rows)}


def whitening_regime(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Every method's capacity at every whitening strength alpha at F >> d (S0.whitening-capacity
    in the paper's regime): at the embeddings' d = 384 the default sample has F / d = 0.67, where GD
    stores with 3-9 units and the trend says little about the constructions; here the fact set is
    projected onto its top d principal directions first (whitening.principal_projection, the
    usability study's projection), then whitened as in `whitening`. No Lipschitz constants (the
    `whitening` sweep measures them). Where the NTK stores no alpha within its width cap, the
    summary reads its accuracy within the cap: a fixed width budget.

    inputs: embeddings. params: seed, search, gd, whitening_regime section (d, alphas, seeds,
    target, methods, ntk_max_width, ntk_degrees). Returns {"table": rows with experiment
    'whitening_regime', every alpha}.
    """
    section = params["whitening_regime"]
    original = minilm_fact_set(inputs["embeddings"], params["seed"], section["d"])
    params = with_section_ntk(params, section)
    rows = []
    for alpha in section["alphas"]:
        facts, _, _ = whiten_fact_set(original, float(alpha), float(alpha))
        ustar, rho = ustar_and_rho(facts)
        for replicate in range(section["seeds"]):
            for method in section["methods"]:
                seed_parts = (params["seed"], "mlp-method", method, "whitening_regime", facts.n_facts, section["d"],
                              float(alpha), replicate)
                for degree, results in search_degrees(method, facts, [section["target"]], seed_parts, params, ustar=ustar,
                                                      device=context.device):
                    for target, result in results.items():
                        rows.append(result_row(result, facts, experiment="whitening_regime", method=method, degree=degree,
                                               replicate=replicate, kappa=math.nan, alpha=float(alpha), target=target, rho=rho))
                        print(f"alpha={alpha:g} replicate {replicate} {method}: W={result.n_params}, best accuracy "
                              f"{result.best_accuracy:.4f} ({result.seconds:.1f} s)", flush=True)
    return {"table": tidy_table(rows)}
