"""Capacity searches: generic bisection, the NTK prefix search, code sizes, GD width search."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from factstore.facts import FactSet, make_fact_set
from factstore.geometry import margin_optimal_targets
from factstore.mlp import encoder_decoder, gd, ntk
from factstore.mlp.capacity import smallest_width, smallest_widths
from factstore.mlp.width_search import ntk_smallest_widths
from factstore.mlp.methods import METHODS, get_method
from factstore.mlp.modules import module_accuracy, parameter_count, parameters_per_unit
from factstore.search import (
    binary_search_smallest, bracket_search_smallest, bracket_search_smallest_together, doubling_search_smallest,
)

torch.set_num_threads(1)


def fact_set(n_facts: int, dim: int, seed: int = 0) -> FactSet:
    return make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))


def generator(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def step_curve(threshold: int, below: float = 0.5):
    """A monotone accuracy curve that reaches 1.0 exactly at `threshold`."""
    return lambda width: 1.0 if width >= threshold else below * width / threshold


# ---------------------------------------------------------------------------------------------
# Generic searches
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(low=st.integers(1, 50), span=st.integers(0, 5000), offset=st.integers(0, 6000))
def test_binary_search_finds_the_threshold_of_a_monotone_curve(low, span, offset):
    high, threshold = low + span, low + offset
    width, evaluations = binary_search_smallest(step_curve(threshold), 1.0, low, high)
    assert width == (threshold if threshold <= high else None)
    assert len(evaluations) <= 1 + math.ceil(math.log2(span + 1))
    assert all(w in range(low, high + 1) for w in evaluations)


@settings(max_examples=200, deadline=None)
@given(low=st.integers(1, 50), span=st.integers(0, 5000), offset=st.integers(0, 6000))
def test_doubling_search_finds_the_threshold_of_a_monotone_curve(low, span, offset):
    high, threshold = low + span, low + offset
    width, evaluations = doubling_search_smallest(step_curve(threshold), 1.0, low, high)
    assert width == (threshold if threshold <= high else None)
    assert all(w in range(low, high + 1) for w in evaluations)
    if width is not None:  # doubling, then bisection of the last doubling step
        doubling = math.ceil(math.log2(threshold / low)) + 1
        assert len(evaluations) <= doubling + math.ceil(math.log2(threshold))


@settings(max_examples=200, deadline=None)
@given(threshold=st.integers(1, 600), guess=st.integers(1, 2000), growth=st.sampled_from([1.5, 2.0, 4.0]))
def test_bracket_search_finds_the_threshold_from_any_guess(threshold, guess, growth):
    width, evaluations = bracket_search_smallest(step_curve(threshold), 1.0, guess, 1, 512, growth)
    assert width == (threshold if threshold <= 512 else None)
    if width is not None:
        assert evaluations[width] == 1.0 and (width == 1 or evaluations.get(width - 1, 0.0) < 1.0)


def test_bracket_search_resolution_trades_probes_for_precision():
    width, evaluations = bracket_search_smallest(step_curve(300), 1.0, 10, 1, 4096, resolution=0.1)
    assert 300 <= width <= 300 * 1.12
    exact, exact_evaluations = bracket_search_smallest(step_curve(300), 1.0, 10, 1, 4096)
    assert exact == 300 and len(evaluations) < len(exact_evaluations)


@settings(max_examples=100, deadline=None)
@given(thresholds=st.lists(st.integers(1, 700), min_size=1, max_size=5), guess=st.integers(1, 800),
       resolution=st.sampled_from([0.0, 0.5]))
def test_lockstep_searches_probe_exactly_what_each_search_probes_alone(thresholds, guess, resolution):
    curves = [step_curve(threshold) for threshold in thresholds]
    rounds = []

    def accuracies_at(probes):
        assert len({i for i, _ in probes}) == len(probes)  # at most one probe per search and round
        rounds.append(probes)
        return [curves[i](width) for i, width in probes]

    together = bracket_search_smallest_together(accuracies_at, 1.0, [guess] * len(thresholds), 1, 512,
                                                resolution=resolution)
    alone = [bracket_search_smallest(curve, 1.0, guess, 1, 512, resolution=resolution) for curve in curves]
    assert together == alone
    assert len(rounds) == max(len(evaluations) for _, evaluations in alone)


def test_binary_search_returns_the_target_crossing_for_partial_targets():
    accuracy = lambda width: min(1.0, width / 1000)  # noqa: E731
    width, _ = binary_search_smallest(accuracy, 0.99, 1, 4096)
    assert width == 990


# ---------------------------------------------------------------------------------------------
# NTK: one pass over units
# ---------------------------------------------------------------------------------------------


def test_ntk_search_finds_a_boundary_of_the_prefix_accuracy_curve():
    facts = fact_set(64, 32)
    result = smallest_width("ntk", facts, 1.0, generator(2))
    width = result.width
    assert width is not None and result.evaluations[width] == 1.0
    assert result.evaluations[width - 1] < 1.0  # bisection ends next to a failing probe
    assert result.n_params == parameter_count(result.module) == 3 * width * 32
    assert module_accuracy(result.module, facts) == 1.0
    curve = ntk.accuracy_by_width(facts, [width - 1, width], generator(2))
    assert curve == {width - 1: result.evaluations[width - 1], width: 1.0}


def test_ntk_search_answers_several_targets_from_one_pass():
    facts = fact_set(64, 16)
    together = smallest_widths("ntk", facts, [0.9, 0.99, 1.0], generator(3), degree=2)
    for target, result in together.items():
        alone = smallest_width("ntk", facts, target, generator(3), degree=2)
        assert (result.width, result.n_params) == (alone.width, alone.n_params)
        assert result.n_params == parameters_per_unit("gated", 16, 16) * result.width == parameter_count(result.module)
    assert together[0.9].width <= together[0.99].width <= together[1.0].width
    without_modules = smallest_widths("ntk", facts, [1.0], generator(3), degree=2, build_modules=False)[1.0]
    assert without_modules.module is None and without_modules.n_params == together[1.0].n_params


def test_ntk_search_checkpoints_change_the_work_not_the_answer():
    # the bisection continues from checkpoints kept along the doubling step: same widths, and every
    # accuracy it records is the one-pass curve's at that width
    facts = fact_set(96, 16)
    checkpointed, evaluations = ntk_smallest_widths(facts, [0.9, 0.99, 1.0], generator(4), degree=2)
    plain, plain_evaluations = ntk_smallest_widths(facts, [0.9, 0.99, 1.0], generator(4), degree=2, checkpoints_per_doubling=1)
    assert checkpointed == plain and evaluations == plain_evaluations
    curve = ntk.accuracy_by_width(facts, list(evaluations), generator(4), degree=2)
    assert curve == pytest.approx(evaluations, abs=1 / 96 + 1e-12)  # float64 summation order only
    assert max(evaluations) > 64 * 32 // 8  # the doubling step where the targets pass was checkpointed


def test_ntk_search_with_partial_target_and_degree_two():
    facts = fact_set(96, 16)
    result = smallest_width("ntk", facts, 0.9, generator(2), degree=2)
    assert result.accuracy >= 0.9 and module_accuracy(result.module, facts) >= 0.9
    assert result.evaluations[result.width - 1] < 0.9


def test_ntk_search_reports_none_and_the_cap_when_the_cap_is_too_small():
    result = smallest_width("ntk", fact_set(64, 16), 1.0, generator(2), high=8, build_modules=False)
    assert result.width is None and result.module is None and max(result.evaluations) == 8
    assert result.params_at_cap == 8 * 3 * 16 and result.best_accuracy < 1.0
    at_cap = smallest_widths("ntk", fact_set(64, 16), [1.0], generator(2), high=8, build_modules=True)[1.0]
    assert at_cap.width is None and at_cap.module.hidden == 8, "asked for modules: the largest MLP tried"


# ---------------------------------------------------------------------------------------------
# Encoder-decoder: code sizes
# ---------------------------------------------------------------------------------------------


def test_code_size_search_finds_the_smallest_decodable_code():
    facts = fact_set(256, 32)
    result = smallest_width("ed_gated_v", facts, 1.0, generator(4))
    size = result.width
    assert 1 < size <= 32 and module_accuracy(result.module, facts) == 1.0
    assert result.module.code_size == size and result.n_params == parameter_count(result.module)
    decoder = encoder_decoder.random_orthogonal(32, generator(4))
    assert encoder_decoder.code_accuracy(facts, decoder[:, : size - 1], facts.values) < 1.0


def test_plain_encoder_decoder_search():
    facts = fact_set(64, 16)
    result = smallest_width("ed_plain_v", facts, 1.0, generator(4))
    assert result.width is not None and module_accuracy(result.module, facts) == 1.0


def test_generic_builder_search_for_the_finite_difference_ntk():
    facts = fact_set(24, 16)
    result = smallest_width("ntk_finite_difference", facts, 1.0, generator(3), high=4096)
    assert result.width is not None and module_accuracy(result.module, facts) == 1.0
    assert result.evaluations[result.width - 1] < 1.0 or result.width == 1


# ---------------------------------------------------------------------------------------------
# Gradient descent
# ---------------------------------------------------------------------------------------------


def test_gd_width_search_with_warm_starts_on_a_tiny_set():
    facts = fact_set(32, 16)
    result = smallest_width("gd_gated", facts, 1.0, generator(5), low=1, high=32)
    assert result.width is not None and result.evaluations[result.width] == 1.0
    assert module_accuracy(result.module, facts) == 1.0
    assert result.n_params == 3 * result.width * 16 and result.steps > 0
    assert all(accuracy < 1.0 for width, accuracy in result.evaluations.items() if width < result.width)


def test_gd_search_shares_models_across_targets_and_reports_the_cap():
    facts = fact_set(32, 8, seed=1)
    protocol = gd.Protocol(lr=0.03, max_steps=600, patience=150)
    results = smallest_widths("gd_gated", facts, [0.9, 1.0], generator(2), high=64, protocol=protocol)
    assert results[0.9].width is not None and results[1.0].width >= results[0.9].width
    assert results[1.0].n_params == 3 * 8 * results[1.0].width
    assert min(results[1.0].evaluations) >= results[0.9].width // 2, "the 1.0 search starts where 0.9 ended"
    capped = smallest_width("gd_gated", facts, 1.0, generator(2), high=1, protocol=protocol)
    assert capped.width is None and capped.module is None and capped.params_at_cap == 3 * 8


def test_fast_protocol_matches_a_long_run_at_one_small_size():
    """The long (paper-like, lr 1e-3, no early stop) run and the fast protocol store the same
    facts at the width where the long run succeeds, the fast one in far fewer steps."""
    facts = fact_set(48, 16)
    long_protocol = gd.Protocol(lr=1e-3, max_steps=4000, name="long")
    width = 8
    _, _, long_info = gd.train(facts, width, generator(6), protocol=long_protocol)
    _, _, fast_info = gd.train(facts, width, generator(6), protocol=gd.FAST_PROTOCOL)
    assert long_info["accuracy"] == 1.0
    assert fast_info["accuracy"] == 1.0
    assert fast_info["steps"] * 3 < long_info["steps"]


# ---------------------------------------------------------------------------------------------
# The method table
# ---------------------------------------------------------------------------------------------


def test_each_method_emits_ustar_or_the_values_and_takes_a_shared_ustar():
    facts = make_fact_set(24, 8, generator(0), value_condition_number=10.0)
    ustar = margin_optimal_targets(facts.values)[0]
    for method in METHODS.values():
        emitted = method.value_targets(facts)
        assert emitted.dtype == torch.float64 and emitted.shape == facts.values.shape
        assert torch.equal(emitted, ustar if method.uses_ustar else facts.values.double()), method.name
    shared = torch.randn(24, 8, generator=generator(2), dtype=torch.float64)
    assert torch.equal(METHODS["ntk_ustar"].value_targets(facts, shared), shared)
    assert torch.equal(METHODS["ntk"].value_targets(facts, shared), facts.values.double())


def test_a_trained_method_trains_its_architecture_and_unknown_names_are_refused():
    facts = fact_set(16, 8)
    protocol = gd.Protocol(lr=0.03, max_steps=5)
    for name, per_unit in (("gd_gated", 3 * 8), ("gd_plain", 2 * 8)):
        _, n_params, _ = METHODS[name].make(facts, 4, generator(), protocol=protocol)
        assert n_params == 4 * per_unit == 4 * parameters_per_unit(METHODS[name].architecture, 8, 8)
    with pytest.raises(ValueError, match="unknown method 'encoder_decoder'"):
        get_method("encoder_decoder")
    with pytest.raises(ValueError, match="unknown method"):
        smallest_width("hebbian", facts, 1.0, generator())


@settings(max_examples=200, deadline=None)
@given(threshold=st.integers(1, 600), guess=st.integers(1, 2000), first_growth=st.sampled_from([1.05, 1.1, 1.5]))
def test_a_small_first_step_finds_the_same_width_and_few_probes_from_a_close_guess(threshold, guess, first_growth):
    width, evaluations = bracket_search_smallest(step_curve(threshold), 1.0, guess, 1, 512, 2.0,
                                                 first_growth=first_growth)
    assert width == bracket_search_smallest(step_curve(threshold), 1.0, guess, 1, 512, 2.0)[0]
    if threshold <= 512 and threshold <= guess <= threshold * first_growth:  # a guess within its expected error
        assert len(evaluations) <= 2 + math.ceil(math.log2(max(2, guess - guess / first_growth)))


@settings(max_examples=300, deadline=None)
@given(threshold=st.integers(2, 600), guess=st.integers(1, 2000), resolution=st.sampled_from([0.0, 0.05]),
       data=st.data())
def test_known_failing_widths_bound_the_bracket_and_a_wrong_hint_costs_no_precision(threshold, guess, resolution, data):
    """Widths known to fail (below the boundary of a monotone curve) bound the bracket's lower end:
    from a passing guess nothing under the widest of them is probed; the answer is the boundary (resolution 0) or within the resolution above it.
    A hint that is wrong (a known width at or above the boundary) is probed like any width and
    changes no answer."""
    known = data.draw(st.lists(st.integers(1, threshold - 1), max_size=5))
    wrong = data.draw(st.lists(st.integers(threshold, 700), max_size=2))
    for hints in (known, known + wrong):
        width, evaluations = bracket_search_smallest(step_curve(threshold), 1.0, guess, 1, 512, 2.0, resolution,
                                                     known_failing=hints)
        if threshold > 512:
            assert width is None
            continue
        assert threshold <= width <= max(threshold, math.ceil(threshold / (1 - resolution)) + 1)
        if resolution == 0:
            assert width == threshold
        if hints is known and known and guess >= threshold:  # nothing probed under the widest known failure
            assert min(evaluations) >= max(known)


def test_a_known_failure_just_below_a_passing_guess_ends_the_search_at_the_guess():
    """The case of a higher target after a lower one: the lower target's answer passes again, and
    its failing neighbour within the resolution settles the search (without the known failure,
    the search steps down and bisects: more probes)."""
    width, evaluations = bracket_search_smallest(step_curve(300), 1.0, 310, 1, 4096, 2.0, 0.05, known_failing=[296, 150])
    assert width == 310 and evaluations == {310: 1.0, 296: step_curve(300)(296)}
    unknown, unknown_evaluations = bracket_search_smallest(step_curve(300), 1.0, 310, 1, 4096, 2.0, 0.05)
    assert len(unknown_evaluations) > 2 and 300 <= unknown <= 310


def test_a_width_that_failed_a_lower_target_is_not_trained_again_for_a_higher_one(monkeypatch):
    facts = fact_set(32, 8, seed=1)
    protocol = gd.Protocol(lr=0.03, max_steps=600, patience=150)
    trained_widths = []

    def counting_train(fact_set, size, *args, **kwargs):
        trained_widths.append((size, kwargs.get("target")))
        return gd.train(fact_set, size, *args, **kwargs)

    monkeypatch.setitem(METHODS, "gd_gated", dataclasses.replace(METHODS["gd_gated"], build=counting_train))
    results = smallest_widths("gd_gated", facts, [0.9, 1.0], generator(2), high=64, protocol=protocol)
    failed_lower = {width for width, accuracy in results[0.9].evaluations.items() if accuracy < 0.9}
    assert failed_lower, "the 0.9 search probed a failing width"
    assert not {width for width, target in trained_widths if target == 1.0} & failed_lower
    below_answer = [width for width in failed_lower if width < results[1.0].width]
    if below_answer:  # nor any width under the widest of them below the answer (`known_failing`)
        assert all(width > max(below_answer) for width, target in trained_widths if target == 1.0)
    assert all(results[1.0].evaluations[width] < 1.0 for width in failed_lower if width in results[1.0].evaluations)


def test_a_hopeless_probe_stops_early_and_a_promising_one_does_not():
    facts = fact_set(64, 8, seed=4)
    hopeless = gd.Protocol(lr=0.03, max_steps=600, patience=None, hopeless_after=50, hopeless_margin=0.3)
    _, _, narrow = gd.train(facts, 1, generator(0), protocol=hopeless, target=1.0)
    assert narrow["stop"] == "hopeless" and narrow["steps"] == 50 and narrow["accuracy"] < 0.7
    _, _, wide = gd.train(facts, 64, generator(0), protocol=hopeless, target=1.0)
    assert wide["stop"] == "target"


def test_a_protocol_gives_up_on_a_plateau_a_hopeless_probe_or_its_last_step():
    protocol = gd.Protocol(lr=0.03, max_steps=100, patience=10, hopeless_after=20, hopeless_margin=0.3)
    assert protocol.gives_up(step=9, best_step=0, best_correct=0, n_facts=100, target=1.0) is None
    assert protocol.gives_up(step=10, best_step=0, best_correct=90, n_facts=100, target=1.0) == "plateau"
    assert protocol.gives_up(step=20, best_step=15, best_correct=69, n_facts=100, target=1.0) == "hopeless"
    assert protocol.gives_up(step=20, best_step=15, best_correct=71, n_facts=100, target=1.0) is None
    assert protocol.gives_up(step=100, best_step=95, best_correct=99, n_facts=100, target=1.0) == "max_steps"
    endless = gd.Protocol(lr=0.03, max_steps=100)  # no patience, never hopeless
    assert endless.gives_up(step=99, best_step=0, best_correct=0, n_facts=100, target=1.0) is None
