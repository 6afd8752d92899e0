"""Experiment steps of the usability study (S0 "Usability inside a Transformer").

Rules in workflow/rules/usability.smk call these through `python -m factstore usability.<step>`:

- `capacity` (one job per method): for every F and seed, the smallest MLP whose MAXIMUM
  fact-adaptive accuracy over training reaches the target (the paper's Fig. 7 criterion),
  searched from the method's standalone capacity (the fact-storing-MLP study's table).
- `whitening` (one job per embedding kind, real MiniLM or anisotropic synthetic): at every
  whitening strength alpha, the standalone capacity of the whitened-and-folded MLP and the
  fact-adaptive accuracy of an MLP of that size (the paper's Fig. 8a).
- `usability_summary.summary` (its own step module, so that editing a metric reruns only the
  summary): the metrics of the three claims (factstore.usability.summary).

Every probe trains one Transformer (factstore.usability.training.usability): the MLP it is
trained with stores map f1; the MLP swapped in stores a fresh map f2 on the same embeddings, is
built the same way at the same size, and its Lipschitz constant is the one the probe records.
Every MLP is built, searched and scored against the whole table the Transformer decodes over
(factstore.usability.task.mlp_fact_set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.facts import FactSet
from factstore.geometry import margin_optimal_targets
from factstore.io import read_table
from factstore.mlp import gd
from factstore.mlp.capacity import smallest_widths_configured
from factstore.mlp.methods import METHODS
from factstore.mlp.modules import fold_module, module_accuracy
from factstore.mlp.results import of_degree
from factstore.search import bracket_search_smallest_together
from factstore.usability.lipschitz import tangent_lipschitz
from factstore.usability.task import (
    JunkLengths, Task, anisotropic_embeddings, gaussian_probe_task, probe_task, real_embeddings, two_maps,
)
from factstore.usability.training import Probe, TrainingSettings, usability
from factstore.whitening import whiten_fact_set

VALUE_FOLDS = ("inverse", "dual")


def build_mlp(method: str, fact_set: FactSet, size: int, generator: torch.Generator, params: dict,
              ustar: Tensor | None = None, device: torch.device | str = "cpu") -> tuple[nn.Module, int]:
    """(module, n_params): one MLP of `method` (mlp.methods.METHODS) at `size` on fact_set.
    params: ntk_degree, gd. ustar: U* of fact_set.values for a U* method (solved when None)."""
    entry = METHODS[method]
    return entry.build_at(fact_set, size, generator, protocol=gd.Protocol.from_config(params["gd"]),
                          degree=params["ntk_degree"], value_targets=entry.value_targets(fact_set, ustar), device=device)


def ustar_for(method: str, values: Tensor) -> Tensor | None:
    """U* of the values for a method that emits it (one solve shared by both fact maps), else None."""
    return margin_optimal_targets(values)[0] if METHODS[method].uses_ustar else None


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
    with the standalone accuracies (over the whole decoding table) and the tangent-space Lipschitz
    constants of their swapped MLPs: one table row per probe."""
    rows, settings = [], TrainingSettings(**params["training"])
    for first in range(0, len(specs), params["runs_per_batch"]):
        chunk = specs[first:first + params["runs_per_batch"]]
        probes = [Probe(spec.task, spec.trained, spec.facts[0].fact_map, spec.swapped, spec.facts[1].fact_map,
                        derived_generator(*spec.generator_parts, "train")) for spec in chunk]
        for spec, record in zip(chunk, usability(probes, settings, device)):
            lipschitz, relative, rms = tangent_lipschitz(spec.swapped, spec.facts[1].keys, params["lipschitz_samples"],
                                                         derived_generator(*spec.generator_parts, "lipschitz"))
            rows.append({"standalone_trained": module_accuracy(spec.trained, spec.facts[0]),
                         "standalone_swapped": module_accuracy(spec.swapped, spec.facts[1])}
                        | {key: record[key] for key in ("fact_adaptive_max", "fact_adaptive", "fact_adaptive_max_step",
                                                        "plain_recall", "attention_on_key", "restarts", "steps",
                                                        "stop", "evaluations", "train_accuracy")}
                        | {"batched_runs": len(chunk), "lipschitz": lipschitz,
                           "lipschitz_relative": relative, "output_rms": rms})
    return rows


def standalone_guess(table: pd.DataFrame, dim: int, n_facts: int, target: float, degree: int) -> tuple[int, float]:
    """(median standalone width over seeds, median n_params) of the fact-storing-MLP study at (d, F,
    target), NTK rows of Hermite degree `degree`; (1, NaN) without a stored row (doubling from 1)."""
    rows = table[(table.d == dim) & (table.F == n_facts) & (table.target - target).abs().lt(1e-9)
                 & table.stored.astype(bool)]
    rows = rows[of_degree(rows, degree)]
    if rows.empty:
        return 1, math.nan
    return max(1, int(round(rows.width.median()))), float(rows.n_params.median())


def size_cap(method: str, dim: int, guess: int, max_factor: float) -> int:
    """The largest size a usability search probes: max_factor x the standalone size, and never a
    code size above d for the encoder-decoder."""
    cap = max(1, math.ceil(guess * max_factor))
    return min(cap, dim) if METHODS[method].search == "code_size" else cap


def capacity(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Smallest MLP of one method whose maximum fact-adaptive accuracy reaches params.target, per F
    and seed.

    inputs: standalone (the fact-storing-MLP study's capacity table of the same method). params:
    method, seed, d, log2_facts, seeds, target, n_junk, lengths, training, runs_per_batch, search
    (max_factor, growth, resolution), lipschitz_samples, ntk_degree, gd. At each F the seeds'
    searches run in lockstep (search.bracket_search_smallest_together): each round's probes, one
    per unfinished seed, train as one batch. Returns {"capacity": one row per (F, seed), "probes":
    one row per usability evaluation}.
    """
    method, dim, target, seeds, search = params["method"], params["d"], params["target"], params["seeds"], params["search"]
    standalone = read_table(inputs["standalone"])
    rows, probes = [], []
    for n_facts in sorted(2**log2 for log2 in params["log2_facts"]):
        tasks = [gaussian_probe_task(n_facts, dim, params["n_junk"], JunkLengths(**params["lengths"]),
                                     derived_generator(params["seed"], "usability-facts", dim, n_facts, replicate))
                 for replicate in range(seeds)]
        ustars = [ustar_for(method, facts[0].values) for _, facts in tasks]  # U* depends on the table only
        guess, standalone_params = standalone_guess(standalone, dim, n_facts, target, params["ntk_degree"])
        cap = size_cap(method, dim, guess, search["max_factor"])
        seen: list[dict[int, int]] = [{} for _ in range(seeds)]

        def usable_at(requests: list[tuple[int, int]]) -> list[float]:
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
                print(f"{method} F={n_facts} seed {replicate} size {size}: fact-adaptive max {record['fact_adaptive_max']:.4f} "
                      f"(final {record['fact_adaptive']:.4f}), plain {record['plain_recall']:.4f}, attention on key "
                      f"{record['attention_on_key']:.3f}, standalone {record['standalone_swapped']:.4f}, {record['steps']} "
                      f"steps, {record['restarts']} restarts", flush=True)
            return [record["fact_adaptive_max"] for record in records]

        searches = bracket_search_smallest_together(usable_at, target, [min(guess, cap)] * seeds, low=1, high=cap,
                                                    growth=search["growth"], resolution=search["resolution"])
        for replicate, (size, evaluations) in enumerate(searches):
            rows.append({"method": method, "d": dim, "F": n_facts, "replicate": replicate, "target": target,
                         "usable_size": size if size is not None else math.nan,
                         "usable_params": seen[replicate][size] if size is not None else math.nan,
                         "found": size is not None, "size_cap": cap, "params_at_cap": seen[replicate].get(cap, math.nan),
                         "standalone_size": guess, "standalone_params": standalone_params,
                         "best_fact_adaptive": max(evaluations.values()), "probes": len(evaluations)})
    return {"capacity": pd.DataFrame(rows), "probes": pd.DataFrame(probes)}


def fold(module: nn.Module, key_transform: Tensor, value_transform: Tensor, kind: str) -> nn.Module:
    """An MLP built on whitened keys and values, made to read the original keys and write in the
    original embedding basis. 'inverse' (the paper's): the output map folds W_alpha^-1, the inverse
    of the value whitening, so an output near a whitened value lands near the original value;
    'dual' (a variant): it folds W_alpha itself, which keeps dot-product decoding exactly
    (<W_alpha g, v> = <g, W_alpha^T v>, the whitened value's score)."""
    if kind not in VALUE_FOLDS:
        raise ValueError(f"value fold must be one of {VALUE_FOLDS}, got {kind!r}")
    return fold_module(module, key_transform, torch.linalg.inv(value_transform) if kind == "inverse" else value_transform)


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Standalone capacity and fact-adaptive accuracy against the whitening strength alpha.

    params: kind ('real' | 'synthetic'), alphas, methods, seeds, standalone_target, value_fold
    ('inverse' | 'dual', see `fold`), mlp_search (the fact-storing-MLP study's search settings),
    and the task / training / MLP settings of `capacity`; synthetic: d, n_facts, kappa; real: d
    (the projection), n_facts (at most). inputs: embeddings (real only). For each alpha, method
    and seed: keys and the decoding table whitened with strength alpha (whitening.whiten_fact_set),
    the smallest size storing standalone_target of f1 there, the MLPs for f1 and f2 at that size
    folded back to the original basis, and one usability evaluation with them. Returns {"table":
    one row per (alpha, method, seed)}.
    """
    kind, lengths, specs, described = params["kind"], JunkLengths(**params["lengths"]), [], []
    for replicate in range(params["seeds"]):
        generator = derived_generator(params["seed"], "usability-anisotropic", params["d"], params["n_facts"],
                                      params.get("kappa"), replicate)
        embeddings = (real_embeddings(inputs["embeddings"], params["n_junk"], params["d"], params.get("n_facts"))
                      if kind == "real" else
                      anisotropic_embeddings(params["n_facts"], params["d"], params["kappa"], params["n_junk"], generator))
        maps = two_maps(len(embeddings[0]), derived_generator(params["seed"], "usability-maps", kind, replicate))
        task, originals = probe_task(*embeddings, lengths, maps, kind)
        n_facts, dim = originals[0].keys.shape
        for alpha in params["alphas"]:
            first, key_transform, value_transform = whiten_fact_set(originals[0], alpha, alpha)
            second = FactSet(first.keys, first.values, maps[1], first.name)
            ustar = margin_optimal_targets(first.values)[0]
            for method in params["methods"]:
                parts = (params["seed"], "usability-whitening", kind, method, float(alpha), replicate)
                entry = METHODS[method]
                target = params["standalone_target"]
                found = smallest_widths_configured(
                    method, first, [target], derived_generator(*parts), params["mlp_search"],
                    protocol=gd.Protocol.from_config(params["gd"]), degree=params["ntk_degree"],
                    value_targets=entry.value_targets(first, ustar), device=context.device,
                )[target]
                size = found.width if found.width is not None else max(found.evaluations)
                trained = found.module
                if trained is None:
                    trained, _ = build_mlp(method, first, size, derived_generator(*parts, 1), params, ustar, context.device)
                swapped, n_params = build_mlp(method, second, size, derived_generator(*parts, 2), params, ustar,
                                              context.device)
                folded = tuple(fold(mlp, key_transform, value_transform, params["value_fold"]) for mlp in (trained, swapped))
                specs.append(ProbeSpec(task, *folded, originals, parts))
                described.append({"experiment": "whitening", "method": method, "d": dim, "F": n_facts,
                                  "replicate": replicate, "alpha": float(alpha), "kind": kind, "size": size,
                                  "n_params": n_params, "stored": found.width is not None,
                                  "value_fold": params["value_fold"],
                                  "facts_per_parameter": n_facts / n_params if found.width is not None else 0.0})
    rows = [row | record for row, record in zip(described, run_probes(specs, params, context.device))]
    for row in rows:
        print(f"{kind} alpha={row['alpha']:g} {row['method']} seed {row['replicate']}: size {row['size']} (stored: "
              f"{row['stored']}), folded standalone {row['standalone_swapped']:.4f}, fact-adaptive max "
              f"{row['fact_adaptive_max']:.4f}, attention on key {row['attention_on_key']:.3f}, Lip/rms "
              f"{row['lipschitz_relative']:.3g}", flush=True)
    return {"table": pd.DataFrame(rows)}
