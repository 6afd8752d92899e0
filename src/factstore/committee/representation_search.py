"""The trajectory search: least action continued, its internal representation certified by LPs
along the way (tree committee machines).

Least action's online trajectory visits a new internal representation (the sign each first-layer
unit gives on each pattern, with the cheapest flips on the misclassified ones) at every epoch; the
LP polish (`polish.polish`: one least-slack LP per unit for that representation) turns one of them
into weights and checks the sign machine on every pattern. A single attempt polishes only the
representation its last epoch left. The search continues the online rule (`least_action.
train_least_action`, the same randomised choice and fixed step) from the weights an attempt left,
for `epochs` further epochs, and polishes the representation every `polish_every` epochs: each
polish is one more candidate, and an instance counts as embedded as soon as one candidate's LP
weights classify every pattern (a proof, as for every other solver). The online weights go on from
where they were (the polish's weights are a candidate, not the next state): the online rule's
weights grow, its relative steps shrink, and the representations it visits late in a run are the
ones the LPs most often realise (measured: docs/methods/committee.md).
"""

from __future__ import annotations

import numpy as np
import torch

from factstore.committee import least_action, polish
from factstore.committee.architectures import Architecture


def search(
    architecture: Architecture, weights: torch.Tensor, patterns: torch.Tensor, labels: torch.Tensor,
    mask: torch.Tensor, embedded: torch.Tensor, *, epochs: int, polish_every: int, polish_rounds: int,
    learning_rate: float, choice_noise: float, generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, int, dict[int, np.ndarray]]:
    """Search every instance not yet embedded: weights (B, K, N / K) the online weights to go on
    from, patterns (B, P, N), labels and mask (B, P), embedded (B,) bool. Runs epochs // polish_every
    stretches of online least action, each followed by the polish (`polish_rounds` rounds) of the
    instances still unembedded. Returns (embedded after the search (B,) on the CPU: an instance
    embedded before stays embedded; the online epochs each instance ran in the search (B,); LPs
    solved; {instance: the weights (K, N / K) that embed it} for every instance the search embedded)."""
    after = embedded.clone().cpu()
    solutions: dict[int, np.ndarray] = {}
    current = weights.clone()
    epochs_run = torch.zeros(len(after), dtype=torch.long)
    solved = 0
    for _ in range(epochs // polish_every):
        left = torch.nonzero(~after).squeeze(1)
        if len(left) == 0:
            break
        index = left.to(patterns.device)
        x, y, m = patterns[index], labels[index], mask[index]
        online, final = least_action.train_least_action(
            architecture, [current[index]], x, y, m, epochs=polish_every, learning_rate=learning_rate,
            choice_noise=choice_noise, generator=generator)
        found_now: dict[int, np.ndarray] = {}
        found, lps = polish.polish(architecture, final, x, y, m, online.embedded, polish_rounds, found_now)
        solutions |= {int(left[b]): weights for b, weights in found_now.items()}
        solutions |= {int(left[b]): final[b].cpu().double().numpy() for b in torch.nonzero(online.embedded.cpu()).squeeze(1).tolist()}
        current[index] = final
        epochs_run[left] += online.epochs.cpu()
        after[left] = found
        solved += lps
    return after, epochs_run, solved, solutions
