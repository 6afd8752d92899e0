"""Fact-storing MLP constructions (NTK, encoder-decoder, Hebbian), GD training and Lipschitz.

Small sizes only (F <= 256, d <= 32): every test runs in about a second on one thread.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from factstore.facts import FactSet, dot_product_accuracy, make_fact_set
from factstore.mlp import encoder_decoder, gd, hebbian, ntk
from factstore.mlp.lipschitz import jacobian_norms, lipschitz_estimate, pairwise_lipschitz_estimate
from factstore.mlp.methods import METHODS
from factstore.mlp.modules import (
    GatedMLP,
    PlainMLP,
    activation_derivative,
    gaussian_hermite_coefficient,
    hermite_features,
    module_accuracy,
    parameter_count,
)

torch.set_num_threads(1)


def fact_set(n_facts: int, dim: int, seed: int = 0) -> FactSet:
    return make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))


def generator(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------
# Hermite features and coefficients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("degree", range(6))
def test_hermite_recurrence_is_normalised_probabilists_hermite(degree):
    z = torch.linspace(-3, 3, 13, dtype=torch.float64)
    coefficients = np.zeros(degree + 1)
    coefficients[degree] = 1.0
    expected = np.polynomial.hermite_e.hermeval(z.numpy(), coefficients) / math.sqrt(math.factorial(degree))
    np.testing.assert_allclose(hermite_features(z, degree).numpy(), expected, rtol=1e-12, atol=1e-12)


def test_hermite_coefficients_of_relu_and_identity():
    relu = torch.relu
    density_at_zero = 1 / math.sqrt(2 * math.pi)
    assert gaussian_hermite_coefficient(relu, 1) == pytest.approx(0.5, abs=1e-8)
    assert gaussian_hermite_coefficient(relu, 2) == pytest.approx(density_at_zero / math.sqrt(2), abs=1e-8)
    assert gaussian_hermite_coefficient(relu, 3) == pytest.approx(0.0, abs=1e-8)
    assert gaussian_hermite_coefficient(lambda z: z, 1) == pytest.approx(1.0, abs=1e-8)


def test_ntk_refuses_a_degree_that_stores_nothing():
    with pytest.raises(ValueError, match="stores no fact"):
        ntk.build(fact_set(8, 8), 16, generator(), activation="relu", degree=3)
    with pytest.raises(ValueError, match="stores no fact"):  # step function has E[step(z) h_2(z)] = 0
        ntk.build_finite_difference(fact_set(8, 8), 16, generator(), activation="relu", degree=2)


# ---------------------------------------------------------------------------------------------
# NTK MLP
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("degree", [1, 2])
def test_ntk_weights_follow_the_spec_formulas(degree):
    facts = fact_set(40, 12)
    width = 100  # not a multiple of the unit block
    module, n_params = ntk.build(facts, width, generator(), degree=degree)
    gate, up, projection = module.gate.weight, module.main.weight, module.down.weight
    assert n_params == parameter_count(module) == 3 * width * 12
    assert torch.allclose(projection.norm(dim=0), torch.ones(width, dtype=torch.float64))
    features = hermite_features(facts.keys @ gate.T, degree)  # H = h_k(K W_gate^T)
    coefficients = facts.values[facts.fact_map] @ projection  # A = Y P
    expected_up = (features * coefficients).T @ facts.keys / width
    assert torch.allclose(up, expected_up, atol=1e-12)
    x = facts.keys[:5]
    expected_outputs = (torch.relu(x @ gate.T) * (x @ up.T)) @ projection.T
    assert torch.allclose(module(x), expected_outputs, atol=1e-12)


def test_ntk_stores_small_fact_set_when_wide_enough():
    facts = fact_set(64, 32)
    module, _ = ntk.build(facts, 1024, generator())
    assert module_accuracy(module, facts) == 1.0
    narrow, _ = ntk.build(facts, 16, generator())
    assert module_accuracy(narrow, facts) < 1.0


def test_ntk_margin_optimal_targets_store_too():
    facts = fact_set(64, 32)
    module, _ = METHODS["ntk_ustar"].make(facts, 1024, generator())  # U* solved by the method
    assert module_accuracy(module, facts) == 1.0


def test_ntk_width_is_a_prefix_of_a_wider_build():
    facts = fact_set(30, 10)
    narrow, _ = ntk.build(facts, 70, generator(5))
    wide, _ = ntk.build(facts, 200, generator(5))
    assert torch.equal(narrow.gate.weight, wide.gate.weight[:70])
    assert torch.equal(narrow.down.weight, wide.down.weight[:, :70])
    assert torch.allclose(narrow.main.weight * 70, wide.main.weight[:70] * 200, atol=1e-12)


def test_prefix_pass_accuracy_equals_separate_builds():
    facts = fact_set(48, 16)
    widths = [1, 7, 64, 65, 100, 300, 777]
    one_pass = ntk.accuracy_by_width(facts, widths, generator(3), block_size=50)
    separate = {w: module_accuracy(ntk.build(facts, w, generator(3))[0], facts) for w in widths}
    assert one_pass == separate
    accumulator = ntk.PrefixAccumulator(facts, generator(3))
    accumulator.advance(300)
    outputs = ntk.build(facts, 300, generator(3))[0](facts.keys)
    assert torch.allclose(accumulator.outputs(), outputs.detach(), atol=1e-12)


def test_finite_difference_variant_emulates_the_derivative_gate():
    facts = fact_set(32, 16)
    gated, _ = ntk.build(facts, 64, generator())
    plain, n_params = ntk.build_finite_difference(facts, 64, generator(), step=1e-6)
    assert n_params == parameter_count(plain) == 4 * 64 * 16
    x = facts.keys
    derivative_gate = activation_derivative("relu")(x @ gated.gate.weight.T)
    expected = (derivative_gate * gated.main(x)) @ gated.down.weight.T
    assert torch.allclose(plain(x), expected, atol=1e-6 * float(expected.detach().abs().max()))


def test_finite_difference_variant_stores_when_wide_enough():
    facts = fact_set(32, 32)
    module, _ = ntk.build_finite_difference(facts, 1024, generator())
    assert module_accuracy(module, facts) == 1.0


# ---------------------------------------------------------------------------------------------
# Encoder-decoder MLP
# ---------------------------------------------------------------------------------------------


def test_orthogonal_decoder_at_full_size_decodes_every_value():
    facts = fact_set(256, 32)
    decoder = encoder_decoder.random_orthogonal(32, generator())
    assert torch.allclose(decoder.T @ decoder, torch.eye(32, dtype=torch.float64), atol=1e-12)
    assert encoder_decoder.code_accuracy(facts, decoder, facts.values) == 1.0
    assert encoder_decoder.code_accuracy(facts, decoder[:, :1], facts.values) < 0.1


def test_gated_encoder_solves_every_code_exactly():
    facts = fact_set(256, 32)
    code_size = 24
    module, n_params = encoder_decoder.build(facts, code_size, generator())
    n_buckets, hidden = 8, 8 * code_size
    expected = 2 * hidden * (32 + 1) + (hidden + 1) * code_size + 32 * code_size
    assert n_params == parameter_count(module) == expected
    decoder, codes = encoder_decoder.decoder_and_codes(facts, code_size, generator(), None)
    with torch.no_grad():
        assert torch.allclose(module.encoder(facts.keys), codes, atol=1e-8)
    assert module_accuracy(module, facts) == 1.0
    assert module.encoder.gate.weight.shape == (n_buckets * code_size, 32)


def test_random_gates_leave_keys_without_an_active_gate_when_buckets_are_few():
    facts = fact_set(32, 32)  # one bucket: a random ReLU gate is off on about half the keys
    module, _ = encoder_decoder.build(facts, 16, generator(), gates="random")
    assert module_accuracy(module, facts) < 0.9
    module, _ = encoder_decoder.build(facts, 16, generator(), gates="interpolating")
    assert module_accuracy(module, facts) == 1.0


def test_interpolating_gates_fire_at_one_on_their_own_bucket():
    facts = fact_set(100, 16)
    buckets = encoder_decoder.random_buckets(100, 7, generator())
    assert torch.bincount(buckets).tolist() == [15, 15, 14, 14, 14, 14, 14]
    gates = encoder_decoder.interpolating_gates(facts.keys, buckets, 7)
    own_scores = (facts.keys * gates[buckets]).sum(dim=1)
    assert torch.allclose(own_scores, torch.ones(100, dtype=torch.float64), atol=1e-10)


def test_gram_solver_gives_the_lstsq_solution():
    facts = fact_set(200, 16)
    by_lstsq, _ = encoder_decoder.build(facts, 12, generator(), solver="lstsq")
    by_gram, _ = encoder_decoder.build(facts, 12, generator(), solver="gram")
    assert torch.allclose(by_lstsq.encoder.main.weight, by_gram.encoder.main.weight, atol=1e-7)
    assert torch.allclose(by_lstsq(facts.keys), by_gram(facts.keys), atol=1e-8)


def test_gated_encoder_with_margin_optimal_codes():
    facts = make_fact_set(128, 16, generator(0), value_condition_number=30.0)
    module, _ = METHODS["ed_gated"].make(facts, 16, generator())  # codes of U*
    assert module_accuracy(module, facts) == 1.0


def test_plain_encoder_decoder_stores_with_about_f_units():
    facts = fact_set(128, 32)
    module, n_params = encoder_decoder.build_plain(facts, 24, generator())
    hidden = 128 + 32
    assert module.encoder.hidden == hidden
    assert n_params == parameter_count(module) == hidden * 32 + hidden + 24 * hidden + 24 + 32 * 24
    assert module_accuracy(module, facts) == 1.0


# ---------------------------------------------------------------------------------------------
# Hebbian memory
# ---------------------------------------------------------------------------------------------


def test_hebbian_stores_everything_at_tiny_load_and_not_at_high_load():
    light = fact_set(8, 64)
    module, n_params = hebbian.build(light)
    assert n_params == parameter_count(module) == 64 * 64
    assert torch.allclose(module.weight, light.targets.T @ light.keys)
    assert module_accuracy(module, light) == 1.0
    heavy = fact_set(1024, 16)
    assert module_accuracy(hebbian.build(heavy)[0], heavy) < 0.5


# ---------------------------------------------------------------------------------------------
# Gradient descent
# ---------------------------------------------------------------------------------------------


def test_chunked_cross_entropy_matches_torch():
    torch.manual_seed(0)
    outputs = (3 * torch.randn(50, 8)).requires_grad_()
    values, fact_map = torch.randn(40, 8), torch.randint(0, 40, (50,))
    loss, gradient, n_correct = gd.cross_entropy_pass(outputs.detach(), values, fact_map, chunk_size=7)
    reference = torch.nn.functional.cross_entropy(outputs @ values.T, fact_map)
    reference.backward()
    assert loss == pytest.approx(reference.item(), rel=1e-5)
    assert torch.allclose(gradient, outputs.grad, atol=1e-7)
    assert n_correct == round(50 * dot_product_accuracy(outputs.detach(), values, fact_map))
    _, _, n_correct_for_ties = gd.cross_entropy_pass(torch.zeros(50, 8), values, fact_map, chunk_size=7)
    assert n_correct_for_ties == 0  # all logits tie: nothing is decoded, as in facts.stored_mask


@pytest.mark.parametrize("architecture", ["gated", "plain"])
@pytest.mark.parametrize("activation", ["relu", "identity", "silu"])
@pytest.mark.parametrize("bias", [False, True])
def test_the_closed_form_pullback_gives_autograds_weight_gradients(architecture, activation, bias):
    """With ReLU and the identity the same bits as autograd (GD's training step relies on it);
    silu's derivative is written out, so there only to rounding."""
    torch.manual_seed(0)
    module_type = GatedMLP if architecture == "gated" else PlainMLP
    module = module_type(12, 16, 8, activation, bias=bias, dtype=torch.float32)
    x, output_gradient = torch.randn(40, 12), torch.randn(40, 8)
    outputs, pullback = module.outputs_and_pullback(x)
    module(x).backward(output_gradient)
    assert torch.equal(outputs, module(x).detach())
    gradients = pullback(output_gradient)
    assert set(gradients) == {name for name, _ in module.named_parameters()}
    for name, parameter in module.named_parameters():
        exact = activation != "silu" and not name.endswith("bias")
        if exact:
            assert torch.equal(gradients[name], parameter.grad), name
        else:
            assert torch.allclose(gradients[name], parameter.grad, rtol=1e-5, atol=1e-6), name


def test_gd_returns_an_ordinary_module_that_autograd_can_train_again():
    """The steps run in inference mode; the module they return must not be made of inference
    tensors (a warm start, an edit or a Jacobian differentiates through it) nor carry gradients."""
    facts = fact_set(32, 8)
    module, _, info = gd.train(facts, 16, generator(), protocol=gd.Protocol(lr=3e-2, max_steps=50))
    assert info["steps"] > 0
    assert all(not parameter.is_inference() and parameter.grad is None for parameter in module.parameters())
    module(facts.keys.float()).square().sum().backward()
    assert all(parameter.grad is not None for parameter in module.parameters())


def test_squared_error_pass_matches_torch_and_decodes_like_cross_entropy():
    torch.manual_seed(0)
    outputs = (3 * torch.randn(50, 8)).requires_grad_()
    values, fact_map = torch.randn(40, 8), torch.randint(0, 40, (50,))
    loss, gradient, n_correct = gd.squared_error_pass(outputs.detach(), values, fact_map, chunk_size=7)
    reference = torch.nn.functional.mse_loss(outputs, values[fact_map])
    reference.backward()
    assert loss == pytest.approx(reference.item(), rel=1e-6)
    assert torch.allclose(gradient, outputs.grad, atol=1e-7)
    assert n_correct == gd.cross_entropy_pass(outputs.detach(), values, fact_map, chunk_size=7)[2]


def test_a_loss_cutoff_trains_past_full_accuracy_to_a_lower_loss():
    facts = fact_set(32, 16)
    protocol = gd.Protocol(lr=1e-2, max_steps=2000, patience=200)
    _, _, first = gd.train(facts, 64, generator(), activation="silu", loss="mse", protocol=protocol)
    module, _, converged = gd.train(facts, 64, generator(), activation="silu", loss="mse", protocol=protocol,
                                    min_loss=first["loss"] / 100)
    assert first["accuracy"] == converged["accuracy"] == 1.0 and converged["steps"] > first["steps"]
    assert converged["loss"] <= first["loss"] / 100 and module_accuracy(module, facts) == 1.0


@pytest.mark.parametrize("method", sorted(name for name, method in METHODS.items() if method.search.trains))
def test_gd_reaches_full_accuracy_on_a_tiny_set(method):
    facts = fact_set(32, 16)
    module, n_params, info = METHODS[method].make(facts, 16, generator())
    assert info["stop"] == "target" and info["accuracy"] == 1.0
    assert module_accuracy(module, facts) == 1.0
    assert n_params == parameter_count(module) == (3 if METHODS[method].architecture == "gated" else 2) * 16 * 16
    assert info["steps"] < gd.FAST_PROTOCOL.max_steps


def test_gd_returns_a_cpu_module_and_the_same_numbers_for_an_explicit_cpu_device():
    facts = fact_set(32, 16)
    default_module, _, default_info = gd.train(facts, 12, generator())
    module, _, info = gd.train(facts, 12, generator(), device=torch.device("cpu"))
    assert all(parameter.device.type == "cpu" for parameter in module.parameters())
    assert info["steps"] == default_info["steps"] and torch.equal(module.gate.weight, default_module.gate.weight)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gd_trains_on_cuda_from_the_cpu_draw_and_hands_back_a_cpu_module():
    facts = fact_set(32, 16)
    module, _, info = gd.train(facts, 16, generator(), device="cuda")
    assert all(parameter.device.type == "cpu" for parameter in module.parameters())
    assert info["stop"] == "target" and module_accuracy(module, facts) == 1.0
    warm, _, _ = gd.train(facts, 12, generator(), init=module, device="cuda")
    assert warm.hidden == 12


def test_gd_gives_up_on_a_plateau():
    facts = fact_set(128, 8)
    protocol = gd.Protocol(lr=1e-2, max_steps=5000, patience=50)
    _, _, info = gd.train(facts, 1, generator(), protocol=protocol)
    assert info["stop"] == "plateau" and info["accuracy"] < 0.5 and info["steps"] < 5000


def test_resize_hidden_grows_without_changing_the_function_and_shrinks_by_importance():
    facts = fact_set(16, 8)
    module = gd.make_mlp("gated", 8, 6, 8, generator())
    grown = gd.resize_hidden(module, 10, generator(2))
    assert grown.hidden == 10
    assert torch.allclose(grown(facts.keys.float()), module(facts.keys.float()), atol=1e-6)
    with torch.no_grad():
        module.down.weight[:, 2] *= 100  # unit 2 becomes the most important
    shrunk = gd.resize_hidden(module, 1, generator(2))
    assert torch.equal(shrunk.gate.weight[0], module.gate.weight[2])


# ---------------------------------------------------------------------------------------------
# Lipschitz constant
# ---------------------------------------------------------------------------------------------


def test_lipschitz_of_a_linear_memory_is_its_spectral_norm():
    facts = fact_set(20, 12)
    module, _ = hebbian.build(facts)
    spectral_norm = float(torch.linalg.matrix_norm(module.weight.detach(), ord=2))
    # The estimate takes its Jacobians in float32 (single_precision): equal to ~1e-7 relative.
    assert lipschitz_estimate(module, facts.keys, n_samples=5, generator=generator()) == pytest.approx(spectral_norm, rel=1e-5)
    assert pairwise_lipschitz_estimate(module, facts.keys, 200, generator()) <= spectral_norm + 1e-9


def test_jacobian_norms_match_finite_differences_for_an_ntk_mlp():
    facts = fact_set(16, 6)
    module, _ = ntk.build(facts, 32, generator(), activation="silu")
    x = facts.keys[3]
    jacobian = torch.autograd.functional.jacobian(module, x)
    assert jacobian_norms(module, x[None])[0] == pytest.approx(float(torch.linalg.matrix_norm(jacobian, ord=2)))
    assert lipschitz_estimate(module, facts.keys, n_samples=100, generator=generator()) == pytest.approx(float(
        jacobian_norms(module, facts.keys).max()), rel=1e-5)  # 100 samples of 16 keys: all of them (float32 Jacobians)


def test_single_precision_jacobians_keep_the_spectral_norm_and_leave_the_module_alone():
    """The Lipschitz estimates take their Jacobians through a float32 copy (2.8x cheaper than
    the constructions' float64): the norms agree to ~1e-6 relative on a wide NTK MLP, and the
    float64 module the study keeps is not changed."""
    from factstore.jacobians import single_precision

    facts = fact_set(64, 16)
    module, _ = ntk.build(facts, 512, generator())
    single = single_precision(module)
    assert next(module.parameters()).dtype == torch.float64 and next(single.parameters()).dtype == torch.float32
    assert single_precision(single) is single
    exact, fast = jacobian_norms(module, facts.keys), jacobian_norms(single, facts.keys)
    torch.testing.assert_close(fast.double(), exact, rtol=1e-5, atol=0)


@pytest.mark.parametrize("activation, degree", [("relu", 1), ("relu", 2), ("silu", 1), ("identity", 1), ("hermite", 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_gated_mlps_closed_form_jacobians_are_reverse_modes(activation, degree, dtype):
    """`GatedMLP.input_jacobians` (what factstore.jacobians uses for it) against torch.func.jacrev
    over the rows: the same numbers bit for bit with ReLU (the same products, in the same order:
    the whitening jobs' Lipschitz values did not move), to rounding with the other activations."""
    from factstore.jacobians import jacobians
    from factstore.mlp.modules import GatedMLP

    module = GatedMLP(12, 40, 9, activation, degree, dtype=dtype)
    inputs = torch.randn(5, 12, generator=generator(), dtype=dtype)
    reverse_mode = torch.func.vmap(torch.func.jacrev(module))(inputs).detach()
    closed_form = jacobians(module, inputs)
    assert closed_form.shape == (5, 9, 12) and not closed_form.requires_grad
    if activation == "relu":
        assert torch.equal(closed_form, reverse_mode)
    else:
        torch.testing.assert_close(closed_form, reverse_mode)
    bent = GatedMLP(12, 40, 9, activation, degree, dtype=dtype)  # another module: the check can fail
    assert not torch.allclose(jacobians(bent, inputs), reverse_mode)


def test_the_encoder_solve_is_the_min_norm_solution_every_time():
    """The main branch is X^+ codes (the unique min-norm solution of the wide system), the same
    bits on every call: torch's default CPU driver (gelsy) returned other exact solutions from call
    to call, depending on memory left by earlier allocations."""
    generator = torch.Generator().manual_seed(0)
    keys = torch.nn.functional.normalize(torch.randn(32, 24, generator=generator, dtype=torch.float64), dim=1)
    gate_values = torch.relu(keys @ torch.randn(2, 24, generator=generator, dtype=torch.float64).T)
    codes = torch.randn(32, 14, generator=generator, dtype=torch.float64)
    design = encoder_decoder.encoder_design_matrix(keys, gate_values)
    minimum_norm = (torch.linalg.pinv(design) @ codes).reshape(2, 25, 14)
    solutions = []
    for repeat in range(6):
        _ = [torch.randn(37 * (repeat + 1)) for _ in range(repeat)]  # other allocations in between
        solutions.append(encoder_decoder.solve_main_branch(keys, gate_values, codes))
    assert all(torch.equal(solution, solutions[0]) for solution in solutions)
    torch.testing.assert_close(solutions[0], minimum_norm)
