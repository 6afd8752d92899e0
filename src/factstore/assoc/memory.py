"""Linear associative memory (S1; Giorlandino, Goldt, Maillard, arXiv 2605.10795).

p input embeddings e_mu and p output embeddings u_mu in R^d, i.i.d. N(0, I/d). A matrix W stores
fact mu when argmax_rho u_rho^T W e_mu = mu. The load is alpha = p ln p / d^2; the optimal W
(trained on cross-entropy) stores everything up to alpha_c = 1/2 as d -> infinity, the Hebbian
W = sum_mu u_mu e_mu^T only up to 1/8.

Every function is batched over independent seeds (leading dimension S), so one call trains or
evaluates several problems at once. In the *decoupled* problem each input mu has its own p
candidate outputs: outputs then have shape (S, p, p, d) with outputs[:, mu, mu] the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.special import lambertw
from torch import Tensor

from factstore.cross_entropy import cross_entropy_gradient, logit_workspace
from factstore.training import check_finite


def facts_for_load(alpha: float, d: int) -> int:
    """The number of facts p with p ln p = alpha d^2 (rounded), via the Lambert W function.

    p ln p = x  <=>  ln p = W(x)  <=>  p = x / W(x).
    """
    if alpha <= 0 or d <= 0:
        raise ValueError(f"load alpha and dimension d must be positive, got alpha={alpha}, d={d}")
    x = alpha * d * d
    return max(2, int(round(x / lambertw(x).real)))


def load(p: int, d: int) -> float:
    """alpha = p ln p / d^2."""
    return p * math.log(p) / d**2


def sample_problem(
    p: int, d: int, n_seeds: int, generator: torch.Generator, decoupled: bool = False, dtype=torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian inputs (S, p, d) and outputs (S, p, d), or (S, p, p, d) for the decoupled problem.

    Scaled in place: the decoupled outputs are the step's largest tensor, drawn once, never copied."""
    scale = 1.0 / math.sqrt(d)
    inputs = torch.randn(n_seeds, p, d, generator=generator, dtype=dtype).mul_(scale)
    shape = (n_seeds, p, p, d) if decoupled else (n_seeds, p, d)
    outputs = torch.randn(*shape, generator=generator, dtype=dtype).mul_(scale)
    return inputs, outputs


def scores(weights: torch.Tensor, inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """Logits u_rho^T W e_mu, shape (S, p, p) indexed [seed, input mu, candidate rho].

    weights: (S, d, d); inputs: (S, p, d); outputs: (S, p, d) shared, or (S, p, p, d) decoupled.
    """
    recalled = inputs @ weights.transpose(1, 2)  # (S, p, d): W e_mu
    if outputs.dim() == 3:
        return recalled @ outputs.transpose(1, 2)
    return torch.einsum("smrd,smd->smr", outputs, recalled)


def recall_accuracy(
    weights: torch.Tensor, inputs: torch.Tensor, outputs: torch.Tensor, chunk_size: int = 2048
) -> torch.Tensor:
    """Fraction of facts recalled per seed, shape (S,). Evaluated in chunks of inputs (memory O(chunk p))."""
    n_seeds, p, _ = inputs.shape
    correct = torch.zeros(n_seeds, dtype=torch.long, device=inputs.device)
    for start in range(0, p, chunk_size):
        stop = min(start + chunk_size, p)
        chunk_outputs = outputs if outputs.dim() == 3 else outputs[:, start:stop]
        logits = scores(weights, inputs[:, start:stop], chunk_outputs)
        targets = torch.arange(start, stop, device=inputs.device)
        correct += (logits.argmax(dim=-1) == targets).sum(dim=-1)
    return correct.to(torch.float64) / p


def hebbian_weights(inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """W = sum_mu u_mu e_mu^T, shape (S, d, d); for the decoupled problem u_mu is each input's own target."""
    targets = outputs if outputs.dim() == 3 else torch.diagonal(outputs, dim1=1, dim2=2).transpose(1, 2)
    return targets.transpose(1, 2) @ inputs


@dataclass
class TrainingResult:
    """Trained weights (S, d, d) and, per seed, the best training accuracy reached and its step."""

    weights: torch.Tensor
    best_accuracy: torch.Tensor
    steps: int
    final_loss: float
    initial_weights: torch.Tensor | None = None  # W = Q R^T at step 0 (rank-constrained runs; full rank starts at 0)


def train_optimal(
    inputs: torch.Tensor,
    outputs: torch.Tensor,
    *,
    rank: int | None = None,
    max_steps: int = 3000,
    learning_rate: float = 0.01,
    patience: int = 300,
    generator: torch.Generator | None = None,
    progress=None,
    init_scale: float = 0.1,
    min_gain: float = 0.0,
    chunk_size: int = 2048,
) -> TrainingResult:
    """Adam on the cross-entropy of logits u_rho^T W e_mu over all p candidates, full batch.

    W is trained directly (rank None, started at zero so the first step is Hebbian), or as
    W = Q R^T with Q, R in R^{d x rank} (started small and random: zero is a saddle), the
    entries of Q and R i.i.d. N(0, init_scale^2 / d); the initial W is returned too.
    Stops when every seed recalls all facts, or when for `patience` steps no seed's best
    accuracy has risen by at least `min_gain` (a fraction of its facts; 0: any gain) above its
    value at the last such rise. The seeds are independent problems: the loss is their sum and
    Adam is elementwise, so batching them changes nothing but speed.

    Each step takes the loss, its gradient and the facts recalled in one pass over the logits
    (`cross_entropy_gradient`, chunks of `chunk_size` inputs; a tie counts as not recalled),
    then dW = G^T E per seed, G the gradient w.r.t. W e_mu: no autograd graph over the (S, p, p)
    logits.
    """
    n_seeds, p, d = inputs.shape
    device, dtype = inputs.device, inputs.dtype
    if rank is None:
        weights = torch.zeros(n_seeds, d, d, device=device, dtype=dtype, requires_grad=True)
        parameters = [weights]
    else:
        scale = init_scale / math.sqrt(d)
        left = torch.randn(n_seeds, d, rank, generator=generator, dtype=dtype).to(device) * scale
        right = torch.randn(n_seeds, d, rank, generator=generator, dtype=dtype).to(device) * scale
        left.requires_grad_(True)
        right.requires_grad_(True)
        parameters = [left, right]
    initial = None if rank is None else (left @ right.transpose(1, 2)).detach().clone()

    def current_weights() -> torch.Tensor:
        return weights if rank is None else parameters[0] @ parameters[1].transpose(1, 2)

    optimiser = torch.optim.Adam(parameters, lr=learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max_steps, eta_min=learning_rate * 1e-3)
    best = torch.zeros(n_seeds, dtype=torch.float64, device=device)
    reference = best.clone()  # each seed's best accuracy when patience last reset
    since_improvement = 0
    loss_value = float("nan")
    step = 0
    for step in range(1, max_steps + 1):
        current = current_weights()
        loss_sum, correct, weight_gradient = _loss_and_gradient(current.detach(), inputs, outputs, chunk_size)
        accuracy = correct.to(torch.float64) / p
        best = torch.maximum(best, accuracy)
        gained = best - reference
        if bool(((gained > 0) & (gained >= min_gain)).any()):
            since_improvement, reference = 0, best.clone()
        else:
            since_improvement += 1
        loss_value = float(loss_sum.sum()) / n_seeds
        check_finite(loss_value, parameters, where=f"assoc.train_optimal(p={p}, d={d}, rank={rank}, "
                     f"learning_rate={learning_rate})", step=step)
        if progress is not None:
            progress.update(1)
        if bool((best >= 1.0).all()) or since_improvement >= patience:
            break
        optimiser.zero_grad(set_to_none=True)
        if rank is None:
            weights.grad = weight_gradient
        else:
            current.backward(weight_gradient)
        optimiser.step()
        schedule.step()
    with torch.no_grad():
        final = current_weights().detach().clone()
        best = torch.maximum(best, recall_accuracy(final, inputs, outputs))
    return TrainingResult(weights=final, best_accuracy=best.cpu(), steps=step, final_loss=loss_value,
                          initial_weights=initial)


@torch.no_grad()
def _loss_and_gradient(
    weights: Tensor, inputs: Tensor, outputs: Tensor, chunk_size: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Per seed (S,): the cross-entropy summed over that seed's facts / p (its mean loss) and the
    facts recalled; and d (sum over seeds of the mean loss) / dW, shape (S, d, d).

    weights: (S, d, d); inputs: (S, p, d); outputs: (S, p, d), or (S, p, p, d) decoupled.
    """
    n_seeds, p, _ = inputs.shape
    recalled = inputs @ weights.transpose(1, 2)  # (S, p, d): W e_mu
    recalled_gradient = torch.empty_like(recalled)
    losses = torch.zeros(n_seeds, dtype=torch.float64, device=inputs.device)
    correct = torch.zeros(n_seeds, dtype=torch.int64, device=inputs.device)
    targets = torch.arange(p, device=inputs.device).unsqueeze(1)
    workspace = logit_workspace(p, p, chunk_size, like=recalled)
    for seed in range(n_seeds):
        for start in range(0, p, chunk_size):
            rows = slice(start, start + chunk_size)
            logits, gradient_buffer = workspace[:, : len(targets[rows])]
            if outputs.dim() == 3:
                torch.mm(recalled[seed, rows], outputs[seed].T, out=logits)
            else:  # each input's own outputs: logits[m, r] = <outputs[m, r], recalled[m]>
                torch.bmm(outputs[seed, rows], recalled[seed, rows].unsqueeze(2), out=logits.unsqueeze(2))
            logit_gradient, loss, n_correct = cross_entropy_gradient(logits, targets[rows], out=gradient_buffer)
            losses[seed] += loss
            correct[seed] += n_correct
            if outputs.dim() == 3:
                recalled_gradient[seed, rows] = logit_gradient @ outputs[seed]
            else:
                torch.bmm(logit_gradient.unsqueeze(1), outputs[seed, rows],
                          out=recalled_gradient[seed, rows].unsqueeze(1))
    recalled_gradient /= p
    return losses / p, correct, recalled_gradient.transpose(1, 2) @ inputs


def normalised_singular_values(weights: torch.Tensor, rank: int | None = None) -> torch.Tensor:
    """Singular values per seed (S, r), scaled so that their mean square is 1.

    For a rank-constrained W only the top `rank` values are kept (the rest are zero).
    """
    values = torch.linalg.svdvals(weights.to(torch.float64))
    if rank is not None:
        values = values[:, :rank]
    return values / values.pow(2).mean(dim=-1, keepdim=True).sqrt()


def quarter_circle_density(s: np.ndarray) -> np.ndarray:
    """rho(s) = sqrt(4 - s^2) / pi on [0, 2]: the law of the optimal W's singular values (E s^2 = 1)."""
    s = np.asarray(s, dtype=float)
    return np.where((s >= 0) & (s <= 2), np.sqrt(np.clip(4 - s**2, 0, None)) / np.pi, 0.0)


def quarter_circle_cdf(s: np.ndarray) -> np.ndarray:
    """P(S <= s) for the quarter-circle law: (s sqrt(4 - s^2) / 2 + 2 arcsin(s / 2)) / pi."""
    s = np.clip(np.asarray(s, dtype=float), 0, 2)
    return (s * np.sqrt(4 - s**2) / 2 + 2 * np.arcsin(s / 2)) / np.pi


def truncated_quarter_circle(rank_fraction: float) -> tuple[float, float]:
    """The quarter-circle law kept on its top `rank_fraction` of mass: (lower edge, E s^2 there).

    A rank-constrained optimum keeps the largest kappa d singular values; compared after
    normalising both to mean square 1, the edge and second moment fix the rescaling.
    """
    from scipy.integrate import quad
    from scipy.optimize import brentq

    if rank_fraction >= 1:
        return 0.0, 1.0
    lower = brentq(lambda s: 1 - quarter_circle_cdf(s) - rank_fraction, 0.0, 2.0)
    second_moment = quad(lambda s: s * s * quarter_circle_density(s), lower, 2.0)[0] / rank_fraction
    return lower, second_moment


def truncated_quarter_circle_cdf(s: np.ndarray, rank_fraction: float) -> np.ndarray:
    """CDF of the truncated law, in units where its own mean square is 1."""
    lower, second_moment = truncated_quarter_circle(rank_fraction)
    scaled = np.asarray(s, dtype=float) * math.sqrt(second_moment)
    base = quarter_circle_cdf(np.clip(scaled, lower, 2.0))
    return (base - quarter_circle_cdf(lower)) / rank_fraction


def truncated_quarter_circle_quantiles(probabilities: np.ndarray, rank_fraction: float) -> np.ndarray:
    """Quantiles of the top-kappa truncated quarter-circle law, in its own units (mean square 1).

    The law of the optimal rank-m W's singular values (m = kappa d, d and the load to infinity;
    docs/assoc_truncated_law.md derives it): the quarter circle kept on its top kappa of mass,
    rescaled to mean square 1. probabilities: any shape in [0, 1]; returns the same shape.
    Solved from the CDF by bracketing (the CDF is continuous and increasing on its support).
    """
    from scipy.optimize import brentq

    lower, second_moment = truncated_quarter_circle(rank_fraction)
    low, high = lower / math.sqrt(second_moment), 2.0 / math.sqrt(second_moment)
    flat = np.clip(np.asarray(probabilities, dtype=float).ravel(), 0.0, 1.0)
    out = np.array([low if q <= 0 else high if q >= 1 else
                    brentq(lambda x: float(truncated_quarter_circle_cdf(x, rank_fraction)) - q, low, high, xtol=1e-12)
                    for q in flat])
    return out.reshape(np.shape(probabilities))


def rank_capacity_ratio(rank_fraction: float) -> float:
    """Predicted alpha_c(kappa) / alpha_c(1): the share of the quarter circle's second moment
    carried by its top kappa of mass, integral_{s_kappa}^2 s^2 rho(s) ds (1 at kappa = 1).

    In the large-margin limit a W of Frobenius norm fixed stores facts in proportion to its
    alignment <W, G> with the Hebbian-like matrix G (quarter-circle spectrum); the best rank-m W
    keeps G's top m singular values (Eckart-Young) and so keeps this share of <G, G>
    (docs/assoc_truncated_law.md)."""
    if rank_fraction >= 1:
        return 1.0
    _, second_moment = truncated_quarter_circle(rank_fraction)
    return float(rank_fraction * second_moment)


def ks_distance(samples: np.ndarray, cdf) -> float:
    """Kolmogorov-Smirnov distance between the empirical law of `samples` and a CDF."""
    from scipy.stats import kstest

    return float(kstest(np.asarray(samples, dtype=float), cdf).statistic)


def extrapolate_capacity(capacities: np.ndarray, facts_at_capacity: np.ndarray) -> tuple[float, float]:
    """Fit alpha_c(d) = alpha_inf + b / ln p_c and return (alpha_inf, b): the d -> infinity estimate."""
    x = 1.0 / np.log(np.asarray(facts_at_capacity, float))
    slope, intercept = np.polyfit(x, np.asarray(capacities, float), 1)
    return float(intercept), float(slope)


def spectrum_load(capacity: pd.DataFrame, spectra: pd.DataFrame, problem: str, d: int, kappa: float) -> float:
    """The grid load closest to (at or below) the measured capacity: 'the optimal W at capacity'.

    The capacity is the paper's (criterion 'all': every fact stored in at least half the seeds)
    when the table has a criterion column."""
    row = capacity[(capacity.method == "trained") & (capacity.problem == problem) & (capacity.d == d) & (capacity.rank_fraction == kappa)]
    if "criterion" in row:
        row = row[row.criterion == "all"]
    loads = np.sort(spectra[(spectra.problem == problem) & (spectra.d == d) & (spectra.rank_fraction == kappa)].alpha.unique())
    alpha_c = row.alpha_c.iloc[0] if len(row) else np.nan
    below = loads[loads <= alpha_c] if np.isfinite(alpha_c) else loads[:1]
    return float(below[-1] if below.size else loads[0])
