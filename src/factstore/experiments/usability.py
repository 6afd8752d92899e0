"""Experiment steps of the usability study (SPEC S0 "Usability inside a Transformer").

Rules in workflow/rules/usability.smk call these through `python -m factstore usability.<step>`:

- `capacity` (one job per method): for every F and seed, the smallest MLP whose fact-adaptive
  accuracy inside the Transformer reaches the target (the seed's Fig. 7 criterion), searched
  from the method's standalone capacity (read from the fact-storing-MLP study's table).
- `whitening` (one job per embedding kind, real MiniLM or anisotropic synthetic): at every
  whitening strength alpha, the standalone capacity of the whitened-and-folded MLP and the
  fact-adaptive accuracy of an MLP of that size (the seed's Fig. 8a).
- `summary`: usable vs standalone capacity, the whitening trade-off, the Lipschitz threshold
  over every MLP of both experiments (the seed's Fig. 8b), and the metrics of the claims.

Every probe trains one Transformer (factstore.usability.training.usability): the MLP it is
trained with stores map f1; the MLP swapped in stores a fresh map f2 on the same embeddings, is
built the same way at the same size, and its Lipschitz constant is the one the probe records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.facts import FactSet, conditioned_embeddings, normalize_rows
from factstore.geometry import margin_optimal_targets
from factstore.io import concat_tables, read_table
from factstore.metrics import MetricsTable
from factstore.mlp import gd
from factstore.mlp.capacity import WidthSearch, smallest_widths
from factstore.mlp.lipschitz import lipschitz_constants
from factstore.mlp.methods import METHODS
from factstore.mlp.modules import fold_module, module_accuracy
from factstore.search import bracket_search_smallest_together
from factstore.statistics import spearman
from factstore.usability import threshold
from factstore.usability.task import (
    JunkLengths, Vocabulary, gaussian_embeddings, mlp_fact_set, principal_projection, token_embeddings,
)
from factstore.usability.training import Probe, Task, TrainingSettings, usability
from factstore.whitening import whiten_fact_set

# ---------------------------------------------------------------------------------------------
# The MLPs (the thin layer over the fact-storing-MLP library)
# ---------------------------------------------------------------------------------------------


def build_mlp(method: str, fact_set: FactSet, size: int, generator: torch.Generator, params: dict,
              ustar: Tensor | None = None, device: torch.device | str = "cpu") -> tuple[nn.Module, int]:
    """(module, n_params): one MLP of method `method` (a name in mlp.methods.METHODS) at `size`.

    params: ntk_degree, gd (learning_rate, max_steps, patience). ustar: U* of fact_set.values,
    for the methods that emit it (solved here when needed and not given). GD trains towards
    100% on `device`.
    """
    entry = METHODS[method]
    return entry.build_at(fact_set, size, generator, protocol=gd.Protocol.from_config(params["gd"]),
                          degree=params["ntk_degree"],
                          value_targets=entry.value_targets(fact_set, ustar), device=device)


def smallest_standalone(method: str, fact_set: FactSet, target: float, generator: torch.Generator, params: dict,
                        ustar: Tensor | None = None, device: torch.device | str = "cpu") -> WidthSearch:
    """The smallest size of `method` storing `target` of fact_set on its own (mlp.capacity), with
    its module (built at the cap when the target is not reached). params: ntk_degree, gd, and
    mlp_search (the fact-storing-MLP study's ntk_max_width, gd_max_width, growth, resolution)."""
    entry, search = METHODS[method], params["mlp_search"]
    if entry.search == "trained":
        return smallest_widths(method, fact_set, [target], generator, high=search["gd_max_width"],
                               growth=search["growth"], resolution=search["resolution"],
                               protocol=gd.Protocol.from_config(params["gd"]), device=device)[target]
    options = {"degree": params["ntk_degree"], "high": search["ntk_max_width"]} if entry.search == "unit_prefix" else {}
    return smallest_widths(method, fact_set, [target], generator, value_targets=entry.value_targets(fact_set, ustar),
                           **options)[target]


def size_cap(method: str, dim: int, guess: int, max_factor: float) -> int:
    """The largest size a usability search probes: max_factor x the standalone size, and never a
    code size above d for the encoder-decoder."""
    cap = max(1, math.ceil(guess * max_factor))
    return min(cap, dim) if METHODS[method].search == "code_size" else cap


def ustar_for(method: str, values: Tensor) -> Tensor | None:
    """U* of the values for a method that emits it (one solve shared by both fact maps), else None."""
    return margin_optimal_targets(values)[0] if METHODS[method].uses_ustar else None


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------


def training_settings(params: dict) -> TrainingSettings:
    return TrainingSettings(**params["training"])


def junk_lengths(params: dict) -> JunkLengths:
    return JunkLengths(**params["lengths"])


def make_task(keys: Tensor, values: Tensor, junk: Tensor, query: Tensor, params: dict) -> Task:
    """The recall task on these embeddings; the MLP-norm scale is the mean RMS of the unit keys."""
    unit_keys = normalize_rows(keys.to(torch.float64))
    scale = float(unit_keys.pow(2).mean(dim=1).sqrt().mean())
    return Task(Vocabulary(len(keys), len(junk)), token_embeddings(keys, values, junk, query), junk_lengths(params), scale)


def two_maps(n_facts: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The map the Transformer trains with and the NEW map of the swapped MLP (random permutations)."""
    return torch.randperm(n_facts, generator=generator), torch.randperm(n_facts, generator=generator)


@dataclass(frozen=True)
class ProbeSpec:
    """One usability evaluation to run: the task, the MLP trained with (storing facts[0]) and the
    MLP swapped in (storing facts[1]), and the parts its generators derive from."""

    task: Task
    trained: nn.Module
    swapped: nn.Module
    facts: tuple[FactSet, FactSet]
    generator_parts: tuple


def run_probes(specs: list[ProbeSpec], params: dict, device) -> list[dict]:
    """Usability evaluations of probes of one shape, params.runs_per_batch Transformers per batch,
    with the standalone numbers and the Lipschitz constants of their MLPs: one table row per probe."""
    rows = []
    for first in range(0, len(specs), params["runs_per_batch"]):
        chunk = specs[first:first + params["runs_per_batch"]]
        standalone = [(module_accuracy(spec.trained, spec.facts[0]), module_accuracy(spec.swapped, spec.facts[1]))
                      for spec in chunk]
        probes = [Probe(spec.task, spec.trained, spec.facts[0].fact_map, spec.swapped, spec.facts[1].fact_map,
                        derived_generator(*spec.generator_parts, "train"), trained_accuracy)
                  for spec, (trained_accuracy, _) in zip(chunk, standalone)]
        records = usability(probes, training_settings(params), device)
        for spec, (trained_accuracy, swapped_accuracy), record in zip(chunk, standalone, records):
            lipschitz, relative, rms = lipschitz_constants(spec.swapped, spec.facts[1].keys, params["lipschitz_samples"],
                                                           derived_generator(*spec.generator_parts, "lipschitz"))
            rows.append({"standalone_trained": trained_accuracy, "standalone_swapped": swapped_accuracy,
                         "plain_recall": record["plain_recall"], "fact_adaptive": record["fact_adaptive"],
                         "attention_on_key": record["attention_on_key"], "train_accuracy": record["train_accuracy"],
                         "steps": record["steps"], "stop": record["stop"],
                         "batched_runs": len(chunk), "lipschitz": lipschitz, "lipschitz_relative": relative,
                         "output_rms": rms})
    return rows


# ---------------------------------------------------------------------------------------------
# Experiment 1: usable capacity
# ---------------------------------------------------------------------------------------------


def of_degree(table: pd.DataFrame, degree: int) -> pd.Series:
    """Rows of a fact-storing-MLP table built with NTK Hermite degree `degree` (the NTK methods'
    rows carry their degree; other methods' degree is NaN and always kept)."""
    if "degree" not in table:
        return pd.Series(True, index=table.index)
    return table.degree.isna() | np.isclose(table.degree, degree)


def standalone_guess(table: pd.DataFrame, dim: int, n_facts: int, target: float, degree: int) -> tuple[int, float]:
    """(median standalone width over seeds, median n_params) of the fact-storing-MLP study at (d, F,
    target); (1, NaN) when it has no stored row there (the search then doubles from 1)."""
    rows = table[(table.d == dim) & (table.F == n_facts) & np.isclose(table.target, target) & table.stored.astype(bool)]
    rows = rows[of_degree(rows, degree)]
    if rows.empty:
        return 1, math.nan
    return max(1, int(round(rows.width.median()))), float(rows.n_params.median())


def capacity_task(params: dict, dim: int, n_facts: int, replicate: int) -> tuple[Task, tuple[FactSet, FactSet]]:
    """The task of one (F, seed) of the capacity experiment: Gaussian keys, values, junk and Q, and
    the fact sets of the map trained with and of the swapped map."""
    generator = derived_generator(params["seed"], "usability-facts", dim, n_facts, replicate)
    keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(params["n_junk"], dim, generator), gaussian_embeddings(1, dim, generator)
    first_map, second_map = two_maps(n_facts, generator)
    facts = (mlp_fact_set(keys, values, first_map), mlp_fact_set(keys, values, second_map))
    return make_task(keys, values, junk, query, params), facts


def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Smallest MLP of one method whose fact-adaptive accuracy reaches params.target, per F and seed.

    inputs: standalone (the fact-storing-MLP study's capacity table of the same method). params:
    method, seed, d, log2_facts, seeds, target, n_junk, lengths, training, runs_per_batch, search
    (max_factor, growth, resolution), lipschitz_samples, ntk_degree, gd. At each F the seeds'
    searches run in lockstep (search.bracket_search_smallest_together): each round's probes, one
    per unfinished seed, train as one batch. Returns {"capacity": one row per (F, seed), "probes":
    one row per usability evaluation}.
    """
    method, dim, target, seeds = params["method"], params["d"], params["target"], params["seeds"]
    standalone = read_table(inputs["standalone"])
    search = params["search"]
    rows, probes = [], []
    for log2_facts in sorted(params["log2_facts"]):
        n_facts = 2**log2_facts
        tasks = [capacity_task(params, dim, n_facts, replicate) for replicate in range(seeds)]
        ustars = [ustar_for(method, facts[0].values) for _, facts in tasks]  # U* depends on the values only
        guess, standalone_params = standalone_guess(standalone, dim, n_facts, target, params["ntk_degree"])
        cap = size_cap(method, dim, guess, search["max_factor"])
        seen: list[dict[int, int]] = [{} for _ in range(seeds)]

        def fact_adaptive_at(requests: list[tuple[int, int]]) -> list[float]:
            specs = []
            for replicate, size in requests:
                (task, facts), parts = tasks[replicate], (params["seed"], "usability-mlp", method, dim, n_facts, replicate, size)
                trained, seen[replicate][size] = build_mlp(method, facts[0], size, derived_generator(*parts, 1), params,
                                                           ustars[replicate], context.device)
                swapped, _ = build_mlp(method, facts[1], size, derived_generator(*parts, 2), params, ustars[replicate],
                                       context.device)
                specs.append(ProbeSpec(task, trained, swapped, facts, parts))
            records = run_probes(specs, params, context.device)
            for (replicate, size), record in zip(requests, records):
                probes.append({"experiment": "capacity", "method": method, "d": dim, "F": n_facts,
                               "replicate": replicate, "alpha": math.nan, "kind": "spherical", "size": size,
                               "n_params": seen[replicate][size]} | record)
                print(f"{method} F={n_facts} seed {replicate} size {size}: fact-adaptive {record['fact_adaptive']:.4f}, "
                      f"plain {record['plain_recall']:.4f}, standalone {record['standalone_swapped']:.4f}, "
                      f"{record['steps']} steps ({len(requests)} runs batched)",
                      flush=True)
            return [record["fact_adaptive"] for record in records]

        searches = bracket_search_smallest_together(fact_adaptive_at, target, [min(guess, cap)] * seeds, low=1,
                                                    high=cap, growth=search["growth"], resolution=search["resolution"])
        for replicate, (size, evaluations) in enumerate(searches):
            rows.append({"method": method, "d": dim, "F": n_facts, "replicate": replicate, "target": target,
                         "usable_size": size if size is not None else math.nan,
                         "usable_params": seen[replicate][size] if size is not None else math.nan,
                         "found": size is not None, "size_cap": cap, "params_at_cap": seen[replicate].get(cap, math.nan),
                         "standalone_size": guess, "standalone_params": standalone_params,
                         "best_fact_adaptive": max(evaluations.values()), "probes": len(evaluations)})
    return {"capacity": pd.DataFrame(rows), "probes": pd.DataFrame(probes)}


# ---------------------------------------------------------------------------------------------
# Experiment 2: whitening
# ---------------------------------------------------------------------------------------------


def real_embeddings(path: Path, n_junk: int, dim: int, n_facts: int | None) -> tuple[Tensor, ...]:
    """(keys, values, junk, query) from the MiniLM archive of the fact-storing-MLP study.

    Facts are the sampled books with an author no other sampled book has (so no two value rows
    coincide); junk and Q are further book-title embeddings (the real distribution, not isotropic
    noise). All rows are projected on the top `dim` principal directions (task.principal_projection).
    """
    with np.load(path, allow_pickle=False) as archive:
        keys, values, authors = (torch.as_tensor(archive["keys"]), torch.as_tensor(archive["values"]),
                                 archive["authors"])
    _, first, counts = np.unique(authors, return_index=True, return_counts=True)
    unique = np.sort(first[counts == 1])
    extra = np.setdiff1d(np.arange(len(keys)), unique)
    if len(extra) < n_junk + 1:  # not enough spare titles: take the last facts' titles
        extra, unique = np.concatenate([extra, unique[-(n_junk + 1 - len(extra)):]]), unique[:-(n_junk + 1 - len(extra))]
    facts = unique if n_facts is None else unique[:n_facts]
    spare = extra[: n_junk + 1]
    projected = principal_projection([keys[facts], values[facts], keys[spare]], dim)
    return projected[0], projected[1], projected[2][:n_junk], projected[2][n_junk]


def synthetic_embeddings(params: dict, replicate: int) -> tuple[Tensor, ...]:
    """Anisotropic keys and values (condition number kappa, facts.conditioned_embeddings, scaled to
    rows of norm ~1 like the Gaussian ones), isotropic Gaussian junk and Q."""
    dim, n_facts = params["d"], params["n_facts"]
    generator = derived_generator(params["seed"], "usability-anisotropic", dim, n_facts, params["kappa"], replicate)
    keys = conditioned_embeddings(n_facts, dim, params["kappa"], generator)
    values = conditioned_embeddings(n_facts, dim, params["kappa"], generator)
    junk, query = gaussian_embeddings(params["n_junk"], dim, generator), gaussian_embeddings(1, dim, generator)
    return keys, values, junk, query


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Standalone capacity and fact-adaptive accuracy against the whitening strength alpha.

    params: kind ('real' | 'synthetic'), alphas, methods, seeds, standalone_target, mlp_search
    (the fact-storing-MLP study's search settings), and the
    task / training / MLP settings of `capacity`; synthetic: d, n_facts, kappa; real: d (the
    projection), n_facts (at most). inputs: embeddings (real only). For each alpha, method and
    seed: keys and values whitened with strength alpha (geometry.whiten_fact_set), the smallest
    size storing standalone_target of f1 (the fact-storing-MLP study's search), the MLPs for f1
    and f2 at that size folded back to read and write the original basis, and one usability
    evaluation with them. Returns {"table": one row per (alpha, method, seed)}.
    """
    kind, specs, described = params["kind"], [], []
    for replicate in range(params["seeds"]):
        if kind == "real":
            keys, values, junk, query = real_embeddings(inputs["embeddings"], params["n_junk"], params["d"],
                                                        params.get("n_facts"))
        else:
            keys, values, junk, query = synthetic_embeddings(params, replicate)
        n_facts, dim = keys.shape
        first_map, second_map = two_maps(n_facts, derived_generator(params["seed"], "usability-maps", kind, replicate))
        originals = (mlp_fact_set(keys, values, first_map, kind), mlp_fact_set(keys, values, second_map, kind))
        task = make_task(keys, values, junk, query, params)
        for alpha in params["alphas"]:
            first, key_transform, value_transform = whiten_fact_set(originals[0], alpha, alpha)
            second = first.__class__(first.keys, first.values, second_map, first.name)
            ustar = margin_optimal_targets(first.values)[0]
            for method in params["methods"]:
                parts = (params["seed"], "usability-whitening", kind, method, float(alpha), replicate)
                found = smallest_standalone(method, first, params["standalone_target"], derived_generator(*parts),
                                            params, ustar, context.device)
                size = found.width if found.width is not None else max(found.evaluations)
                trained = found.module
                if trained is None:
                    trained, _ = build_mlp(method, first, size, derived_generator(*parts, 1), params, ustar, context.device)
                swapped, n_params = build_mlp(method, second, size, derived_generator(*parts, 2), params, ustar,
                                              context.device)
                folded = (fold_module(trained, key_transform, value_transform),
                          fold_module(swapped, key_transform, value_transform))
                specs.append(ProbeSpec(task, folded[0], folded[1], originals, parts))
                described.append({"experiment": "whitening", "method": method, "d": dim, "F": n_facts,
                                  "replicate": replicate, "alpha": float(alpha), "kind": kind, "size": size,
                                  "n_params": n_params, "stored": found.width is not None,
                                  "facts_per_parameter": n_facts / n_params if found.width is not None else 0.0})
    rows = [row | record for row, record in zip(described, run_probes(specs, params, context.device))]
    for row in rows:
        print(f"{kind} alpha={row['alpha']:g} {row['method']} seed {row['replicate']}: size {row['size']} (stored: "
              f"{row['stored']}), fact-adaptive {row['fact_adaptive']:.4f}, plain {row['plain_recall']:.4f}, "
              f"Lip/rms {row['lipschitz_relative']:.3g}", flush=True)
    return {"table": pd.DataFrame(rows)}


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------

CONSTRUCTIONS = ("ntk", "ed_gated")
MODERATE_ALPHAS = (0.1, 0.2)


def standalone_means(standalone: pd.DataFrame, target: float, degree: int) -> pd.DataFrame:
    """Seed-mean standalone parameter count per (method, d, F) at `target` (NaN unless every seed
    stored), NTK rows of Hermite degree `degree` only."""
    rows = standalone[np.isclose(standalone.target, target) & of_degree(standalone, degree)]
    grouped = rows.groupby(["method", "d", "F"]).agg(standalone_params=("n_params", "mean"),
                                                     standalone_stored=("stored", "all")).reset_index()
    grouped.loc[~grouped.standalone_stored, "standalone_params"] = math.nan
    return grouped


def usable_means(capacity_table: pd.DataFrame) -> pd.DataFrame:
    """Seed-mean usable parameter count per (method, d, F) (NaN unless found in every seed)."""
    grouped = capacity_table.groupby(["method", "d", "F"]).agg(
        usable_params=("usable_params", "mean"), found=("found", "all"), seeds=("replicate", "nunique"),
        best_fact_adaptive=("best_fact_adaptive", "mean")).reset_index()
    grouped.loc[~grouped.found, "usable_params"] = math.nan
    return grouped


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Tables and metrics of the three claims.

    inputs: capacity_<method>, probes_<method> (capacity step), whitening_<kind> (whitening step),
    standalone_<method> (the fact-storing-MLP study's capacity tables). params: target (the usability
    criterion), lipschitz_on ('lipschitz_relative' | 'lipschitz'). Returns {"usable": usable vs
    standalone per (method, F), "mlps": every MLP evaluated (both experiments), "metrics"}.
    """
    target = params["target"]
    capacity_table = concat_tables(inputs, "capacity_")
    probes = concat_tables(inputs, "probes_")
    whitening_table = concat_tables(inputs, "whitening_")
    standalone = concat_tables(inputs, "standalone_")
    usable = usable_means(capacity_table).merge(standalone_means(standalone, target, params["ntk_degree"]), on=["method", "d", "F"], how="left")
    usable["usable_over_standalone"] = usable.usable_params / usable.standalone_params
    mlps = pd.concat([probes, whitening_table], ignore_index=True)
    metrics = MetricsTable()
    _usable_metrics(capacity_table, usable, probes, target, metrics)
    _whitening_metrics(whitening_table, target, metrics)
    _lipschitz_metrics(mlps, target, params["lipschitz_on"], metrics)
    return {"usable": usable, "mlps": mlps, "metrics": metrics.frame()}


def _usable_metrics(capacity_table: pd.DataFrame, usable: pd.DataFrame, probes: pd.DataFrame, target: float,
                    metrics: MetricsTable) -> None:
    if capacity_table.empty:
        return
    built = capacity_table[capacity_table.method.isin(CONSTRUCTIONS)]
    setting = (f"d = {int(capacity_table.d.iloc[0])}, F in {sorted(int(f) for f in capacity_table.F.unique())}, "
               f"{capacity_table.replicate.nunique()} seeds, target {target:g}")
    metrics.add("usable_found_fraction", built.found.mean() if len(built) else math.nan,
                f"fraction of (construction, F, seed) where some MLP size up to the cap reaches fact-adaptive accuracy "
                f">= {target:g}; constructions {sorted(built.method.unique())}; {setting}")
    metrics.add("usable_found_fraction_all", capacity_table.found.mean(), f"the same over every method; {setting}")
    ratio = usable.usable_over_standalone
    metrics.add("usable_over_standalone_max", ratio.max() if ratio.notna().all() and len(ratio) else math.inf,
                "max over (method, F) of seed-mean usable W / seed-mean standalone W (inf if a usable size was not "
                "found in every seed, or the standalone table has no stored W there): "
                + ", ".join(f"{r.method} F {r.F}: {r.usable_over_standalone:.3g}" for r in usable.itertuples()))
    metrics.add("usable_over_standalone_median", ratio.median(), "median of the same ratio over (method, F) where both exist")
    metrics.add("best_fact_adaptive_min", capacity_table.best_fact_adaptive.min(),
                "min over (method, F, seed) of the best fact-adaptive accuracy any probed size reached")
    gap = probes.plain_recall - probes.fact_adaptive
    metrics.add("memorisation_gap_max", gap.max(), "max over every probe of plain recall - fact-adaptive accuracy "
                "(large: the Transformer memorised facts around the MLP)")
    metrics.add("attention_on_key_median", probes.attention_on_key.median(),
                "median over probes of the attention weight the query puts on the key")


def _whitening_metrics(table: pd.DataFrame, target: float, metrics: MetricsTable) -> None:
    if table.empty:
        return
    means = table.groupby(["kind", "method", "alpha"])[["fact_adaptive", "facts_per_parameter", "lipschitz_relative"]].mean()
    moderate_accuracy, drops, gains = [], [], []
    for (kind, method), group in means.groupby(level=["kind", "method"]):
        group = group.droplevel(["kind", "method"])
        moderate = group[group.index.isin(MODERATE_ALPHAS)]
        if moderate.empty or 1.0 not in group.index or 0.0 not in group.index:
            continue
        moderate_accuracy.append(moderate.fact_adaptive.min())
        drops.append(moderate.fact_adaptive.min() - group.fact_adaptive.loc[1.0])
        base = group.facts_per_parameter.loc[0.0]
        worse = moderate.facts_per_parameter.min()
        gains.append(worse / base if base > 0 else (math.inf if worse > 0 else math.nan))
    setting = (f"{sorted(table.kind.unique())} embeddings, methods {sorted(table.method.unique())}, alpha in "
               f"{sorted(float(a) for a in table.alpha.unique())}, mean over {table.replicate.nunique()} seeds")
    metrics.add("whitening_moderate_accuracy_min", min(moderate_accuracy, default=math.nan),
                f"min over (kind, method, alpha in {MODERATE_ALPHAS}) of the mean fact-adaptive accuracy; {setting}")
    metrics.add("whitening_full_drop_min", min(drops, default=math.nan),
                "min over (kind, method) of [min moderate fact-adaptive accuracy - fact-adaptive accuracy at alpha = 1]")
    metrics.add("whitening_moderate_capacity_gain_min",
                math.nan if not gains or any(math.isnan(g) for g in gains) else min(gains),
                "min over (kind, method) of standalone F / W at the worse moderate alpha over F / W at alpha = 0 "
                "(F / W = 0 where a seed does not store within the width cap; NaN where neither alpha stores: no gain "
                "shown)")
    for (kind, method, alpha), row in means.iterrows():
        metrics.add(f"whitening_fact_adaptive_{kind}_{method}_a{alpha:g}", row.fact_adaptive, setting)


def _lipschitz_metrics(mlps: pd.DataFrame, target: float, column: str, metrics: MetricsTable) -> None:
    storing = mlps[(mlps.standalone_swapped >= target) & mlps[column].notna()] if len(mlps) else mlps
    detail = (f"{column} of the swapped MLP vs its fact-adaptive accuracy, over the {len(storing)} MLPs of both "
              f"experiments that store >= {target:g} of their facts on their own")
    if len(storing) < 2:
        for name in ("lipschitz_threshold", "lipschitz_usable_fraction_above", "lipschitz_fraction_below_threshold",
                     "lipschitz_logistic_slope", "lipschitz_logistic_threshold", "lipschitz_spearman"):
            metrics.add(name, math.nan, detail + " (too few)")
        return
    lipschitz, accuracy = storing[column].to_numpy(float), storing.fact_adaptive.to_numpy(float)
    limit = threshold.smallest_failing(lipschitz, accuracy, target)
    fit = threshold.logistic_fit(lipschitz, accuracy >= target)
    metrics.add("lipschitz_threshold", limit, "smallest Lipschitz constant with fact-adaptive accuracy < target; " + detail)
    metrics.add("lipschitz_usable_fraction_above", threshold.usable_fraction(lipschitz, accuracy, target, limit, above=True),
                "fraction usable among MLPs at or above the threshold (NaN: no MLP failed)")
    metrics.add("lipschitz_fraction_below_threshold", float((lipschitz < limit).mean()),
                "fraction of the MLPs below the threshold (all usable by construction)")
    metrics.add("lipschitz_logistic_slope", fit.slope, "slope of P(usable) against log10 L (negative: usability falls)")
    metrics.add("lipschitz_logistic_threshold", fit.threshold, "L where the logistic fit crosses P(usable) = 1/2")
    metrics.add("lipschitz_spearman", spearman(lipschitz, accuracy), "Spearman(L, fact-adaptive accuracy)")
