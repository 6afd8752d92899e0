"""Provenance of a result: what produced it, where, and how long it took.

A sidecar answers "can I trust and reproduce this number?": the resolved parameters and seed,
the git commit (and whether the tree had uncommitted changes), package versions, the device, and
the wall time and the peak memory. It names no folder of the machine it ran on: the command is
recorded as `["python -m factstore", STEP, ...]`, not by the absolute path of the runner's file.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import platform
import resource
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("factstore", "torch", "numpy", "scipy", "pandas", "matplotlib", "seaborn", "snakemake")


def parameters_fingerprint(params: dict, leave_out: tuple[str, ...] = ("checkpoint",)) -> str:
    """sha256 of a step's parameters (canonical JSON) without the keys in `leave_out` (where a
    checkpoint is written does not change what is trained): a saved training state is resumed
    only by a step whose fingerprint matches."""
    kept = {key: value for key, value in params.items() if key not in leave_out}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


@functools.cache
def git_state(directory: str | None = None) -> dict[str, Any]:
    """The commit of the checkout that holds `directory` (default: this source file) and a dirty flag."""
    cwd = directory or str(Path(__file__).resolve().parent)

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit or "unknown", "dirty": bool(status) if status is not None else None}


@functools.cache
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def describe_device(device: Any) -> str:
    """A readable device name: 'cpu' or 'cuda:0 (NVIDIA H200)'."""
    text = str(device)
    if text.startswith("cuda"):
        import torch

        return f"{text} ({torch.cuda.get_device_name(torch.device(text))})"
    return text


def peak_memory_mib(device: Any = "cpu") -> dict[str, float]:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB), and the
    peak CUDA memory allocated by torch when the step ran on a GPU."""
    peak = {"cpu": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if str(device).startswith("cuda"):
        import torch

        peak["cuda"] = round(torch.cuda.max_memory_allocated(torch.device(str(device))) / 2**20, 1)
    return peak


def study_of(step: str) -> str:
    """The study a step belongs to, from its name `<module>.<function>`: the module up to its first
    underscore, so that a study's step modules count together ('mlp_summary.summary' and
    'committee_least_action.embedding' are steps of 'mlp' and 'committee'). No study's name has one."""
    return step.split(".")[0].split("_")[0]


def process_cpu_time_s() -> float:
    """CPU seconds (user + system, every thread) this process has used since it started."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def command_line(argv: list[str] | None = None) -> list[str]:
    """The command that ran the step, shaped like sys.argv (the program, then its arguments) but
    without this machine's folders: the runner's absolute path (sys.argv[0] under `python -m
    factstore`) becomes "python -m factstore", another program its file name."""
    argv = sys.argv if argv is None else argv
    program = Path(argv[0]) if argv else Path("python")
    if program.name == "__main__.py" and program.parent.name == "factstore":
        return ["python -m factstore", *argv[1:]]
    return [program.name, *argv[1:]]


def collect(
    *,
    step: str,
    params: dict[str, Any],
    inputs: dict[str, str],
    device: Any,
    threads: int,
    wall_time_s: float,
    step_cpu_time_s: float | None = None,
) -> dict[str, Any]:
    """Everything a sidecar records about one run of a step.

    cpu_time_s: the step's own CPU time (all threads) and the whole process's so far (the
    interpreter's start and imports included): their difference is a job's fixed cost."""
    return {
        "step": step,
        "params": params,
        "seed": params.get("seed", params.get("seeds")),
        "inputs": inputs,
        "git": git_state(),
        "versions": package_versions(),
        "device": describe_device(device),
        "threads": threads,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "command": command_line(),
        "wall_time_s": round(wall_time_s, 3),
        "cpu_time_s": {"step": None if step_cpu_time_s is None else round(step_cpu_time_s, 3),
                       "process": round(process_cpu_time_s(), 3)},
        "peak_memory_mib": peak_memory_mib(device),
    }
