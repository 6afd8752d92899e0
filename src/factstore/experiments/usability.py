"""Experiment steps of the usability study (S0 "Usability inside a Transformer").

Rules in workflow/rules/usability.smk call these through `python -m factstore usability.<step>`:

- `capacity` (one job per method): for every F and seed, the smallest MLP whose MAXIMUM
  fact-adaptive accuracy over training reaches the target (the paper's Fig. 7 criterion),
  searched from the method's standalone capacity (the fact-storing-MLP study's table).
- `whitening` (one job per embedding kind, real MiniLM or anisotropic synthetic): at every
  whitening strength alpha, the standalone capacity of the whitened-and-folded MLP and the
  fact-adaptive accuracy of MLPs hosted at the first of 1x, 2x, 4x ... that size where both the
  trained and the swapped MLP store every fact (and, per kind, at 1x) (the paper's Fig. 8a).
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
class ProbeSetup:
    """One usability evaluation to run: the task, the MLP trained with (storing facts[0]) and the
    MLP swapped in (storing facts[1]), and the parts its generators derive from."""

    task: Task
    trained: nn.Module
    swapped: nn.Module
    facts: tuple[FactSet, FactSet]
    generator_parts: tuple


def run_probes(setups: list[ProbeSetup], params: dict, device, skip_unreachable: bool = False) -> list[dict]:
    """Usability evaluations of probes of one shape, params.runs_per_batch Transformers per batch,
    with the standalone accuracies (over the whole decoding table) and the tangent-space Lipschitz
    constants of their swapped MLPs: one table row per probe. skip_unreachable: probes whose
    ceiling is below the target are recorded untrained (usability.training.train_attention)."""
    rows, settings = [], TrainingSettings(**params["training"])
    for first in range(0, len(setups), params["runs_per_batch"]):
        chunk = setups[first:first + params["runs_per_batch"]]
        probes = [Probe(setup.task, setup.trained, setup.facts[0].fact_map, setup.swapped, setup.facts[1].fact_map,
                        derived_generator(*setup.generator_parts, "train")) for setup in chunk]
        for setup, record in zip(chunk, usability(probes, settings, device, skip_unreachable=skip_unreachable)):
            lipschitz, relative, rms = tangent_lipschitz(setup.swapped, setup.facts[1].keys, params["lipschitz_samples"],
                                                         derived_generator(*setup.generator_parts, "lipschitz"))
            rows.append({"standalone_trained": module_accuracy(setup.trained, setup.facts[0]),
                         "standalone_swapped": module_accuracy(setup.swapped, setup.facts[1])}
                        | {key: record[key] for key in ("fact_adaptive_max", "fact_adaptive", "fact_adaptive_max_step",
                                                        "plain_recall", "attention_on_key", "ceiling", "restarts", "steps",
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
    per unfinished seed, train as one batch. A probe whose swapped MLP's ceiling (its recall with
    attention on the key) is below the target is recorded untrained: no Transformer could make it
    usable. Returns {"capacity": one row per (F, seed), "probes": one row per usability evaluation}.
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
            setups = []
            for replicate, size in requests:
                (task, facts), parts = tasks[replicate], (params["seed"], "usability-mlp", method, dim, n_facts, replicate, size)
                trained, seen[replicate][size] = build_mlp(method, facts[0], size, derived_generator(*parts, 1), params,
                                                           ustars[replicate], context.device)
                swapped, _ = build_mlp(method, facts[1], size, derived_generator(*parts, 2), params, ustars[replicate],
                                       context.device)
                setups.append(ProbeSetup(task, trained, swapped, facts, parts))
            records = run_probes(setups, params, context.device, skip_unreachable=True)
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
                         "best_fact_adaptive": pd.Series(list(evaluations.values()), dtype=float).max(),  # NaN: untrained
                         "probes": len(evaluations)})
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


HOSTS = ("stores_all", "standalone")
"""Where a whitening probe hosts its MLPs: 'stores_all', the first of the widths s, 2s, 4s, ...
(s the standalone size, at most the width cap) at which the folded trained AND swapped MLPs each
recall every fact of their map on their own; 'standalone', s itself (the earlier host, whose
swapped MLP need not store its own map)."""


def ladder(size: int, cap: int) -> list[int]:
    """The host widths tried from the standalone size: size, 2 size, 4 size, ... below the cap, then
    the cap (the cap alone when size >= cap)."""
    widths = [size]
    while widths[-1] * 2 < cap:
        widths.append(widths[-1] * 2)
    return widths + [cap] if widths[-1] < cap else widths


def batched(items, size: int):
    """Lists of up to `size` consecutive items, each built only when asked for: a consumer that
    drops a list before asking for the next holds at most one list's items."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass(frozen=True)
class WhiteningSetting:
    """One (alpha, method, seed) of a whitening family: the whitened table, the two maps' fact sets
    (whitened), the original fact sets, the transforms that fold back, and the generators' parts."""

    task: Task
    originals: tuple[FactSet, FactSet]
    whitened: tuple[FactSet, FactSet]
    transforms: tuple[Tensor, Tensor]
    ustar: Tensor | None
    parts: tuple


def host_cap(method: str, dim: int, search: dict) -> int:
    """The widest host of `method`: the search's width cap (NTK units, GD hidden units), d for the
    encoder-decoder's code."""
    return {"unit_prefix": search["ntk_max_width"], "trained": search["gd_max_width"]}.get(METHODS[method].search, dim)


def _folded_pair(setting: WhiteningSetting, method: str, size: int, trained: nn.Module | None, params: dict,
                 device) -> tuple[nn.Module, nn.Module, int]:
    """(folded trained MLP, folded swapped MLP, swapped n_params) of `method` at `size` on the
    whitened maps; `trained`: the search's MLP at this size (built when None)."""
    if trained is None:
        trained, _ = build_mlp(method, setting.whitened[0], size, derived_generator(*setting.parts, 1), params,
                               setting.ustar, device)
    swapped, n_params = build_mlp(method, setting.whitened[1], size, derived_generator(*setting.parts, 2), params,
                                  setting.ustar, device)
    folded = tuple(fold(mlp, *setting.transforms, params["value_fold"]) for mlp in (trained, swapped))
    return folded[0], folded[1], n_params


def _stores_all(trained: nn.Module, swapped: nn.Module, originals: tuple[FactSet, FactSet]) -> bool:
    """Whether each folded MLP recalls every fact of its own map (original basis, whole table)."""
    return module_accuracy(trained, originals[0]) == 1.0 and module_accuracy(swapped, originals[1]) == 1.0


def _hosted(setting: WhiteningSetting, method: str, host: str, found, size: int, cap: int, params: dict,
            device) -> tuple[ProbeSetup, dict]:
    """The probe of one host (HOSTS) and its row's host columns: 'standalone' at the standalone
    size; 'stores_all' up the ladder until both folded MLPs store every fact (else at the cap).
    Only one candidate pair is alive at a time."""
    if host not in HOSTS:
        raise ValueError(f"host must be one of {HOSTS}, got {host!r}")
    widths = ladder(size, cap) if host == "stores_all" else [size]
    for width in widths:
        trained, swapped, n_params = _folded_pair(setting, method, width, found.module if width == size else None,
                                                  params, device)
        stores = _stores_all(trained, swapped, setting.originals)
        if stores or width == widths[-1]:
            break
        trained = swapped = None  # dropped before the next candidate is built
    return (ProbeSetup(setting.task, trained, swapped, setting.originals, setting.parts + (host,)),
            {"host": host, "host_size": width, "host_params": n_params, "host_stored": stores})


def _whitening_settings(params: dict, inputs: dict[str, Path]):
    """Every (alpha, seed) of the step's embedding kind, built lazily: (replicate, alpha, task,
    originals, whitened fact sets, transforms)."""
    kind, lengths = params["kind"], JunkLengths(**params["lengths"])
    for replicate in range(params["seeds"]):
        generator = derived_generator(params["seed"], "usability-anisotropic", params["d"], params["n_facts"],
                                      params.get("kappa"), replicate)
        embeddings = (real_embeddings(inputs["embeddings"], params["n_junk"], params["d"], params.get("n_facts"))
                      if kind == "real" else
                      anisotropic_embeddings(params["n_facts"], params["d"], params["kappa"], params["n_junk"], generator))
        maps = two_maps(len(embeddings[0]), derived_generator(params["seed"], "usability-maps", kind, replicate))
        task, originals = probe_task(*embeddings, lengths, maps, kind)
        for alpha in params["alphas"]:
            first, key_transform, value_transform = whiten_fact_set(originals[0], alpha, alpha)
            second = FactSet(first.keys, first.values, maps[1], first.name)
            yield replicate, float(alpha), task, originals, (first, second), (key_transform, value_transform)


def _whitening_probes(params: dict, inputs: dict[str, Path], device):
    """(row, ProbeSetup) of every (alpha, seed, method, host), built lazily (whitening's order)."""
    kind, target = params["kind"], params["standalone_target"]
    for replicate, alpha, task, originals, whitened, transforms in _whitening_settings(params, inputs):
        ustar = margin_optimal_targets(whitened[0].values)[0]
        n_facts, dim = originals[0].keys.shape
        for method in params["methods"]:
            parts = (params["seed"], "usability-whitening", kind, method, alpha, replicate)
            setting = WhiteningSetting(task, originals, whitened, transforms, ustar, parts)
            found = smallest_widths_configured(
                method, whitened[0], [target], derived_generator(*parts), params["mlp_search"],
                protocol=gd.Protocol.from_config(params["gd"]), degree=params["ntk_degree"],
                value_targets=METHODS[method].value_targets(whitened[0], ustar), device=device,
            )[target]
            size = found.width if found.width is not None else max(found.evaluations)
            cap = max(size, host_cap(method, dim, params["mlp_search"]))
            n_params = found.n_params if found.n_params is not None else found.params_at_cap
            for host in params["hosts"]:
                setup, hosted = _hosted(setting, method, host, found, size, cap, params, device)
                yield ({"experiment": "whitening", "method": method, "d": dim, "F": n_facts, "replicate": replicate,
                        "alpha": alpha, "kind": kind, "size": size, "n_params": n_params,
                        "stored": found.width is not None, "value_fold": params["value_fold"],
                        "facts_per_parameter": n_facts / n_params if found.width is not None else 0.0} | hosted, setup)
            del found


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Standalone capacity and fact-adaptive accuracy against the whitening strength alpha.

    params: kind ('real' | 'synthetic'), alphas, methods, seeds, standalone_target, value_fold
    ('inverse' | 'dual', see `fold`), hosts (HOSTS: where each probe hosts its MLPs), mlp_search
    (the fact-storing-MLP study's search settings), and the task / training / MLP settings of
    `capacity`; synthetic: d, n_facts, kappa; real: d (the projection), n_facts (at most). inputs:
    embeddings (real only). For each alpha, method and seed: keys and the decoding table whitened
    with strength alpha (whitening.whiten_fact_set), the smallest size storing standalone_target of
    f1 there (size, n_params, stored: the standalone capacity), and per host the MLPs for f1 and f2
    at the host's width folded back to the original basis (host_size, host_params, host_stored)
    with one usability evaluation of them. Probes are built, run and dropped params.runs_per_batch
    at a time: at most one batch's MLPs are alive. Returns {"table": one row per (alpha, method,
    seed, host)}.
    """
    rows = []
    for chunk in batched(_whitening_probes(params, inputs, context.device), params["runs_per_batch"]):
        described, setups = zip(*chunk)
        rows += [row | record for row, record in zip(described, run_probes(list(setups), params, context.device))]
        del chunk, described, setups
    for row in rows:
        print(f"{row['kind']} alpha={row['alpha']:g} {row['method']} seed {row['replicate']} {row['host']}: standalone "
              f"size {row['size']} (stored: {row['stored']}), host size {row['host_size']} (stores all: "
              f"{row['host_stored']}), folded standalone {row['standalone_swapped']:.4f}, fact-adaptive max "
              f"{row['fact_adaptive_max']:.4f}, attention on key {row['attention_on_key']:.3f}, Lip/rms "
              f"{row['lipschitz_relative']:.3g}", flush=True)
    return {"table": pd.DataFrame(rows)}
