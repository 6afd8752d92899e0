"""The usability study: the recall task, the Transformer's frozen parts, the swap evaluation, claims."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from factstore import claims
from factstore.facts import normalize_rows
from factstore.mlp.modules import LinearMemory
from factstore.transformer import attention_at, attention_over_tables, rotary, table_attention_pays
from factstore.usability import threshold
from factstore.usability.summary import capacity_gains
from factstore.usability.task import (
    IGNORE, JunkLengths, Task, Vocabulary, gaussian_embeddings, gaussian_probe_task, make_task, mlp_fact_set,
    recall_sequences, token_embeddings,
)
from factstore.usability.training import (
    Probe, TrainingSettings, build_runs, recall_accuracy, train_attention, usability,
)
from factstore.whitening import principal_projection

REPOSITORY = Path(__file__).resolve().parents[1]


def small_task(n_facts=8, dim=16, n_junk=3, lengths=JunkLengths(1, 3, 1, 3), seed=0, orthonormal=False):
    generator = torch.Generator().manual_seed(seed)
    if orthonormal:  # keys and values orthonormal: a linear memory recalls every fact exactly
        basis = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))[0]
        keys, values = basis[:n_facts], basis[n_facts : 2 * n_facts]
    else:
        keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(n_junk, dim, generator), gaussian_embeddings(1, dim, generator)
    task, _ = make_task(keys, values, junk, query[0], lengths)
    return task, keys, values


# ---------------------------------------------------------------------------------------------
# The sequences
# ---------------------------------------------------------------------------------------------


def test_sequences_have_the_layout_junk_key_junk_query_value():
    vocabulary, lengths = Vocabulary(n_facts=10, n_junk=4), JunkLengths(2, 5, 1, 3)
    fact_map = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    facts = torch.arange(10).repeat(20)
    sequences = recall_sequences(facts, fact_map, vocabulary, lengths, torch.Generator().manual_seed(2))
    junk = range(10, 10 + 4)
    prefixes, suffixes = set(), set()
    for row in range(len(facts)):
        tokens = sequences.tokens[row].tolist()
        q = int(sequences.query_positions[row])
        key = tokens.index(int(facts[row]))
        prefixes.add(key)
        suffixes.add(q - key - 1)
        assert all(t in junk for t in tokens[:key]), "the prefix is junk"
        assert all(t in junk for t in tokens[key + 1 : q]), "the suffix is junk"
        assert tokens[q] == vocabulary.query
        assert tokens[q + 1] == int(fact_map[facts[row]]), "the value's fact token follows Q (keys and values tied)"
        assert sequences.lengths[row] == q + 2
        assert all(t == vocabulary.query for t in tokens[q + 2 :]), "right padding after the value"
    assert prefixes == set(range(2, 6)) and suffixes == set(range(1, 4)), "lengths cover their ranges, no more"


def test_loss_mask_is_exactly_the_query_position():
    vocabulary = Vocabulary(n_facts=6, n_junk=3)
    fact_map = torch.tensor([3, 0, 5, 1, 4, 2])
    sequences = recall_sequences(torch.arange(6), fact_map, vocabulary, JunkLengths(0, 4, 0, 4), torch.Generator().manual_seed(0))
    scored = sequences.targets != IGNORE
    assert scored.sum(dim=1).eq(1).all()
    assert torch.equal(scored.float().argmax(dim=1), sequences.query_positions)
    assert torch.equal(sequences.answers, fact_map)


def test_vocabulary_layout_and_embedding_tables():
    vocabulary = Vocabulary(n_facts=5, n_junk=2)
    assert vocabulary.size == 8 and vocabulary.query == 7, "keys and values tied: F + J + 1 tokens"
    keys, values = torch.randn(5, 4), torch.randn(5, 4)
    junk, query = torch.randn(2, 4), torch.randn(4)
    inputs, outputs = token_embeddings(keys, values, junk, query)
    assert inputs.shape == outputs.shape == (8, 4) and inputs.dtype == torch.float32
    assert torch.allclose(inputs[vocabulary.key(torch.tensor(2))], keys[2])
    assert torch.allclose(outputs[vocabulary.value(torch.tensor(2))], values[2])
    assert torch.equal(inputs[5:], outputs[5:]), "junk and Q read and write the same rows"
    facts = mlp_fact_set(keys, outputs, torch.arange(5))
    assert torch.allclose(facts.keys.norm(dim=1), torch.ones(5, dtype=torch.float64)), "MLP keys on the sphere"
    assert torch.equal(facts.values, outputs.double()), "the MLP decodes over the whole output table"


def test_principal_projection_keeps_the_leading_subspace():
    rows = torch.randn(50, 3, dtype=torch.float64) @ torch.randn(3, 12, dtype=torch.float64)  # rank 3
    projected = principal_projection([rows[:30], rows[30:]], 3)
    gram = torch.cat(projected) @ torch.cat(projected).T
    assert torch.allclose(gram, rows @ rows.T, atol=1e-9), "a rank-3 set keeps every inner product in 3 dims"


# ---------------------------------------------------------------------------------------------
# The Transformer
# ---------------------------------------------------------------------------------------------


def test_rotary_scores_depend_on_the_distance_only():
    q, k = torch.randn(1, 1, 8), torch.randn(1, 1, 8)
    score = lambda i, j: float(rotary(q, torch.tensor([[i]])) @ rotary(k, torch.tensor([[j]])).transpose(-1, -2))
    assert score(3, 1) == pytest.approx(score(7, 5), rel=1e-5)
    assert score(0, 0) == pytest.approx(float(q @ k.transpose(-1, -2)), rel=1e-5)


@pytest.mark.parametrize("n_head", [1, 4])
def test_attention_over_the_tables_is_the_per_position_attention(n_head):
    # without RoPE the attention is computed on the vocabulary tables (transformer.attention_over_tables):
    # the same outputs and gradients as per position, with repeated tokens and positions after the query
    generator = torch.Generator().manual_seed(0)
    count, batch, length, vocabulary, dim = 3, 5, 7, 4, 16  # 4 entries in 7 positions: tokens repeat
    key_tables = torch.randn(count, vocabulary, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    inputs = torch.randn(count, vocabulary, dim, generator=generator, dtype=torch.float64)
    queries = torch.randn(count, batch, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(vocabulary, (count, batch, length), generator=generator)
    query_positions = torch.randint(length, (count, batch), generator=generator)
    rows = torch.arange(count).view(count, 1, 1)
    per_position = attention_at(queries.reshape(-1, dim), key_tables[rows, tokens].view(-1, length, dim),
                                inputs[rows, tokens].view(-1, length, dim), query_positions.reshape(-1), n_head,
                                None).view(count, batch, dim)
    over_tables = attention_over_tables(queries, key_tables, inputs, tokens, query_positions, n_head)
    assert torch.allclose(over_tables, per_position, atol=1e-12)
    weights = torch.randn(count, batch, dim, generator=generator, dtype=torch.float64)
    gradients = [torch.autograd.grad((result * weights).sum(), (queries, key_tables)) for result in (per_position, over_tables)]
    for first, second in zip(*gradients):
        assert torch.allclose(first, second, atol=1e-12)
    changed = tokens.clone()
    changed[query_positions < length - 1, -1] = (changed[query_positions < length - 1, -1] + 1) % vocabulary
    assert torch.equal(attention_over_tables(queries, key_tables, inputs, changed, query_positions, n_head), over_tables), \
        "a token after the query is never read"
    assert table_attention_pays(vocabulary, length, None) and not table_attention_pays(vocabulary, length, 10_000.0)
    assert not table_attention_pays(10_000, length, None)


def test_query_position_forward_matches_the_full_forward():
    task, _, _ = small_task()
    model = build_runs([task], [torch.nn.Linear(16, 16)], [torch.Generator().manual_seed(3)],
                       settings=TrainingSettings(positional="rope")).run_model(0)
    with torch.no_grad():
        model.attention.query.weight.mul_(50)  # sharp attention, so a masking error would show
    sequences = recall_sequences(torch.arange(8), torch.arange(8), task.vocabulary, task.lengths, torch.Generator().manual_seed(4))
    full = model(sequences.tokens)
    picked = model(sequences.tokens, sequences.query_positions)
    assert torch.allclose(full[torch.arange(8), sequences.query_positions], picked, atol=1e-5)


def test_frozen_parts_stay_frozen_and_only_query_and_key_train():
    task, keys, values = small_task()
    mlps = [torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 16)).double()
            for width in (32, 8)]
    generators = [torch.Generator().manual_seed(seed) for seed in (0, 1)]
    model = build_runs([task, task], mlps, generators, swapped=mlps[::-1])
    frozen_before = {name: tensor.clone() for name, tensor in model.state_dict().items()
                     if not name.startswith(("query.", "key."))}
    trained_before = [tensor.clone() for tensor in (*model.query, *model.key)]
    assert {id(p) for p in model.parameters() if p.requires_grad} == {id(p) for p in (*model.query, *model.key)}
    settings = TrainingSettings(learning_rate=0.05, max_steps=5, batch_size=4, eval_every=2)
    maps = [torch.randperm(8), torch.randperm(8)]
    train_attention(model, [task, task], maps, maps[::-1], settings, generators)
    after = model.state_dict()
    assert set(frozen_before) >= {"embeddings", "decoders", "mlp_input_scales", "mlps.0.0.weight", "mlps.1.2.weight",
                                  "swapped.0.0.weight"}
    for name, tensor in frozen_before.items():
        assert torch.equal(tensor, after[name]), f"{name} changed in training"
    for before, now in zip(trained_before, (*model.query, *model.key)):
        assert not torch.equal(before, now)
    single = model.run_model(1)
    assert torch.equal(single.attention.value.weight, torch.eye(16)) and torch.equal(single.attention.output.weight, torch.eye(16))
    for original, hosted in zip(mlps[1].parameters(), single.mlp.parameters()):
        assert torch.equal(original.float(), hosted), "the hosted MLP is the MLP given"


# ---------------------------------------------------------------------------------------------
# Runs batched together
# ---------------------------------------------------------------------------------------------


def three_runs(seed=0):
    """Three tasks of one shape (different embeddings), MLPs of different sizes, a map each."""
    tasks = [small_task(seed=seed + run)[0] for run in range(3)]
    mlps = [torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 16)).double()
            for width in (4, 64, 16)]
    maps = [torch.randperm(8, generator=torch.Generator().manual_seed(seed + 10 + run)) for run in range(3)]
    return tasks, mlps, maps


def test_a_batched_run_computes_what_its_own_transformer_computes():
    tasks, mlps, maps = three_runs()
    model = build_runs(tasks, mlps, [torch.Generator().manual_seed(run) for run in range(3)])
    with torch.no_grad():
        for weight in model.query:
            weight.mul_(50)  # sharp attention, so a masking or padding error would show
    runs = [2, 0]
    sequences = [recall_sequences(torch.arange(8), maps[run], tasks[run].vocabulary, JunkLengths(0, 5, 0, 7),
                                  torch.Generator().manual_seed(20 + run)) for run in runs]
    length = max(batch.tokens.shape[1] for batch in sequences) + 3  # extra padding after every query
    tokens = torch.stack([torch.nn.functional.pad(batch.tokens, (0, length - batch.tokens.shape[1]),
                                                  value=tasks[0].vocabulary.query) for batch in sequences])
    batched = model(runs, tokens, torch.stack([batch.query_positions for batch in sequences]))
    for row, (run, batch) in enumerate(zip(runs, sequences)):
        alone = model.run_model(run)(batch.tokens, batch.query_positions)
        assert torch.allclose(batched[row], alone, atol=1e-5)


def test_runs_trained_together_train_as_they_would_alone():
    tasks, mlps, maps = three_runs()
    swapped_maps = [fact_map.roll(1) for fact_map in maps]
    settings = TrainingSettings(learning_rate=0.02, max_steps=9, batch_size=4, patience=4, eval_every=2,
                                restart_after=3, restart_below=0.9, stop_accuracy=1.0, stop_at_ceiling=False)
    together_generators = [torch.Generator().manual_seed(30 + run) for run in range(3)]
    together = build_runs(tasks, mlps, together_generators, settings=settings, swapped=mlps[::-1])
    records = train_attention(together, tasks, maps, swapped_maps, settings, together_generators)
    for run in range(3):
        generator = [torch.Generator().manual_seed(30 + run)]
        alone = build_runs([tasks[run]], [mlps[run]], generator, settings=settings, swapped=[mlps[::-1][run]])
        record = train_attention(alone, [tasks[run]], [maps[run]], [swapped_maps[run]], settings, generator)[0]
        for key in ("steps", "stop", "restarts", "fact_adaptive_max", "fact_adaptive_max_step", "evaluations"):
            assert record[key] == records[run][key], key
        assert torch.allclose(alone.query[0], together.query[run], atol=1e-6)
        assert torch.allclose(alone.key[0], together.key[run], atol=1e-6)
        assert torch.equal(generator[0].get_state(), together_generators[run].get_state()), "the same random draws"
    assert sum(record["restarts"] for record in records) > 0, "restarts happen (attention < 0.9 after 3 updates)"


def test_training_stops_on_the_fact_adaptive_maximum():
    """A swapped MLP that recalls its map exactly (a linear memory on orthonormal keys) makes the
    run stop at the target, with the maximum recorded; one that answers the wrong map plateaus
    (the ceiling stop off: its ceiling would stop it at once)."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    second = first.roll(1)
    memory, other = linear_memory(keys, values, first), linear_memory(keys, values, second)
    settings = TrainingSettings(learning_rate=0.05, max_steps=400, batch_size=64, eval_every=10, patience=50,
                                stop_accuracy=0.99, stop_at_ceiling=False, max_restarts=0)
    generators = [torch.Generator().manual_seed(6), torch.Generator().manual_seed(7)]
    model = build_runs([task, task], [memory, memory], generators, settings=settings, swapped=[other, memory])
    using, ignoring = train_attention(model, [task, task], [first, first], [second, second], settings, generators)
    assert using["stop"] == "target" and using["fact_adaptive_max"] >= 0.99
    assert using["steps"] % 10 == 0 and using["fact_adaptive_max_step"] == using["steps"]
    assert ignoring["stop"] == "plateau" and ignoring["fact_adaptive_max"] == 0.0


def test_the_ceiling_is_the_swapped_mlps_recall_with_attention_on_the_key():
    """key_recall is the recall the Transformer reaches when its attention sits on the key: 1 for a
    memory of the scored map, 0 for a memory of a derangement of it (the Transformer's own score
    with one-hot attention: test_one_hot_attention_on_the_key_recalls_what_the_mlp_stores_alone)."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    second = first.roll(1)
    model = build_runs([task], [linear_memory(keys, values, first)], [torch.Generator().manual_seed(1)],
                       swapped=[linear_memory(keys, values, second)])
    assert model.key_recall(0, first) == 1.0 and model.key_recall(0, second) == 0.0
    assert model.key_recall(0, second, swapped=True) == 1.0 and model.key_recall(0, first, swapped=True) == 0.0


def test_a_run_stops_once_it_reaches_its_ceiling():
    """A swapped MLP that stores half of its map caps the fact-adaptive accuracy at 1/2: the run
    stops there ('ceiling') and is not restarted, since no initialisation could reach the target."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    half = torch.cat([first[:4], first[4:].roll(1)])  # the swapped memory answers 4 of the 8 facts
    settings = TrainingSettings(learning_rate=0.05, max_steps=400, batch_size=64, eval_every=10, patience=50,
                                stop_accuracy=0.99, max_restarts=2)
    generators = [torch.Generator().manual_seed(6)]
    model = build_runs([task], [linear_memory(keys, values, first)], generators, settings=settings,
                       swapped=[linear_memory(keys, values, half)])
    record = train_attention(model, [task], [first], [first], settings, generators)[0]
    assert record["ceiling"] == 0.5
    assert record["stop"] == "ceiling" and record["fact_adaptive_max"] >= 0.5 and record["restarts"] == 0, record
    assert record["steps"] < 400


def test_a_probe_that_cannot_reach_the_target_is_left_untrained_when_asked():
    """skip_unreachable: the probe whose ceiling is below the target gets no update and NaN
    accuracies; its batch mate whose ceiling reaches the target trains as before."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    half = torch.cat([first[:4], first[4:].roll(1)])
    settings = TrainingSettings(learning_rate=0.05, max_steps=400, batch_size=64, eval_every=10, patience=50,
                                stop_accuracy=0.99)
    memory = linear_memory(keys, values, first)
    unreachable, reachable = usability([
        Probe(task, memory, first, linear_memory(keys, values, half), first, torch.Generator().manual_seed(6)),
        Probe(task, memory, first, memory, first, torch.Generator().manual_seed(7)),
    ], settings, skip_unreachable=True)
    assert unreachable["stop"] == "unreachable" and unreachable["steps"] == 0 and unreachable["ceiling"] == 0.5
    assert all(math.isnan(unreachable[key]) for key in ("fact_adaptive_max", "fact_adaptive", "attention_on_key"))
    assert reachable["stop"] == "target" and reachable["fact_adaptive_max"] >= 0.99


def test_an_initialisation_that_ends_below_the_target_starts_a_new_one():
    """A run that cannot learn (learning rate ~0) under a swapped MLP that could reach the target
    ends each initialisation on its plateau and starts a new one, max_restarts times; its maximum
    is over all of them. With the restart check off (restart_below 0) only plateaus restart it."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    memory = linear_memory(keys, values, first)
    settings = TrainingSettings(learning_rate=1e-9, max_steps=200, batch_size=16, eval_every=5, patience=10,
                                stop_accuracy=1.0, restart_after=30, restart_below=0.0, max_restarts=2)
    generators = [torch.Generator().manual_seed(3)]
    model = build_runs([task], [memory], generators, settings=settings, swapped=[memory])
    record = train_attention(model, [task], [first], [first], settings, generators)[0]
    assert record["ceiling"] == 1.0
    assert record["restarts"] == 2 and record["stop"] == "plateau", record
    assert record["evaluations"] >= 3 * 2, "every initialisation evaluated until its plateau"


def test_a_stuck_run_restarts_at_its_check_and_a_budget_ends_each_initialisation():
    """A run whose attention is off the key at its restart check (restart_below 1.01: always)
    restarts there; with no patience, each later initialisation ends at max_steps updates."""
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    memory = linear_memory(keys, values, first)
    settings = TrainingSettings(learning_rate=1e-9, max_steps=40, batch_size=16, eval_every=5, patience=None,
                                stop_accuracy=1.0, restart_after=30, restart_below=1.01, max_restarts=1)
    generators = [torch.Generator().manual_seed(3)]
    model = build_runs([task], [memory], generators, settings=settings, swapped=[memory])
    record = train_attention(model, [task], [first], [first], settings, generators)[0]
    assert record["restarts"] == 1 and record["stop"] == "max_steps", record
    assert record["steps"] == 30 + 40, "restarted at 30 updates, then one initialisation of 40"


def test_runs_of_different_shapes_are_refused():
    small, large = small_task(n_facts=8)[0], small_task(n_facts=6)[0]
    with pytest.raises(ValueError, match="one vocabulary and embedding shape"):
        build_runs([small, large], [torch.nn.Identity()] * 2, [torch.Generator()] * 2)


def test_swap_puts_a_frozen_copy_in_the_slot():
    task, _, _ = small_task()
    model = build_runs([task], [torch.nn.Linear(16, 16)], [torch.Generator()]).run_model(0)
    replacement = torch.nn.Linear(16, 16)
    model.swap_mlp(replacement)
    assert all(not p.requires_grad for p in model.mlp.parameters())
    assert torch.equal(model.mlp.weight, replacement.weight.float())
    assert model.trainable_parameters() == [model.attention.query.weight, model.attention.key.weight]


# ---------------------------------------------------------------------------------------------
# The swap evaluation
# ---------------------------------------------------------------------------------------------


def linear_memory(keys, values, fact_map):
    """W = sum_i v_f(i) k_i^T: recalls every fact exactly when the keys are orthonormal."""
    return LinearMemory((values[fact_map].T @ normalize_rows(keys)).double())


def test_a_transformer_whose_facts_do_not_move_with_the_mlp_scores_at_chance():
    task, keys, values = small_task(orthonormal=True)
    first = torch.randperm(8, generator=torch.Generator().manual_seed(5))
    second = first.roll(1)  # a derangement of the first map: chance agreement is exactly 0
    settings = TrainingSettings(learning_rate=0.02, max_steps=300, batch_size=64, eval_repeats=4, eval_every=50,
                                stop_at_ceiling=False)  # the first probe's ceiling is 0: it would stop at once
    memory = linear_memory(keys, values, first)
    # "Swapping" in a module that still answers the first map: the facts live outside the swap.
    # Both probes train side by side in one batch; neither sees the other.
    ignoring, using = usability([
        # "Swapping" in a module that still answers the first map: the facts live outside the swap.
        Probe(task, memory, first, memory, second, torch.Generator().manual_seed(6)),
        # Swapping in a memory of the NEW map: a Transformer that reads its MLP follows it.
        Probe(task, memory, first, linear_memory(keys, values, second), second, torch.Generator().manual_seed(6)),
    ], settings)
    assert ignoring["plain_recall"] >= 0.95, "the Transformer learnt to read the memory"
    assert ignoring["fact_adaptive"] == 0.0 and ignoring["fact_adaptive_max"] == 0.0
    assert using["fact_adaptive"] >= 0.95 and using["fact_adaptive_max"] >= 0.95


class OneHotOnKey(torch.nn.Module):
    """Attention that puts all its weight on the key: the normalised key token's row."""

    def forward(self, table, tokens, query_positions):
        key_positions = (tokens < self.n_facts).float().argmax(dim=1)  # the first fact token
        return table[tokens[torch.arange(len(tokens)), key_positions]]

    def __init__(self, n_facts):
        super().__init__()
        self.n_facts = n_facts


@pytest.mark.parametrize("method", ["ntk", "ed_gated"])
@pytest.mark.parametrize("output_norm", ["unit", "rms"])
def test_one_hot_attention_on_the_key_recalls_what_the_mlp_stores_alone(method, output_norm):
    """The in-Transformer accuracy with attention one-hot on the key equals the MLP's standalone
    accuracy over the same decoding table: the Transformer decodes what the MLP was built on."""
    from factstore.mlp.modules import module_accuracy
    from factstore.usability.probes import MlpSettings, build_mlp

    task, (facts, _) = gaussian_probe_task(48, 16, 5, JunkLengths(2, 4, 2, 4), torch.Generator().manual_seed(8))
    settings = MlpSettings.from_config({"learning_rate": 0.03, "max_steps": 1, "patience": 1}, degree=2)
    for size in (8, 64, 512) if method == "ntk" else (4, 8, 16):
        mlp, _ = build_mlp(method, facts, size, torch.Generator().manual_seed(size), settings)
        runs = build_runs([task], [mlp], [torch.Generator()], settings=TrainingSettings(output_norm=output_norm))
        model = runs.run_model(0)
        model.attention = OneHotOnKey(task.vocabulary.n_facts)
        inside = recall_accuracy(model, task, facts.fact_map, torch.Generator().manual_seed(9))
        assert inside == pytest.approx(module_accuracy(mlp, facts), abs=1 / 48 + 1e-9), (size, inside)
        assert runs.key_recall(0, facts.fact_map) == pytest.approx(inside, abs=1e-12), "the ceiling is this accuracy"


# ---------------------------------------------------------------------------------------------
# Threshold rules
# ---------------------------------------------------------------------------------------------


def test_threshold_rules_locate_a_clean_step():
    lipschitz = np.array([1, 2, 3, 4, 10, 20, 30, 40], dtype=float)
    accuracy = np.array([1, 1, 1, 1, 0.5, 0.4, 0.3, 0.2])
    assert threshold.smallest_failing(lipschitz, accuracy, 0.99) == 10
    assert threshold.usable_fraction(lipschitz, accuracy, 0.99, 10) == 0.0
    fit = threshold.logistic_fit(lipschitz, accuracy >= 0.99)
    assert fit.slope < 0 and 4 < fit.threshold < 10
    assert math.isinf(threshold.smallest_failing(lipschitz, np.ones(8), 0.99))
    assert math.isnan(threshold.logistic_fit(lipschitz, np.ones(8, dtype=bool)).slope)


# ---------------------------------------------------------------------------------------------
# Claims: each check flips with the metric it reads
# ---------------------------------------------------------------------------------------------

PASSING = {
    "attending_fraction": 0.9,
    "usable_found_fraction": 1.0, "usable_over_standalone_max": 1.5,
    "whitening_moderate_accuracy_min": 0.995, "whitening_full_drop_min": 0.2, "whitening_moderate_capacity_gain_min": 1.3,
    "whitening_moderate_vs_control_min": 0.0,
    "lipschitz_usable_fraction_above": 0.1, "lipschitz_fraction_below_threshold": 0.6, "lipschitz_logistic_slope": -3.0,
}
FAILING = {
    "usable_found_fraction": 0.5, "usable_over_standalone_max": 9.0,
    "whitening_moderate_accuracy_min": 0.9, "whitening_full_drop_min": 0.0, "whitening_moderate_capacity_gain_min": 0.7,
    "whitening_moderate_vs_control_min": -0.05,
    "lipschitz_usable_fraction_above": 0.9, "lipschitz_fraction_below_threshold": 0.0, "lipschitz_logistic_slope": 1.0,
}


@pytest.mark.parametrize("claim_id", ["S0.usable", "S0.whitening-tradeoff", "S0.lipschitz-threshold"])
def test_each_check_of_the_usability_claims_can_fail(claim_id):
    registry = {claim["id"]: claim for claim in claims.load_registry(REPOSITORY / "config/claims.yaml")}
    claim = registry[claim_id]
    result = claim["result"]

    def status(values):
        table = pd.DataFrame({"metric": list(values), "value": list(values.values()), "detail": ""})
        return claims.evaluate_claim(claim, {result: table}, "smoke")["status"]

    assert status(PASSING) == "PASS"
    for check in claim["checks"]:
        flipped = PASSING | {check["metric"]: FAILING[check["metric"]]}
        assert status(flipped) == "FAIL", f"{claim_id}: {check['metric']} does not flip"
    assert status(PASSING | {claim["checks"][0]["metric"]: math.nan}) == "FAIL", "an unmeasured metric fails"
    for gate in claim.get("gates", []):
        assert status(PASSING | {gate["metric"]: 0.1}) == "UNTESTABLE", f"{claim_id}: gate {gate['metric']} does not flip"


# ---------------------------------------------------------------------------------------------
# The workflow: the smoke config yields every figure
# ---------------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_smoke_config_plans_every_usability_figure():
    from factstore.plots.usability import FIGURES

    targets = [f"runs/smoke/figures/usability_{name}.png" for name in FIGURES]  # config/smoke.yaml's run_dir
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", *targets, "--configfile", "config/smoke.yaml"],
                          cwd=REPOSITORY, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    smoke = yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())
    assert set(smoke["usability"]["capacity"]["log2_facts"]) <= set(smoke["mlp"]["capacity"]["log2_facts"])


# ---------------------------------------------------------------------------------------------
# The study's measurements (usability/summary.py) on hand-made tables
# ---------------------------------------------------------------------------------------------


def test_lipschitz_threshold_is_located_within_each_whitening_family():
    """Two families on different Lipschitz scales, each failing above its own threshold: pooled,
    no MLP is usable above its family's threshold, although family b's usable MLPs lie above
    family a's threshold (a threshold over both would mix them)."""
    from factstore.usability.summary import lipschitz_metrics

    rows = [{"kind": "real", "method": method, "standalone_swapped": 1.0, "lipschitz_relative": scale * lipschitz,
             "fact_adaptive_max": accuracy}
            for method, scale in (("a", 1.0), ("b", 100.0))
            for lipschitz, accuracy in ((1, 1.0), (2, 1.0), (3, 0.995), (5, 0.5), (8, 0.2))]
    rows.append({"kind": "real", "method": "a", "standalone_swapped": 0.5, "lipschitz_relative": 0.1,
                 "fact_adaptive_max": 0.0})  # does not store on its own: left out
    metrics = {name: value for name, value, _, _ in lipschitz_metrics(pd.DataFrame(rows), 0.99, "lipschitz_relative")}
    assert metrics["lipschitz_threshold"] == 5.0
    assert metrics["lipschitz_usable_fraction_above"] == 0.0
    assert metrics["lipschitz_fraction_below_threshold"] == pytest.approx(0.6)
    pooled = threshold.usable_fraction([r["lipschitz_relative"] for r in rows[:-1]],
                                       [r["fact_adaptive_max"] for r in rows[:-1]], 0.99, 5.0)
    assert pooled == pytest.approx(3 / 7), "one threshold over both families reads family b's usable MLPs above it"


def test_usable_ratio_is_over_the_constructions_with_gd_beside_it():
    from factstore.usability.summary import usable_metrics, usable_table

    capacity_table = pd.DataFrame([
        {"method": method, "d": 8, "F": 64, "replicate": seed, "usable_params": params * (1 + seed),
         "found": True, "best_fact_adaptive": 1.0}
        for method, params in (("ntk", 200.0), ("ed_gated", 100.0), ("gd_gated", 1000.0)) for seed in range(2)])
    standalone = pd.DataFrame([{"method": m, "d": 8, "F": 64, "target": 0.99, "n_params": 100.0, "stored": True}
                               for m in ("ntk", "ed_gated", "gd_gated")])
    probes = pd.DataFrame({"plain_recall": [1.0], "fact_adaptive": [1.0], "attention_on_key": [0.9], "restarts": [0]})
    usable = usable_table(capacity_table, standalone, 0.99)
    metrics = {name: (value, error) for name, value, _, error in usable_metrics(capacity_table, usable, probes, 0.99)}
    assert metrics["usable_over_standalone_max"][0] == pytest.approx(3.0), "ntk: mean of 200 and 400 over 100"
    assert metrics["usable_over_standalone_max"][1] == pytest.approx(1.0), "its standard error over the two seeds"
    assert metrics["usable_over_standalone_max_gd"][0] == pytest.approx(15.0)
    assert metrics["usable_found_fraction"][0] == 1.0 and metrics["attending_fraction"][0] == 1.0


def _whitening_rows(stored_at_zero: bool, moderate_params: int, moderate_stored: bool = True,
                    recalled_at_zero: float = 1.0, moderate_recalled: float = 1.0) -> pd.DataFrame:
    """One (kind, method), one seed: alpha = 0 at 4,000 parameters (stored or at the cap), a
    moderate alpha at `moderate_params`; `*_recalled`: the fraction each recalls on its own."""
    return pd.DataFrame([
        {"replicate": 0, "alpha": 0.0, "F": 100, "n_params": 4000, "stored": stored_at_zero,
         "standalone_trained": recalled_at_zero},
        {"replicate": 0, "alpha": 0.5, "F": 100, "n_params": moderate_params, "stored": moderate_stored,
         "standalone_trained": moderate_recalled},
    ])


def test_capacity_gain_is_a_lower_bound_when_alpha_zero_does_not_store():
    # alpha = 0 stored at 4,000 parameters: the gain is exact, 4000 / 2000
    assert capacity_gains(_whitening_rows(True, 2000), [0.5]).iloc[0] == pytest.approx(2.0)
    # alpha = 0 not stored within a cap of 4,000: its capacity needs more, so the gain is >= 2
    assert capacity_gains(_whitening_rows(False, 2000, recalled_at_zero=0.9), [0.5]).iloc[0] == pytest.approx(2.0)
    # the moderate alpha needs more than the cap alpha = 0 failed at: the bound is below 1 (flips the check)
    assert capacity_gains(_whitening_rows(False, 8000), [0.5]).iloc[0] < 1.0
    # a moderate alpha that does not store counts 0 where alpha = 0 stores
    assert capacity_gains(_whitening_rows(True, 4000, moderate_stored=False, moderate_recalled=0.99), [0.5]).iloc[0] == 0.0


def test_capacity_gain_where_neither_stores_is_read_at_the_cap_width():
    """Both at the 4,000-parameter cap: the facts each recalls there, per parameter."""
    neither = dict(stored_at_zero=False, moderate_params=4000, moderate_stored=False)
    assert capacity_gains(_whitening_rows(**neither, recalled_at_zero=0.8, moderate_recalled=0.96),
                          [0.5]).iloc[0] == pytest.approx(1.2)
    # the moderate alpha recalls fewer facts at the cap than alpha = 0: below 1 (flips the check)
    assert capacity_gains(_whitening_rows(**neither, recalled_at_zero=0.9, moderate_recalled=0.6),
                          [0.5]).iloc[0] == pytest.approx(2 / 3)
    # of two moderate alphas the one that does not store is the worse, whatever the other's F / W (the
    # per-seed worse reading, an alternative; the verdict averages the band)
    rows = pd.concat([_whitening_rows(**neither, recalled_at_zero=0.8, moderate_recalled=0.88),
                      pd.DataFrame([{"replicate": 0, "alpha": 0.2, "F": 100, "n_params": 100, "stored": True,
                                     "standalone_trained": 1.0}])], ignore_index=True)
    assert capacity_gains(rows, [0.2, 0.5], reduce="min").iloc[0] == pytest.approx(1.1)


# ---------------------------------------------------------------------------------------------
# Declared alternatives the summary step evaluates (usability/alternatives.py)
# ---------------------------------------------------------------------------------------------


def _status_under(claim_id: str, values: dict[str, float], renamed: dict[str, str] | None = None) -> str:
    """The claim's verdict on `values` (PASSING for every metric not given), its checks reading the
    metrics `renamed` maps them to (factstore.robustness, same ranges)."""
    from factstore.robustness import alternative_claim

    claim = {claim["id"]: claim for claim in claims.load_registry(REPOSITORY / "config/claims.yaml")}[claim_id]
    claim = alternative_claim(claim, {"metrics": renamed or {}})
    values = PASSING | values
    table = pd.DataFrame({"metric": list(values), "value": list(values.values()), "detail": ""})
    return claims.evaluate_claim(claim, {claim["result"]: table}, "smoke")["status"]


def test_capacity_gain_readings_of_the_declared_alternatives():
    """exact: NaN unless both store; bound: NaN where neither stores; both the run's gain elsewhere."""
    from factstore.usability.alternatives import capacity_gain_readings

    def read(**kwargs):
        return capacity_gain_readings(_whitening_rows(**kwargs), [0.5]).iloc[0]

    both = read(stored_at_zero=True, moderate_params=2000)
    assert both.gain == both.exact == both.bound == pytest.approx(2.0)
    only_moderate = read(stored_at_zero=False, moderate_params=2000, recalled_at_zero=0.9)
    assert only_moderate.bound == only_moderate.gain == pytest.approx(2.0) and math.isnan(only_moderate.exact)
    only_zero = read(stored_at_zero=True, moderate_params=4000, moderate_stored=False, moderate_recalled=0.99)
    assert only_zero.bound == only_zero.gain == 0.0 and math.isnan(only_zero.exact)
    neither = read(stored_at_zero=False, moderate_params=4000, moderate_stored=False, recalled_at_zero=0.8,
                   moderate_recalled=0.96)
    assert neither.gain == pytest.approx(1.2) and math.isnan(neither.bound) and math.isnan(neither.exact)


def _gain_family(kind: str, seeds: list[tuple[bool, int, bool, float]]) -> list[dict]:
    """One (kind, ntk) whitening family: per seed (alpha = 0 stored, moderate alpha's n_params,
    moderate stored, fraction each recalls at the cap); alpha = 0 and 1 at 4,000 parameters, F = 100;
    usable at the moderate alpha, not at alpha = 1. Hand-made: every family is judged (host_stored),
    to exercise the readings where a standalone search does not store within its cap."""
    rows = []
    for replicate, (zero_stored, moderate_params, moderate_stored, recalled) in enumerate(seeds):
        for alpha, params, stored in ((0.0, 4000, zero_stored), (0.2, moderate_params, moderate_stored), (1.0, 4000, True)):
            rows.append({"kind": kind, "method": "ntk", "replicate": replicate, "alpha": alpha, "F": 100,
                         "n_params": params, "stored": stored, "standalone_trained": 1.0 if stored else recalled,
                         "facts_per_parameter": 100 / params if stored else 0.0,
                         "fact_adaptive_max": 0.5 if alpha == 1.0 else 1.0,
                         "value_fold": "inverse", "host_stored": True})
    return rows


def test_capacity_gain_alternatives_can_flip_the_whitening_check():
    """The run's reading passes (min over kinds 1.25); the exact ratio is NaN where alpha = 0 does
    not store (fails); the bound alone is NaN where neither stores (fails), and equals the run's
    reading where alpha = 0 or the moderate alpha stores (passes)."""
    from factstore.usability.alternatives import beside, capacity_gain_alternatives
    from factstore.usability.summary import whitening_metrics

    synthetic = _gain_family("synthetic", [(True, 3200, True, 1.0), (True, 3200, True, 1.0)])  # gain 1.25 per seed
    bound_only = pd.DataFrame(synthetic + _gain_family("real", [(False, 2000, True, 0.9), (True, 2500, True, 1.0)]))
    at_cap = pd.DataFrame(synthetic + _gain_family("real", [(False, 4000, False, 0.9), (True, 2500, True, 1.0)]))
    names = {"exact": "whitening_moderate_capacity_gain_min_exact", "bound": "whitening_moderate_capacity_gain_min_bound"}
    for table, bound_passes in ((bound_only, True), (at_cap, False)):
        metrics = beside(whitening_metrics(table), capacity_gain_alternatives(table))
        order = [name for name, *_ in metrics]
        assert order[order.index("whitening_moderate_capacity_gain_min") + 1:][:2] == list(names.values())
        values = {name: value for name, value, _, _ in metrics}
        assert values["whitening_moderate_capacity_gain_min"] == pytest.approx(1.25)
        assert math.isnan(values[names["exact"]])
        gain = "whitening_moderate_capacity_gain_min"
        assert _status_under("S0.whitening-tradeoff", values) == "PASS"
        assert _status_under("S0.whitening-tradeoff", values, {gain: names["exact"]}) == "FAIL"
        assert _status_under("S0.whitening-tradeoff", values, {gain: names["bound"]}) == ("PASS" if bound_passes else "FAIL")
    # where every row stores, the three readings agree
    values = {name: value for _, (name, value, _, _) in capacity_gain_alternatives(pd.DataFrame(synthetic))}
    assert values[names["exact"]] == values[names["bound"]] == pytest.approx(1.25)


def _lipschitz_rows(kind: str, items: list[tuple[float, float, float, float]]) -> list[dict]:
    """(lipschitz_relative, lipschitz, max fact-adaptive accuracy, standalone_swapped) per MLP."""
    return [{"kind": kind, "method": "ntk", "lipschitz_relative": relative, "lipschitz": raw, "fact_adaptive_max": accuracy,
             "standalone_swapped": swapped} for relative, raw, accuracy, swapped in items]


def test_lipschitz_alternatives_can_flip_the_threshold_claim():
    """Two whitening families on different scales, each failing only above its own threshold (the
    run's reading passes). One threshold over both reads family b's usable MLPs above family a's;
    without the RMS division the failing MLPs have the smallest L; the probes' family adds usable
    MLPs above its own failing one; at the cut-offs 1.0 / 0.95 the failing MLPs (storing 0.995 of
    their facts) are not storing, so no MLP fails: each reads another verdict."""
    from factstore.usability.alternatives import beside, lipschitz_alternatives
    from factstore.usability.summary import lipschitz_metrics

    whitening = pd.DataFrame(
        _lipschitz_rows("real", [(1, 10, 1.0, 1.0), (2, 20, 1.0, 1.0), (5, 1, 0.5, 0.995), (0.1, 0.1, 0.0, 0.5)])
        + _lipschitz_rows("synthetic", [(100, 10, 1.0, 1.0), (200, 20, 1.0, 1.0), (300, 30, 1.0, 1.0), (500, 5, 0.2, 0.995)]))
    probes = pd.DataFrame(_lipschitz_rows("spherical", [(0.5, 0.5, 0.3, 1.0), (1, 1, 1.0, 1.0), (2, 2, 1.0, 1.0),
                                                        (3, 3, 1.0, 1.0), (4, 4, 1.0, 1.0), (0.1, 0.1, 0.0, 0.5)]))
    mlps = pd.concat([probes, whitening], ignore_index=True)
    metrics = beside(lipschitz_metrics(whitening, 0.99, "lipschitz_relative"),
                     lipschitz_alternatives(whitening, mlps, 0.99, "lipschitz_relative"))
    values = {name: value for name, value, _, _ in metrics}
    assert values["lipschitz_usable_fraction_above"] == 0.0
    assert values["lipschitz_fraction_below_threshold"] == pytest.approx(5 / 7)
    assert _status_under("S0.lipschitz-threshold", values) == "PASS"

    above, below, slope = "lipschitz_usable_fraction_above", "lipschitz_fraction_below_threshold", "lipschitz_logistic_slope"
    # one threshold (5): above it 100, 200, 300 usable, 5 and 500 not
    assert values["lipschitz_usable_fraction_above_one_threshold"] == pytest.approx(3 / 5)
    assert values["lipschitz_fraction_below_threshold_one_threshold"] == pytest.approx(2 / 7)
    # without the RMS division each family's failing MLP has its smallest L: every MLP above
    assert values["lipschitz_usable_fraction_above_unnormalised"] == pytest.approx(5 / 7)
    assert values["lipschitz_fraction_below_threshold_unnormalised"] == 0.0
    assert values["lipschitz_logistic_slope_unnormalised"] > 0
    # with the probes: their family's threshold is 0.5, its 4 usable MLPs above it
    assert values["lipschitz_usable_fraction_above_with_probes"] == pytest.approx(4 / 7)
    assert values["lipschitz_fraction_below_threshold_with_probes"] == pytest.approx(5 / 12)
    # cut-offs 1.0 / 0.95: the two failing MLPs are not storing, no MLP fails (NaN), all below
    assert math.isnan(values["lipschitz_usable_fraction_above_all_stored_usable95"])
    assert values["lipschitz_fraction_below_threshold_all_stored_usable95"] == 1.0
    for suffix, renamed in (
            ("one_threshold", {above: "lipschitz_usable_fraction_above_one_threshold",
                               below: "lipschitz_fraction_below_threshold_one_threshold"}),
            ("unnormalised", {above: "lipschitz_usable_fraction_above_unnormalised",
                              below: "lipschitz_fraction_below_threshold_unnormalised",
                              slope: "lipschitz_logistic_slope_unnormalised"}),
            ("with_probes", {above: "lipschitz_usable_fraction_above_with_probes",
                             below: "lipschitz_fraction_below_threshold_with_probes",
                             slope: "lipschitz_logistic_slope_with_probes"}),
            ("all_stored_usable95", {above: "lipschitz_usable_fraction_above_all_stored_usable95",
                                     below: "lipschitz_fraction_below_threshold_all_stored_usable95",
                                     slope: "lipschitz_logistic_slope_all_stored_usable95"})):
        assert _status_under("S0.lipschitz-threshold", values, renamed) == "FAIL", suffix
    # each alternative follows the metric it is the alternative of
    order = [name for name, *_ in metrics]
    assert order[order.index(slope) + 1:order.index("lipschitz_logistic_threshold")] == [
        "lipschitz_logistic_slope_unnormalised", "lipschitz_logistic_slope_with_probes",
        "lipschitz_logistic_slope_all_stored_usable95", "lipschitz_logistic_slope_one_host"]
