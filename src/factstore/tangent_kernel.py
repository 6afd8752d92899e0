"""The neural tangent kernel of a two-layer ReLU network, finite and infinite width (S2).

The network, in NTK parameterisation, with every weight drawn i.i.d. N(0, 1):

    f(x) = a^T relu(W x / sqrt(d)) / sqrt(n),        W: (n, d), a: (n,)

Its empirical NTK is Theta_emp(x, x') = <d f(x) / d theta, d f(x') / d theta>, summed over BOTH
layers. `empirical_ntk` computes it with torch.func (vmap of jacrev over the parameters through
functional_call, then a contraction of the Jacobians); `analytic_ntk` is its n -> infinity limit.

Derivation of the limit (it confirms S2's formula and constants). With
u = w.x / sqrt(d), u' = w.x' / sqrt(d) jointly Gaussian, E u^2 = q11 = x.x/d, E u u' = q12 = x.x'/d:
- the a-gradients are relu(u_i) / sqrt(n), so their part of Theta is the average over units of
  relu(u_i) relu(u'_i) -> E relu(u) relu(u') = kappa1 = sqrt(q11 q22) / (2 pi) (sin t + (pi - t) cos t),
  t = arccos(q12 / sqrt(q11 q22)) (the degree-1 arc-cosine kernel, Cho and Saul 2009);
- the W-gradients are a_i relu'(u_i) x / sqrt(n d), so their part is the average of
  a_i^2 1[u_i > 0] 1[u'_i > 0] (x.x'/d) -> E[a^2] P(u > 0, u' > 0) q12 = q12 (pi - t) / (2 pi).
So Theta(x, x') = kappa1 + (x.x'/d) (pi - t) / (2 pi), exactly S2's formula, for N(0, 1) weights
in both layers (a different init variance of `a` would scale the second term by E a^2). Both terms
are averages over n i.i.d. units, so at initialisation ||Theta_emp - Theta||_F ~ n^{-1/2}; the tests
check the normalisation numerically at n = 2^14 (relative Frobenius error ~ 1e-2).

Training convention (used for the linearised dynamics): full-batch gradient descent with learning
rate eta on L = ||f(X) - y||^2 / (2 N). Gradient flow on this loss gives
    d f_t / dt = -(eta / N) Theta (f_t - y)   =>   f_t = f_0 + (I - exp(-eta Theta t / N)) (y - f_0),
with t counted in GD steps; GD follows it up to O(eta lambda_max / N) discretisation error.

How far the kernel moves in training: the classical statements (Jacot et al. 2018; Lee et al.
2019) bound ||Theta_t - Theta_0|| by O(n^{-1/2}). Measured here over a fixed GD run the relative
change falls faster, about n^{-0.8} for this ReLU network (a softplus network gives about n^{-1},
the rate finite-width expansions predict for smooth activations, Dyer and Gur-Ari 2020): the
first-order change of every unit carries the random sign of its a_i and averages out. For ReLU,
the units whose pre-activation crosses zero during training (a fraction ~ n^{-1/2}) add a slower
term; that this gives about n^{-3/4} is our heuristic reading, not a derived result.

Predicted learning curve (S2.kernel-scaling-law): on the sphere of radius sqrt(d) the analytic NTK
is a dot-product kernel of the cosine t, Theta = ntk_on_sphere(t), and the teacher is a sum of ridge
functions of the cosines <u_i, x / |x|>, so both decompose exactly by spherical-harmonic degree
(`factstore.spherical_spectrum`); `predicted_teacher_error` feeds that spectrum and the teacher's
weights to the spectral theory of kernel regression (`factstore.learning_curve_theory`).

All functions take and return tensors (float64 recommended), the spectral ones numpy arrays; none
reads configuration.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

from factstore import learning_curve_theory, spherical_spectrum
from factstore.training import check_finite

Params = dict[str, torch.Tensor]


# --------------------------------------------------------------------------------------------
# The network
# --------------------------------------------------------------------------------------------
class TwoLayerReLU(nn.Module):
    """f(x) = a^T relu(W x / sqrt(d)) / sqrt(n) with W: (n, d), a: (n,), all weights N(0, 1).

    The 1/sqrt(fan-in) factors live in the forward pass (NTK parameterisation), so the kernel
    has an O(1) limit as n -> infinity and every weight moves by O(1/sqrt(n)) during training.
    """

    def __init__(self, input_dim: int, width: int, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float64, device: torch.device | str | None = None):
        super().__init__()
        self.input_dim, self.width = input_dim, width
        self.W = nn.Parameter(torch.randn(width, input_dim, generator=generator, dtype=dtype, device=device))
        self.a = nn.Parameter(torch.randn(width, generator=generator, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d) -> (...,)"""
        hidden = torch.relu(x @ self.W.T / math.sqrt(self.input_dim))
        return hidden @ self.a / math.sqrt(self.width)


def network_params(model: nn.Module) -> Params:
    """The model's parameters as a detached dict {name: tensor}, the form torch.func works on."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def network_outputs(model: nn.Module, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    """Outputs of `model` evaluated with `params`. inputs: (N, d) -> (N,)"""
    return functional_call(model, params, (inputs,))


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------
def parameter_jacobian(model: nn.Module, params: Params, inputs: torch.Tensor,
                       chunk_size: int | None = None) -> Params:
    """Per-example gradients of the scalar output. inputs: (N, d) -> {name: (N, *param.shape)}.

    vmap over the examples of jacrev over the parameters (through functional_call); `chunk_size`
    bounds memory by vectorising over that many examples at a time.
    """

    def output_of_one(p: Params, x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, p, (x.unsqueeze(0),)).squeeze(0)

    return vmap(jacrev(output_of_one), in_dims=(None, 0), chunk_size=chunk_size)(params, inputs)


def contract_jacobians(jac1: Params, jac2: Params) -> torch.Tensor:
    """Theta = sum over parameter tensors of J1 J2^T. {name: (N, ...)}, {name: (M, ...)} -> (N, M)"""
    blocks = [jac1[name].flatten(1) @ jac2[name].flatten(1).T for name in jac1]
    return torch.stack(blocks).sum(0)


def empirical_ntk(model: nn.Module, params: Params, inputs: torch.Tensor,
                  other_inputs: torch.Tensor | None = None, chunk_size: int | None = None) -> torch.Tensor:
    """Empirical NTK of `model` at `params`. inputs: (N, d), other_inputs: (M, d) -> (N, M).

    Without `other_inputs` the (N, N) Gram matrix on `inputs` (Jacobians computed once).
    """
    jac = parameter_jacobian(model, params, inputs, chunk_size)
    other = jac if other_inputs is None else parameter_jacobian(model, params, other_inputs, chunk_size)
    return contract_jacobians(jac, other)


def arccos_kernels(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Infinite-width pieces for inputs x: (N, d), y: (M, d), all (N, M):

    q12 = x.y / d, kappa0 = (pi - t) / (2 pi) = P(u > 0, u' > 0), and
    kappa1 = sqrt(q11 q22) / (2 pi) (sin t + (pi - t) cos t) = E relu(u) relu(u'),
    where t = arccos(q12 / sqrt(q11 q22)) is the angle between x and y. A zero input has
    kappa1 = 0 and q12 = 0; its angle is set to pi/2 (any value gives the same kernel).
    """
    d = x.shape[-1]
    q12 = x @ y.T / d
    norms = torch.outer(x.norm(dim=-1), y.norm(dim=-1)) / d  # sqrt(q11 q22)
    cosine = torch.where(norms > 0, q12 / norms.clamp_min(torch.finfo(x.dtype).tiny), torch.zeros_like(q12))
    angle = torch.arccos(cosine.clamp(-1.0, 1.0))
    kappa0 = (math.pi - angle) / (2 * math.pi)
    kappa1 = norms / (2 * math.pi) * (torch.sin(angle) + (math.pi - angle) * torch.cos(angle))
    return q12, kappa0, kappa1


def analytic_ntk(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    """Infinite-width NTK of `TwoLayerReLU`, both layers trained. x: (N, d), y: (M, d) -> (N, M).

    Theta(x, y) = kappa1(x, y) + (x.y / d) (pi - t) / (2 pi)  (see the module docstring).
    It is symmetric PSD and positively homogeneous: Theta(c x, y) = c Theta(x, y) for c > 0.
    """
    y = x if y is None else y
    q12, kappa0, kappa1 = arccos_kernels(x, y)
    return kappa1 + q12 * kappa0


def relative_frobenius_error(estimate: torch.Tensor, reference: torch.Tensor) -> float:
    """||estimate - reference||_F / ||reference||_F (any matching shapes)."""
    return float(torch.linalg.matrix_norm(estimate - reference) / torch.linalg.matrix_norm(reference))


# --------------------------------------------------------------------------------------------
# Training and the linearised dynamics
# --------------------------------------------------------------------------------------------
def mse_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """L = ||outputs - targets||^2 / (2 N): the convention under which GD with rate eta follows
    d f/dt = -(eta / N) Theta (f - y). outputs, targets: (N,) -> scalar."""
    return 0.5 * (outputs - targets).pow(2).mean()


def train_full_batch_gd(model: nn.Module, params: Params, inputs: torch.Tensor, targets: torch.Tensor,
                        learning_rate: float, steps: int, record_at: list[int] | None = None,
                        ) -> tuple[Params, torch.Tensor]:
    """Full-batch GD on `mse_loss`. inputs: (N, d), targets: (N,).

    Returns the final parameters and the training outputs at each step in `record_at`
    (default: only the last), shape (len(record_at), N). Step 0 is the initialisation.
    """
    record_at = [steps] if record_at is None else list(record_at)
    if any(s < 0 or s > steps for s in record_at):
        raise ValueError(f"record_at must lie in [0, {steps}], got {record_at}")

    def loss_of(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = network_outputs(model, p, inputs)
        return mse_loss(outputs, targets), outputs

    gradient_and_outputs = torch.func.grad_and_value(loss_of, has_aux=True)
    wanted = set(record_at)
    recorded: dict[int, torch.Tensor] = {}
    params = {name: value.clone() for name, value in params.items()}
    for step in range(steps + 1):
        grads, (loss, outputs) = gradient_and_outputs(params)
        check_finite(loss, None, where=f"tangent_kernel.train_full_batch_gd(N={len(inputs)}, "
                     f"learning_rate={learning_rate})", step=step)
        if step in wanted:
            recorded[step] = outputs.detach()
        if step == steps:
            break
        params = {name: value - learning_rate * grads[name] for name, value in params.items()}
    check_finite(0.0, params.values(), where=f"tangent_kernel.train_full_batch_gd(N={len(inputs)}, "
                 f"learning_rate={learning_rate})", step=steps)
    return params, torch.stack([recorded[s] for s in record_at])


def linearised_outputs(theta: torch.Tensor, f0: torch.Tensor, targets: torch.Tensor, learning_rate: float,
                       times: torch.Tensor, theta_test_train: torch.Tensor | None = None,
                       f0_test: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs of the network linearised around its initialisation, trained by gradient flow on
    `mse_loss` with rate `learning_rate` for `times` (in GD steps).

    theta: (N, N) kernel on the training inputs, f0, targets: (N,), times: (T,).
    Training outputs: f_t = f0 + (I - exp(-eta Theta t / N)) (y - f0)  -> (T, N).
    With theta_test_train: (M, N) and f0_test: (M,), test outputs instead  -> (T, M):
        f_t(x*) = f0(x*) + Theta(x*, X) Theta^{-1} (I - exp(-eta Theta t / N)) (y - f0).
    The matrix functions use the eigendecomposition Theta = V diag(lam) V^T; the test factor
    (1 - exp(-c lam)) / lam is evaluated with expm1 and tends to c at lam -> 0, so a singular
    kernel is fine. As t -> infinity the test outputs become kernel regression on y - f0.
    """
    n_train = theta.shape[0]
    eigenvalues, eigenvectors = torch.linalg.eigh(0.5 * (theta + theta.T))
    eigenvalues = eigenvalues.clamp_min(0.0)
    residual = eigenvectors.T @ (targets - f0)  # (N,) in the eigenbasis
    rate = learning_rate * times.to(theta.dtype)[:, None] / n_train  # (T, 1)
    decayed = -torch.expm1(-rate * eigenvalues)  # (T, N): 1 - exp(-eta lam t / N)
    if theta_test_train is None:
        return f0 + (decayed * residual) @ eigenvectors.T
    if f0_test is None:
        raise ValueError("test outputs need f0_test, the network's initial outputs on the test inputs")
    safe = eigenvalues > 0
    per_eigenvalue = torch.where(safe, decayed / torch.where(safe, eigenvalues, 1.0), rate.expand_as(decayed))
    return f0_test + (per_eigenvalue * residual) @ (theta_test_train @ eigenvectors).T


def discrete_linearised_outputs(theta: torch.Tensor, f0: torch.Tensor, targets: torch.Tensor,
                                learning_rate: float, steps: torch.Tensor) -> torch.Tensor:
    """The linearised network trained by DISCRETE full-batch GD on `mse_loss`:
    f_t = f0 + (I - (I - eta Theta / N)^t) (y - f0).  theta: (N, N), f0, targets: (N,), steps: (T,) -> (T, N).

    Its distance to `linearised_outputs` (gradient flow) is the discretisation error of GD, a floor
    of O(eta lambda_max / N) that the network-vs-flow comparison cannot go below at any width.
    """
    n_train = theta.shape[0]
    eigenvalues, eigenvectors = torch.linalg.eigh(0.5 * (theta + theta.T))
    residual = eigenvectors.T @ (targets - f0)
    factor = 1.0 - learning_rate * eigenvalues.clamp_min(0.0) / n_train  # (N,)
    remaining = factor[None, :] ** steps.to(theta.dtype)[:, None]  # (T, N)
    return f0 + ((1.0 - remaining) * residual) @ eigenvectors.T


def kernel_regression(k_train: torch.Tensor, k_test_train: torch.Tensor, targets: torch.Tensor,
                      ridge: float = 0.0) -> torch.Tensor:
    """Kernel (ridge) regression predictions K(x*, X) (K(X, X) + ridge I)^{-1} y.

    k_train: (N, N), k_test_train: (M, N), targets: (N,) -> (M,). ridge = 0 is the
    interpolating (ridgeless) predictor, the t -> infinity limit of the linearised network with f0 = 0.
    """
    system = k_train + ridge * torch.eye(k_train.shape[0], dtype=k_train.dtype, device=k_train.device)
    return k_test_train @ torch.linalg.solve(system, targets)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def sphere_inputs(count: int, dim: int, generator: torch.Generator | None = None,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """`count` points uniform on the sphere of radius sqrt(dim), so x.x/d = 1. -> (count, dim)"""
    gaussian = torch.randn(count, dim, generator=generator, dtype=dtype)
    return math.sqrt(dim) * gaussian / gaussian.norm(dim=-1, keepdim=True)


def teacher_outputs(teacher: Params, inputs: torch.Tensor) -> torch.Tensor:
    """A two-layer ReLU teacher y(x) = a^T (relu(W x / sqrt(d)) - 1/sqrt(2 pi)) / sqrt(k).

    Subtracting 1/sqrt(2 pi) (= E relu(u) for u ~ N(0, 1)) removes most of each unit's mean over
    the sphere, so the target is not dominated by a constant. teacher: {"W": (k, d), "a": (k,)},
    inputs: (N, d) on the sphere of radius sqrt(d) -> (N,)"""
    W, a = teacher["W"], teacher["a"]
    hidden = torch.relu(inputs @ W.T / math.sqrt(inputs.shape[-1])) - 1.0 / math.sqrt(2 * math.pi)
    return hidden @ a / math.sqrt(W.shape[0])


def random_teacher(dim: int, hidden: int, generator: torch.Generator | None = None,
                   dtype: torch.dtype = torch.float64) -> Params:
    """Weights of a random two-layer ReLU teacher (see `teacher_outputs`): W rows on the unit
    sphere times sqrt(d), so each unit sees a pre-activation of unit variance, a ~ N(0, 1)."""
    return {"W": sphere_inputs(hidden, dim, generator, dtype), "a": torch.randn(hidden, generator=generator, dtype=dtype)}


# --------------------------------------------------------------------------------------------
# Predicted learning curve of kernel regression on the teacher task
# --------------------------------------------------------------------------------------------
def ntk_on_sphere(cosine: np.ndarray) -> np.ndarray:
    """`analytic_ntk` between two inputs on the sphere of radius sqrt(d) (q11 = q22 = 1) as a function
    of their cosine t = cos(angle): (sin a + (pi - a) t) / (2 pi) + t (pi - a) / (2 pi), a = arccos t.
    cosine: (...) -> (...); ntk_on_sphere(1) = 1, the kernel's diagonal."""
    t = np.clip(np.asarray(cosine, dtype=np.float64), -1.0, 1.0)
    angle = np.arccos(t)
    return (np.sin(angle) + 2 * (math.pi - angle) * t) / (2 * math.pi)


def _teacher_unit(dim: int) -> Callable[[np.ndarray], np.ndarray]:
    """One teacher unit as a function of the cosine t between its direction and the input (inputs and
    rows of W both on the sphere of radius sqrt(d)): relu(sqrt(d) t) - 1 / sqrt(2 pi)."""
    return lambda t: np.maximum(math.sqrt(dim) * t, 0.0) - 1.0 / math.sqrt(2 * math.pi)


def teacher_spectrum(teacher: Params, max_degree: int) -> dict[str, np.ndarray | float]:
    """The analytic NTK's spectrum under the uniform sphere in d = teacher["W"].shape[1] dimensions and
    the teacher's weights in it, degree by degree (Funk-Hecke; `factstore.spherical_spectrum`).

    Kernel degrees 0..max_degree are resolved (eigenvalues below 1e-14 of the largest, the quadrature's
    rounding level, e.g. the exactly vanishing odd degrees >= 3 of the ReLU NTK, are set to 0); the
    kernel's remaining trace ntk_on_sphere(1) - sum_l N_l lambda_l is returned as `unresolved_trace`.
    The teacher's weights are resolved to degree 2 max_degree (its degrees above max_degree stand
    with eigenvalue 0). Returns {"eigenvalues", "multiplicity", "target_power": (2 max_degree + 1,),
    "unresolved_trace": float, "target_norm": E_x y(x)^2, summed over the resolved degrees}.
    """
    weights = teacher["W"].detach().cpu().double().numpy()
    dim = weights.shape[1]
    nodes = 4 * max_degree + 64  # Gauss-Legendre in the angle: exact for the degree-2 max_degree polynomials
    eigenvalues = spherical_spectrum.legendre_coefficients(ntk_on_sphere, dim, max_degree, nodes)
    eigenvalues = np.where(eigenvalues > 1e-14 * eigenvalues.max(), eigenvalues, 0.0)
    multiplicity = spherical_spectrum.harmonic_multiplicity(dim, np.arange(max_degree + 1))
    unresolved = float(ntk_on_sphere(np.array(1.0)) - np.sum(multiplicity * eigenvalues))
    coefficients = spherical_spectrum.legendre_coefficients(_teacher_unit(dim), dim, 2 * max_degree, 2 * nodes)
    directions = weights / np.linalg.norm(weights, axis=1, keepdims=True)
    output = teacher["a"].detach().cpu().double().numpy() / math.sqrt(weights.shape[0])
    power = spherical_spectrum.ridge_target_power(coefficients, dim, directions, output)
    padding = np.zeros(max_degree)
    return {"eigenvalues": np.concatenate([eigenvalues, padding]),
            "multiplicity": np.concatenate([multiplicity, padding]),
            "target_power": power, "unresolved_trace": max(unresolved, 0.0), "target_norm": float(power.sum())}


def predicted_teacher_error(teacher: Params, sample_sizes, ridge: float, max_degree: int) -> np.ndarray:
    """Predicted relative test error E_g(P) / E y^2 of `kernel_regression` with the analytic NTK on P
    inputs uniform on the sphere of radius sqrt(d), target the teacher (`teacher_outputs`), ridge in
    the kernel's units (the study's ridge: a multiple of the mean diagonal, here ntk_on_sphere(1) = 1).
    The theory of `factstore.learning_curve_theory` on `teacher_spectrum(teacher, max_degree)`.
    sample_sizes: (S,) -> (S,)"""
    spectrum = teacher_spectrum(teacher, max_degree)
    error = learning_curve_theory.generalisation_error(
        spectrum["eigenvalues"], spectrum["target_power"], sample_sizes, ridge=ridge,
        multiplicity=spectrum["multiplicity"], unresolved_trace=spectrum["unresolved_trace"])
    return error / spectrum["target_norm"]
