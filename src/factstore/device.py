"""Choose the compute device once, at the entry point: CUDA when present, else the CPU."""

from __future__ import annotations

import os

import torch


def select_device(requested: str | None = None) -> torch.device:
    """`requested` (or $FACTSTORE_DEVICE) may be 'cpu', 'cuda', 'cuda:1' or 'auto' (the default)."""
    choice = (requested or os.environ.get("FACTSTORE_DEVICE") or "auto").lower()
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device '{choice}' was requested but CUDA is not available on this machine")
    try:
        return torch.device(choice)
    except RuntimeError as error:
        raise ValueError(f"unknown device '{choice}': use auto, cpu or cuda[:N]") from error


def seed_everything(seed: int) -> None:
    """Seed torch's CPU and CUDA generators (library code takes explicit generators as well)."""
    torch.manual_seed(seed)
