"""The tangent-space Lipschitz estimate shared by the S0 studies (factstore.jacobians) and the
paper's inverse fold the fact-storing-MLP study's whitening sweep measures it on."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from factstore import jacobians
from factstore.facts import real_fact_set
from factstore.mlp.lipschitz import jacobian_norms
from factstore.mlp.modules import EncoderDecoderMLP, GatedMLP, PlainMLP, fold_module
from factstore.usability import lipschitz as usability_lipschitz
from factstore.whitening import whiten_fact_set


def _keys(n_keys: int, dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return nn.functional.normalize(torch.randn(n_keys, dim, generator=generator, dtype=torch.float64), dim=1)


def _random_modules(dim: int = 12) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    gated, plain = GatedMLP(dim, 40, dim, degree=2), PlainMLP(dim, 30, dim)
    encoder = GatedMLP(dim, 20, 6)
    modules = {"gated": gated, "plain": plain, "encoder-decoder": EncoderDecoderMLP(encoder, torch.randn(dim, 6, dtype=torch.float64))}
    with torch.no_grad():
        for module in modules.values():
            for parameter in module.parameters():
                parameter.normal_(0.0, parameter.shape[-1] ** -0.5)
    return modules


def _whole_jacobian_reading(module: nn.Module, keys: torch.Tensor, n_samples: int, seed: int) -> tuple[float, float, float]:
    """The usability study's estimate as it was computed before it moved to factstore.jacobians:
    the same sampled rows, SVDs of the whole float32 Jacobians restricted to the tangent space."""
    rows = torch.randperm(len(keys), generator=torch.Generator().manual_seed(seed))[: min(n_samples, len(keys))]
    norms = jacobians.norms_in_float32(module, keys[rows], jacobians.tangent_jacobian_norms, 4)
    with torch.no_grad():
        return jacobians.relative_to_output_rms(float(norms.max()), module(keys))


@pytest.mark.parametrize("name", ["gated", "plain", "encoder-decoder"])
def test_shared_estimate_gives_the_usability_studys_numbers(name):
    module, keys = _random_modules()[name], _keys(60, 12)
    lipschitz, relative, rms = jacobians.tangent_lipschitz(module, keys, 25, torch.Generator().manual_seed(3))
    before = _whole_jacobian_reading(module, keys, 25, 3)
    assert lipschitz == pytest.approx(before[0], rel=1e-5) and relative == pytest.approx(before[1], rel=1e-5)
    assert rms == before[2]  # the output scale is computed as before, bit for bit
    assert jacobians.tangent_lipschitz(module, keys, 25, torch.Generator().manual_seed(3)) == (lipschitz, relative, rms)
    assert usability_lipschitz.tangent_lipschitz is jacobians.tangent_lipschitz  # one function for both studies


def test_tangent_norms_match_an_independent_whole_jacobian():
    """jacrev of a plain MLP (no closed form), projected by hand: the exact reference and the
    Lanczos estimate both agree with it."""
    module, keys = _random_modules()["plain"], _keys(7, 12, seed=1)
    whole = torch.stack([torch.func.jacrev(module)(key) for key in keys])
    projected = whole @ (torch.eye(12, dtype=torch.float64) - keys[:, :, None] * keys[:, None, :])
    expected = torch.linalg.matrix_norm(projected, ord=2)
    torch.testing.assert_close(jacobians.tangent_jacobian_norms(module, keys), expected)
    lanczos = jacobians.tangent_spectral_norms(module, keys, torch.Generator().manual_seed(0))
    torch.testing.assert_close(lanczos, expected, rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("name", ["gated", "plain", "encoder-decoder"])
def test_tangent_norm_is_at_most_the_whole_jacobians(name):
    module, keys = _random_modules()[name], _keys(30, 12, seed=2)
    whole = jacobian_norms(module, keys)
    assert (jacobians.tangent_jacobian_norms(module, keys) <= whole * (1 + 1e-12)).all()
    assert (jacobians.tangent_spectral_norms(module, keys, torch.Generator().manual_seed(0)) <= whole * (1 + 1e-5)).all()


def test_tangent_norm_drops_the_radial_direction():
    """A linear map diag(3, 2, 1) at the key e1: the whole Jacobian's norm is 3 (along e1, the
    radial direction), the tangent one 2."""
    module = nn.Linear(3, 3, bias=False, dtype=torch.float64)
    with torch.no_grad():
        module.weight.copy_(torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64)))
    key = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    assert float(jacobian_norms(module, key)[0]) == pytest.approx(3.0)
    assert float(jacobians.tangent_jacobian_norms(module, key)[0]) == pytest.approx(2.0)
    assert float(jacobians.tangent_spectral_norms(module, key, torch.Generator().manual_seed(0))[0]) == pytest.approx(2.0)


def test_top_eigenvalues_of_a_batch_of_symmetric_matrices():
    generator = torch.Generator().manual_seed(0)
    factors = torch.randn(5, 20, 20, generator=generator, dtype=torch.float64)
    matrices = factors @ factors.mT
    start = torch.randn(5, 20, generator=generator, dtype=torch.float64)
    top = jacobians.top_eigenvalues(lambda v: (matrices @ v[:, :, None])[:, :, 0], start, 1e-10)
    torch.testing.assert_close(top, torch.linalg.eigvalsh(matrices)[:, -1], rtol=1e-8, atol=0.0)


def test_inverse_fold_of_identity_transforms_leaves_the_module_unchanged():
    module, keys = _random_modules()["gated"], _keys(9, 12)
    identity = torch.eye(12, dtype=torch.float64)
    folded = fold_module(module, identity, torch.linalg.inv(identity))
    with torch.no_grad():
        torch.testing.assert_close(folded(keys), module(keys), rtol=0.0, atol=0.0)


def test_inverse_fold_writes_in_the_original_value_basis():
    """Folded with W_k on the input and W_v^-1 on the output, the MLP on an original key gives the
    whitened MLP's output on the whitened key mapped back by W_v^-1: a whitened value v W_v lands
    on the original value v."""
    generator = torch.Generator().manual_seed(0)
    stretch = torch.linspace(0.1, 3.0, 12, dtype=torch.float64)
    keys = torch.randn(40, 12, generator=generator, dtype=torch.float64) * stretch
    values = torch.randn(40, 12, generator=generator, dtype=torch.float64) * stretch.flip(0)
    original = real_fact_set(keys, values, generator, fact_map="aligned")
    whitened, key_transform, value_transform = whiten_fact_set(original, 1.0, 1.0)
    module = _random_modules()["gated"]
    folded = fold_module(module, key_transform, torch.linalg.inv(value_transform))
    with torch.no_grad():
        torch.testing.assert_close(folded(original.keys) @ value_transform.T, module(whitened.keys))
    torch.testing.assert_close(whitened.values @ torch.linalg.inv(value_transform).T, original.values)
