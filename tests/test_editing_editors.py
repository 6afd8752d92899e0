"""The weight editors (factstore.editing.editors) satisfy their defining equations: ROME is exact
on its key and blind to C-orthogonal keys, MEMIT solves a batch exactly as the ridge vanishes and
matches ROME for one key, AlphaEdit leaves preserved keys' outputs alone and cannot edit with an
empty null space."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from factstore.editing.editors import (
    alphaedit_update,
    key_second_moment,
    memit_update,
    null_space_projector,
    rome_update,
)

OUT, HIDDEN = 4, 6
seeds = st.integers(0, 10_000)


def random(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def low_rank_keys(count: int, rank: int, seed: int) -> Tensor:
    """count keys (count, HIDDEN) in a rank-dimensional subspace: K0 = A B, A (count, rank), B (rank, HIDDEN)."""
    return random(count, rank, seed=seed) @ random(rank, HIDDEN, seed=seed + 1)


def test_second_moment_is_the_mean_outer_product():
    keys = random(7, HIDDEN, seed=0)
    mean_outer = torch.stack([torch.outer(key, key) for key in keys]).mean(dim=0)
    torch.testing.assert_close(key_second_moment(keys), mean_outer)


@settings(max_examples=25, deadline=None)
@given(seed=seeds)
def test_rome_is_exact_on_its_key_and_blind_to_c_orthogonal_keys(seed):
    weight, key, target = random(OUT, HIDDEN, seed=seed), random(HIDDEN, seed=seed + 1), random(OUT, seed=seed + 2)
    second_moment = key_second_moment(random(200, HIDDEN, seed=seed + 3))
    residual = target - weight @ key
    edited = rome_update(weight, key[None], residual[None], second_moment)
    torch.testing.assert_close(edited @ key, target, rtol=0, atol=1e-10)
    # Any k with (C^{-1} k*)^T k = 0: a random vector with its component along C^{-1} k* removed.
    direction = torch.linalg.solve(second_moment, key)
    other = random(HIDDEN, seed=seed + 4)
    other = other - (direction @ other) / (direction @ direction) * direction
    torch.testing.assert_close(edited @ other, weight @ other, rtol=0, atol=1e-10)


def test_rome_with_several_keys_is_exact_on_the_last_and_leaves_the_input_alone():
    weight, keys, residuals = random(OUT, HIDDEN, seed=0), random(3, HIDDEN, seed=1), random(3, OUT, seed=2)
    original = weight.clone()
    edited = rome_update(weight, keys, residuals, key_second_moment(random(100, HIDDEN, seed=3)))
    # The targets come from the original weight, v*_i = W0 k_i + r_i.
    torch.testing.assert_close(edited @ keys[-1], original @ keys[-1] + residuals[-1], rtol=0, atol=1e-10)
    assert torch.equal(weight, original)


def test_rome_rejects_a_singular_second_moment():
    keys = random(20, HIDDEN, seed=0)
    keys[:, 0] = 0  # one coordinate never used: C has a zero row
    with pytest.raises(ValueError, match="ridge"):
        rome_update(random(OUT, HIDDEN, seed=1), keys[:2], random(2, OUT, seed=2), key_second_moment(keys))


@settings(max_examples=25, deadline=None)
@given(seed=seeds, count=st.integers(1, HIDDEN - 1))
def test_memit_with_a_vanishing_ridge_solves_the_batch_exactly(seed, count):
    weight, keys, residuals = random(OUT, HIDDEN, seed=seed), random(count, HIDDEN, seed=seed + 1), \
        random(count, OUT, seed=seed + 2)
    second_moment = key_second_moment(random(200, HIDDEN, seed=seed + 3))
    edited = memit_update(weight, keys, residuals, second_moment, ridge=1e-12)
    torch.testing.assert_close(keys @ edited.T, keys @ weight.T + residuals, rtol=0, atol=1e-8)


def test_memit_update_shrinks_as_the_ridge_grows():
    weight, keys, residuals = random(OUT, HIDDEN, seed=0), random(3, HIDDEN, seed=1), random(3, OUT, seed=2)
    second_moment = key_second_moment(random(200, HIDDEN, seed=3))
    updates = [memit_update(weight, keys, residuals, second_moment, ridge) - weight
               for ridge in (1e-6, 1e-2, 1.0, 1e2, 1e4)]
    # The C-weighted size tr(dW C dW^T) is monotone in the ridge (whitened singular values s/(ridge+s^2)).
    sizes = [float(torch.trace(update @ second_moment @ update.T)) for update in updates]
    assert all(larger > smaller for larger, smaller in pairwise(sizes))
    assert updates[-1].norm() < 1e-2 * updates[0].norm()


@settings(max_examples=25, deadline=None)
@given(seed=seeds, ridge=st.floats(1e-3, 1e3))
def test_memit_for_one_key_is_sherman_morrison_and_tends_to_rome(seed, ridge):
    weight, key, residual = random(OUT, HIDDEN, seed=seed), random(1, HIDDEN, seed=seed + 1), random(1, OUT, seed=seed + 2)
    second_moment = key_second_moment(random(200, HIDDEN, seed=seed + 3))
    direction = torch.linalg.solve(second_moment, key[0])  # C^{-1} k
    expected = torch.outer(residual[0], direction) / (ridge + key[0] @ direction)
    torch.testing.assert_close(memit_update(weight, key, residual, second_moment, ridge) - weight, expected)
    # The limit ridge -> 0 is ROME: the gap is ROME's update times ridge / (ridge + k^T C^{-1} k).
    rome = rome_update(weight, key, residual, second_moment) - weight
    for small_ridge in (1e-2, 1e-4, 1e-6):  # abs: rounding of order eps |C| / ridge
        gap = (memit_update(weight, key, residual, second_moment, small_ridge) - weight - rome).norm() / rome.norm()
        assert float(gap) == pytest.approx(small_ridge / (small_ridge + float(key[0] @ direction)), rel=1e-3, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=seeds, rank=st.integers(1, HIDDEN - 1))
def test_null_space_projector_annihilates_low_rank_preserved_keys(seed, rank):
    preserved = low_rank_keys(20, rank, seed)
    projector, dimension = null_space_projector(preserved, threshold=1e-8)
    assert dimension == HIDDEN - rank
    torch.testing.assert_close(projector, projector.T)
    torch.testing.assert_close(projector @ projector, projector)
    torch.testing.assert_close(projector @ preserved.T, torch.zeros(HIDDEN, 20, dtype=torch.float64), rtol=0, atol=1e-9)
    assert float(torch.trace(projector)) == pytest.approx(HIDDEN - rank)


def test_null_space_projector_of_spanning_and_of_empty_preserved_sets():
    projector, dimension = null_space_projector(random(30, HIDDEN, seed=0), threshold=1e-6)
    assert dimension == 0 and torch.equal(projector, torch.zeros(HIDDEN, HIDDEN, dtype=torch.float64))
    projector, dimension = null_space_projector(torch.zeros(0, HIDDEN, dtype=torch.float64), threshold=1e-6)
    assert dimension == HIDDEN and torch.equal(projector, torch.eye(HIDDEN, dtype=torch.float64))


@settings(max_examples=25, deadline=None)
@given(seed=seeds, regulariser=st.sampled_from([1e-12, 1e-6, 1.0, 10.0]))
def test_alphaedit_keeps_preserved_outputs_and_edits_exactly_as_the_regulariser_vanishes(seed, regulariser):
    rank, count = 3, 2  # null space of dimension 3 >= 2 edits, so the projected edit keys are independent
    preserved = low_rank_keys(30, rank, seed)
    projector, dimension = null_space_projector(preserved, threshold=1e-8)
    assert dimension == HIDDEN - rank
    weight, keys, residuals = random(OUT, HIDDEN, seed=seed + 2), random(count, HIDDEN, seed=seed + 3), \
        random(count, OUT, seed=seed + 4)
    update = alphaedit_update(weight, keys, residuals, projector, regulariser) - weight
    torch.testing.assert_close(update @ preserved.T, torch.zeros(OUT, 30, dtype=torch.float64), rtol=0, atol=1e-9)
    # On the edit keys, dW K^T = R^T (G + a I)^{-1} G with G = K P K^T: exact (= R^T) as a -> 0.
    gram = keys @ projector @ keys.T
    moved = residuals.T @ torch.linalg.solve(gram + regulariser * torch.eye(count, dtype=torch.float64), gram)
    torch.testing.assert_close(update @ keys.T, moved, rtol=1e-9, atol=1e-10)
    if regulariser == 1e-12:
        torch.testing.assert_close(keys @ (weight + update).T, keys @ weight.T + residuals, rtol=0, atol=1e-6)


def test_alphaedit_cannot_edit_with_an_empty_null_space():
    projector, dimension = null_space_projector(random(30, HIDDEN, seed=0), threshold=1e-6)
    assert dimension == 0
    weight = random(OUT, HIDDEN, seed=1)
    edited = alphaedit_update(weight, random(2, HIDDEN, seed=2), random(2, OUT, seed=3), projector, 1e-3)
    assert torch.equal(edited, weight)


@pytest.mark.parametrize("call", [
    lambda w, k, r, c: rome_update(w, k, r[:, :-1], c),
    lambda w, k, r, c: rome_update(w, k[:, :-1], r, c),
    lambda w, k, r, c: memit_update(w, k, r, c[:-1], ridge=1.0),
    lambda w, k, r, c: memit_update(w, k, r[:-1], c, ridge=1.0),
    lambda w, k, r, c: alphaedit_update(w, k, r, c[:, :-1]),
    lambda w, k, r, c: alphaedit_update(w[0], k, r, c),
], ids=["rome-residuals", "rome-keys", "memit-second-moment", "memit-count", "alphaedit-projector", "alphaedit-weight"])
def test_inconsistent_shapes_are_rejected_with_the_shapes_named(call):
    weight, keys, residuals = random(OUT, HIDDEN, seed=0), random(2, HIDDEN, seed=1), random(2, OUT, seed=2)
    with pytest.raises(ValueError, match=r"got weight \(.*\), keys \(.*\), residuals \("):
        call(weight, keys, residuals, torch.eye(HIDDEN, dtype=torch.float64))


def test_bad_single_arguments_are_rejected():
    with pytest.raises(ValueError, match=r"\(7,\)"):
        key_second_moment(torch.ones(7, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(3, 2, 1\)"):
        null_space_projector(torch.ones(3, 2, 1, dtype=torch.float64), threshold=1e-3)
    with pytest.raises(ValueError, match="threshold"):
        null_space_projector(torch.ones(3, 2, dtype=torch.float64), threshold=2.0)
    with pytest.raises(ValueError, match="dtype"):
        memit_update(torch.zeros(OUT, HIDDEN), torch.zeros(1, HIDDEN, dtype=torch.float64),
                     torch.zeros(1, OUT, dtype=torch.float64), torch.eye(HIDDEN, dtype=torch.float64), 1.0)
