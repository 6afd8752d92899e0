"""Whitening and its folding, decodability and margin-optimal targets."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog, minimize

from factstore.facts import (
    condition_number,
    conditioned_embeddings,
    decoding_margins,
    dot_product_accuracy,
    make_fact_set,
    spherical_embeddings,
    stored_mask,
)
from factstore.geometry import decodability, margin_of_targets, margin_optimal_targets, solve_margin_optimal
from factstore.min_norm_point import min_norm_point_in_hulls, project_rows_to_simplex
from factstore.whitening import (
    fold_into_mlp,
    fold_value_transform,
    fold_whitening_into_linear,
    second_moment,
    whiten,
    whiten_fact_set,
    whitening_transform,
)

torch.set_num_threads(1)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------
# Whitening
# ---------------------------------------------------------------------------------------------


def test_zero_strength_is_the_identity():
    embeddings = conditioned_embeddings(100, 8, 50.0, generator())
    transform, inverse = whitening_transform(embeddings, 0.0)
    torch.testing.assert_close(transform, torch.eye(8, dtype=torch.float64))
    torch.testing.assert_close(inverse, torch.eye(8, dtype=torch.float64))


def test_full_whitening_without_rescaling_gives_identity_second_moment():
    embeddings = conditioned_embeddings(500, 10, 100.0, generator(1))
    whitened, transform, inverse = whiten(embeddings, 1.0, eps=1e-12, preserve_scale=False)
    torch.testing.assert_close(second_moment(whitened, eps=0.0), torch.eye(10, dtype=torch.float64))
    torch.testing.assert_close(transform @ inverse, torch.eye(10, dtype=torch.float64))
    torch.testing.assert_close(transform, transform.T)


def test_preserve_scale_keeps_the_frobenius_norm_and_only_rescales():
    embeddings = conditioned_embeddings(300, 12, 20.0, generator(2))
    scaled, _, _ = whiten(embeddings, 0.7)
    literal, _, _ = whiten(embeddings, 0.7, preserve_scale=False)
    assert float(scaled.norm()) == pytest.approx(float(embeddings.norm()), rel=1e-12)
    ratio = scaled / literal
    torch.testing.assert_close(ratio, torch.full_like(ratio, float(ratio[0, 0])))


@settings(max_examples=20, deadline=None)
@given(strength=st.floats(0.0, 1.0), kappa=st.floats(1.0, 500.0), seed=st.integers(0, 1000))
def test_whitening_strength_interpolates_the_condition_number(strength, kappa, seed):
    embeddings = conditioned_embeddings(200, 6, kappa, generator(seed))
    whitened, _, _ = whiten(embeddings, strength, eps=1e-14)
    # Singular values s -> s^(1 - alpha) (times one scalar), so kappa -> kappa^(1 - alpha).
    assert condition_number(whitened) == pytest.approx(kappa ** (1.0 - strength), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# Folding: the folded MLP on original data decodes exactly what the unfolded one did
# ---------------------------------------------------------------------------------------------


def random_feature_mlp(keys, targets, hidden, seed, gated):
    """A tiny two-layer MLP whose last layer is fitted by least squares, so it stores some facts."""
    gen = generator(seed)
    gate = torch.randn(hidden, keys.shape[1], generator=gen, dtype=torch.float64)
    up = torch.randn(hidden, keys.shape[1], generator=gen, dtype=torch.float64)

    def features(x, gate_weight, up_weight):
        activations = torch.relu(x @ gate_weight.T)
        return activations * (x @ up_weight.T) if gated else activations

    down = torch.linalg.lstsq(features(keys, gate, up), targets).solution.T
    return (gate, up), down, features


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("key_strength,value_strength", [(1.0, 1.0), (0.3, 0.0), (0.0, 0.6)])
def test_folded_mlp_decodes_the_same_facts_as_the_unfolded_one(gated, key_strength, value_strength):
    facts = make_fact_set(
        120, 6, generator(7), value_condition_number=40.0, key_condition_number=20.0
    )
    whitened, key_transform, value_transform = whiten_fact_set(facts, key_strength, value_strength)
    (gate, up), down, features = random_feature_mlp(whitened.keys, whitened.targets, 40, 8, gated)

    unfolded_outputs = features(whitened.keys, gate, up) @ down.T
    unfolded_scores = unfolded_outputs @ whitened.values.T

    (gate_f, up_f), down_f = fold_into_mlp((gate, up), down, key_transform, value_transform)
    folded_outputs = features(facts.keys, gate_f, up_f) @ down_f.T
    folded_scores = folded_outputs @ facts.values.T

    torch.testing.assert_close(folded_scores, unfolded_scores, rtol=0, atol=1e-10)
    unfolded_mask = stored_mask(unfolded_outputs, whitened.values, facts.fact_map)
    folded_mask = stored_mask(folded_outputs, facts.values, facts.fact_map)
    assert torch.equal(folded_mask, unfolded_mask)
    assert 0 < int(folded_mask.sum()) < facts.n_facts  # a non-trivial mixture of stored facts


def test_folding_the_inverse_would_not_preserve_decoding():
    """Why the value side folds W_v and not W_v^{-1} (see the whitening module docstring)."""
    facts = make_fact_set(200, 6, generator(9), value_condition_number=200.0)
    whitened, _, value_transform = whiten_fact_set(facts, 0.0, 1.0)
    (gate, up), down, features = random_feature_mlp(whitened.keys, whitened.targets, 40, 10, False)
    unfolded = features(whitened.keys, gate, up) @ down.T
    right = fold_value_transform(down, value_transform)
    wrong = fold_value_transform(down, torch.linalg.inv(value_transform))
    hidden = features(facts.keys, gate, up)
    reference = decoding_margins(unfolded, whitened.values, facts.fact_map)
    torch.testing.assert_close(
        decoding_margins(hidden @ right.T, facts.values, facts.fact_map), reference
    )
    assert not torch.allclose(
        decoding_margins(hidden @ wrong.T, facts.values, facts.fact_map), reference
    )


def test_folded_linear_memory_matches():
    facts = make_fact_set(
        50, 8, generator(11), value_condition_number=30.0, key_condition_number=30.0
    )
    whitened, key_transform, value_transform = whiten_fact_set(facts, 0.5, 1.0)
    hebbian = whitened.targets.T @ whitened.keys  # sum_i v_f(i) k_i^T on whitened data
    folded = fold_whitening_into_linear(hebbian, key_transform, value_transform)
    torch.testing.assert_close(
        (facts.keys @ folded.T) @ facts.values.T,
        (whitened.keys @ hebbian.T) @ whitened.values.T,
        rtol=0,
        atol=1e-10,
    )


def test_fold_into_mlp_accepts_a_single_first_layer_and_no_transforms():
    weight, last = torch.randn(5, 3, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    first, folded_last = fold_into_mlp(weight, last)
    assert first is weight and folded_last is last


# ---------------------------------------------------------------------------------------------
# Decodability and margin-optimal targets
# ---------------------------------------------------------------------------------------------


def unit_differences(values: np.ndarray, i: int) -> np.ndarray:
    differences = np.delete(values[i] - values, i, axis=0)
    return differences / np.linalg.norm(differences, axis=1, keepdims=True)


def scipy_margin_optimum(values: np.ndarray, i: int) -> tuple[float, np.ndarray]:
    """max t s.t. <d_ij, u> >= t, ||u||^2 <= 1, by SLSQP from several starts (an independent
    primal formulation of the problem the batched solver attacks through its dual)."""
    differences = unit_differences(values, i)
    dim = values.shape[1]
    constraints = [
        {
            "type": "ineq",
            "fun": lambda z: differences @ z[:dim] - z[dim],
            "jac": lambda z: np.c_[differences, -np.ones(len(differences))],
        },
        {
            "type": "ineq",
            "fun": lambda z: np.array([1.0 - z[:dim] @ z[:dim]]),
            "jac": lambda z: np.r_[-2.0 * z[:dim], 0.0][None, :],
        },
    ]
    best = None
    for start in range(4):
        initial = np.r_[np.random.default_rng(start).normal(size=dim) * 0.1, 0.0]
        result = minimize(
            lambda z: -z[dim],
            initial,
            jac=lambda z: np.r_[np.zeros(dim), -1.0],
            constraints=constraints,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 2000},
        )
        if result.success and (best is None or result.fun < best.fun):
            best = result
    assert best is not None
    return -best.fun, best.x[:dim]


SMALL_CASES = [
    ("spherical", 8, 4, 0),
    ("spherical", 16, 5, 1),
    ("spherical", 20, 6, 2),
    ("conditioned", 12, 4, 3),
    ("conditioned", 20, 5, 4),
    ("conditioned", 20, 6, 5),
]


@pytest.mark.parametrize("kind,n_values,dim,seed", SMALL_CASES)
def test_margin_optimal_targets_match_scipy(kind, n_values, dim, seed):
    if kind == "spherical":
        values = spherical_embeddings(n_values, dim, generator(seed))
    else:
        values = conditioned_embeddings(n_values, dim, 30.0, generator(seed))
    result = solve_margin_optimal(values, n_candidates=3, n_added=2)  # forces several rounds
    assert bool(result.converged.all())
    torch.testing.assert_close(
        result.targets.norm(dim=1), torch.ones(n_values, dtype=torch.float64)
    )
    for i in range(n_values):
        optimum, direction = scipy_margin_optimum(values.numpy(), i)
        assert result.margins[i].item() >= optimum - 1e-6  # at least as good as SLSQP
        assert result.margins[i].item() == pytest.approx(max(optimum, 0.0), abs=1e-5)
        if optimum > 1e-3:  # the optimal direction is unique when the margin is positive
            np.testing.assert_allclose(result.targets[i].numpy(), direction, atol=1e-4)
        # the reported margin is the one the target really achieves
        achieved = (unit_differences(values.numpy(), i) @ result.targets[i].numpy()).min()
        assert achieved == pytest.approx(result.margins[i].item(), abs=1e-10)


def test_value_inside_the_hull_of_the_others_is_undecodable():
    values = spherical_embeddings(10, 3, generator(12))
    values[0] = values[1:].mean(dim=0)
    result = solve_margin_optimal(values)
    assert result.margins[0].item() == 0.0 and bool(result.converged[0])
    assert bool((result.margins[1:] > 0).all())
    # LP check: no u with <d_0j, u> >= 1 for all j exists.
    differences = unit_differences(values.numpy(), 0)
    lp = linprog(
        np.zeros(3), A_ub=-differences, b_ub=-np.ones(len(differences)), bounds=[(None, None)] * 3
    )
    assert lp.status == 2  # infeasible
    assert decodability(values) == 0.0


def test_duplicated_values_are_undecodable():
    values = spherical_embeddings(6, 3, generator(13))
    values[4] = values[2]
    _, rho = margin_optimal_targets(values)
    assert rho[2].item() == 0.0 and rho[4].item() == 0.0 and bool((rho[[0, 1, 3, 5]] > 0).all())


def test_margin_optimal_targets_decode_every_value():
    facts = make_fact_set(300, 8, generator(14), value_condition_number=100.0)
    targets, rho = margin_optimal_targets(facts.values, chunk_size=64)
    assert bool((rho > 0).all())
    assert dot_product_accuracy(targets[facts.fact_map], facts.values, facts.fact_map) == 1.0
    torch.testing.assert_close(margin_of_targets(targets, facts.values), rho, rtol=0, atol=1e-12)
    # U* is never worse than emitting the values themselves, and usually much better here.
    naive = margin_of_targets(facts.values / facts.values.norm(dim=1, keepdim=True), facts.values)
    assert bool((rho >= naive - 1e-12).all())
    assert decodability(facts.values) == pytest.approx(rho.min().item())


def test_solution_does_not_depend_on_chunking_or_working_set_size():
    values = conditioned_embeddings(300, 8, 10.0, generator(15))
    reference = solve_margin_optimal(values)
    tiny_sets = solve_margin_optimal(values, n_candidates=2, n_added=3, chunk_size=37)
    assert tiny_sets.n_rounds > reference.n_rounds
    assert bool(reference.converged.all()) and bool(tiny_sets.converged.all())
    torch.testing.assert_close(tiny_sets.margins, reference.margins, rtol=0, atol=1e-8)
    torch.testing.assert_close(tiny_sets.targets, reference.targets, rtol=0, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(
    n_values=st.integers(2, 25),
    dim=st.integers(2, 6),
    seed=st.integers(0, 10_000),
    shift=st.floats(-3.0, 3.0),
    scale=st.floats(0.1, 10.0),
)
def test_margins_are_certified_optimal_and_invariant(n_values, dim, seed, shift, scale):
    gen = generator(seed)
    values = torch.randn(n_values, dim, generator=gen, dtype=torch.float64)
    result = solve_margin_optimal(values)
    assert bool(result.converged.all())
    positive = result.margins > 0
    assert bool((result.upper_bounds[positive] - result.margins[positive] <= 1e-7).all())
    # No other unit direction beats u*_i: the values' own directions and random ones.
    probes = torch.cat([values, torch.randn(30, dim, generator=gen, dtype=torch.float64)])
    probes = probes / probes.norm(dim=1, keepdim=True)
    for probe in probes:
        achieved = margin_of_targets(probe.expand(n_values, dim), values)
        assert bool((achieved <= result.margins + 1e-9).all())
    # rho depends only on normalised differences: invariant to translation, scaling, rotation.
    rotation, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    moved = scale * (values + shift) @ rotation
    torch.testing.assert_close(
        solve_margin_optimal(moved).margins, result.margins, rtol=0, atol=1e-7
    )


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), size=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_simplex_projection_is_the_nearest_point(rows, size, seed):
    points = 3 * torch.randn(rows, size, generator=generator(seed), dtype=torch.float64)
    projected = project_rows_to_simplex(points)
    assert bool((projected >= 0).all())
    torch.testing.assert_close(projected.sum(dim=1), torch.ones(rows, dtype=torch.float64))
    # Optimality: <points - projected, s - projected> <= 0 for every vertex s of the simplex.
    residual = points - projected
    vertex_terms = residual - (residual * projected).sum(dim=1, keepdim=True)
    assert bool((vertex_terms <= 1e-10).all())


def test_min_norm_point_of_a_hull_containing_the_origin_is_zero():
    points = torch.tensor([[[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    weights = min_norm_point_in_hulls(points @ points.transpose(1, 2), torch.full((1, 3), 1 / 3.0))
    torch.testing.assert_close(
        (weights.unsqueeze(2) * points).sum(dim=1), torch.zeros(1, 2, dtype=torch.float64)
    )


def test_a_full_working_set_is_solved_on_until_certified():
    """Where every competitor is already in the working set (F - 1 <= its size), a round whose
    min-norm solve stops short of the certificate is followed by more rounds from its weights, not
    returned unconverged: every row comes back certified (upper bound - margin within tolerance),
    however many rounds the host's rounding needed (hypothesis found this set: before the fix, value 5's margin was 0.0057
    with an upper bound of 0.0237, against 0.0211 for the same set unmoved)."""
    gen = generator(642)
    values = torch.randn(15, 3, generator=gen, dtype=torch.float64)
    torch.randn(30, 3, generator=gen, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))
    moved = 5.753724969009297 * (values - 1.8301717564552749) @ rotation
    result = solve_margin_optimal(moved)
    # The certificate itself, whichever number of rounds this CPU's rounding needed to reach it.
    assert bool(result.converged.all())
    assert bool((result.upper_bounds - result.margins <= 1e-8).all())
    torch.testing.assert_close(result.margins, solve_margin_optimal(values).margins, rtol=0, atol=1e-7)
