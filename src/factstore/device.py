"""Choose the compute device once, at the entry point: CUDA when present, else the CPU."""

from __future__ import annotations

import os

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
