"""What every benchmark shares: the peak memory of a run and writing its report with a sidecar.

Benchmarks are scripts (`python benchmarks/bench_<study>.py`); this folder is on their import
path, so they `from common import ...`.
"""

from __future__ import annotations

import resource

import torch

from factstore import io, provenance


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory in MiB: the CUDA allocator's peak on a GPU, the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_report(report: object, path: str, script: str, params: dict, device: torch.device, threads: int,
                 wall_time_s: float) -> None:
    """Write a benchmark's JSON report atomically, with its provenance sidecar (as a workflow step's)."""
    io.write_json(report, path)
    io.write_json(provenance.collect(step=script, params=params, inputs={}, device=device, threads=threads,
                                     wall_time_s=wall_time_s), io.sidecar_path(path))
