"""Encoder-decoder MLPs (S0): the PROJECT'S RECONSTRUCTION of the paper's construction.

The paper (arXiv 2512.00207) describes its encoder-decoder MLP but does not publish the exact
gadget; what follows is rebuilt from its description and is the project's own choice where the
description is silent. Every such choice is marked "(choice)".

    g(x) = D enc(x),    D (d_out, m) a random projection (the Johnson-Lindenstrauss bottleneck)

Decoder. D is the first m columns of a Haar-random orthogonal d_out x d_out matrix (choice: with
orthonormal columns, m = d_out gives D D^T = I, so a valid code size always exists, and the
first m columns of one draw give nested decoders, so the smallest m can be searched on one draw).
The code of fact i is c_i = D^T t_f(i) with t = v (or u*, margin-optimal); it decodes when
argmax_j <D c_i, v_j> = f(i), i.e. when the projection D D^T t_f(i) still points to its value.
`code_accuracy` checks this directly on the F x n_values scores (in chunks).

Gated encoder enc(x) = E (sigma(G x + b_G) o (A x + b_A)) + b_E with m-dimensional output.
Keys are split at random into n = ceil(F / d_in) buckets of at most d_in keys. Bucket b owns
one gate g_b shared by m hidden units (b, r), r = 0..m-1, and E sums unit (b, r) into code
coordinate r. With the gates fixed, enc(k_i)_r = sum_b s_b(k_i) (a_br . k_i + beta_br) is
LINEAR in the main-branch rows and biases, so the m conditions enc(k_i) = c_i for all keys are
m least-squares problems that share one design matrix

    X (F, n (d_in + 1)),  row i = [s_1(k_i) [k_i, 1], ..., s_n(k_i) [k_i, 1]],   s_b = sigma(g_b . k + b_b)

solved together by torch.linalg.lstsq (float64; min-norm solution). X has full row rank, hence
every key is stored exactly, for all but a measure-zero set of keys as long as n (d_in + 1) >= F
and the gate values are "generic" -- which is the whole design question for the gates:
- (choice, default gates="interpolating") g_b is the minimum-norm solution of g_b . k_i = 1 for
  every key i of bucket b, with b_G = 0: each key's row carries weight exactly 1 on its own
  block (never an all-zero row), and the ReLU cuts the other keys at generic places, so the
  gate values are genuinely nonlinear in the key.
- gates="random": G ~ N(0, 1), b_G = 0, as the description reads literally. It works when n is
  large, but a key sees no active ReLU gate with probability 2^-n (n = 1, 2 fail often).
Measured alternatives that fail: random biases (a gate can be dead on every key) and gates
aligned with the bucket mean with biases chosen to cut other buckets (they end up active on
nearly all keys, i.e. affine, and an affine gate makes s_b(k) k quadratic in k: X loses rank).
The gate activation must be nonlinear (not 'identity') for the same reason.

The dense module has hidden width H = n m; its gate rows repeat g_b m times and E is the 0/1
summing matrix. Parameters: 2 H (d_in + 1) + (H + 1) m + d_out m ~ 2 F m + F m^2 / d_in, i.e.
O(m F) as in the paper, and m grows like log F / rho^2 (JL), hence W ~ F log F.

Non-gated encoder enc(x) = E sigma(A x + b_A) + b_E: A, b_A random, [E, b_E] solved by least
squares on the F x (N + 1) random-feature matrix; it needs about N ~ F hidden units.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet, per_value_targets, stored_mask
from factstore.mlp.modules import EncoderDecoderMLP, GatedMLP, PlainMLP, activation_function, parameter_count

GateKind = Literal["interpolating", "random"]
Solver = Literal["lstsq", "gram"]


# ---------------------------------------------------------------------------------------------
# Decoder and codes
# ---------------------------------------------------------------------------------------------


def random_orthogonal(dim: int, generator: torch.Generator) -> Tensor:
    """(dim, dim) float64 Haar-random orthogonal matrix (QR of a Gaussian with the sign fix)."""
    gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    return q * torch.sign(torch.diagonal(r))


def code_accuracy(
    fact_set: FactSet, decoder: Tensor, value_targets: Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> float:
    """Fraction of facts whose code c = D^T t_f(i) decodes: argmax_j <D D^T t_f(i), v_j> = f(i).

    decoder: (d_out, m); value_targets: (n_values, d_out). Each distinct value used by the fact
    map is decoded once against all values (row chunks), then counted once per fact.
    """
    used_values, fact_to_used = torch.unique(fact_set.fact_map, return_inverse=True)
    decoded = (value_targets[used_values] @ decoder) @ decoder.T
    stored = stored_mask(decoded, fact_set.values, used_values, chunk_size)
    return float(stored[fact_to_used].double().mean())


# ---------------------------------------------------------------------------------------------
# Gated encoder: buckets, gates, one least-squares solve
# ---------------------------------------------------------------------------------------------


def random_buckets(n_keys: int, n_buckets: int, generator: torch.Generator) -> Tensor:
    """(F,) bucket id of each key: a random split into n_buckets of near-equal size."""
    order = torch.randperm(n_keys, generator=generator)
    buckets = torch.empty(n_keys, dtype=torch.long)
    buckets[order] = torch.arange(n_keys) % n_buckets
    return buckets


def interpolating_gates(keys: Tensor, buckets: Tensor, n_buckets: int) -> Tensor:
    """(n, d_in): g_b = argmin ||g|| subject to g . k_i = 1 for every key i in bucket b."""
    gates = torch.zeros(n_buckets, keys.shape[1], dtype=keys.dtype)
    for bucket in range(n_buckets):
        gates[bucket] = torch.linalg.pinv(keys[buckets == bucket]).sum(dim=1)  # pinv(K_b) @ 1
    return gates


def encoder_design_matrix(keys: Tensor, gate_values: Tensor) -> Tensor:
    """(F, n (d_in + 1)): row i = [s_b(k_i) [k_i, 1] for b in buckets].

    keys: (F, d_in); gate_values: (F, n) with entries s_b(k_i).
    """
    augmented = torch.cat([keys, torch.ones(len(keys), 1, dtype=keys.dtype)], dim=1)
    return (gate_values[:, :, None] * augmented[:, None, :]).reshape(len(keys), -1)


def design_transpose_times(gate_values: Tensor, augmented_keys: Tensor, dual: Tensor) -> Tensor:
    """X^T y as (n, d_in + 1, m), block b = sum_i s_b(k_i) [k_i, 1]^T y_i, without forming X.

    gate_values: (F, n); augmented_keys: [K, 1] (F, d_in + 1); dual: y (F, m).
    """
    return torch.stack([augmented_keys.T @ (gate_values[:, [b]] * dual) for b in range(gate_values.shape[1])])


def design_times(gate_values: Tensor, augmented_keys: Tensor, theta: Tensor) -> Tensor:
    """X theta as (F, m) = sum_b s_b(k_i) [k_i, 1] theta_b, without forming X; theta (n, d_in + 1, m)."""
    return sum(gate_values[:, [b]] * (augmented_keys @ theta[b]) for b in range(gate_values.shape[1]))


def encoder_gram(gate_values: Tensor, augmented_keys: Tensor, chunk_size: int = 1024) -> Tensor:
    """X X^T (F, F) = ([K, 1] [K, 1]^T) o (S S^T), the second factor multiplied in by row chunks
    so that only one F x F matrix is ever held."""
    gram = augmented_keys @ augmented_keys.T
    for start in range(0, len(gram), chunk_size):
        rows = slice(start, start + chunk_size)
        gram[rows] *= gate_values[rows] @ gate_values.T
    return gram


def solve_main_branch(keys: Tensor, gate_values: Tensor, codes: Tensor, solver: Solver = "lstsq") -> Tensor:
    """(n, d_in + 1, m): main-branch rows and biases [a_br, beta_br] with enc(k_i) = c_i.

    keys: (F, d_in); gate_values: (F, n); codes: (F, m). The m columns of `codes` are m
    independent least-squares problems sharing one design matrix X (one call, m right-hand
    sides), and both solvers return the min-norm solution of X theta = codes:
    - 'lstsq' (default, S0's): torch.linalg.lstsq on X (F, n (d_in + 1)) with the SVD
      driver gelsd. The CPU default, gelsy, returned a different exact solution from call to call
      on the same wide X (the min-norm one only sometimes: its null-space part depended on memory
      left over from earlier allocations), which made the encoder's weights, its Lipschitz
      constant and everything downstream change between two runs of one seed.
    - 'gram': theta = X^T y with (X X^T) y = codes, by Cholesky plus one step of iterative
      refinement. X X^T = ([K, 1] [K, 1]^T) o (S S^T) is formed without X, so memory is two
      F x F matrices (Gram and its factor) at most -- 4.1 GB at F = 2^14, as lstsq -- and it
      is 4-13x faster there (48-52 s vs 207-651 s, d = 128, one thread on a busy box).
      Squaring the condition number costs accuracy that the refinement step wins back (the
      codes are met to ~1e-14 at F = 2^12).
    """
    n_keys, n_buckets = gate_values.shape
    augmented = torch.cat([keys, torch.ones(n_keys, 1, dtype=keys.dtype)], dim=1)
    if solver == "lstsq":
        solution = torch.linalg.lstsq(encoder_design_matrix(keys, gate_values), codes, driver="gelsd").solution
        return solution.reshape(n_buckets, keys.shape[1] + 1, codes.shape[1])
    if solver == "gram":
        factor, info = torch.linalg.cholesky_ex(encoder_gram(gate_values, augmented))
        if info != 0:
            raise ValueError(
                "the encoder's design matrix is not of full row rank (a key has no active gate, or "
                "the gates are affine on the keys); use gates='interpolating' or solver='lstsq'"
            )
        theta = design_transpose_times(gate_values, augmented, torch.cholesky_solve(codes, factor))
        residual = codes - design_times(gate_values, augmented, theta)
        return theta + design_transpose_times(gate_values, augmented, torch.cholesky_solve(residual, factor))
    raise ValueError(f"unknown solver '{solver}' (use 'lstsq' or 'gram')")


def gated_encoder(
    gates: Tensor, main_branch: Tensor, activation: str, gate_bias: Tensor | None = None
) -> GatedMLP:
    """The dense GatedMLP enc: d_in -> m with hidden units (b, r) at index b m + r.

    gates: (n, d_in); main_branch: (n, d_in + 1, m) from solve_main_branch.
    """
    n_buckets, d_in_plus_one, code_size = main_branch.shape
    hidden = n_buckets * code_size
    encoder = GatedMLP(d_in_plus_one - 1, hidden, code_size, activation, bias=True)
    with torch.no_grad():
        encoder.gate.weight.copy_(gates.repeat_interleave(code_size, dim=0))
        encoder.gate.bias.copy_(
            torch.zeros(hidden, dtype=torch.float64) if gate_bias is None else gate_bias.repeat_interleave(code_size)
        )
        rows = main_branch.permute(0, 2, 1).reshape(hidden, d_in_plus_one)  # unit (b, r) -> [a_br, beta_br]
        encoder.main.weight.copy_(rows[:, :-1])
        encoder.main.bias.copy_(rows[:, -1])
        encoder.down.weight.copy_(torch.eye(code_size, dtype=torch.float64).repeat(1, n_buckets))
        encoder.down.bias.zero_()
    return encoder


def build(
    fact_set: FactSet,
    size: int,
    generator: torch.Generator,
    activation: str = "relu",
    value_targets: Tensor | None = None,
    gates: GateKind = "interpolating",
    solver: Solver = "lstsq",
) -> tuple[EncoderDecoderMLP, int]:
    """The gated encoder-decoder MLP with code size m = `size` (<= d_out) storing `fact_set`.

    Draw order from `generator`: the orthogonal d_out x d_out decoder draw, then the bucket split
    (then random gates if gates='random'); D = its first m columns, so every m shares one draw.
    Returns the dense module and its parameter count (see the module docstring).
    """
    decoder, codes = decoder_and_codes(fact_set, size, generator, value_targets)
    keys = fact_set.keys.to(torch.float64)
    n_buckets = math.ceil(fact_set.n_facts / fact_set.key_dim)
    buckets = random_buckets(fact_set.n_facts, n_buckets, generator)
    if gates == "interpolating":
        gate_rows = interpolating_gates(keys, buckets, n_buckets)
    elif gates == "random":
        gate_rows = torch.randn(n_buckets, fact_set.key_dim, generator=generator, dtype=torch.float64)
    else:
        raise ValueError(f"unknown gate kind '{gates}' (use 'interpolating' or 'random')")
    gate_values = activation_function(activation)(keys @ gate_rows.T)
    main_branch = solve_main_branch(keys, gate_values, codes, solver)
    module = EncoderDecoderMLP(gated_encoder(gate_rows, main_branch, activation), decoder)
    return module, parameter_count(module)


def decoder_and_codes(
    fact_set: FactSet, code_size: int, generator: torch.Generator, value_targets: Tensor | None
) -> tuple[Tensor, Tensor]:
    """(D (d_out, m), codes (F, m) = T_f(i) D): the decoder draw comes first from `generator`.

    T = value_targets (n_values, d_out), e.g. U*; None: the values V themselves.
    """
    if not 1 <= code_size <= fact_set.value_dim:
        raise ValueError(f"code size must be in [1, d_out = {fact_set.value_dim}], got {code_size}")
    decoder = random_orthogonal(fact_set.value_dim, generator)[:, :code_size]
    targets = per_value_targets(fact_set, value_targets)[fact_set.fact_map]
    return decoder, targets @ decoder


# ---------------------------------------------------------------------------------------------
# Non-gated encoder
# ---------------------------------------------------------------------------------------------


def build_plain(
    fact_set: FactSet,
    size: int,
    generator: torch.Generator,
    hidden_units: int | None = None,
    activation: str = "relu",
    value_targets: Tensor | None = None,
    bias_scale: float = 0.1,
) -> tuple[EncoderDecoderMLP, int]:
    """Non-gated encoder-decoder MLP with code size m = `size` and N = hidden_units hidden units.

    A ~ N(0, 1) (N, d_in) and b_A ~ N(0, bias_scale^2) give random features
    Phi = sigma(K A^T + b_A) (F, N); [E, b_E] is the min-norm solution of
    [Phi, 1] [E, b_E]^T = codes, exact when Phi has full row rank (N + 1 >= F, generic keys).
    Default N = F + d_in (choice): N = F is square and ill-conditioned (smallest singular value
    ~1e-3 at F = 2^10, weights ~10x larger); d_in spare units fix that. A small bias (choice)
    makes the features universal without the dead / everywhere-active units (affine on the
    keys, hence linearly dependent) that b_A ~ N(0, 1) produces; the latter measurably lost a
    rank at every F tried. Draw order: decoder, A, b_A.
    """
    decoder, codes = decoder_and_codes(fact_set, size, generator, value_targets)
    hidden = hidden_units or fact_set.n_facts + fact_set.key_dim
    keys = fact_set.keys.to(torch.float64)
    input_weight = torch.randn(hidden, fact_set.key_dim, generator=generator, dtype=torch.float64)
    input_bias = bias_scale * torch.randn(hidden, generator=generator, dtype=torch.float64)
    features = activation_function(activation)(keys @ input_weight.T + input_bias)
    design = torch.cat([features, torch.ones(len(keys), 1, dtype=torch.float64)], dim=1)
    solution = torch.linalg.lstsq(design, codes, driver="gelsd").solution  # (N + 1, m); gelsd: see solve_main_branch
    encoder = PlainMLP(fact_set.key_dim, hidden, size, activation, bias=True)
    with torch.no_grad():
        encoder.input.weight.copy_(input_weight)
        encoder.input.bias.copy_(input_bias)
        encoder.output.weight.copy_(solution[:-1].T)
        encoder.output.bias.copy_(solution[-1])
    module = EncoderDecoderMLP(encoder, decoder)
    return module, parameter_count(module)


def gated_parameter_count(n_facts: int, d_in: int, d_out: int, code_size: int) -> int:
    """Parameters of `build`'s dense module without building it (the module docstring's count):
    hidden H = ceil(F / d_in) m; gate and main rows with biases 2 H (d_in + 1), the summing map
    E with its bias (H + 1) m, the decoder d_out m. At code_size = d_out it is the most an
    encoder-decoder of this fact set can cost (m <= d_out)."""
    hidden = math.ceil(n_facts / d_in) * code_size
    return 2 * hidden * (d_in + 1) + (hidden + 1) * code_size + d_out * code_size
