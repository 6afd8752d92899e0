"""Where usability falls against the MLP's Lipschitz constant (S0, the paper's Fig. 8b).

Two rules, both stated before any run:
- `smallest_failing`: the smallest Lipschitz constant among MLPs whose fact-adaptive accuracy is
  below the usability target (every MLP below it is usable by construction; the claim is that
  most MLPs above it are not).
- `logistic_fit`: P(usable | L) = sigmoid(slope * (log10 L - log10 L_half)) by maximum likelihood
  with a small ridge on the slope (it keeps the fit finite when the two groups separate
  perfectly); L_half is where usability is a coin flip, slope < 0 means usability falls with L.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize


class LogisticFit(NamedTuple):
    """P(usable) = sigmoid(slope * (log10 L - midpoint)); threshold = 10^midpoint."""

    slope: float
    midpoint: float

    @property
    def threshold(self) -> float:
        return 10.0**self.midpoint if math.isfinite(self.midpoint) else math.nan


def smallest_failing(lipschitz, accuracy, target: float) -> float:
    """min L over the MLPs with accuracy < target; inf when every MLP reaches the target."""
    lipschitz, accuracy = np.asarray(lipschitz, dtype=float), np.asarray(accuracy, dtype=float)
    failing = lipschitz[accuracy < target]
    return float(failing.min()) if len(failing) else math.inf


def usable_fraction(lipschitz, accuracy, target: float, threshold: float, above: bool = True) -> float:
    """Fraction of MLPs with accuracy >= target among those with L >= threshold (above) or
    L < threshold (below); NaN when there is none."""
    lipschitz, accuracy = np.asarray(lipschitz, dtype=float), np.asarray(accuracy, dtype=float)
    side = lipschitz >= threshold if above else lipschitz < threshold
    return float((accuracy[side] >= target).mean()) if side.any() else math.nan


def logistic_fit(lipschitz, usable, ridge: float = 1e-3) -> LogisticFit:
    """Maximum-likelihood logistic fit of usable (bool) against log10 L (module docstring).

    NaN slope and midpoint when every MLP is usable or none is (nothing to locate).
    """
    x = np.log10(np.asarray(lipschitz, dtype=float))
    y = np.asarray(usable, dtype=float)
    keep = np.isfinite(x)
    x, y = x[keep], y[keep]
    if len(x) < 2 or y.min() == y.max():
        return LogisticFit(math.nan, math.nan)
    centre, spread = x.mean(), max(x.std(), 1e-12)
    z = (x - centre) / spread

    def loss(theta: np.ndarray) -> float:
        logits = theta[0] * z + theta[1]
        return float(np.sum(np.logaddexp(0.0, logits) - y * logits) + ridge * theta[0] ** 2)

    theta = minimize(loss, np.zeros(2), method="BFGS").x
    slope = theta[0] / spread
    if slope == 0:
        return LogisticFit(0.0, math.nan)
    # theta0 z + theta1 = 0  <=>  x = centre - theta1 spread / theta0
    return LogisticFit(float(slope), float(centre - theta[1] * spread / theta[0]))
