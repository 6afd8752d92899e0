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
from factstore.transformer import rotary
from factstore.usability import threshold
from factstore.usability.task import (
    IGNORE, JunkLengths, Vocabulary, gaussian_embeddings, mlp_fact_set, principal_projection, recall_sequences,
    token_embeddings,
)
from factstore.usability.training import Task, TrainingSettings, build_model, train_attention, usability

REPOSITORY = Path(__file__).resolve().parents[1]


def small_task(n_facts=8, dim=16, n_junk=3, lengths=JunkLengths(1, 3, 1, 3), seed=0, orthonormal=False):
    generator = torch.Generator().manual_seed(seed)
    if orthonormal:  # keys and values orthonormal: a linear memory recalls every fact exactly
        basis = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))[0]
        keys, values = basis[:n_facts], basis[n_facts : 2 * n_facts]
    else:
        keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(n_junk, dim, generator), gaussian_embeddings(1, dim, generator)
    scale = float(normalize_rows(keys).pow(2).mean(1).sqrt().mean())
    task = Task(Vocabulary(n_facts, n_junk), token_embeddings(keys, values, junk, query), lengths, scale)
    return task, keys, values


# ---------------------------------------------------------------------------------------------
# The sequences
# ---------------------------------------------------------------------------------------------


def test_sequences_have_the_layout_junk_key_junk_query_value():
    vocabulary, lengths = Vocabulary(n_facts=10, n_junk=4), JunkLengths(2, 5, 1, 3)
    fact_map = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    facts = torch.arange(10).repeat(20)
    sequences = recall_sequences(facts, fact_map, vocabulary, lengths, torch.Generator().manual_seed(2))
    junk = range(2 * 10, 2 * 10 + 4)
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
        assert tokens[q + 1] == 10 + int(fact_map[facts[row]]), "the value token follows Q"
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
    assert torch.equal(sequences.answers, 6 + fact_map)


def test_vocabulary_layout_and_embedding_table():
    vocabulary = Vocabulary(n_facts=5, n_junk=2)
    assert vocabulary.size == 13 and vocabulary.query == 12
    keys, values = torch.randn(5, 4), torch.randn(5, 4)
    junk, query = torch.randn(2, 4), torch.randn(4)
    table = token_embeddings(keys, values, junk, query)
    assert table.shape == (13, 4) and table.dtype == torch.float32
    assert torch.allclose(table[vocabulary.value(torch.tensor(2))], values[2])
    facts = mlp_fact_set(keys, values, torch.arange(5))
    assert torch.allclose(facts.keys.norm(dim=1), torch.ones(5, dtype=torch.float64)), "MLP keys on the sphere"
    assert torch.allclose(facts.values, values.double()), "MLP values are the value embeddings"


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


def test_query_position_forward_matches_the_full_forward():
    task, _, _ = small_task()
    model = build_model(task, torch.nn.Linear(16, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model.attention.query.weight.mul_(50)  # sharp attention, so a masking error would show
    sequences = recall_sequences(torch.arange(8), torch.arange(8), task.vocabulary, task.lengths, torch.Generator().manual_seed(4))
    full = model(sequences.tokens)
    picked = model(sequences.tokens, sequences.query_positions)
    assert torch.allclose(full[torch.arange(8), sequences.query_positions], picked, atol=1e-5)


def test_frozen_parts_stay_frozen_and_only_query_and_key_train():
    task, keys, values = small_task()
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).double()
    model = build_model(task, mlp, generator=torch.Generator().manual_seed(0))
    frozen_before = {name: tensor.clone() for name, tensor in model.state_dict().items()
                     if "attention.query" not in name and "attention.key" not in name}
    trained_before = [model.attention.query.weight.clone(), model.attention.key.weight.clone()]
    assert {id(p) for p in model.trainable_parameters()} == {id(model.attention.query.weight), id(model.attention.key.weight)}
    settings = TrainingSettings(learning_rate=0.05, max_steps=5, batch_size=4)
    train_attention(model, task, torch.randperm(8), settings, torch.Generator().manual_seed(1))
    after = model.state_dict()
    for name, tensor in frozen_before.items():
        assert torch.equal(tensor, after[name]), f"{name} changed in training"
    assert torch.equal(model.attention.value.weight, torch.eye(16)) and torch.equal(model.attention.output.weight, torch.eye(16))
    assert not torch.equal(trained_before[0], model.attention.query.weight)
    assert not torch.equal(trained_before[1], model.attention.key.weight)
    for original, hosted in zip(mlp.parameters(), model.mlp.parameters()):
        assert torch.equal(original.float(), hosted), "the hosted MLP is the MLP given"


def test_swap_puts_a_frozen_copy_in_the_slot():
    task, _, _ = small_task()
    model = build_model(task, torch.nn.Linear(16, 16))
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
    settings = TrainingSettings(learning_rate=0.02, max_steps=300, batch_size=64, eval_repeats=4)
    memory = linear_memory(keys, values, first)
    # "Swapping" in a module that still answers the first map: the facts live outside the swap.
    ignoring = usability(task, memory, first, memory, second, settings, torch.Generator().manual_seed(6))
    assert ignoring["plain_recall"] >= 0.95, "the Transformer learnt to read the memory"
    assert ignoring["fact_adaptive"] == 0.0
    # Swapping in a memory of the NEW map: a Transformer that reads its MLP follows it.
    using = usability(task, memory, first, linear_memory(keys, values, second), second, settings,
                      torch.Generator().manual_seed(6))
    assert using["fact_adaptive"] >= 0.95


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
    "usable_found_fraction": 1.0, "usable_over_standalone_max": 1.5,
    "whitening_moderate_accuracy_min": 0.995, "whitening_full_drop_min": 0.2, "whitening_moderate_capacity_gain_min": 1.3,
    "lipschitz_usable_fraction_above": 0.1, "lipschitz_fraction_below_threshold": 0.6, "lipschitz_logistic_slope": -3.0,
}
FAILING = {
    "usable_found_fraction": 0.5, "usable_over_standalone_max": 9.0,
    "whitening_moderate_accuracy_min": 0.9, "whitening_full_drop_min": 0.0, "whitening_moderate_capacity_gain_min": 0.7,
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


# ---------------------------------------------------------------------------------------------
# The workflow: the smoke config yields every figure
# ---------------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_smoke_config_plans_every_usability_figure():
    from factstore.plots.usability import FIGURES

    targets = [f"figures/usability_{name}.png" for name in FIGURES]
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", *targets, "--configfile", "config/smoke.yaml"],
                          cwd=REPOSITORY, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    smoke = yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())
    assert set(smoke["usability"]["capacity"]["log2_facts"]) <= set(smoke["mlp"]["capacity"]["log2_facts"])
