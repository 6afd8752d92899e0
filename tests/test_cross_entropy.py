"""The one-pass softmax cross-entropy that GD and S1 train with (factstore.cross_entropy)."""

from __future__ import annotations

import pytest
import torch

from factstore.cross_entropy import cross_entropy_gradient, logit_workspace


def reference(logits: torch.Tensor, target: torch.Tensor) -> tuple[float, torch.Tensor]:
    """The summed loss and its gradient by autograd, in float64."""
    logits = logits.double().requires_grad_()
    loss = torch.nn.functional.cross_entropy(logits, target.squeeze(1), reduction="sum")
    loss.backward()
    return loss.item(), logits.grad


@pytest.mark.parametrize("scale", [0.1, 3.0, 300.0])
def test_loss_gradient_and_count_equal_autograds_cross_entropy_at_every_logit_scale(scale):
    """At scale 300 most rows' targets sit hundreds below their maximum: their probability
    underflows, and the loss must still come from the normaliser, not from log(p_target)."""
    generator = torch.Generator().manual_seed(0)
    logits = scale * torch.randn(64, 50, generator=generator)
    target = torch.randint(0, 50, (64, 1), generator=generator)
    logits[:8].scatter_(1, target[:8], logits[:8].amax(dim=1, keepdim=True) + 1)  # 8 rows decoded right
    before = logits.clone()
    gradient, loss, n_correct = cross_entropy_gradient(logits, target)
    expected_loss, expected_gradient = reference(before, target)
    assert torch.equal(logits, before)  # the target column set aside is put back
    assert loss.dtype == torch.float64 and loss.item() == pytest.approx(expected_loss, rel=1e-6)
    assert torch.allclose(gradient.double(), expected_gradient, atol=1e-6)
    assert n_correct.item() == int((before.argmax(dim=1, keepdim=True) == target).sum()) >= 8


def test_a_tie_with_the_target_counts_as_wrong():
    logits = torch.zeros(5, 4)
    _, loss, n_correct = cross_entropy_gradient(logits, torch.zeros(5, 1, dtype=torch.long))
    assert n_correct.item() == 0 and loss.item() == pytest.approx(5 * torch.log(torch.tensor(4.0)).item())


def test_the_gradient_goes_to_the_buffer_given_and_equals_a_fresh_one():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 9, generator=generator)
    target = torch.randint(0, 9, (6, 1), generator=generator)
    workspace = logit_workspace(6, 9, 4, like=logits)
    assert workspace.shape == (2, 4, 9)
    fresh, fresh_loss, fresh_count = cross_entropy_gradient(logits[:4], target[:4])
    into, loss, count = cross_entropy_gradient(logits[:4], target[:4], out=workspace[1])
    assert into.data_ptr() == workspace[1].data_ptr()
    assert torch.equal(into, fresh) and loss == fresh_loss and count == fresh_count
