"""Random +-1 patterns and labels for capacity experiments, batched over instances.

Instances that belong to different loads alpha share one tensor: every instance gets the same
padded number of patterns P_max, and a boolean mask marks the first P = round(alpha N) of them as
real. Padding patterns are random too but never enter a loss or an error count.
"""

from __future__ import annotations

import torch


def patterns_for_load(alpha: float, weights: int) -> int:
    """P = round(alpha W): the number of patterns at load alpha for a machine with W weights."""
    if alpha <= 0 or weights <= 0:
        raise ValueError(f"need alpha > 0 and weights > 0, got alpha={alpha}, weights={weights}")
    return max(1, round(alpha * weights))


def random_signs(shape: tuple[int, ...], generator: torch.Generator, device="cpu", dtype=torch.float32) -> torch.Tensor:
    """I.i.d. uniform +-1 entries (drawn on the CPU with `generator`, then moved: reproducible on any device)."""
    bits = torch.randint(0, 2, shape, generator=generator, dtype=torch.int8)
    return (2 * bits - 1).to(device=device, dtype=dtype)


def load_batch(
    counts: list[int], n_inputs: int, generator: torch.Generator, n_outputs: int = 0, device="cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One batch of independent instances with counts[b] real patterns each.

    Returns patterns (B, P_max, N), labels (B, P_max) (or (B, P_max, O) when n_outputs > 0) and
    mask (B, P_max) bool, True on the first counts[b] patterns of instance b.
    """
    batch, p_max = len(counts), max(counts)
    patterns = random_signs((batch, p_max, n_inputs), generator, device)
    label_shape = (batch, p_max, n_outputs) if n_outputs > 0 else (batch, p_max)
    labels = random_signs(label_shape, generator, device)
    counts_tensor = torch.as_tensor(counts, device=device)
    mask = torch.arange(p_max, device=device)[None, :] < counts_tensor[:, None]
    return patterns, labels, mask
