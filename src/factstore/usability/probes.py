"""Usability probes (S0 "Usability inside a Transformer"): the MLPs a probe hosts, running probes in
batches, and where a usability search starts and stops.

Every probe trains one Transformer (usability.training.usability): the MLP it is trained with
stores map f1; the MLP swapped in stores a fresh map f2 on the same embeddings, is built the same
way at the same size, and its Lipschitz constant is the one the probe records. Every MLP is built,
searched and scored against the whole table the Transformer decodes over
(usability.task.mlp_fact_set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.facts import FactSet
from factstore.geometry import margin_optimal_targets
from factstore.mlp import gd
from factstore.mlp.methods import METHODS, get_method
from factstore.mlp.modules import module_accuracy
from factstore.mlp.results import of_degree
from factstore.usability.lipschitz import tangent_lipschitz
from factstore.usability.task import Task
from factstore.usability.training import Probe, TrainingSettings, usability

RECORD_COLUMNS = ("fact_adaptive_max", "fact_adaptive", "fact_adaptive_max_step", "plain_recall", "attention_on_key",
                  "ceiling", "restarts", "steps", "stop", "evaluations", "train_accuracy")
"""The columns of a usability evaluation (usability.training.usability) a probe's row keeps."""


@dataclass(frozen=True)
class MlpSettings:
    """How a probe's MLPs are built: the gd.Protocol a trained method trains with, the Hermite
    degree an NTK builds with."""

    protocol: gd.Protocol
    degree: int

    @classmethod
    def from_config(cls, section: dict, degree: int) -> MlpSettings:
        """The settings of a config's GD section ({learning_rate, max_steps, patience, ...}) and NTK degree."""
        return cls(gd.Protocol.from_config(section), degree)


def build_mlp(method: str, fact_set: FactSet, size: int, generator: torch.Generator, settings: MlpSettings,
              ustar: Tensor | None = None, device: torch.device | str = "cpu") -> tuple[nn.Module, int]:
    """(module, n_params): one MLP of `method` (mlp.methods.METHODS) at `size` on fact_set.
    ustar: U* of fact_set.values for a U* method (solved when None)."""
    entry = METHODS[method]
    return entry.build_at(fact_set, size, generator, protocol=settings.protocol, degree=settings.degree,
                          value_targets=entry.value_targets(fact_set, ustar), device=device)


def ustar_for(method: str, values: Tensor) -> Tensor | None:
    """U* of the values (n_values, d) for a method that emits it (one solve shared by both fact
    maps), else None."""
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


def run_probes(setups: list[ProbeSetup], settings: TrainingSettings, runs_per_batch: int, lipschitz_samples: int,
               device, skip_unreachable: bool = False) -> list[dict]:
    """Usability evaluations of probes of one shape, runs_per_batch Transformers per batch, with the
    standalone accuracies (over the whole decoding table) and the tangent-space Lipschitz constants
    (from lipschitz_samples keys) of their swapped MLPs: one table row per probe. skip_unreachable:
    probes whose ceiling is below the target are recorded untrained (usability.training.train_attention)."""
    rows = []
    for first in range(0, len(setups), runs_per_batch):
        chunk = setups[first:first + runs_per_batch]
        probes = [Probe(setup.task, setup.trained, setup.facts[0].fact_map, setup.swapped, setup.facts[1].fact_map,
                        derived_generator(*setup.generator_parts, "train")) for setup in chunk]
        for setup, record in zip(chunk, usability(probes, settings, device, skip_unreachable=skip_unreachable)):
            lipschitz, relative, rms = tangent_lipschitz(setup.swapped, setup.facts[1].keys, lipschitz_samples,
                                                         derived_generator(*setup.generator_parts, "lipschitz"))
            rows.append({"standalone_trained": module_accuracy(setup.trained, setup.facts[0]),
                         "standalone_swapped": module_accuracy(setup.swapped, setup.facts[1])}
                        | {key: record[key] for key in RECORD_COLUMNS}
                        | {"batched_runs": len(chunk), "lipschitz": lipschitz,
                           "lipschitz_relative": relative, "output_rms": rms})
    return rows


def standalone_guess(table: pd.DataFrame, dim: int, n_facts: int, target: float, degree: int) -> tuple[int, float]:
    """(median standalone width over seeds, median n_params) of the fact-storing-MLP study's
    capacity table at (d, F, target), NTK rows of Hermite degree `degree`; (1, NaN) without a
    stored row (the search then doubles from 1)."""
    rows = table[(table.d == dim) & (table.F == n_facts) & (table.target - target).abs().lt(1e-9)
                 & table.stored.astype(bool)]
    rows = rows[of_degree(rows, degree)]
    if rows.empty:
        return 1, math.nan
    return max(1, int(round(rows.width.median()))), float(rows.n_params.median())


def size_cap(method: str, dim: int, guess: int, max_factor: float) -> int:
    """The largest size a usability search probes: max_factor x the standalone size, and never a
    code size above d for the encoder-decoder (the method's search strategy caps it)."""
    cap = max(1, math.ceil(guess * max_factor))
    return get_method(method).search.size_cap(cap, dim)
