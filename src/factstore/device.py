"""Choose the compute device once, at the entry point: CUDA when present, else the CPU."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from factstore.errors import DeviceUnavailable


def select_device(requested: str | None = None) -> torch.device:
    """`requested` (or $FACTSTORE_DEVICE) may be 'cpu', 'cuda', 'cuda:1' or 'auto' (the default)."""
    choice = (requested or os.environ.get("FACTSTORE_DEVICE") or "auto").lower()
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        source = "--device" if requested else "FACTSTORE_DEVICE"
        raise DeviceUnavailable(f"{source}={choice}, but CUDA is not available on this machine "
                                f"(use cpu or auto, or run where a GPU is)")
    try:
        return torch.device(choice)
    except RuntimeError as error:
        raise ValueError(f"unknown device '{choice}': use auto, cpu or cuda[:N]") from error


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
