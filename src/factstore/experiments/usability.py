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

The probes (their MLPs, batches, search caps) are factstore.usability.probes; the whitening
trade-off's settings, folds and hosts are factstore.usability.whitening_probes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from factstore.device import derived_generator
from factstore.io import read_table
from factstore.mlp.width_search import SearchSettings
from factstore.search import bracket_search_smallest_together
from factstore.usability.probes import (
    MlpSettings, ProbeSetup, build_mlp, run_probes, size_cap, standalone_guess, ustar_for,
)
from factstore.usability.task import JunkLengths, gaussian_probe_task
from factstore.usability.training import TrainingSettings
from factstore.usability.whitening_probes import WhiteningFamily, batched, whitening_probes


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
    mlp, training = MlpSettings.from_config(params["gd"], params["ntk_degree"]), TrainingSettings(**params["training"])
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
                trained, seen[replicate][size] = build_mlp(method, facts[0], size, derived_generator(*parts, 1), mlp,
                                                           ustars[replicate], context.device)
                swapped, _ = build_mlp(method, facts[1], size, derived_generator(*parts, 2), mlp, ustars[replicate],
                                       context.device)
                setups.append(ProbeSetup(task, trained, swapped, facts, parts))
            records = run_probes(setups, training, params["runs_per_batch"], params["lipschitz_samples"], context.device,
                                 skip_unreachable=True)
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


def whitening(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Standalone capacity and fact-adaptive accuracy against the whitening strength alpha.

    params: kind ('real' | 'synthetic'), alphas, methods, seeds, standalone_target, value_fold
    ('inverse' | 'dual': usability.whitening_probes.fold), hosts (usability.whitening_probes.HOSTS:
    where each probe hosts its MLPs), mlp_search (the fact-storing-MLP study's search settings),
    and the task / training / MLP settings of `capacity`; synthetic: d, n_facts, kappa; real: d (the projection), n_facts (at most). inputs:
    embeddings (real only). For each alpha, method and seed: keys and the decoding table whitened
    with strength alpha (whitening.whiten_fact_set), the smallest size storing standalone_target of
    f1 there (size, n_params, stored: the standalone capacity), and per host the MLPs for f1 and f2
    at the host's width folded back to the original basis (host_size, host_params, host_stored)
    with one usability evaluation of them. Probes are built, run and dropped params.runs_per_batch
    at a time: at most one batch's MLPs are alive. Returns {"table": one row per (alpha, method,
    seed, host)}.
    """
    family = WhiteningFamily(params["kind"], params["seed"], params["seeds"], params["d"], params.get("n_facts"),
                             params.get("kappa"), params["n_junk"], JunkLengths(**params["lengths"]),
                             tuple(params["alphas"]), inputs.get("embeddings"))
    mlp, training = MlpSettings.from_config(params["gd"], params["ntk_degree"]), TrainingSettings(**params["training"])
    probes = whitening_probes(family, params["methods"], params["hosts"], params["standalone_target"],
                              SearchSettings.from_config(params["mlp_search"]), mlp, params["value_fold"],
                              context.device)
    rows = []
    for chunk in batched(probes, params["runs_per_batch"]):
        described, setups = zip(*chunk)
        records = run_probes(list(setups), training, params["runs_per_batch"], params["lipschitz_samples"],
                             context.device)
        rows += [row | record for row, record in zip(described, records)]
        del chunk, described, setups
    for row in rows:
        print(f"{row['kind']} alpha={row['alpha']:g} {row['method']} seed {row['replicate']} {row['host']}: standalone "
              f"size {row['size']} (stored: {row['stored']}), host size {row['host_size']} (stores all: "
              f"{row['host_stored']}), folded standalone {row['standalone_swapped']:.4f}, fact-adaptive max "
              f"{row['fact_adaptive_max']:.4f}, attention on key {row['attention_on_key']:.3f}, Lip/rms "
              f"{row['lipschitz_relative']:.3g}", flush=True)
    return {"table": pd.DataFrame(rows)}
