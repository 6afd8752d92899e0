"""The whitening trade-off's probes (S0, the paper's Fig. 8a): every (alpha, seed, method, host) of
one embedding kind, its MLPs built on whitened keys and values, folded back to the original basis
and hosted at a width where both store their maps.

Probes are built lazily, in the step's order, so that a consumer holding one batch of them holds
at most that batch's MLPs (`batched`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.facts import FactSet
from factstore.geometry import margin_optimal_targets
from factstore.mlp.methods import get_method
from factstore.mlp.modules import fold_module, module_accuracy
from factstore.mlp.smallest_width_searches import WidthSearch
from factstore.mlp.width_search import SearchSettings
from factstore.usability.probes import MlpSettings, ProbeSetup, build_mlp
from factstore.usability.task import JunkLengths, Task, anisotropic_embeddings, probe_task, real_embeddings, two_maps
from factstore.whitening import whiten_fact_set

VALUE_FOLDS = ("inverse", "dual")

HOSTS = ("stores_all", "standalone")
"""Where a whitening probe hosts its MLPs: 'stores_all', the first of the widths s, 2s, 4s, ...
(s the standalone size, at most the width cap) at which the folded trained AND swapped MLPs each
recall every fact of their map on their own; 'standalone', s itself (the earlier host, whose
swapped MLP need not store its own map)."""


def fold(module: nn.Module, key_transform: Tensor, value_transform: Tensor, kind: str) -> nn.Module:
    """An MLP built on whitened keys and values, made to read the original keys and write in the
    original embedding basis. 'inverse' (the paper's): the output map folds W_alpha^-1, the inverse
    of the value whitening, so an output near a whitened value lands near the original value;
    'dual' (a variant): it folds W_alpha itself, which keeps dot-product decoding exactly
    (<W_alpha g, v> = <g, W_alpha^T v>, the whitened value's score)."""
    if kind not in VALUE_FOLDS:
        raise ValueError(f"value fold must be one of {VALUE_FOLDS}, got {kind!r}")
    return fold_module(module, key_transform, torch.linalg.inv(value_transform) if kind == "inverse" else value_transform)


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


def host_cap(method: str, dim: int, search: SearchSettings) -> int:
    """The widest host of `method`: the search's width cap (NTK units, GD hidden units), d for the
    encoder-decoder's code (search: the fact-storing-MLP study's search settings)."""
    return get_method(method).search.configured_cap(search, dim)


def folded_pair(setting: WhiteningSetting, method: str, size: int, trained: nn.Module | None, mlp: MlpSettings,
                value_fold: str, device) -> tuple[nn.Module, nn.Module, int]:
    """(folded trained MLP, folded swapped MLP, swapped n_params) of `method` at `size` on the
    whitened maps, folded with `value_fold` (VALUE_FOLDS); `trained`: the search's MLP at this
    size (built when None)."""
    if trained is None:
        trained, _ = build_mlp(method, setting.whitened[0], size, derived_generator(*setting.parts, 1), mlp,
                               setting.ustar, device)
    swapped, n_params = build_mlp(method, setting.whitened[1], size, derived_generator(*setting.parts, 2), mlp,
                                  setting.ustar, device)
    folded = tuple(fold(module, *setting.transforms, value_fold) for module in (trained, swapped))
    return folded[0], folded[1], n_params


def stores_all(trained: nn.Module, swapped: nn.Module, originals: tuple[FactSet, FactSet]) -> bool:
    """Whether each folded MLP recalls every fact of its own map (original basis, whole table)."""
    return module_accuracy(trained, originals[0]) == 1.0 and module_accuracy(swapped, originals[1]) == 1.0


def hosted(setting: WhiteningSetting, method: str, host: str, found: WidthSearch, size: int, cap: int,
           mlp: MlpSettings, value_fold: str, device) -> tuple[ProbeSetup, dict]:
    """The probe of one host (HOSTS) and its row's host columns: 'standalone' at the standalone
    size; 'stores_all' up the ladder until both folded MLPs store every fact (else at the cap).
    Only one candidate pair is alive at a time."""
    if host not in HOSTS:
        raise ValueError(f"host must be one of {HOSTS}, got {host!r}")
    widths = ladder(size, cap) if host == "stores_all" else [size]
    for width in widths:
        trained, swapped, n_params = folded_pair(setting, method, width, found.module if width == size else None,
                                                 mlp, value_fold, device)
        stores = stores_all(trained, swapped, setting.originals)
        if stores or width == widths[-1]:
            break
        trained = swapped = None  # dropped before the next candidate is built
    return (ProbeSetup(setting.task, trained, swapped, setting.originals, setting.parts + (host,)),
            {"host": host, "host_size": width, "host_params": n_params, "host_stored": stores})


@dataclass(frozen=True)
class WhiteningFamily:
    """The tables a whitening step sweeps: one embedding kind ('real' MiniLM | 'synthetic'
    anisotropic), its seeds, alphas and task settings. n_facts: F (real: at most); dim: d (real:
    the projection); kappa: the synthetic keys' anisotropy (None for real); embeddings: the real
    kind's embeddings file (None for synthetic)."""

    kind: str
    seed: int
    seeds: int
    dim: int
    n_facts: int | None
    kappa: float | None
    n_junk: int
    lengths: JunkLengths
    alphas: tuple[float, ...]
    embeddings: Path | None = None


def whitening_settings(family: WhiteningFamily) -> Iterator[tuple]:
    """Every (alpha, seed) of the family, built lazily: (replicate, alpha, task, originals,
    whitened fact sets, (key transform, value transform))."""
    kind = family.kind
    for replicate in range(family.seeds):
        generator = derived_generator(family.seed, "usability-anisotropic", family.dim, family.n_facts, family.kappa,
                                      replicate)
        embeddings = (real_embeddings(family.embeddings, family.n_junk, family.dim, family.n_facts)
                      if kind == "real" else
                      anisotropic_embeddings(family.n_facts, family.dim, family.kappa, family.n_junk, generator))
        maps = two_maps(len(embeddings[0]), derived_generator(family.seed, "usability-maps", kind, replicate))
        task, originals = probe_task(*embeddings, family.lengths, maps, kind)
        for alpha in family.alphas:
            first, key_transform, value_transform = whiten_fact_set(originals[0], alpha, alpha)
            second = FactSet(first.keys, first.values, maps[1], first.name)
            yield replicate, float(alpha), task, originals, (first, second), (key_transform, value_transform)


def whitening_probes(family: WhiteningFamily, methods: list[str], hosts: list[str], standalone_target: float,
                     search: SearchSettings, mlp: MlpSettings, value_fold: str, device) -> Iterator[tuple[dict, ProbeSetup]]:
    """(row, ProbeSetup) of every (alpha, seed, method, host) of the family, built lazily (alpha
    within seed, then method, then host). Per (alpha, seed, method): the smallest size storing
    standalone_target of f1 on the whitened table (search: the fact-storing-MLP study's search
    settings), then each host's pair of folded MLPs (`hosted`)."""
    kind, target = family.kind, standalone_target
    for replicate, alpha, task, originals, whitened, transforms in whitening_settings(family):
        ustar = margin_optimal_targets(whitened[0].values)[0]
        n_facts, dim = originals[0].keys.shape
        for method in methods:
            parts = (family.seed, "usability-whitening", kind, method, alpha, replicate)
            setting = WhiteningSetting(task, originals, whitened, transforms, ustar, parts)
            entry = get_method(method)
            found = entry.search.smallest_widths(
                entry, whitened[0], [target], derived_generator(*parts), search, protocol=mlp.protocol,
                degree=mlp.degree, value_targets=entry.value_targets(whitened[0], ustar), device=device,
            )[target]
            size = found.width if found.width is not None else max(found.evaluations)
            cap = max(size, host_cap(method, dim, search))
            n_params = found.n_params if found.n_params is not None else found.params_at_cap
            for host in hosts:
                setup, host_columns = hosted(setting, method, host, found, size, cap, mlp, value_fold, device)
                yield ({"experiment": "whitening", "method": method, "d": dim, "F": n_facts, "replicate": replicate,
                        "alpha": alpha, "kind": kind, "size": size, "n_params": n_params,
                        "stored": found.width is not None, "value_fold": value_fold,
                        "facts_per_parameter": n_facts / n_params if found.width is not None else 0.0} | host_columns,
                       setup)
            del found
