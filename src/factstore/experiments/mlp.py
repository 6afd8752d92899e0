"""Experiment steps of the fact-storing MLP study (SPEC S0): capacity scaling, anisotropy, whitening.

Rules in workflow/rules/mlp.smk call these through `python -m factstore mlp.<step>`:

- `embeddings`: MiniLM embeddings of a seeded sample of Goodreads book titles (keys) and their
  authors (values), computed once and stored as an .npz that later rules read.
- `capacity` (one job per method): the smallest parameter count W storing a target fraction of
  F random facts on the sphere, for every F, seed and target (the seed's Fig. 7).
- `anisotropy` (one job per value condition number kappa): the same search for every method on
  conditioned values, with the decodability rho(V) of each value set (the seed's Fig. 5).
- `whitening` (one job per strength alpha): the search on the real MiniLM fact set whitened with
  strength alpha (keys and values), the transform folded back into the MLP so it reads and writes
  the ORIGINAL basis, and the Lipschitz constant of that folded MLP.
- `summary`: fits W = C F (log2 F + b), the information bound, and every metric that
  config/claims.yaml checks; figure steps draw the tables with factstore.plots.mlp.

Methods (the names used in tables, figures and metrics; `METHOD_SPECS`):
  ntk, ntk_ustar      NTK MLP (Algorithm 5, Hermite degree from the config) emitting V or U*
  ed_gated, ed_plain  encoder-decoder MLP, gated or non-gated encoder, codes of U* (the paper's
                      construction decodes margin-optimal targets; see below)
  ed_gated_v          gated encoder-decoder with codes of V itself (shows why U* matters)
  gd_gated, gd_plain  gradient descent, gated (ReLU gate) or plain ReLU MLP
The encoder-decoder named plainly is the U* variant: the paper's construction works "for all but
a measure-zero set of output embeddings", which codes of V cannot (with anisotropic values a
value need not be the best match of itself, and then no code decodes it), and its parameter
count is predicted from rho(V), the margin U* attains.

Searches: capacity.smallest_widths, all targets of one (method, fact set) at once. Every search
assumes accuracy grows with width and returns the smallest width it saw pass with a narrower one
failing; `evaluations` keep every probe. NTK: one pass over units; encoder-decoder: code sizes
checked on the codes; GD: bracketing from a guess (the 2-bits-per-parameter width, or the previous
F's width scaled by log2 F!), bisection to a relative resolution, warm starts, targets sharing the
trained models. A search that fails at its width cap leaves width / n_params empty and records the
best accuracy reached and the cap's parameter count (`params_at_cap`, a lower bound on W).

Random streams come from `derived_generator(seed, stream, ...)`: the fact set of (d, F, kappa,
replicate) is the same for every method and job, and a job's numbers do not depend on which other
jobs ran.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.facts import FactSet, make_fact_set, real_fact_set
from factstore.geometry import margin_optimal_targets
from factstore.io import concat_tables, read_table
from factstore.mlp import TRAINERS, gd
from factstore.mlp.capacity import WidthSearch, smallest_widths
from factstore.mlp.lipschitz import lipschitz_estimate
from factstore.mlp.modules import input_layers, module_outputs, output_layer, parameters_per_unit
from factstore.whitening import fold_into_mlp, fold_value_transform, whiten_fact_set


@dataclass(frozen=True)
class MethodSpec:
    """How a study method maps onto the library: family ('ntk' | 'ed' | 'gd'), library name, options."""

    family: str
    library_name: str
    label: str
    uses_ustar: bool = False
    options: dict = field(default_factory=dict)


METHOD_SPECS = {
    "ntk": MethodSpec("ntk", "ntk", "NTK"),
    "ntk_ustar": MethodSpec("ntk", "ntk_ustar", "NTK + U*", uses_ustar=True),
    "ed_gated": MethodSpec("ed", "encoder_decoder", "encoder-decoder, gated", True, {"margin_optimal": True}),
    "ed_gated_v": MethodSpec("ed", "encoder_decoder", "encoder-decoder, gated, codes of V"),
    "ed_plain": MethodSpec("ed", "encoder_decoder_plain", "encoder-decoder, non-gated", True, {"margin_optimal": True}),
    "gd_gated": MethodSpec("gd", "gd_gated", "GD, gated"),
    "gd_plain": MethodSpec("gd", "gd_plain", "GD, plain"),
}

CONSTRUCTIONS = [name for name, spec in METHOD_SPECS.items() if spec.family != "gd"]

TABLE_COLUMNS = [
    "experiment", "method", "d", "F", "replicate", "kappa", "alpha", "target", "width", "n_params",
    "accuracy", "best_accuracy", "stored", "params_at_cap", "probes", "steps", "seconds", "rho",
    "bits_per_parameter", "facts_per_parameter", "lipschitz", "lipschitz_relative", "output_rms",
]


# ---------------------------------------------------------------------------------------------
# Information content and the bound
# ---------------------------------------------------------------------------------------------


def permutation_bits(n_facts: int | np.ndarray) -> np.ndarray:
    """log2(F!): the bits that single out one permutation fact map among all F! (lgamma, exact)."""
    n = np.asarray(n_facts, dtype=float)
    return np.vectorize(lambda f: math.lgamma(f + 1) / math.log(2))(n)


def information_bound(n_facts, bits_per_parameter: float) -> np.ndarray:
    """Counting bound W >= log2(F!) / b: parameters needed to hold a permutation of F values if
    each parameter holds at most b bits (the assumption; b = 2 is the ceiling measured for trained
    networks, Allen-Zhu & Li 2024, and Gardner's 2 bits per weight of a perceptron)."""
    return permutation_bits(n_facts) / bits_per_parameter


def spec_bits(n_facts) -> np.ndarray:
    """F log2 F: the bits of F F-valued facts as SPEC counts them (a random map; bits per parameter)."""
    n = np.asarray(n_facts, dtype=float)
    return n * np.log2(n)


# ---------------------------------------------------------------------------------------------
# Fits
# ---------------------------------------------------------------------------------------------


def fit_f_log_f(n_facts, n_params) -> dict[str, float]:
    """Fit W = C F (log2 F + b): W / F = C log2 F + C b is linear in log2 F (least squares).

    Returns C, b, r2 (of W / F against log2 F) and exponent (the log-log slope of W against F).
    NaN where fewer than two distinct F are given.
    """
    f = np.asarray(n_facts, dtype=float)
    w = np.asarray(n_params, dtype=float)
    keep = np.isfinite(f) & np.isfinite(w) & (f > 0) & (w > 0)
    f, w = f[keep], w[keep]
    nan = {"C": math.nan, "b": math.nan, "r2": math.nan, "exponent": math.nan}
    if len(np.unique(f)) < 2:
        return nan
    x, y = np.log2(f), w / f
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else 1.0
    exponent = np.polyfit(np.log(f), np.log(w), 1)[0]
    return {"C": float(slope), "b": float(intercept / slope) if slope != 0 else math.nan,
            "r2": float(r2), "exponent": float(exponent)}


def fitted_params(n_facts, fit: dict[str, float]) -> np.ndarray:
    """W = C F (log2 F + b) at the given F."""
    f = np.asarray(n_facts, dtype=float)
    return fit["C"] * f * (np.log2(f) + fit["b"])


# ---------------------------------------------------------------------------------------------
# Searches
# ---------------------------------------------------------------------------------------------


def search_method(
    method: str, fact_set: FactSet, targets: list[float], seed_parts: tuple, params: dict,
    value_targets: Tensor | None = None, gd_guess: int | None = None, build_modules: bool = False,
    device: torch.device | str = "cpu",
) -> dict[float, WidthSearch]:
    """{target: capacity.smallest_widths' result} for one study method, with the study's config.

    params: the study's config section (search caps, GD protocol, NTK degree). value_targets: U*,
    solved once per value set by the caller and shared by the U* methods. gd_guess: where the GD
    bracketing starts (default: the 2-bits-per-parameter width). build_modules: also build the
    NTK module at the width found (the other methods always return theirs). device: where GD
    trains (the step's device: CUDA when present); the constructions run on the CPU, whose
    float64 solves and one-pass unit sums are not the bottleneck.
    """
    spec = METHOD_SPECS[method]
    search = params["search"]
    options = dict(spec.options)
    if spec.uses_ustar:
        options["value_targets"] = value_targets
    generator = derived_generator(*seed_parts)
    if spec.family == "ntk":
        return smallest_widths(spec.library_name, fact_set, targets, generator, high=search["ntk_max_width"],
                               build_modules=build_modules, degree=params["ntk_degree"], **options)
    if spec.family == "ed":
        return smallest_widths(spec.library_name, fact_set, targets, generator, **options)
    protocol = gd.Protocol(lr=params["gd"]["learning_rate"], max_steps=params["gd"]["max_steps"],
                           patience=params["gd"]["patience"], name="config")
    return smallest_widths(spec.library_name, fact_set, targets, generator, high=search["gd_max_width"],
                           guess=gd_guess or default_gd_guess(spec, fact_set), growth=search["growth"],
                           resolution=search["resolution"], protocol=protocol, device=device, **options)


def default_gd_guess(spec: MethodSpec, fact_set: FactSet) -> int:
    """The width at which the MLP would hold log2(F!) bits at 2 bits per parameter."""
    bits = float(permutation_bits(fact_set.n_facts))
    architecture = TRAINERS[spec.library_name].keywords["architecture"]
    return max(1, math.ceil(bits / 2 / parameters_per_unit(architecture, fact_set.key_dim, fact_set.value_dim)))


# ---------------------------------------------------------------------------------------------
# Fact sets, rows, folding, Lipschitz
# ---------------------------------------------------------------------------------------------


def synthetic_fact_set(seed: int, dim: int, n_facts: int, kappa: float, replicate: int) -> FactSet:
    """Spherical keys; spherical (kappa = 1) or conditioned values; a random permutation map.

    The same (seed, d, F, kappa, replicate) gives the same set in every job and experiment.
    """
    return make_fact_set(n_facts, dim, derived_generator(seed, "mlp-facts", dim, n_facts, float(kappa), replicate),
                         value_condition_number=float(kappa))


def result_row(result: WidthSearch, fact_set: FactSet, **fields) -> dict:
    """One tidy row of a search result (fields: experiment, method, F, replicate, kappa, ...)."""
    stored = result.width is not None
    n_params = result.n_params if stored else math.nan
    n_facts = fact_set.n_facts
    return {
        "d": fact_set.key_dim, "F": n_facts, "width": result.width if stored else math.nan,
        "n_params": n_params, "accuracy": result.accuracy if stored else math.nan,
        "best_accuracy": result.best_accuracy, "stored": stored,
        "params_at_cap": result.params_at_cap if result.params_at_cap is not None else math.nan,
        "probes": len(result.evaluations), "steps": result.steps, "seconds": result.seconds,
        "bits_per_parameter": float(spec_bits(n_facts)) / n_params if stored else math.nan,
        "facts_per_parameter": n_facts / n_params if stored else 0.0,
        "lipschitz": math.nan, "lipschitz_relative": math.nan, "output_rms": math.nan,
    } | fields


def _tidy(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    for column in TABLE_COLUMNS:
        if column not in table:
            table[column] = math.nan
    return table[TABLE_COLUMNS]


def fold_module(module: nn.Module, key_transform: Tensor, value_transform: Tensor) -> nn.Module:
    """A copy of an MLP built on whitened keys and values that reads and writes the ORIGINAL basis.

    Every linear map reading the input gets W <- W W_k^T, the map writing the output W <- W_v W
    (and its bias b <- W_v b); see whitening.fold_into_mlp. Handles GatedMLP, PlainMLP and
    EncoderDecoderMLP (its encoder reads the input, its decoder writes the output).
    """
    import copy

    folded = copy.deepcopy(module)
    inputs, output = input_layers(folded), output_layer(folded)
    dtype = output.weight.dtype
    with torch.no_grad():
        first, last = fold_into_mlp([layer.weight for layer in inputs], output.weight,
                                    key_transform.to(dtype), value_transform.to(dtype))
        for layer, weight in zip(inputs, first, strict=True):
            layer.weight.copy_(weight)
        output.weight.copy_(last)
        if output.bias is not None:
            output.bias.copy_(fold_value_transform(output.bias[:, None], value_transform.to(dtype))[:, 0])
    return folded


def lipschitz_constants(module: nn.Module, keys: Tensor, n_samples: int, generator: torch.Generator,
                        chunk_size: int = 4) -> tuple[float, float, float]:
    """(Lip, Lip / RMS output norm, RMS output norm) over `n_samples` sampled keys.

    Lip = max_i ||J_g(k_i)||_2 (SPEC: the Jacobian's spectral norm at sampled keys; the library's
    lipschitz.lipschitz_estimate, in chunks of rows to bound memory at large widths). Decoding does
    not depend on the output scale, so Lip / RMS_i ||g(k_i)|| (over all keys) is the scale-free
    version that can be compared across methods.
    """
    lipschitz = lipschitz_estimate(module, keys, n_samples, generator, chunk_size)
    rms = float(module_outputs(module, keys).norm(dim=1).pow(2).mean().sqrt())
    return lipschitz, lipschitz / rms if rms > 0 else math.nan, rms


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------


def embeddings(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """MiniLM embeddings of a seeded sample of n_facts Goodreads facts: keys = titles, values = authors.

    inputs: facts (data/processed/goodreads_facts.csv, columns book, author). params: seed,
    n_facts, batch_size. Returns {"embeddings": bytes of an .npz} with keys (n, 384) float32,
    values (n, 384) float32, rows (n,) row numbers in the facts table, books, authors (str).
    Row i of keys and of values is one fact (book i -> author i).
    """
    from factstore.embeddings import embed_texts

    table = pd.read_csv(inputs["facts"], keep_default_na=False)
    n_facts = min(params["n_facts"], len(table))
    rows = np.sort(np.random.default_rng(params["seed"]).choice(len(table), size=n_facts, replace=False))
    sample = table.iloc[rows]
    books, authors = sample["book"].astype(str).tolist(), sample["author"].astype(str).tolist()
    keys = embed_texts(books, batch_size=params["batch_size"])
    values = embed_texts(authors, batch_size=params["batch_size"])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, keys=keys, values=values, rows=rows.astype(np.int64),
                        books=np.array(books, dtype=str), authors=np.array(authors, dtype=str))
    return {"embeddings": buffer.getvalue()}


def load_embeddings(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Smallest W of one method for every F = 2^log2_facts, replicate and target (spherical facts).

    params: method, seed, ntk_degree, search, gd, capacity section (d, log2_facts, seeds, targets).
    Returns {"table": tidy rows, TABLE_COLUMNS}.
    """
    method, section = params["method"], params["capacity"]
    spec = METHOD_SPECS[method]
    rows = []
    for replicate in range(section["seeds"]):
        previous = None  # (F, width) of the last F that stored, for the GD guess
        for log2_facts in sorted(section["log2_facts"]):
            n_facts = 2**log2_facts
            facts = synthetic_fact_set(params["seed"], section["d"], n_facts, 1.0, replicate)
            value_targets, rho = _ustar_if_needed(spec, facts)
            guess = None
            if spec.family == "gd" and previous is not None:
                scale = float(permutation_bits(n_facts) / permutation_bits(previous[0]))
                guess = max(1, round(previous[1] * scale))
            results = search_method(method, facts, section["targets"],
                                    (params["seed"], "mlp-method", method, section["d"], n_facts, replicate),
                                    params, value_targets, guess, device=context.device)
            for target, result in results.items():
                rows.append(result_row(result, facts, experiment="capacity", method=method, replicate=replicate,
                                       kappa=1.0, alpha=math.nan, target=target, rho=rho))
            first = results[min(results)]
            if first.width is not None:
                previous = (n_facts, first.width)
            print(f"{method} F={n_facts} replicate {replicate}: "
                  + ", ".join(f"t={t}: W={r.n_params} ({r.seconds:.1f} s)" for t, r in results.items()), flush=True)
    return {"table": _tidy(rows)}


def _ustar_if_needed(spec: MethodSpec, facts: FactSet) -> tuple[Tensor | None, float]:
    if not spec.uses_ustar:
        return None, math.nan
    targets, margins = margin_optimal_targets(facts.values)
    return targets, float(margins.min())


def anisotropy(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Every method's smallest W at one value condition number kappa, with rho(V) of each set.

    params: kappa, seed, ntk_degree, search, gd, anisotropy section (d, n_facts, ntk_facts, seeds,
    target, methods). Every method runs at F = n_facts; the NTK methods also at every F of
    ntk_facts (cheap: one pass over units), which measures the U* gain where the plain NTK still
    stores. U* and rho are solved once per value set and shared by the U* methods.
    """
    section, kappa = params["anisotropy"], float(params["kappa"])
    sizes = sorted(set(section["ntk_facts"]) | {section["n_facts"]})
    rows = []
    for replicate in range(section["seeds"]):
        for n_facts in sizes:
            facts = synthetic_fact_set(params["seed"], section["d"], n_facts, kappa, replicate)
            value_targets, margins = margin_optimal_targets(facts.values)
            rho = float(margins.min())
            for method in section["methods"]:
                if n_facts != section["n_facts"] and METHOD_SPECS[method].family != "ntk":
                    continue
                seed_parts = (params["seed"], "mlp-method", method, section["d"], n_facts, replicate, kappa)
                results = search_method(method, facts, [section["target"]], seed_parts, params, value_targets,
                                        device=context.device)
                for target, result in results.items():
                    rows.append(result_row(result, facts, experiment="anisotropy", method=method, replicate=replicate,
                                           kappa=kappa, alpha=math.nan, target=target, rho=rho))
                    print(f"kappa={kappa:g} F={n_facts} replicate {replicate} {method}: W={result.n_params}, best "
                          f"accuracy {result.best_accuracy:.4f} ({result.seconds:.1f} s)", flush=True)
    return {"table": _tidy(rows)}


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Capacity and Lipschitz constant at one whitening strength alpha on the MiniLM fact set.

    inputs: embeddings (.npz of the `embeddings` step). params: alpha, seed, ntk_degree, search,
    gd, whitening section (seeds, target, methods, lipschitz_samples, ntk_max_width). Keys and values are whitened with
    the same alpha (ZCA on the uncentred second moment, scale kept; whitening.py), each MLP is
    built on the whitened set, folded back so it reads original keys and writes for the original
    values, checked to decode exactly the same facts there, and its Lipschitz constant measured
    on the ORIGINAL keys. Fact map: each book to its own author (the real one-to-one map). The
    data are fixed, so `seeds` replicates redraw only the MLPs' randomness (and the sampled keys).
    """
    section, alpha = params["whitening"], float(params["alpha"])
    archive = load_embeddings(inputs["embeddings"])
    original = real_fact_set(archive["keys"], archive["values"], derived_generator(params["seed"], "mlp-real"),
                             fact_map="aligned", name="goodreads-minilm")
    # The NTK's width cap of this experiment: at d = 384 a unit costs 6x more than at d = 64.
    params = params | {"search": params["search"] | {"ntk_max_width": section["ntk_max_width"]}}
    facts, key_transform, value_transform = whiten_fact_set(original, alpha, alpha)
    value_targets, margins = margin_optimal_targets(facts.values)
    rho = float(margins.min())
    rows = []
    for replicate in range(section["seeds"]):  # the fact set is the data; replicates redraw the MLPs
        for method in section["methods"]:
            seed_parts = (params["seed"], "mlp-method", method, "whitening", facts.n_facts, alpha, replicate)
            results = search_method(method, facts, [section["target"]], seed_parts, params, value_targets,
                                    build_modules=True, device=context.device)
            for target, result in results.items():
                row = result_row(result, facts, experiment="whitening", method=method, replicate=replicate,
                                 kappa=math.nan, alpha=alpha, target=target, rho=rho)
                if result.module is not None:
                    folded = fold_module(result.module, key_transform, value_transform)
                    if not torch.equal(_stored(result.module, facts), _stored(folded, original)):
                        raise RuntimeError(f"{method}: the folded MLP decodes other facts than the whitened one")
                    lipschitz, relative, rms = lipschitz_constants(
                        folded, original.keys, section["lipschitz_samples"],
                        derived_generator(params["seed"], "mlp-lipschitz", alpha, replicate))
                    row |= {"lipschitz": lipschitz, "lipschitz_relative": relative, "output_rms": rms}
                rows.append(row)
                print(f"alpha={alpha:g} replicate {replicate} {method}: W={result.n_params}, Lip={row['lipschitz']:.4g}, "
                      f"Lip/rms={row['lipschitz_relative']:.4g} ({result.seconds:.1f} s)", flush=True)
    return {"table": _tidy(rows)}


def _stored(module: nn.Module, facts: FactSet) -> Tensor:
    from factstore.facts import stored_mask

    return stored_mask(module_outputs(module, facts.keys), facts.values, facts.fact_map)


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------


def spearman(x, y) -> float:
    """Spearman's rank correlation; NaN (without a warning) when either input is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def seed_means(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean W over replicates per group; stored only if every replicate stored (else W = NaN)."""
    grouped = table.groupby(keys, dropna=False)
    out = grouped.agg(n_params=("n_params", "mean"), stored=("stored", "all"), replicates=("replicate", "nunique"),
                      best_accuracy=("best_accuracy", "mean"), params_at_cap=("params_at_cap", "max"),
                      rho=("rho", "mean"), lipschitz=("lipschitz", "mean"),
                      lipschitz_relative=("lipschitz_relative", "mean"),
                      facts_per_parameter=("facts_per_parameter", "mean")).reset_index()
    out.loc[~out.stored, "n_params"] = math.nan
    return out


def fits_table(capacity_table: pd.DataFrame) -> pd.DataFrame:
    """One fit of W = C F (log2 F + b) per (method, target) over the seed-mean W of stored F."""
    rows = []
    means = seed_means(capacity_table, ["method", "target", "F"])
    for (method, target), group in means.groupby(["method", "target"]):
        stored = group[group.stored]
        fit = fit_f_log_f(stored.F, stored.n_params)
        rows.append({"method": method, "target": target, "n_points": len(stored), **fit})
    return pd.DataFrame(rows, columns=["method", "target", "n_points", "C", "b", "r2", "exponent"])


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Combined tables, fits and the metrics config/claims.yaml checks.

    inputs: capacity_<method>, anisotropy_k<kappa>, whitening_a<alpha> tables. params:
    bits_per_parameter_assumed, main_target (the seed's 99% criterion), ntk_degree, search,
    anisotropy_facts (the F every method runs at in the anisotropy sweep).
    Returns {"results": every row, "fits": per (method, target), "metrics": metric, value, detail}.
    """
    capacity_table = concat_tables(inputs, "capacity_", _tidy([]))
    anisotropy_table = concat_tables(inputs, "anisotropy_", _tidy([]))
    whitening_table = concat_tables(inputs, "whitening_", _tidy([]))
    results = pd.concat([capacity_table, anisotropy_table, whitening_table], ignore_index=True)
    fits = fits_table(capacity_table)
    metrics: list[dict] = []

    def metric(name: str, value: float, detail: str = "") -> None:
        metrics.append({"metric": name, "value": float(value), "detail": detail})

    bits_assumed = params["bits_per_parameter_assumed"]
    main_target = params["main_target"]
    _capacity_metrics(capacity_table, fits, main_target, params, metric)
    # Information bound over every measured count (all experiments).
    measured = results[results.stored & results.n_params.notna()]
    if len(measured):
        ratio = measured.n_params / information_bound(measured.F.to_numpy(), bits_assumed)
        worst = measured.loc[ratio.idxmin()]
        metric("info_bound_min_ratio", ratio.min(),
               f"min W / (log2(F!) / {bits_assumed:g}) over {len(measured)} measured counts; worst: {worst.method}, "
               f"{worst.experiment}, F = {worst.F}, target {worst.target:g} ({worst.bits_per_parameter:.3g} bits/param as F log2 F / W)")
        metric("max_bits_per_parameter", measured.bits_per_parameter.max(),
               f"max F log2 F / W over all measured counts ({worst.method} is the extreme of the bound ratio)")
    _anisotropy_metrics(anisotropy_table, params["anisotropy_facts"], metric)
    _whitening_metrics(whitening_table, metric)
    return {"results": results, "fits": fits, "metrics": pd.DataFrame(metrics, columns=["metric", "value", "detail"])}


def _capacity_metrics(table: pd.DataFrame, fits: pd.DataFrame, main_target: float, params: dict, metric) -> None:
    if table.empty:
        return
    means = seed_means(table, ["method", "target", "F"])
    largest_f = int(table.F.max())
    detail = f"d = {int(table.d.iloc[0])}, spherical facts, mean over {table.replicate.nunique()} seeds"
    for row in fits.itertuples():
        metric(f"fit_C_{row.method}_t{row.target:g}", row.C, f"W = C F (log2 F + b), {row.n_points} F values, {detail}")
        metric(f"fit_b_{row.method}_t{row.target:g}", row.b, f"r2 of W/F vs log2 F = {row.r2:.3g}")
        metric(f"exponent_{row.method}_t{row.target:g}", row.exponent, "log-log slope of W against F")
    at_largest = means[(means.F == largest_f) & (means.target == main_target)]
    for row in at_largest.itertuples():
        bits = float(spec_bits(largest_f)) / row.n_params if row.stored else 0.0
        metric(f"bits_per_parameter_{row.method}", bits,
               f"F log2 F / W at F = {largest_f}, accuracy >= {main_target:g}, {detail}" + ("" if row.stored else "; not stored within the cap"))
        metric(f"facts_per_parameter_{row.method}", largest_f / row.n_params if row.stored else 0.0,
               f"F / W at F = {largest_f}, accuracy >= {main_target:g}")
    # S0.ntk-stores: the NTK MLP reaches 100% at every F within the width cap.
    ntk_full = table[(table.method == "ntk") & (table.target == 1.0)]
    if len(ntk_full):
        metric("ntk_stores_fraction", ntk_full.stored.mean(),
               f"fraction of (F, seed) where the NTK MLP (Hermite degree {params['ntk_degree']}) stores 100% within "
               f"{params['search']['ntk_max_width']} units; F <= {largest_f}, d = {int(ntk_full.d.iloc[0])}")
    # S0.ed-matches-gd-asymptotics
    gaps = []
    for target, group in fits.groupby("target"):
        exponents = dict(zip(group.method, group.exponent))
        if {"ed_gated", "gd_gated"} <= set(exponents):
            gaps.append(abs(exponents["ed_gated"] - exponents["gd_gated"]))
    if gaps:
        metric("exponent_gap_ed_gd", max(gaps), "max over targets of |exponent(ed_gated) - exponent(gd_gated)|, log-log slope of W vs F")
    # S0.gd-cheapest: the cheapest GD MLP vs the cheapest construction at every (F, target).
    gd_methods = [m for m in means.method.unique() if METHOD_SPECS[m].family == "gd"]
    built = [m for m in means.method.unique() if METHOD_SPECS[m].family != "gd"]
    if gd_methods and built:
        pivot = means.pivot_table(index=["target", "F"], columns="method", values="n_params")
        cheapest_gd = pivot[gd_methods].min(axis=1)
        cheapest_built = pivot[built].min(axis=1)
        advantage = (cheapest_built / cheapest_gd).dropna()
        if len(advantage):
            target, n_facts = advantage.idxmin()
            metric("gd_cost_advantage_min", advantage.min(),
                   f"min over (target, F) of min construction W / min GD W; {len(advantage)} points, worst at "
                   f"target {float(target):g}, F = {int(n_facts)}")
    # S0.ntk-costlier: NTK vs the gated encoder-decoder at the largest F.
    ratios = []
    for target in sorted(means.target.unique()):
        here = means[(means.F == largest_f) & (means.target == target)].set_index("method")
        if {"ntk", "ed_gated"} <= set(here.index):
            ntk_row = here.loc["ntk"]
            ntk_params = ntk_row.n_params if ntk_row.stored else ntk_row.params_at_cap  # a lower bound
            ratios.append(ntk_params / here.loc["ed_gated"].n_params)
    if ratios:
        metric("ntk_over_ed_largest_f", min(ratios), f"min over targets of W(ntk) / W(ed_gated) at F = {largest_f} (NTK at its cap if it did not store: a lower bound)")


def _anisotropy_metrics(table: pd.DataFrame, main_facts: int, metric) -> None:
    if table.empty:
        return
    main = table[table.F == main_facts]
    means = seed_means(main, ["method", "kappa"])
    by = {method: group.set_index("kappa").sort_index() for method, group in means.groupby("method")}
    kappas = sorted(main.kappa.unique())
    setting = f"d = {int(main.d.iloc[0])}, F = {main_facts}, target {main.target.iloc[0]:g}, kappa in {[float(k) for k in kappas]}"
    # S0.ntk-anisotropy-breaks: smallest kappa where the NTK fails in at least half of the seeds.
    if "ntk" in by:
        per_kappa = main[main.method == "ntk"].groupby("kappa").stored.mean()
        failing = per_kappa[per_kappa <= 0.5]
        metric("ntk_break_kappa", failing.index.min() if len(failing) else math.nan,
               f"smallest kappa where the NTK MLP fails to store in >= half the seeds (within its width cap); {setting}")
        metric("ntk_stored_fraction_kappa1", per_kappa.get(1.0, math.nan), f"fraction of seeds stored by the NTK at kappa = 1; {setting}")
        metric("ntk_best_accuracy_max_kappa", by["ntk"].best_accuracy.iloc[-1],
               f"mean best accuracy of the NTK within its width cap at kappa = {kappas[-1]:g}")
    # S0.ntk-ustar-gain: facts per parameter of NTK + U* over NTK, wherever both store (kappa > 1, every F).
    pair = seed_means(table[table.method.isin(["ntk", "ntk_ustar"])], ["method", "kappa", "F"])
    if {"ntk", "ntk_ustar"} <= set(pair.method):
        wide = pair.pivot_table(index=["kappa", "F"], columns="method", values="n_params")
        gain = (wide["ntk"] / wide["ntk_ustar"]).dropna()
        anisotropic = gain[gain.index.get_level_values("kappa") > 1]
        metric("ustar_gain_median", anisotropic.median() if len(anisotropic) else math.nan,
               f"median over (kappa > 1, F) where both store of W(ntk) / W(ntk_ustar) = the facts-per-parameter gain; "
               f"{len(anisotropic)} points: " + ", ".join(f"kappa {k:g} F {f}: {g:.2f}" for (k, f), g in anisotropic.items()))
        isotropic = gain[gain.index.get_level_values("kappa") == 1]
        metric("ustar_gain_kappa1", isotropic.median() if len(isotropic) else math.nan, "the same ratio on spherical values (kappa = 1)")
        stored = pair.pivot_table(index=["kappa", "F"], columns="method", values="stored", aggfunc="all")
        only_ustar = stored["ntk_ustar"].astype(bool) & ~stored["ntk"].astype(bool)
        metric("ustar_stores_where_ntk_fails", int(only_ustar.sum()),
               f"(kappa, F) stored by NTK + U* but not by the NTK, of {len(stored)}")
    # S0.others-robust
    for method in ("gd_gated", "ed_gated", "ed_plain", "ed_gated_v"):
        if method not in by:
            continue
        stored = main[main.method == method].stored.mean()
        metric(f"robust_stored_fraction_{method}", stored, f"fraction of (kappa, seed) stored; {setting}")
        base = by[method].n_params.get(1.0, math.nan)
        ratio = (by[method].n_params / base).max() if by[method].stored.all() else math.inf
        metric(f"robust_cost_ratio_{method}", ratio, "max over kappa of mean W(kappa) / W(kappa = 1) (inf if some kappa failed)")
    # S0.rho-predicts: rank correlation of rho(V) with facts per parameter across the value sets.
    for method in main.method.unique():
        rows = main[(main.method == method) & main.stored]
        if rows.rho.nunique() >= 3:
            statistic = spearman(rows.rho, rows.facts_per_parameter)
            metric(f"rho_spearman_{method}", statistic, f"Spearman(rho(V), F / W) over {len(rows)} stored (kappa, seed) value sets; {setting}")
    rho = main.groupby("kappa").rho.mean()
    metric("rho_kappa1", rho.get(1.0, math.nan), f"decodability rho(V) of spherical values, mean over seeds; {setting}")
    metric("rho_max_kappa", rho.iloc[-1], f"rho(V) at kappa = {rho.index[-1]:g}")


def _whitening_metrics(table: pd.DataFrame, metric) -> None:
    if table.empty:
        return
    setting = (f"MiniLM Goodreads facts, F = {int(table.F.iloc[0])}, d = {int(table.d.iloc[0])}, "
               f"alpha in {[float(a) for a in sorted(table.alpha.unique())]}, mean over {table.replicate.nunique()} seeds")
    for method, group in table.groupby("method"):
        # per alpha: mean facts per parameter (0 where a seed did not store) and mean Lipschitz constants
        means = group.groupby("alpha")[["facts_per_parameter", "lipschitz", "lipschitz_relative", "rho"]].mean().reset_index()
        metric(f"whitening_capacity_spearman_{method}", spearman(means.alpha, means.facts_per_parameter),
               f"Spearman(alpha, F / W) with F / W = 0 where not stored; {setting}")
        lip = means.dropna(subset=["lipschitz_relative"])
        if len(lip) >= 3:
            metric(f"whitening_lipschitz_spearman_{method}", spearman(lip.alpha, lip.lipschitz_relative),
                   "Spearman(alpha, Lip / RMS output) of the folded MLP at its smallest storing width (the cap if none)")
            metric(f"whitening_lipschitz_raw_spearman_{method}", spearman(lip.alpha, lip.lipschitz),
                   "Spearman(alpha, Lip) without the output-scale normalisation")
        first, last = means.iloc[0], means.iloc[-1]
        metric(f"whitening_capacity_gain_{method}",
               last.facts_per_parameter / first.facts_per_parameter if first.facts_per_parameter > 0 else math.inf,
               f"F / W at alpha = {last.alpha:g} over alpha = {first.alpha:g} (inf: not stored at alpha = {first.alpha:g})")
        stored = means[means.facts_per_parameter > 0]
        if stored.rho.nunique() >= 3:
            metric(f"rho_spearman_whitening_{method}", spearman(stored.rho, stored.facts_per_parameter),
                   f"Spearman(rho(V), F / W) over the whitening strengths; {setting}")


# ---------------------------------------------------------------------------------------------
# Figures (the plotting module is imported lazily so editing it reruns only figure rules)
# ---------------------------------------------------------------------------------------------


def figure_capacity_scaling(params, inputs, context):
    from factstore.plots import mlp as plots, style

    return style.outputs(plots.capacity_scaling(read_table(inputs["results"]), read_table(inputs["fits"]), params))


def figure_bits_per_parameter(params, inputs, context):
    from factstore.plots import mlp as plots, style

    return style.outputs(plots.bits_per_parameter(read_table(inputs["results"]), params))


def figure_anisotropy(params, inputs, context):
    from factstore.plots import mlp as plots, style

    return style.outputs(plots.anisotropy(read_table(inputs["results"]), params))


def figure_whitening(params, inputs, context):
    from factstore.plots import mlp as plots, style

    return style.outputs(plots.whitening(read_table(inputs["results"]), params))
