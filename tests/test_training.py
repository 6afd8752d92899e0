"""The divergence guard (factstore.training) and the loops that use it."""

from __future__ import annotations

import math

import pytest
import torch

from factstore.assoc import memory
from factstore.training import DivergenceError, FusedAdam, check_finite


def test_finite_loss_and_parameters_pass():
    check_finite(0.5, [torch.ones(3), torch.zeros(2, 2)], where="x", step=1)
    check_finite(torch.tensor(1.0), None, where="x", step=1)


@pytest.mark.parametrize("loss", [math.nan, math.inf, -math.inf, torch.tensor(math.nan)])
def test_non_finite_loss_names_setting_and_step(loss):
    with pytest.raises(DivergenceError, match=r"mlp\(size=4\): training diverged at step 7: loss = (nan|inf|-inf)") as error:
        check_finite(loss, [torch.ones(2)], where="mlp(size=4)", step=7)
    assert error.value.step == 7 and error.value.where == "mlp(size=4)"
    assert isinstance(error.value, RuntimeError)


def test_non_finite_parameter_is_named():
    weights = torch.ones(2, 3)
    weights[1, 2] = math.inf
    with pytest.raises(DivergenceError, match=r"step 3: parameter 2 of 2 \(shape \(2, 3\)\) is not finite"):
        check_finite(0.1, [torch.ones(4), weights], where="w", step=3)


def test_train_optimal_stops_at_the_step_it_diverges():
    x, y = memory.sample_problem(8, 8, 1, torch.Generator().manual_seed(0))
    x[0, 3, 1] = math.nan  # one bad number: the loss is NaN from the first step
    with pytest.raises(DivergenceError, match=r"assoc.train_optimal\(p=8, d=8, rank=None, learning_rate=0.5\): "
                                              r"training diverged at step 1: loss = nan"):
        memory.train_optimal(x, y, max_steps=20, learning_rate=0.5, patience=5)


def test_gradient_descent_mlp_stops_when_it_diverges():
    import dataclasses

    from factstore.facts import make_fact_set
    from factstore.mlp import gd

    facts = make_fact_set(16, 8, torch.Generator().manual_seed(0))
    keys = facts.keys.clone()
    keys[2, 0] = math.inf
    protocol = gd.Protocol(lr=0.01, max_steps=20, patience=None)
    try:
        with pytest.raises(DivergenceError, match=r"mlp.gd.train\(gated, size=8, facts=16, lr=0.01\): training diverged at step 0"):
            gd.train(dataclasses.replace(facts, keys=keys), 8, torch.Generator().manual_seed(0), protocol=protocol)
    finally:
        torch.set_flush_denormal(False)  # gd.train turns it on; hypothesis' float strategies need subnormals


def test_the_attention_and_tangent_kernel_loops_stop_on_divergence():
    from factstore.attention.capacity import TrainingSettings, fit_sizes
    from factstore.attention.model import AttentionShape, make_dataset
    from factstore import tangent_kernel

    generator = torch.Generator().manual_seed(0)
    shape = AttentionShape(d=4, heads=1, d_head=2, d_value=2, n_classes=3)
    pool = make_dataset(16, 4, 3, 3, "shared", generator)
    with pytest.raises(DivergenceError, match="attention.fit_sizes"):
        fit_sizes(pool, [8], shape, TrainingSettings(learning_rate=1e30, max_steps=50, warmup_steps=0), generator)
    model = tangent_kernel.TwoLayerReLU(3, 8, generator)
    weights = tangent_kernel.network_params(model)
    dtype = next(iter(weights.values())).dtype
    x = torch.randn(5, 3, generator=generator, dtype=dtype)
    with pytest.raises(DivergenceError, match="train_full_batch_gd"):
        tangent_kernel.train_full_batch_gd(model, weights, x, torch.randn(5, generator=generator, dtype=dtype), 1e300, 50)


def test_flushing_denormals_restores_what_was_set_before():
    from factstore.training import flushing_denormals, flushing_denormals_now

    assert not flushing_denormals_now()
    with flushing_denormals():
        assert flushing_denormals_now()
    assert not flushing_denormals_now()
    torch.set_flush_denormal(True)
    try:
        with flushing_denormals():
            pass
        assert flushing_denormals_now()  # the runner turns it on for a whole step: it stays on
    finally:
        torch.set_flush_denormal(False)


def test_fused_adam_makes_torch_adams_updates_bit_for_bit():
    """FusedAdam calls the function torch.optim.Adam(fused=True).step() calls, with the state it
    keeps: over steps with a changing learning rate the weights are the same bits."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(32, 24), (32, 24), (24, 32)]
    ours = [torch.randn(shape, generator=generator) for shape in shapes]
    theirs = [torch.nn.Parameter(weight.clone()) for weight in ours]
    reference = torch.optim.Adam(theirs, lr=0.03, fused=True)
    adam = FusedAdam(ours)
    for step in range(20):
        gradients = [torch.randn(shape, generator=generator) * 10.0 ** (step % 5 - 2) for shape in shapes]
        learning_rate = 0.03 * (1 + math.cos(math.pi * step / 20)) / 2
        for parameter, gradient in zip(theirs, gradients, strict=True):
            parameter.grad = gradient.clone()
        reference.param_groups[0]["lr"] = learning_rate
        reference.step()
        adam.step(gradients, lr=learning_rate)
    assert all(torch.equal(mine, parameter.detach()) for mine, parameter in zip(ours, theirs, strict=True))
