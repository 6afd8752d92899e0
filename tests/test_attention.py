"""Tests of the multi-head attention memorisation study (the factstore.attention package, S4)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from conftest import claim_verdict

from factstore.attention.assumptions import (
    check_assumptions,
    context_ranks,
    kruskal_rank_estimate,
    random_subset_ranks,
)
from factstore.attention.capacity import (
    FitResult,
    TrainingSettings,
    attention_capacity,
    best_budget_runs,
    budget_check_sizes,
    budget_rise,
    fit_sizes,
    grid_step,
    warmup_cosine,
)
from factstore.attention.model import (
    CONTEXT_KINDS,
    AttentionShape,
    MemorisationData,
    MultiHeadAttentionMemory,
    make_dataset,
    softmax_last,
)
from factstore.attention.summary import (
    budget_ratio_spread,
    heads_exponent,
    heads_law_residuals,
    nondecreasing_violations,
    slopes_around,
)
from factstore.search import LargestSearch, search_largest
from factstore.statistics import linear_fit


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------- model


def test_forward_shapes_and_parameter_count():
    shape = AttentionShape(d=12, heads=3, d_head=5, d_value=4, n_classes=7)
    model = MultiHeadAttentionMemory(shape, generator())
    queries, contexts = torch.rand(10, 12), torch.rand(10, 6, 12)  # B = 10 examples, n = 6 context tokens
    assert model(queries, contexts).shape == (10, 7)
    assert model(queries, contexts[0]).shape == (10, 7)  # one shared context (n, d)
    expected = 3 * 12 * (5 + 5) + 3 * 12 * 4 + 3 * 4 * 12 + 12 * 7  # W_Q, W_K, W_V, W_O, W_D
    assert model.n_params == shape.n_params() == expected + 12 + 7  # and the token and decoder biases
    no_biases = AttentionShape(d=12, heads=3, d_head=5, d_value=4, n_classes=7, biases=False)
    assert MultiHeadAttentionMemory(no_biases, generator()).n_params == no_biases.n_params() == expected


@pytest.mark.parametrize("score_scale, biases", [("head_dim", False), ("model_dim", True)])
def test_forward_matches_the_papers_per_head_formula(score_scale, biases):
    """o = sum_h W_O,h^T W_V,h^T E'^T softmax(E' W_K,h W_Q,h^T e' / s), y = W_D^T o (+ b_D), with
    e' = e + b, E' = E + b (the token bias) and s = sqrt(d) (model_dim) or sqrt(d_h) (head_dim)."""
    shape = AttentionShape(d=6, heads=2, d_head=3, d_value=4, n_classes=5, score_scale=score_scale, biases=biases)
    model = MultiHeadAttentionMemory(shape, generator(1)).double()
    if biases:  # non-zero biases, so the formula sees them
        torch.nn.init.normal_(model.token_bias, generator=generator(2))
        torch.nn.init.normal_(model.readout_bias, generator=generator(3))
    queries, contexts = torch.rand(3, 6, dtype=torch.float64), torch.rand(3, 4, 6, dtype=torch.float64)
    bias = model.token_bias if biases else torch.zeros(6, dtype=torch.float64)
    e, context = queries[1] + bias, contexts[1] + bias
    scale = math.sqrt(6 if score_scale == "model_dim" else 3)
    output = torch.zeros(6, dtype=torch.float64)
    for h in range(2):
        alpha = context @ model.w_key[h] @ model.w_query[h].T @ e / scale
        z = context.T @ torch.softmax(alpha, dim=0)
        output += model.w_out[h].T @ model.w_value[h].T @ z
    expected = model.w_readout.T @ output + (model.readout_bias if biases else 0)
    torch.testing.assert_close(model(queries, contexts)[1], expected)
    shared = model(queries, contexts[1])  # the same context for every query
    torch.testing.assert_close(shared[1], expected)


def test_score_scale_changes_the_scores_by_sqrt_d_over_d_head():
    """Dividing by sqrt(d) instead of sqrt(d_h) is W_Q scaled by sqrt(d_h / d): the two layers
    agree once the head_dim layer's W_Q is scaled so, and differ without it."""
    by_model = AttentionShape(d=16, heads=2, d_head=4, d_value=1, n_classes=5, score_scale="model_dim")
    by_head = AttentionShape(d=16, heads=2, d_head=4, d_value=1, n_classes=5, score_scale="head_dim")
    model = MultiHeadAttentionMemory(by_model, generator(1)).double()
    other = MultiHeadAttentionMemory(by_head, generator(1)).double()
    queries, contexts = torch.rand(7, 16, dtype=torch.float64), torch.rand(7, 5, 16, dtype=torch.float64)
    assert not torch.allclose(model(queries, contexts), other(queries, contexts))
    with torch.no_grad():
        other.w_query.mul_(math.sqrt(4 / 16))
    torch.testing.assert_close(model(queries, contexts), other(queries, contexts))
    with pytest.raises(ValueError, match="score_scale"):
        AttentionShape(score_scale="sqrt")


@pytest.mark.parametrize("length", [2, 8, 16, 40])
def test_softmax_last_matches_torch(length):
    logits = torch.randn(3, 4, length) * 20
    torch.testing.assert_close(softmax_last(logits), logits.softmax(dim=-1))


# ----------------------------------------------------------------------------------------- data


@pytest.mark.parametrize("context", CONTEXT_KINDS)
def test_dataset_shapes_and_prefixes(context):
    data = make_dataset(50, d=8, n_context=5, n_classes=10, context=context, generator=generator())
    assert data.queries.shape == (50, 8) and data.labels.shape == (50,)
    assert data.contexts.shape == ((5, 8) if context == "shared" else (50, 5, 8))
    assert data.shared_context == (context == "shared") and data.context_size == 5
    assert 0 <= float(data.queries.min()) and float(data.contexts.max()) <= 1
    assert data.labels.min() >= 0 and data.labels.max() < 10
    head = data.prefix(20)
    assert head.size == 20 and head.shared_context == data.shared_context
    torch.testing.assert_close(head.queries, data.queries[:20])
    assert head.context_matrices().shape == ((1, 5, 8) if context == "shared" else (20, 5, 8))


def test_unknown_context_kind_is_refused():
    with pytest.raises(ValueError, match="context must be one of"):
        make_dataset(5, 4, 2, 3, "rotating", generator())


# ------------------------------------------------------------------------------------- training


def test_warmup_cosine_schedule():
    settings = TrainingSettings(max_steps=100, warmup_steps=10, final_lr_fraction=0.1)
    factors = [warmup_cosine(step, settings) for step in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:]))
    assert warmup_cosine(100, settings) == pytest.approx(0.1)


def test_models_trained_side_by_side_see_only_their_own_examples():
    """A model on the first 12 examples ignores the rest of the batch (its labels, its count)."""
    shape = AttentionShape(d=8, heads=2, d_head=4, d_value=4, n_classes=5)
    settings = TrainingSettings(learning_rate=1e-2, max_steps=30, warmup_steps=3, target_accuracy=2.0)  # never stops early
    pool = make_dataset(30, 8, 4, 5, "per_example", generator(0))
    relabelled = MemorisationData(pool.queries, pool.contexts, torch.cat([pool.labels[:12], pool.labels[12:].flip(0)]))
    first = fit_sizes(pool, [12, 30], shape, settings, generator(7))
    second = fit_sizes(relabelled, [12, 20], shape, settings, generator(7))
    assert first[0].best_accuracy == second[0].best_accuracy
    assert first[0].final_accuracy == second[0].final_accuracy
    assert [fit.size for fit in first] == [12, 30] and first[1].n_params == shape.n_params()


def test_fits_a_tiny_dataset_and_stops_early():
    shape = AttentionShape(d=8, heads=2, d_head=4, d_value=4, n_classes=10)
    pool = make_dataset(16, 8, 4, 10, "shared", generator(0))
    (fit,) = fit_sizes(pool, [16], shape, TrainingSettings(learning_rate=3e-2, max_steps=600, warmup_steps=10), generator(1))
    assert fit.fitted and fit.best_accuracy == 1.0
    assert fit.steps_run == fit.fitted_at_step + 1 < 600


# ------------------------------------------------------------------------------- capacity search


def threshold_fit(capacity: int, calls: list | None = None):
    """A stub 'training': fits every N <= capacity, and N > capacity only partly."""

    def fit_accuracy(sizes):
        if calls is not None:
            calls.append(list(sizes))
        return [1.0 if size <= capacity else capacity / size for size in sizes]

    return fit_accuracy



@pytest.mark.parametrize("context", CONTEXT_KINDS)
def test_a_batch_of_at_least_n_is_full_batch_training(context):
    """batch_size >= N trains exactly as the full batch: the same FitResults, step for step."""
    shape = AttentionShape(d=8, heads=2, d_head=4, d_value=1, n_classes=10)
    pool = make_dataset(64, 8, 4, 10, context, generator(0))
    full = TrainingSettings(learning_rate=3e-2, max_steps=60, warmup_steps=5)
    results = [fit_sizes(pool, [24, 64], shape, settings, generator(1))
               for settings in (full, replace(full, batch_size=64), replace(full, batch_size=1000))]
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("context", CONTEXT_KINDS)
def test_mini_batches_fit_a_tiny_dataset_and_read_accuracy_over_all_examples(context):
    """batch 8 of N = 24: the models learn (accuracy read over all their examples, once an epoch),
    and a model with fewer examples than the batch trains on all of them."""
    shape = AttentionShape(d=8, heads=4, d_head=4, d_value=2, n_classes=4)
    pool = make_dataset(24, 8, 4, 4, context, generator(0))
    settings = TrainingSettings(learning_rate=3e-2, max_steps=600, warmup_steps=10, batch_size=8)
    fits = fit_sizes(pool, [6, 24], shape, settings, generator(1))
    assert all(fit.best_accuracy * fit.size == round(fit.best_accuracy * fit.size) for fit in fits)  # counts of examples
    assert fits[0].fitted and fits[1].best_accuracy > 0.5

@pytest.mark.parametrize("probes_per_round", [1, 2, 3])
@pytest.mark.parametrize("true_capacity", [1, 37, 50, 1000])
def test_search_finds_the_exact_capacity_of_a_stub(true_capacity, probes_per_round):
    search = search_largest(
        threshold_fit(true_capacity), start=10, probes_per_round=probes_per_round, relative_resolution=0.0
    )
    assert search.capacity == true_capacity
    assert search.smallest_failure == true_capacity + 1
    assert search.memorised_examples == pytest.approx(true_capacity)


def test_search_brackets_downward_and_batches_its_probes():
    calls = []
    search = search_largest(threshold_fit(5, calls), start=100, probes_per_round=2, relative_resolution=0.0)
    assert search.capacity == 5
    assert calls[0] == [100, 200] and calls[1] == [25, 50] and all(len(c) <= 2 for c in calls)


def test_search_stops_at_the_requested_resolution():
    search = search_largest(threshold_fit(1000), start=64, relative_resolution=0.1)
    assert search.capacity <= 1000 < search.smallest_failure <= search.capacity * 1.1 + 1


def test_search_edge_cases():
    assert search_largest(lambda sizes: [0.0] * len(sizes), start=8).capacity == 0
    everything = search_largest(lambda sizes: [1.0] * len(sizes), start=8, max_size=100)
    assert everything.capacity == 100 and everything.smallest_failure is None
    # An optimisation failure at 16 below a fit at 32: nested data, so the fit at 32 stands.
    noisy = search_largest(
        lambda sizes: [0.9 if s == 16 else float(s <= 40) for s in sizes], start=16, probes_per_round=2, relative_resolution=0.0
    )
    assert noisy.capacity == 40 and noisy.smallest_failure == 41


def test_capacity_of_a_tiny_real_model():
    """A 2-head layer with ~300 weights memorises some tens of random 10-class labels, not 400."""
    shape = AttentionShape(d=8, heads=2, d_head=4, d_value=4, n_classes=10)
    pool = make_dataset(400, 8, 4, 10, "shared", generator(0))
    settings = TrainingSettings(learning_rate=3e-2, max_steps=400, warmup_steps=20)
    search, fits = attention_capacity(
        pool, shape, settings, generator(1), start=16, probes_per_round=2, relative_resolution=0.25
    )
    assert 8 <= search.capacity < 400 and search.smallest_failure is not None
    assert any(fit.size == search.capacity and fit.fitted for fit in fits)
    assert len(fits) == len(search.probes)


def _fit(size: int, fitted: bool) -> FitResult:
    return FitResult(size=size, best_accuracy=1.0 if fitted else 0.9, final_accuracy=0.9,
                     fitted_at_step=10 if fitted else None, steps_run=100, n_params=1)


@given(capacity=st.integers(1, 10_000), width=st.integers(1, 500), resolution=st.floats(0.01, 0.5))
def test_budget_check_probes_the_bracket_and_one_grid_step_above(capacity, width, resolution):
    failure = capacity + width
    sizes = budget_check_sizes(LargestSearch(capacity, failure), resolution, max_size=10**6)
    step = grid_step(failure, resolution)
    assert sizes == [capacity, failure, failure + step] and step >= resolution * failure
    # Nothing fits beyond the old capacity: no rise; the failure fits: at most one step when the
    # bracket is at most one step wide; the size above the failure fits: more than one step.
    assert budget_rise(capacity, step, [_fit(capacity, True), _fit(failure, False)]) == 0
    assert budget_rise(capacity, step, [_fit(failure, True)]) == width / step
    assert budget_rise(capacity, step, [_fit(failure, False), _fit(failure + step, True)]) > 1


def test_budget_check_retrains_steps_above_the_failure():
    assert budget_check_sizes(LargestSearch(95, 100), 0.1, max_size=10**6, steps_above=3) == [95, 100, 110, 120, 130]
    assert budget_check_sizes(LargestSearch(95, 100), 0.1, max_size=115, steps_above=3) == [95, 100, 110, 115]


def test_the_better_budget_is_the_one_that_fitted_the_largest_size():
    runs = {"x4 lr 0.05": [_fit(10, True), _fit(12, False)], "x4 lr 0.01": [_fit(10, True), _fit(12, True)]}
    assert best_budget_runs(runs) == "x4 lr 0.01"
    assert best_budget_runs({"a": [_fit(12, True)], "b": [_fit(12, True)]}) == "a"  # a tie: the first listed
    assert best_budget_runs({"a": [_fit(12, False)]}) is None


def test_a_model_still_gaining_in_the_last_half_of_its_steps_is_unconverged():
    late = FitResult(size=20, best_accuracy=0.95, final_accuracy=0.95, fitted_at_step=None, steps_run=100,
                     n_params=1, last_gain_step=70)
    early = FitResult(size=20, best_accuracy=0.95, final_accuracy=0.95, fitted_at_step=None, steps_run=100,
                      n_params=1, last_gain_step=30)
    assert late.still_gaining(0.5) and not early.still_gaining(0.5) and early.still_gaining(0.8)
    assert not _fit(20, True).still_gaining(1.0)  # a fitted model has nothing left to gain


def test_search_continues_from_known_probes_without_repeating_them():
    probed = []

    def stub(sizes):
        probed.extend(sizes)
        return [1.0 if size <= 37 else 0.5 for size in sizes]

    search = search_largest(stub, start=1, probes_per_round=2, relative_resolution=0.05, known=[(30, 1.0), (33, 1.0)])
    assert search.capacity == 37 and search.smallest_failure == 38
    assert not {30, 33} & set(probed) and min(probed) > 33  # it went up from the known fits
    bracketed = search_largest(stub, start=1, probes_per_round=2, relative_resolution=0.1, known=[(36, 1.0), (39, 0.5)])
    assert bracketed.capacity == 36 and len(bracketed.probes) == 2  # already within the resolution: nothing trained


def test_counts_are_read_at_one_budget_and_at_the_larger_one(tmp_path):
    """A tiny case where 10 steps fit few examples: the row's count at 1x is the paper's count,
    max over the search's probes of N x accuracy; at 8x it is the same count over the budget
    check's retrained sizes (both learning rates), and their ratio is the gate's per-layer r."""
    from factstore.__main__ import run_step
    from factstore.io import read_table

    params = {
        "seed": 0, "n_classes": 10, "context": "shared", "assumption_subsets": 20,
        "training": {"learning_rate": 0.05, "max_steps": 10, "warmup_steps": 2, "target_accuracy": 1.0, "patience": None},
        "search": {"start": 4, "growth": 2.0, "probes_per_round": 2, "relative_resolution": 0.2, "max_size": 256},
        "budget_check": {"steps_factor": 8, "learning_rates": [0.05, 0.2], "steps_above": 2},
        "layer": {"d": 6, "heads": 2, "d_head": 3, "d_value": 3, "n_context": 3},
    }
    outputs = {kind: str(tmp_path / f"{kind}.csv") for kind in ("capacity", "probes")}
    run_step("attention.capacity", params, {}, outputs)
    row, probes = read_table(outputs["capacity"]).iloc[0], read_table(outputs["probes"])
    count = probes["size"] * probes["best_accuracy"]
    searched = probes["budget"] == "search"
    assert row["memorised_examples"] == pytest.approx(count[searched].max())
    assert row["memorised_examples_larger_budget"] == pytest.approx(count[~searched].max())
    assert row["budget_count_ratio"] == pytest.approx(row["memorised_examples_larger_budget"] / row["memorised_examples"])
    assert row["budget_steps"] == 10 and row["budget_steps_larger"] == 80
    assert row["capacity"] == probes.loc[searched & probes["fitted"], "size"].max()  # the 1x capacity, never escalated
    assert (probes.loc[~searched, "steps_run"] <= 80).all()


def test_budget_check_edge_cases():
    assert budget_check_sizes(LargestSearch(100, None), 0.1, max_size=100) == []
    assert budget_check_sizes(LargestSearch(95, 100), 0.1, max_size=105) == [95, 100, 105]
    assert budget_rise(50, 5, [_fit(50, False)]) == 0  # a fit found stands: the capacity never falls


# ---------------------------------------------------------------------------------- assumptions


def test_context_ranks():
    contexts = torch.rand(5, 4, 10, generator=generator())
    assert context_ranks(contexts).tolist() == [4] * 5
    contexts[2, 3] = contexts[2, 0] + contexts[2, 1]  # one dependent row
    assert context_ranks(contexts).tolist() == [4, 4, 3, 4, 4]


def test_random_subset_ranks_catch_dependent_vectors():
    vectors = torch.rand(30, 6, generator=generator())
    assert random_subset_ranks(vectors, 6, 200, generator(1)).eq(6).all()
    vectors[:, 5] = vectors[:, 4]  # now every subset lies in a 5-dim space
    assert random_subset_ranks(vectors, 6, 50, generator(1)).max() == 5


def test_kruskal_rank_estimate():
    vectors = torch.rand(40, 7, generator=generator())
    assert kruskal_rank_estimate(vectors, 100, generator(1)) == 7
    vectors[:, 6] = 2 * vectors[:, 5]  # every subset now lies in a 6-dim space
    assert kruskal_rank_estimate(vectors, 100, generator(1)) == 6
    vectors[1] = vectors[0]  # a repeated vector: Kruskal rank 1; found when a subset holds both
    assert kruskal_rank_estimate(vectors[:4], 50, generator(1)) == 1


def test_check_assumptions_holds_for_n_below_d_and_fails_above():
    ok = check_assumptions(make_dataset(100, 16, 8, 10, "per_example", generator()), 100, generator(1))
    assert ok["context_full_rank"] == 1.0 and ok["kruskal_subsets_full_rank"] == 1.0
    assert ok["kruskal_rank_estimate"] == 16 and ok["n_contexts"] == 100
    too_long = check_assumptions(make_dataset(100, 8, 12, 10, "shared", generator()), 100, generator(1))
    assert too_long["context_full_rank"] == 0.0 and too_long["context_rank_min"] == 8
    assert too_long["kruskal_subsets_full_rank"] == 0.0


# ------------------------------------------------------------------------------------ summaries


def test_linear_fit_and_slopes_around_a_knee():
    fit = linear_fit([1, 2, 4, 8], [3, 5, 9, 17])
    assert fit.slope == pytest.approx(2) and fit.intercept == pytest.approx(1) and fit.r2 == pytest.approx(1)
    slopes = slopes_around([2, 4, 8, 16, 32], [20, 40, 80, 81, 83], knee=8)
    assert slopes.below == pytest.approx(10) and slopes.above == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="two points on each side"):
        slopes_around([2, 4, 8], [1, 2, 3], knee=8)


# ------------------------------------------------------------------------- experiment steps


def test_capacity_and_summary_steps_write_tidy_tables(tmp_path):
    """The workflow's steps end to end on a tiny heads sweep: per-layer tables, then metrics."""
    from factstore.__main__ import run_step
    from factstore.io import read_table

    common = {
        "seed": 0, "n_classes": 10, "context": "shared", "assumption_subsets": 20,
        "training": {"learning_rate": 0.05, "max_steps": 60, "warmup_steps": 5, "target_accuracy": 1.0, "patience": None},
        "search": {"start": 4, "growth": 2.0, "probes_per_round": 2, "relative_resolution": 0.3, "max_size": 128},
        "budget_check": {"steps_factor": 2, "learning_rates": [0.05, 0.02], "steps_above": 1},
    }
    inputs = {}
    for heads in (1, 2):
        layer = {"d": 6, "heads": heads, "d_head": 3, "d_value": 3, "n_context": 3}
        outputs = {kind: str(tmp_path / f"{kind}_H{heads}.csv") for kind in ("capacity", "probes")}
        run_step("attention.capacity", common | {"layer": layer}, {}, outputs)
        inputs |= {f"{kind}__heads__shared__{heads}": path for kind, path in outputs.items()}
    row = read_table(tmp_path / "capacity_H2.csv").iloc[0]
    assert row["heads"] == 2 and row["n_params"] == AttentionShape(6, 2, 3, 3, 10).n_params()
    assert row["context_full_rank"] == 1.0 and row["theory_scale"] == 2 * 3
    probes = read_table(tmp_path / "probes_H2.csv")
    assert (probes["budget"] == "search").sum() == row["n_probes"]
    assert set(probes["budget"]) == {"search", "x2 lr 0.05", "x2 lr 0.02"}
    retrained = probes[probes["budget"] != "search"]
    checked = {row["capacity"], row["smallest_failure"], row["smallest_failure"] + row["budget_grid_step"]}
    assert checked <= set(retrained["size"]) and len(retrained) == 2 * len(checked)
    assert (retrained["steps_run"] <= 2 * 60).all() and row["budget_capacity"] >= row["capacity"]

    summary = {kind: str(tmp_path / f"{kind}.csv") for kind in ("capacity", "probes", "metrics")}
    run_step("attention_summary.summary", {"relative_resolution": 0.3}, inputs, summary)
    metrics = read_table(summary["metrics"]).set_index("metric")["value"]
    assert {"heads_linear_slope", "heads_linear_r2", "capacity_heads2_shared", "heads_budget_rise_steps_max"} <= set(metrics.index)
    same = read_table(summary["capacity"])["budget_count_ratio_same_sizes"]
    assert same.notna().all() and (same > 0).all()  # the bracket is trained at both budgets
    assert list(read_table(summary["capacity"])["value"]) == [1, 2]


def test_summary_metric_names_are_written_out_in_the_source(tmp_path):
    """Every metric the summary writes, for every sweep and both context kinds, is a literal string
    of factstore/attention/summary.py (the per-layer capacities: a literal template plus the
    swept value), so a search for a claim's metric finds the code that computes it."""
    import inspect
    import re

    import pandas as pd

    import factstore.attention.summary
    from factstore.__main__ import run_step
    from factstore.io import read_table

    base = {"d": 8, "heads": 2, "d_head": 4, "d_value": 4, "n_context": 4, "n_classes": 100, "memorised_examples": 50.0,
            "n_params": 1000, "bits_per_parameter": 0.5, "theory_scale": 8, "context_full_rank": 1.0,
            "kruskal_subsets_full_rank": 1.0, "budget_rise_steps": 0.5, "budget_capacity": 60, "budget_limited": False,
            "budget_steps": 100, "budget_steps_larger": 400, "memorised_examples_larger_budget": 60.0,
            "budget_count_ratio": 1.2}
    inputs = {}
    for context in CONTEXT_KINDS:
        for sweep, values in (("heads", (1, 2, 4)), ("n_context", (2, 4, 8)), ("d_head", (1, 2, 4, 8))):
            for value in values:
                row = base | {sweep: value, "context": context, "capacity": 10 * value + len(context)}
                for kind, table in (("capacity", [row]), ("probes", [{"context": context, "size": 1}])):
                    path = tmp_path / f"{kind}_{sweep}_{context}_{value}.csv"
                    pd.DataFrame(table).to_csv(path, index=False)
                    inputs[f"{kind}__{sweep}__{context}__{value}"] = str(path)
    outputs = {kind: str(tmp_path / f"summary_{kind}.csv") for kind in ("capacity", "probes", "metrics")}
    run_step("attention_summary.summary", {"relative_resolution": 0.1}, inputs, outputs)
    names = read_table(outputs["metrics"])["metric"].tolist()

    source = inspect.getsource(factstore.attention.summary)
    literals = set(re.findall(r'"([a-z0-9_{}]+)"', source))
    templates = [re.compile(re.escape(t).replace(r"\{value\}", "[0-9]+") + "$") for t in literals if "{value}" in t]
    assert len(names) == 2 * 10 + 2 * (12 + 9 + 7 + 7) + 3  # per layer, fits (heads twice: H d_v >= 2 here) per sweep and kind, overall
    for name in names:
        assert name in literals or any(t.match(name) for t in templates), name
    assert {"heads_linear_r2", "heads_loglog_exponent", "context_spearman_per_example", "head_dim_slope_below_n",
            "capacity_d_head8_per_example"} <= set(names)


# ------------------------------------------------------------------ the S4 claims' summary metrics
# Hand-made capacities run through the summary step and the registry's checks: each check can fail.

def _summary_metrics(tmp_path, sweep: str, capacity_of, ratio_of=lambda value: 1.2, rise_of=lambda value: 0.0,
                     resolution: float = 0.1) -> dict[str, float]:
    """attention_summary.summary on a shared-context sweep whose count at each swept value is
    capacity_of(value), whose count at 4x the steps is ratio_of(value) times it, and whose 100%
    capacity the budget check raised by rise_of(value) grid steps; returns its metrics table as
    {name: value}."""
    import pandas as pd

    from factstore.__main__ import run_step
    from factstore.io import read_table

    values = {"heads": (1, 2, 4, 8, 16), "d_head": (1, 2, 4, 8, 12, 16), "n_context": (2, 4, 8, 16)}[sweep]
    base = {"d": 16, "heads": 4, "d_head": 8, "d_value": 1, "n_context": 8, "n_classes": 100, "n_params": 1000,
            "bits_per_parameter": 0.5, "theory_scale": 8, "context_full_rank": 1.0, "kruskal_subsets_full_rank": 1.0}
    inputs = {}
    for value in values:
        capacity = capacity_of(value)
        row = base | {sweep: value, "context": "shared", "capacity": capacity, "memorised_examples": capacity,
                      "memorised_examples_larger_budget": capacity * ratio_of(value), "budget_count_ratio": ratio_of(value),
                      "budget_steps": 1000, "budget_steps_larger": 4000, "budget_rise_steps": rise_of(value),
                      "budget_capacity": capacity, "budget_limited": rise_of(value) > 1}
        for kind, table in (("capacity", [row]), ("probes", [{"context": "shared", "size": 1}])):
            path = tmp_path / f"{kind}_{sweep}_{value}.csv"
            pd.DataFrame(table).to_csv(path, index=False)
            inputs[f"{kind}__{sweep}__shared__{value}"] = str(path)
    outputs = {kind: str(tmp_path / f"summary_{kind}.csv") for kind in ("capacity", "probes", "metrics")}
    run_step("attention_summary.summary", {"relative_resolution": resolution}, inputs, outputs)
    return read_table(outputs["metrics"]).set_index("metric")["value"].to_dict()


def test_heads_exponent_tells_linear_from_square_root_where_r2_cannot(tmp_path):
    linear = _summary_metrics(tmp_path, "heads", lambda h: 40 * h + 3)
    assert linear["heads_loglog_exponent"] == pytest.approx(1, abs=0.05)
    assert claim_verdict("S4.heads-linear", linear) == "PASS"
    square_root = _summary_metrics(tmp_path, "heads", lambda h: 100 * math.sqrt(h))
    assert square_root["heads_linear_r2"] > 0.95  # a line through four points fits sqrt(H) too
    assert square_root["heads_loglog_exponent"] == pytest.approx(0.5)
    assert claim_verdict("S4.heads-linear", square_root) == "FAIL"
    quadratic = _summary_metrics(tmp_path, "heads", lambda h: 10 * h * h)
    assert claim_verdict("S4.heads-linear", quadratic) == "FAIL"


def test_heads_exponent_is_nan_without_a_positive_capacity():
    exponent, error, how = heads_exponent([1, 2, 4], [0, 10, 20])
    assert math.isnan(exponent) and math.isnan(error) and "not positive" in how
    assert heads_exponent([1, 2, 4], [5, 10, 20])[:2] == pytest.approx((1, 0))


def test_residuals_tell_a_linear_law_with_an_intercept_from_sqrt_h(tmp_path):
    """c = a + bH with a = b has a log-log slope of ~0.72 over H = 1-8 (the exponent band rejects
    it) but fits better than a + b sqrt(H); sqrt(H) data fit better as a + b sqrt(H)."""
    linear, sqrt_h = [40 * h + 40 for h in (1, 2, 4, 8)], [100 * math.sqrt(h) + 20 for h in (1, 2, 4, 8)]
    linear_ss, sqrt_ss = heads_law_residuals([1, 2, 4, 8], linear)
    assert linear_ss == pytest.approx(0, abs=1e-9) and sqrt_ss > 100
    linear_ss, sqrt_ss = heads_law_residuals([1, 2, 4, 8], sqrt_h)
    assert sqrt_ss == pytest.approx(0, abs=1e-9) and linear_ss > 100
    with_intercept = _summary_metrics(tmp_path, "heads", lambda h: 40 * h + 120)  # fitted over H = 2-16: a = 3b
    assert with_intercept["heads_loglog_exponent"] < 0.8 < with_intercept["heads_sqrt_over_linear_residual_ratio"]
    noisy_linear = _summary_metrics(tmp_path, "heads", lambda h: 40 * h + 3 + (-1) ** h)
    assert noisy_linear["heads_sqrt_over_linear_residual_ratio"] > 1
    assert claim_verdict("S4.heads-linear", noisy_linear) == "PASS"
    square_root = _summary_metrics(tmp_path, "heads", lambda h: 200 * math.sqrt(h) - 100 + (-1) ** h)
    assert square_root["heads_sqrt_over_linear_residual_ratio"] < 1
    assert claim_verdict("S4.heads-linear", {**noisy_linear, "heads_sqrt_over_linear_residual_ratio": 0.5}) == "FAIL"


@pytest.mark.parametrize("sweep, claim", [("heads", "S4.heads-linear"), ("d_head", "S4.head-dim"),
                                          ("n_context", "S4.context-monotone")])
def test_a_budget_acting_unevenly_on_the_fitted_layers_makes_the_claim_untestable(tmp_path, sweep, claim):
    """The gate: count(4x) / count(1x) alike across the layers the checks read (spread <= 1.25)
    leaves the claim testable, whatever the 100% capacity's rise; a ratio of 1.6 on one fitted
    layer against 1.1 elsewhere (spread 1.45) makes it UNTESTABLE; a missing ratio too. A layer
    the checks do not read (H = 1; d_h > n) does not enter the spread."""
    capacity_of = {"heads": lambda h: 40 * h + 3 + (-1) ** h, "d_head": lambda dh: 10 * min(dh, 8),
                   "n_context": lambda n: 10 * n}[sweep]
    spread_name = {"heads": "heads_budget_ratio_spread", "d_head": "head_dim_budget_ratio_spread",
                   "n_context": "context_budget_ratio_spread"}[sweep]
    uniform = _summary_metrics(tmp_path, sweep, capacity_of, ratio_of=lambda value: 1.3, rise_of=lambda value: 3.0)
    assert uniform[spread_name] == pytest.approx(1) and claim_verdict(claim, uniform) == "PASS"
    unread = {"heads": 1, "d_head": 16, "n_context": None}[sweep]
    if unread is not None:
        ignored = _summary_metrics(tmp_path, sweep, capacity_of, ratio_of=lambda value: 3.0 if value == unread else 1.1)
        assert ignored[spread_name] == pytest.approx(1) and claim_verdict(claim, ignored) == "PASS"
    uneven = _summary_metrics(tmp_path, sweep, capacity_of, ratio_of=lambda value: 1.6 if value == 4 else 1.1)
    assert uneven[spread_name] == pytest.approx(1.6 / 1.1) and claim_verdict(claim, uneven) == "UNTESTABLE"
    missing = _summary_metrics(tmp_path, sweep, capacity_of, ratio_of=lambda value: math.nan if value == 4 else 1.1)
    assert math.isnan(missing[spread_name]) and claim_verdict(claim, missing) == "UNTESTABLE"


def test_the_earlier_gate_rule_stays_reported(tmp_path):
    from factstore.io import read_table

    metrics = _summary_metrics(tmp_path, "heads", lambda h: 40 * h, rise_of=lambda value: 2.0 if value == 4 else 0.0)
    assert metrics["heads_budget_unconverged_layers"] == 1 and metrics["heads_budget_rise_steps_max"] == 2
    assert claim_verdict("S4.heads-linear", metrics) == "PASS"  # reported, not gated
    details = read_table(tmp_path / "summary_metrics.csv").set_index("metric")["detail"]
    assert "heads = 4: 160 -> 160" in details["heads_budget_rise_steps_max"]
    assert "192 at 4000 steps" in details["capacity_heads4_shared"]


def test_heads_fits_without_h2_are_the_declared_alternative(tmp_path):
    metrics = _summary_metrics(tmp_path, "heads", lambda h: 200 if h == 2 else 40 * h)  # H = 2 off the line
    assert metrics["heads_loglog_exponent_drop_h2"] == pytest.approx(1)
    assert metrics["heads_loglog_exponent"] < 0.8


def test_context_check_reads_a_fall_beyond_one_grid_step(tmp_path):
    """Non-decreasing within one grid step: 100 -> 95 at 10% resolution is no violation; 100 -> 85
    is one, and the claim fails (Spearman alone, kept as a report, reads both as a fall)."""
    assert nondecreasing_violations([10, 100, 95, 120], 0.1) == 0
    assert nondecreasing_violations([10, 100, 85, 120], 0.1) == 1
    within = _summary_metrics(tmp_path, "n_context", {2: 10, 4: 100, 8: 95, 16: 120}.get)
    assert within["context_nondecreasing_violations"] == 0 and claim_verdict("S4.context-monotone", within) == "PASS"
    falls = _summary_metrics(tmp_path, "n_context", {2: 10, 4: 100, 8: 85, 16: 120}.get)
    assert falls["context_nondecreasing_violations"] == 1 and claim_verdict("S4.context-monotone", falls) == "FAIL"


def test_budget_ratio_spread():
    assert budget_ratio_spread([1.2, 1.2, 1.2]) == 1
    assert budget_ratio_spread([1.0, 1.5]) == 1.5
    assert math.isnan(budget_ratio_spread([1.0, math.nan])) and math.isnan(budget_ratio_spread([]))


def test_heads_fits_leave_out_a_layer_whose_logits_reach_two_classes(tmp_path):
    """H d_v = 1: the logits are a scalar times a fixed vector (argmax reaches 2 classes), so its
    capacity says nothing about the layer; the fits use H >= 2 (the capacity stays reported)."""
    metrics = _summary_metrics(tmp_path, "heads", lambda h: 1 if h == 1 else 40 * h)
    assert metrics["capacity_heads1_shared"] == 1
    assert metrics["heads_loglog_exponent"] == pytest.approx(1) and metrics["heads_linear_r2"] == pytest.approx(1)
    assert claim_verdict("S4.heads-linear", metrics) == "PASS"


def test_head_dim_check_is_growth_below_n_whatever_happens_beyond(tmp_path):
    n = 8
    for beyond in (lambda dh: 80, lambda dh: 10 * dh, lambda dh: 120 - 5 * dh):  # flat, growing, falling past n
        grows = _summary_metrics(tmp_path, "d_head", lambda dh, beyond=beyond: 10 * dh if dh <= n else beyond(dh))
        assert grows["head_dim_slope_below_n"] == pytest.approx(10)
        assert claim_verdict("S4.head-dim", grows) == "PASS"
    flat = _summary_metrics(tmp_path, "d_head", lambda dh: 80)
    assert flat["head_dim_slope_below_n"] == 0
    assert claim_verdict("S4.head-dim", flat) == "FAIL"
    falling = _summary_metrics(tmp_path, "d_head", lambda dh: 100 - dh)
    assert claim_verdict("S4.head-dim", falling) == "FAIL"


def test_figure_draws_the_theorem_as_a_lower_bound_under_every_point():
    from factstore.plots.attention import lower_bound_constant

    bound = [4.0, 8.0, 16.0, 32.0, 32.0]  # H min(n, d_h) for d_h = 1, 2, 4, 8, 16 at H = 4, n = 8
    capacity = [30.0, 50.0, 70.0, 100.0, 160.0]
    c = lower_bound_constant(bound, capacity)
    assert all(c * b <= y + 1e-12 for b, y in zip(bound, capacity))
    assert any(c * b == pytest.approx(y) for b, y in zip(bound, capacity))  # the largest such c


def test_heads_figure_bound_leaves_out_the_two_class_layer():
    """At H d_v = 1 argmax reaches two classes, so its capacity (~1 example) is the labels', not
    the layer's: the drawn lower bound takes c over H d_v >= 2, as the summary's fits do. With
    H = 1 in, c would be ~1/8 and the bound would lie flat on the axis."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from factstore.plots.attention import heads

    rows = [{"sweep": "heads", "value": h, "context": "shared", "d": 16, "heads": h, "d_head": 8, "d_value": 1,
             "n_context": 8, "n_classes": 100, "capacity": capacity, "memorised_examples": capacity,
             "theory_scale": 8 * h, "n_params": 1000 + 500 * h, "budget_limited": False}
            for h, capacity in ((1, 1), (2, 64), (4, 160), (8, 256))]
    params = {"training": {"target_accuracy": 1.0, "max_steps": 1000}, "budget_check": {"steps_factor": 4}}
    figure = heads({"capacity": pd.DataFrame(rows)}, params)
    bound = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(bound) == 1
    x, y = bound[0].get_data()
    assert list(x) == [2, 4, 8]
    assert list(y) == pytest.approx([4.0 * 16, 4.0 * 32, 4.0 * 64])  # c = min(64/16, 160/32, 256/64) = 4
    plt.close(figure)


def test_memory_estimate_counts_the_batch_not_n():
    """With training.batch_size the attention term's activations are a batch's: at the paper's
    sizes (N up to 262,144, H = 60) they fit one GPU; full batch they do not."""
    import yaml

    from factstore.memory_estimate import attention_terms
    from conftest import REPOSITORY

    section = yaml.safe_load((REPOSITORY / "config/paper.yaml").read_text())["attention"]
    batched = attention_terms(section)[0]
    full = attention_terms(section | {"training": section["training"] | {"batch_size": None}})[0]
    assert batched.key == "training.batch_size" and batched.value == 256 and batched.bytes < 16e9
    assert full.key == "search.max_size" and full.bytes > 10 * batched.bytes
