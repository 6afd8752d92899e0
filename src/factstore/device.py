"""Choose the compute device once, at the entry point: CUDA when present, else the CPU."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from factstore.errors import DeviceUnavailable


DEVICE_NAME = re.compile(r"auto|cpu|cuda(:\d+)?")
"""The device names select_device accepts (lower case): auto, cpu, cuda, cuda:N."""


def device_name_problem(choice: str, source: str = "FACTSTORE_DEVICE") -> str | None:
    """Why `choice` (lower case) is not a device name select_device accepts, or None."""
    if DEVICE_NAME.fullmatch(choice):
        return None
    return f"{source}={choice} is not a device name: use auto, cpu, cuda or cuda:N (N the GPU's index)"


def select_device(requested: str | None = None) -> torch.device:
    """`requested` (or $FACTSTORE_DEVICE) may be 'cpu', 'cuda', 'cuda:1' or 'auto' (the default).

    Any other name (a typo such as 'gpu'), a CUDA device when CUDA is absent, or a CUDA index past
    the devices present raises DeviceUnavailable naming the source (--device or FACTSTORE_DEVICE),
    which the step runner prints as one line.
    """
    choice = (requested or os.environ.get("FACTSTORE_DEVICE") or "auto").strip().lower()
    source = "--device" if requested else "FACTSTORE_DEVICE"
    problem = device_name_problem(choice, source)
    if problem:
        raise DeviceUnavailable(problem)
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceUnavailable(f"{source}={choice}, but CUDA is not available on this machine "
                                f"(use cpu or auto, or run where a GPU is)")
    device = torch.device(choice)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceUnavailable(f"{source}={choice}, but this machine has {torch.cuda.device_count()} CUDA device(s) "
                                f"(use cuda:0..cuda:{torch.cuda.device_count() - 1}, cuda or auto)")
    return device


def seed_everything(seed: int) -> None:
    """Seed torch's CPU and CUDA generators (library code takes explicit generators as well)."""
    torch.manual_seed(seed)


def derived_generator(*parts: object, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded from a stable hash of `parts` (seed, d, alpha index, ...).

    Each job of a sweep gets its own stream that does not depend on which other jobs ran, so a
    single rerun reproduces exactly the numbers of the full sweep.
    """
    import hashlib

    digest = hashlib.sha256(repr(parts).encode()).digest()
    return torch.Generator(device=device).manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


@contextmanager
def seeded_global_generators(seed: int, device: str | torch.device = "cpu") -> Iterator[None]:
    """Inside the block torch's global generators are seeded with `seed`; after it, the CPU's (and,
    when `device` is CUDA, the CUDA devices') are restored. For draws that library code makes from
    the global generators (module initialisation, dropout masks): they then depend on `seed`
    alone, not on what ran before in the process."""
    cuda = torch.device(device).type == "cuda"
    with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if cuda else []):
        seed_everything(seed)
        yield


def global_generator_states() -> dict:
    """torch's global generator states (CPU, and every CUDA device's), e.g. for a checkpoint: a
    resumed run that restores them (set_global_generator_states) draws what the uninterrupted one would."""
    return {"cpu": torch.random.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_global_generator_states(states: dict | None) -> None:
    """Restore global_generator_states() (None, e.g. from a checkpoint written before they were kept: nothing)."""
    if states is None:
        return
    torch.random.set_rng_state(states["cpu"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
