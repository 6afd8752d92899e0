"""Fact sets, embeddings and the dot-product accuracy every method is scored by."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from factstore.facts import (
    FactSet,
    condition_number,
    conditioned_embeddings,
    singular_value_profile,
    decoding_margins,
    dot_product_accuracy,
    make_fact_set,
    per_value_targets,
    random_fact_map,
    real_fact_set,
    spherical_embeddings,
    stored_mask,
    target_and_best_other,
)

torch.set_num_threads(1)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_spherical_embeddings_are_unit_float64_rows():
    embeddings = spherical_embeddings(50, 16, generator())
    assert embeddings.shape == (50, 16)
    assert embeddings.dtype == torch.float64
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(50, dtype=torch.float64))


@pytest.mark.parametrize("kappa", [1.0, 10.0, 1000.0])
@pytest.mark.parametrize("shape", [(200, 16), (12, 30)])
def test_conditioned_embeddings_have_the_requested_condition_number(kappa, shape):
    n, d = shape
    embeddings = conditioned_embeddings(n, d, kappa, generator(1))
    assert embeddings.shape == (n, d)
    assert condition_number(embeddings) == pytest.approx(kappa, rel=1e-8)
    # Frobenius norm of the spherical start is kept: mean squared row norm 1.
    assert float(embeddings.pow(2).sum()) == pytest.approx(n, rel=1e-10)
    singular_values = torch.linalg.svdvals(embeddings)
    expected = torch.linspace(1.0, 1.0 / kappa, min(n, d), dtype=torch.float64)
    torch.testing.assert_close(singular_values / singular_values[0], expected)


@pytest.mark.parametrize("kappa", [10.0, 1000.0])
def test_geometric_spectrum_has_the_requested_condition_number_and_equal_ratios(kappa):
    n, d = 200, 16
    embeddings = conditioned_embeddings(n, d, kappa, generator(1), spectrum="geometric")
    assert condition_number(embeddings) == pytest.approx(kappa, rel=1e-8)
    assert float(embeddings.pow(2).sum()) == pytest.approx(n, rel=1e-10)
    singular_values = torch.linalg.svdvals(embeddings)
    ratios = singular_values[1:] / singular_values[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, kappa ** (-1 / (d - 1))))
    # the same draws as the linspace set: only the singular values differ
    linspace = conditioned_embeddings(n, d, kappa, generator(1))
    assert condition_number(linspace) == pytest.approx(kappa, rel=1e-8)
    assert not torch.allclose(embeddings, linspace)


def test_singular_value_profile_rejects_an_unknown_spectrum():
    with pytest.raises(ValueError, match="unknown spectrum"):
        singular_value_profile(8, 10.0, "cosine")


def test_conditioned_embeddings_reject_kappa_below_one():
    with pytest.raises(ValueError):
        conditioned_embeddings(10, 4, 0.5, generator())


def test_random_fact_maps():
    permutation = random_fact_map(100, generator(), "permutation")
    assert sorted(permutation.tolist()) == list(range(100))
    random_map = random_fact_map(100, generator(), "random")
    assert random_map.dtype == torch.long and random_map.min() >= 0 and random_map.max() < 100
    assert len(set(random_map.tolist())) < 100  # a random map almost surely repeats values
    with pytest.raises(ValueError):
        random_fact_map(10, generator(), "shuffled")


def test_make_fact_set_shapes_keys_and_determinism():
    facts = make_fact_set(
        64, 8, generator(3), value_condition_number=30.0, key_condition_number=5.0
    )
    again = make_fact_set(
        64, 8, generator(3), value_condition_number=30.0, key_condition_number=5.0
    )
    assert facts.n_facts == 64 and facts.key_dim == 8 and facts.value_dim == 8
    torch.testing.assert_close(facts.keys.norm(dim=1), torch.ones(64, dtype=torch.float64))
    assert condition_number(facts.values) == pytest.approx(30.0, rel=1e-8)
    torch.testing.assert_close(facts.targets, facts.values[facts.fact_map])
    torch.testing.assert_close(facts.keys, again.keys)
    assert torch.equal(facts.fact_map, again.fact_map)


def test_with_values_keeps_keys_and_map():
    facts = make_fact_set(10, 4, generator())
    new_values = torch.zeros(10, 6, dtype=torch.float64)
    replaced = facts.with_values(new_values)
    assert replaced.values is new_values and replaced.keys is facts.keys
    assert replaced.targets.shape == (10, 6)


def test_per_value_targets_are_the_given_targets_or_the_values_in_float64():
    facts = make_fact_set(10, 4, generator())
    values = per_value_targets(facts)
    assert values.dtype == torch.float64 and torch.equal(values, facts.values.to(torch.float64))
    given_targets = torch.ones(10, 4, dtype=torch.float32)
    emitted = per_value_targets(facts, given_targets)
    assert emitted.dtype == torch.float64 and torch.equal(emitted, given_targets.double())


def test_fact_set_validates_its_map():
    keys = spherical_embeddings(5, 3, generator())
    with pytest.raises(ValueError):
        FactSet(keys, keys, torch.arange(4))
    with pytest.raises(ValueError):
        FactSet(keys, keys, torch.tensor([0, 1, 2, 3, 5]))


def test_real_fact_set_from_precomputed_embeddings():
    rng = np.random.default_rng(0)
    books = rng.normal(size=(30, 12)).astype(np.float32) * 3.0
    unique_authors = rng.normal(size=(7, 12)).astype(np.float32)
    book_to_author = torch.as_tensor(rng.integers(0, 7, size=30))
    facts = real_fact_set(books, unique_authors, generator(), fact_map=book_to_author)
    assert facts.keys.dtype == torch.float64
    torch.testing.assert_close(facts.keys.norm(dim=1), torch.ones(30, dtype=torch.float64))
    torch.testing.assert_close(facts.values, torch.as_tensor(unique_authors, dtype=torch.float64))
    assert torch.equal(facts.fact_map, book_to_author)

    aligned = real_fact_set(books, books[::-1].copy(), generator(), fact_map="aligned", n_facts=10)
    assert aligned.n_facts == 10 and torch.equal(aligned.fact_map, torch.arange(10))
    permuted = real_fact_set(books, books, generator(), n_facts=10)
    assert sorted(permuted.fact_map.tolist()) == list(range(10))
    with pytest.raises(ValueError):
        real_fact_set(books, unique_authors, generator(), fact_map="permutation")


def test_accuracy_is_one_for_exact_targets_and_zero_output_stores_nothing():
    facts = make_fact_set(40, 16, generator(2))
    assert dot_product_accuracy(facts.targets, facts.values, facts.fact_map) == 1.0
    zeros = torch.zeros_like(facts.targets)
    assert dot_product_accuracy(zeros, facts.values, facts.fact_map) == 0.0


def test_accuracy_counts_a_hand_made_case():
    values = torch.eye(3, dtype=torch.float64)
    outputs = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.2, 0.9], [0.5, 0.5, 0.0]], dtype=torch.float64)
    fact_map = torch.tensor([0, 1, 0])
    # fact 0 right, fact 1 wrong (value 2 wins), fact 2 tied -> not stored
    assert stored_mask(outputs, values, fact_map).tolist() == [True, False, False]
    torch.testing.assert_close(
        decoding_margins(outputs, values, fact_map),
        torch.tensor([1.0, -0.7, 0.0], dtype=torch.float64),
    )


def test_accuracy_casts_float32_outputs():
    facts = make_fact_set(20, 8, generator(4))
    assert dot_product_accuracy(facts.targets.float(), facts.values, facts.fact_map) == 1.0


@settings(max_examples=25, deadline=None)
@given(
    n_facts=st.integers(1, 60),
    n_values=st.integers(2, 40),
    dim=st.integers(1, 6),
    chunk_size=st.integers(1, 17),
    seed=st.integers(0, 2**16),
)
def test_chunked_accuracy_equals_unchunked(n_facts, n_values, dim, chunk_size, seed):
    gen = generator(seed)
    outputs = torch.randn(n_facts, dim, generator=gen, dtype=torch.float64)
    values = torch.randn(n_values, dim, generator=gen, dtype=torch.float64)
    fact_map = torch.randint(0, n_values, (n_facts,), generator=gen)
    scores = outputs @ values.T
    reference = scores.argmax(dim=1) == fact_map  # no ties with continuous random data
    chunked = stored_mask(outputs, values, fact_map, chunk_size=chunk_size)
    assert torch.equal(chunked, reference)
    assert dot_product_accuracy(outputs, values, fact_map, chunk_size) == pytest.approx(
        reference.double().mean().item()
    )
    assert torch.equal(stored_mask(outputs, values, fact_map, chunk_size=10**6), reference)


@settings(max_examples=25, deadline=None)
@given(n_rows=st.integers(1, 20), n_columns=st.integers(2, 12), seed=st.integers(0, 2**16))
def test_target_and_best_other_is_the_brute_force_pair_and_leaves_the_scores_as_they_were(n_rows, n_columns, seed):
    gen = generator(seed)
    scores = torch.randint(-3, 4, (n_rows, n_columns), generator=gen).double()  # small integers: ties happen
    target = torch.randint(0, n_columns, (n_rows, 1), generator=gen)
    before = scores.clone()
    target_score, best_other = target_and_best_other(scores, target)
    assert torch.equal(scores, before)
    for row in range(n_rows):
        others = [scores[row, column] for column in range(n_columns) if column != target[row, 0]]
        assert target_score[row, 0] == scores[row, target[row, 0]]
        assert best_other[row, 0] == max(others)


def test_a_tie_with_another_value_is_not_stored():
    scores = torch.tensor([[1.0, 1.0, 0.0], [2.0, 1.0, 2.0], [3.0, 1.0, 2.0]])
    target_score, best_other = target_and_best_other(scores, torch.tensor([[0], [1], [0]]))
    assert (target_score > best_other).squeeze(1).tolist() == [False, False, True]


def test_accuracy_at_large_fact_counts_stays_chunked():
    facts = make_fact_set(2**14, 32, generator(5))
    noisy = facts.targets + 0.05 * torch.randn(
        facts.targets.shape, generator=generator(6), dtype=torch.float64
    )
    accuracy = dot_product_accuracy(noisy, facts.values, facts.fact_map, chunk_size=512)
    assert 0.5 < accuracy <= 1.0
