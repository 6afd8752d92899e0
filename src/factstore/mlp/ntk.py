"""NTK MLPs: fact-storing gated MLPs built in closed form (the paper's Algorithm 5, S0).

Construction, for keys K (F, d_in), targets Y (F, d_out) with rows y_i = V_f(i) (or U*_f(i)):

    W_gate ~ N(0, 1)^{h x d_in}          P ~ N(0, 1)^{d_out x h}, columns normalised to 1
    Z = K W_gate^T (F, h)                 H = h_k(Z)  (normalised Hermite, see modules.py)
    A = Y P (F, h)                        W_up = (1/h) (H o A)^T K   (h, d_in)
    g(x) = P (sigma(W_gate x) o (W_up x))

Why it stores facts: unit j contributes p_j sigma(w_j.x) (1/h) sum_l h_k(w_j.k_l) <p_j, y_l>
<k_l, x>; averaged over the random w_j, p_j this is (c_k / d_out) sum_l <k_l, x>^{k+1} y_l with
c_k = E[sigma(z) h_k(z)], a kernel memory dominated by the l with k_l = x. Finite width adds
noise of order 1/sqrt(h), which is why storage needs h large enough; a larger k sharpens the
kernel (crosstalk <k_l, x>^{k+1} ~ d^{-(k+1)/2}). If c_k = 0 (ReLU with k = 3, identity with
k >= 2) the construction stores nothing, and if c_k < 0 (ReLU with k = 4) it emits -y and
decodes wrong values, so `build` refuses both.

Prefix property (DESIGN.md): unit j's parameters and its unscaled up row
u_j = (H_j o A_j)^T K depend on nothing but unit j, and the width-h MLP is
g_h(x) = (1/h) sum_{j<h} p_j sigma(w_j.x) (u_j.x). Units are drawn from the generator in fixed
blocks of UNIT_BLOCK, so the first h units of a wider build are exactly the width-h build, and
`accuracy_by_width` gets the accuracy at every width from one pass over units.

Non-gated variant (the paper's step eps "for an ordinary MLP"): each gated unit becomes the pair
of ordinary units [sigma((w + eps a).x) - sigma(w.x)] / eps with a = (W_up)_j, which tends to
sigma'(w.x) (a.x) as eps -> 0: the gated unit with gate sigma' instead of sigma. It stores facts
when E[sigma'(z) h_k(z)] != 0 (ReLU: k = 1 yes, k = 2 no).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet, dot_product_accuracy, per_value_targets
from factstore.mlp.modules import (
    GatedMLP,
    PlainMLP,
    activation_derivative,
    activation_function,
    gaussian_hermite_coefficient,
    hermite_features,
    parameter_count,
)

UNIT_BLOCK = 64
"""Units are drawn from the generator in blocks of this many, so every width is a prefix."""

DEFAULT_STEP = 1e-3
"""Finite-difference step eps of the non-gated variant (float64 makes the error ~ eps)."""


# ---------------------------------------------------------------------------------------------
# Random units, drawn so that every width is a prefix of every wider one
# ---------------------------------------------------------------------------------------------


class UnitDraws:
    """The random (w_j, p_j) of an NTK MLP, drawn lazily in blocks of UNIT_BLOCK units.

    Each block draws randn(UNIT_BLOCK, d_in) for the gate rows, then randn(UNIT_BLOCK, d_out)
    for the projection columns; identical calls in an identical order give identical numbers,
    so `units(0, h)` is the same however many units are drawn in all (whatever torch's sampler
    does with tensor sizes).
    """

    def __init__(self, d_in: int, d_out: int, generator: torch.Generator) -> None:
        self.d_in, self.d_out, self.generator = d_in, d_out, generator
        self._gate_blocks: list[Tensor] = []
        self._projection_blocks: list[Tensor] = []

    def _draw_block(self) -> None:
        gate = torch.randn(UNIT_BLOCK, self.d_in, generator=self.generator, dtype=torch.float64)
        projection = torch.randn(UNIT_BLOCK, self.d_out, generator=self.generator, dtype=torch.float64)
        self._gate_blocks.append(gate)
        self._projection_blocks.append(projection / projection.norm(dim=1, keepdim=True))

    def units(self, start: int, stop: int) -> tuple[Tensor, Tensor]:
        """(W_gate rows start..stop-1 (n, d_in), P columns start..stop-1 as rows (n, d_out))."""
        while len(self._gate_blocks) * UNIT_BLOCK < stop:
            self._draw_block()
        gate = torch.cat(self._gate_blocks[start // UNIT_BLOCK : math.ceil(stop / UNIT_BLOCK)])
        projection = torch.cat(self._projection_blocks[start // UNIT_BLOCK : math.ceil(stop / UNIT_BLOCK)])
        offset = (start // UNIT_BLOCK) * UNIT_BLOCK
        return gate[start - offset : stop - offset], projection[start - offset : stop - offset]


# ---------------------------------------------------------------------------------------------
# The construction, unit block by unit block
# ---------------------------------------------------------------------------------------------


def construction_targets(fact_set: FactSet, value_targets: Tensor | None = None) -> Tensor:
    """(F, d_out) float64: the output each key is built to emit, Y_i = T_f(i).

    T = value_targets (n_values, d_out) if given (e.g. U*, solved once by the caller), else the
    values V themselves.
    """
    return per_value_targets(fact_set, value_targets)[fact_set.fact_map]


def check_hermite_coefficient(activation: str, degree: int, gate_derivative: bool = False) -> float:
    """c_k = E[s(z) h_k(z)] with s = sigma (or sigma'); raise unless c_k > 0.

    The infinite-width output is (c_k / d_out) sum_l <k_l, x>^{k+1} y_l: with c_k = 0 it stores
    nothing (ReLU, k = 3), with c_k < 0 it emits -y and decodes the wrong values (ReLU, k = 4).
    """
    gate = activation_derivative(activation, degree) if gate_derivative else activation_function(activation, degree)
    coefficient = gaussian_hermite_coefficient(gate, degree)
    if coefficient < 1e-6:
        which = "sigma'" if gate_derivative else "sigma"
        raise ValueError(
            f"E[{which}(z) h_{degree}(z)] = {coefficient:.3g} for activation '{activation}': an NTK MLP of "
            f"Hermite degree {degree} stores no fact with it (it needs > 0); choose another degree or activation"
        )
    return coefficient


def unscaled_up_rows(keys: Tensor, targets: Tensor, preactivation: Tensor, projection: Tensor, degree: int) -> Tensor:
    """(n, d_in): u_j = (H_j o A_j)^T K for a block of n units, without the 1/h factor.

    keys: (F, d_in); targets: (F, d_out); preactivation: Z = K W_gate^T (F, n) of the block;
    projection: (n, d_out) rows p_j (columns of P).
    """
    features = hermite_features(preactivation, degree)  # H: (F, n)
    coefficients = targets @ projection.T  # A = Y P: (F, n)
    return (features * coefficients).T @ keys


def unit_block_outputs(
    keys: Tensor, targets: Tensor, gate: Tensor, projection: Tensor, activation: str, degree: int
) -> Tensor:
    """(F, d_out): sum over a block of units of p_j sigma(w_j.k_i) (u_j.k_i), unscaled.

    The width-h MLP's outputs at the keys are (1/h) times this sum over units 0..h-1.
    """
    preactivation = keys @ gate.T  # Z: (F, n), used by the Hermite features and by the gate
    up_rows = unscaled_up_rows(keys, targets, preactivation, projection, degree)
    sigma = activation_function(activation, degree)
    return (sigma(preactivation) * (keys @ up_rows.T)) @ projection


def _construct(
    fact_set: FactSet, size: int, generator: torch.Generator, activation: str, degree: int,
    value_targets: Tensor | None, block_size: int,
) -> GatedMLP:
    """The gated NTK MLP of width `size` (no check of the Hermite coefficient)."""
    if size < 1:
        raise ValueError(f"width must be >= 1, got {size}")
    keys = fact_set.keys.to(torch.float64)
    targets = construction_targets(fact_set, value_targets)
    gate, projection = UnitDraws(fact_set.key_dim, fact_set.value_dim, generator).units(0, size)
    blocks = [slice(start, start + block_size) for start in range(0, size, block_size)]
    up_rows = torch.cat([
        unscaled_up_rows(keys, targets, keys @ gate[block].T, projection[block], degree) for block in blocks
    ])
    module = GatedMLP(fact_set.key_dim, size, fact_set.value_dim, activation, degree)
    with torch.no_grad():
        module.gate.weight.copy_(gate)
        module.main.weight.copy_(up_rows / size)
        module.down.weight.copy_(projection.T)
    return module


def build(
    fact_set: FactSet,
    size: int,
    generator: torch.Generator,
    activation: str = "relu",
    degree: int = 1,
    value_targets: Tensor | None = None,
    block_size: int = 1024,
) -> tuple[GatedMLP, int]:
    """The width-`size` NTK MLP storing `fact_set` (float64, bias-free), and its 3 h d parameters.

    size: hidden width h. activation: 'relu' (default), 'silu', 'identity' or 'hermite'.
    degree: Hermite degree k of the features H = h_k(Z). value_targets: (n_values, d_out), the
    vector emitted for each value (e.g. U*); None: the values V themselves.
    block_size: units processed together (memory ~ F x block_size).
    """
    check_hermite_coefficient(activation, degree)
    module = _construct(fact_set, size, generator, activation, degree, value_targets, block_size)
    return module, parameter_count(module)


def finite_difference_mlp(gated: GatedMLP, step: float = DEFAULT_STEP) -> PlainMLP:
    """The non-gated MLP whose unit pairs [sigma((w + eps a).x) - sigma(w.x)] / eps emulate
    sigma'(w.x) (a.x): W_in = [W_gate + eps W_up; W_gate] (2h, d_in), W_out = [P, -P] / eps."""
    hidden = gated.hidden
    module = PlainMLP(gated.gate.in_features, 2 * hidden, gated.down.out_features, gated.activation, gated.degree)
    with torch.no_grad():
        gate, up, projection = gated.gate.weight, gated.main.weight, gated.down.weight
        module.input.weight.copy_(torch.cat([gate + step * up, gate]))
        module.output.weight.copy_(torch.cat([projection, -projection], dim=1) / step)
    return module


def build_finite_difference(
    fact_set: FactSet,
    size: int,
    generator: torch.Generator,
    activation: str = "relu",
    degree: int = 1,
    value_targets: Tensor | None = None,
    step: float = DEFAULT_STEP,
    block_size: int = 1024,
) -> tuple[PlainMLP, int]:
    """Non-gated NTK MLP from `size` gated units, i.e. 2 * size ordinary units (4 h d params).

    Same random units as `build` with the same generator state; see the module docstring for
    which gate it emulates (sigma'), hence the check of E[sigma'(z) h_k(z)].
    """
    check_hermite_coefficient(activation, degree, gate_derivative=True)
    gated = _construct(fact_set, size, generator, activation, degree, value_targets, block_size)
    module = finite_difference_mlp(gated, step)
    return module, parameter_count(module)


# ---------------------------------------------------------------------------------------------
# One pass over units: accuracy at every width
# ---------------------------------------------------------------------------------------------


class PrefixAccumulator:
    """Running sum S_h = sum_{j<h} p_j sigma(w_j.k_i) (u_j.k_i) over the units of one NTK MLP.

    `advance(h)` adds units up to width h (never goes back); `outputs()` is S_h / h, exactly
    the width-h MLP's outputs at the keys. `copy()` keeps a checkpoint (used by the width search).
    """

    def __init__(
        self, fact_set: FactSet, generator: torch.Generator, activation: str = "relu", degree: int = 1,
        value_targets: Tensor | None = None, block_size: int = 1024,
        draws: UnitDraws | None = None,
    ) -> None:
        check_hermite_coefficient(activation, degree)
        self.keys = fact_set.keys.to(torch.float64)
        self.targets = construction_targets(fact_set, value_targets)
        self.draws = draws or UnitDraws(fact_set.key_dim, fact_set.value_dim, generator)
        self.activation, self.degree, self.block_size = activation, degree, block_size
        self.width = 0
        self.sum = torch.zeros(fact_set.n_facts, fact_set.value_dim, dtype=torch.float64)

    def advance(self, width: int) -> None:
        if width < self.width:
            raise ValueError(f"cannot go back from width {self.width} to {width}")
        for start in range(self.width, width, self.block_size):
            stop = min(start + self.block_size, width)
            gate, projection = self.draws.units(start, stop)
            self.sum += unit_block_outputs(self.keys, self.targets, gate, projection, self.activation, self.degree)
        self.width = width

    def outputs(self) -> Tensor:
        """(F, d_out): the width-h MLP's outputs at the keys."""
        return self.sum / self.width

    def copy(self) -> PrefixAccumulator:
        clone = object.__new__(PrefixAccumulator)
        clone.__dict__.update(self.__dict__)
        clone.sum = self.sum.clone()
        return clone


def accuracy_by_width(
    fact_set: FactSet,
    widths: Iterable[int],
    generator: torch.Generator,
    activation: str = "relu",
    degree: int = 1,
    value_targets: Tensor | None = None,
    block_size: int = 1024,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> dict[int, float]:
    """{h: accuracy of build(fact_set, h, generator-in-the-same-state)} for every h, in one pass.

    Cost: one construction at max(widths) plus one F x n_values decoding check per width.
    """
    accumulator = PrefixAccumulator(
        fact_set, generator, activation, degree, value_targets, block_size
    )
    accuracies = {}
    for width in sorted(set(widths)):
        if width < 1:
            raise ValueError(f"widths must be >= 1, got {width}")
        accumulator.advance(width)
        accuracies[width] = dot_product_accuracy(
            accumulator.outputs(), fact_set.values, fact_set.fact_map, chunk_size
        )
    return accuracies
