"""Capacity per label (dilution study, S3 second half): archetype statistics, pruning masks
that stay applied, BERT's MLM masking, the FewRel loader on the mirror's files, the BERT pipeline
on a handful of paragraphs (checkpoint and resume included), the claim checks, the smoke figures."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from conftest import REPOSITORY, SMOKE_DIR, assert_figures
from factstore.claims import evaluate_claim, load_registry
from factstore.dilution import archetypes as toy
from factstore.dilution import fewrel, mlm, readings
from factstore.dilution.pruning import (
    kept_fraction_ratio, max_dilution, max_dilution_interval, prune_by_magnitude, search_plateau_end, zero_fraction,
)
from factstore.experiments import dilution_bert, dilution_fewrel, dilution_summary
from factstore.io import load_tensors
from factstore.training import steps_for_epochs


@pytest.fixture(scope="module")
def tokenizer():
    try:
        return mlm.wordpiece_tokenizer()
    except ImportError as error:
        pytest.skip(f"offline tokenizer unavailable: {error}")


# -- archetypes ---------------------------------------------------------------------------------


def test_archetype_samples_flip_bits_at_the_given_rate_and_carry_their_archetype_label():
    generator = torch.Generator().manual_seed(0)
    archetypes = toy.random_archetypes(8, 2000, generator)
    assert set(archetypes.unique().tolist()) == {-1.0, 1.0}
    inputs, labels = toy.noisy_samples(archetypes, 25, 0.2, generator)
    assert inputs.shape == (200, 2000) and torch.equal(torch.bincount(labels), torch.full((8,), 25))
    flipped = (inputs != archetypes[labels]).float().mean().item()
    assert abs(flipped - 0.2) < 0.005
    # one label per archetype: each sample is closest to its own archetype (far from the rest)
    assert torch.equal((inputs @ archetypes.T).argmax(1), labels)
    clean, _ = toy.noisy_samples(archetypes, 3, 0.0, generator)
    assert torch.equal(clean, archetypes.repeat_interleave(3, 0))


def test_stacked_dilution_zeroes_each_members_share_and_masks_survive_training():
    generator = torch.Generator().manual_seed(1)
    prototypes = toy.random_archetypes(4, 64, generator)
    train = toy.noisy_samples(prototypes, 20, 0.1, generator)
    test = toy.noisy_samples(prototypes, 10, 0.1, generator)
    rates = [0.0, 0.5, 0.9]
    runs = toy.train_diluted(train, test, rates, hidden=8, depth=2, steps=15, learning_rate=0.05, batch_size=16, generator=generator)
    assert [run.rate for run in runs] == rates
    for run in runs:
        assert abs(run.zero_fraction - run.rate) < 0.01
        assert 0 <= run.test_accuracy <= 1
    assert runs[0].train_accuracy > 0.5  # the undiluted net learns


def test_weight_count_is_the_nets_parameter_count():
    for depth in (1, 2, 3):
        net = toy.stacked_networks(1, 64, 16, depth, 10, torch.Generator().manual_seed(0))
        assert toy.weight_count(64, 16, depth, 10) == sum(p.numel() for p in net.parameters())


def test_magnitude_pruning_zeros_the_smallest_weights_and_they_stay_zero_through_training():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 30), nn.Tanh(), nn.Linear(30, 5))
    pairs = [(net[0], "weight"), (net[2], "weight")]
    magnitudes = torch.cat([net[0].weight.detach().abs().flatten(), net[2].weight.detach().abs().flatten()])
    prune_by_magnitude(pairs, 0.7)
    assert abs(zero_fraction(pairs) - 0.7) < 1e-2
    kept = torch.cat([net[0].weight.detach().abs().flatten(), net[2].weight.detach().abs().flatten()])
    assert kept[kept > 0].min() >= magnitudes.sort().values[int(0.7 * len(magnitudes)) - 1]
    masks = [net[0].weight_mask.clone(), net[2].weight_mask.clone()]
    optimiser = torch.optim.Adam(net.parameters(), lr=0.1)
    for _ in range(5):
        optimiser.zero_grad()
        net(torch.randn(16, 20)).pow(2).sum().backward()
        optimiser.step()
    for (module, _), mask in zip(pairs, masks):
        assert torch.all(module.weight[mask == 0] == 0)
        assert torch.any(module.weight_orig[mask == 0] != 0)  # the hidden parameter moved; the mask holds
    assert abs(zero_fraction(pairs) - 0.7) < 1e-2


def test_max_dilution_is_the_end_of_the_plateau():
    rates = [0.0, 0.5, 0.9, 0.95, 0.99]
    assert max_dilution(rates, [1.0, 0.99, 0.985, 0.9, 0.97], 1.0, 0.02) == 0.9  # a later recovery does not count
    assert max_dilution(rates, [1.0, 0.5, 0.5, 0.5, 0.5], 1.0, 0.02) == 0.0
    assert max_dilution(rates[::-1], [1.0, 1.0, 1.0, 1.0, 1.0][::-1], 1.0, 0.02) == 0.99
    assert kept_fraction_ratio([0.9, 0.95]) == pytest.approx(2.0)
    assert kept_fraction_ratio([0.5, 0.5]) == 1.0


@given(grid=st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]), min_size=1, max_size=10, unique=True),
       drops=st.lists(st.floats(0, 0.2), min_size=11, max_size=11), tolerance=st.sampled_from([0.02, 0.05, 0.1]))
def test_the_rate_search_finds_the_grid_sweeps_plateau_end_with_fewer_fine_tunes(grid, drops, tolerance):
    """For an accuracy that falls monotonically with the rate, the bisection reads the same max
    dilution as the whole grid, after 1 + ceil(log2(n + 1)) evaluations for n diluted rates."""
    rates = [0.0, *sorted(grid)]
    accuracy = dict(zip(rates, 0.9 - np.cumsum(drops[: len(rates)]) + drops[0]))  # rate 0 at 0.9, then falling
    calls = []

    def accuracy_at(rate):
        calls.append(rate)
        return accuracy[rate]

    measured = search_plateau_end(rates, accuracy_at, tolerance)
    assert len(calls) == len(set(calls)) == len(measured) <= 1 + np.ceil(np.log2(len(grid) + 1))
    swept = max_dilution(rates, [accuracy[r] for r in rates], accuracy[0.0], tolerance)
    assert max_dilution(list(measured), list(measured.values()), measured[0.0], tolerance) == swept


def test_the_rate_search_assumes_one_fall():
    """A dip that recovers (0.3 off the plateau, 0.5 on it) is not visited: the search reads 0.5
    where the whole grid reads 0. The step records every measured rate, so the curve shows it."""
    rates = [0.0, 0.3, 0.5, 0.7]
    accuracy = {0.0: 1.0, 0.3: 0.5, 0.5: 1.0, 0.7: 0.5}
    measured = search_plateau_end(rates, accuracy.__getitem__, 0.05)
    assert sorted(measured) == [0.0, 0.5, 0.7]
    assert max_dilution(list(measured), list(measured.values()), 1.0, 0.05) == 0.5
    assert max_dilution(rates, [accuracy[r] for r in rates], 1.0, 0.05) == 0.0


def test_an_epoch_budget_trains_every_size_alike():
    assert [steps_for_epochs(n, 4, 32) for n in (400, 1600, 2520)] == [50, 200, 315]
    assert steps_for_epochs(3, 0.5, 32) == 1  # at least one step


# -- masked LM ----------------------------------------------------------------------------------


def test_mlm_masking_follows_bert_15_percent_and_80_10_10():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (400, 128), generator=generator)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:, 100:] = True  # padding
    masked, labels = mlm.mask_tokens(ids, special, mask_id=103, vocab_size=30522, generator=generator)
    picked = labels != mlm.IGNORE
    assert not picked[special].any()
    assert abs(picked.float().sum().item() / (~special).sum().item() - 0.15) < 0.005
    assert torch.equal(labels[picked], ids[picked])
    assert torch.equal(masked[~picked], ids[~picked])
    n = picked.sum().item()
    as_mask = (masked[picked] == 103).sum().item() / n
    unchanged = (masked[picked] == ids[picked]).sum().item() / n
    assert abs(as_mask - 0.8) < 0.01 and abs(unchanged - 0.1) < 0.01
    assert abs(1 - as_mask - unchanged - 0.1) < 0.01  # random replacements


def test_partition_masks_mask_every_token_exactly_once():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (50, 64), generator=generator)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, 50:] = True
    masked, labels = mlm.partition_masks(ids, special, mask_id=103, vocab_size=30522, maskings=7, generator=generator)
    assert masked.shape == (7 * 50, 64)
    picked = (labels != mlm.IGNORE).view(7, 50, 64)
    assert torch.equal(picked.sum(0), (~special).long())  # each non-special token in exactly one masking
    assert all(abs(picked[j].sum().item() / (~special).sum().item() - 1 / 7) < 0.02 for j in range(7))
    assert torch.equal(labels.view(7, 50, 64)[picked], ids.expand(7, -1, -1)[picked])
    assert abs((masked[labels != mlm.IGNORE] == 103).float().mean().item() - 0.8) < 0.02


def test_standard_errors_of_an_accuracy_and_of_a_paired_difference():
    rng = np.random.default_rng(0)
    first = torch.tensor(rng.random(20000) < 0.2)
    assert mlm.binomial_standard_error(first) == pytest.approx(np.sqrt(0.2 * 0.8 / 20000), rel=0.02)
    assert mlm.paired_standard_error(first, first) == 0.0  # the same predictions: no noise in the difference
    second = first.clone()
    second[:200] = ~second[:200]  # 1% of the tokens disagree
    assert mlm.paired_standard_error(first, second) == pytest.approx(np.sqrt(0.01 / 20000), rel=0.05)


def test_vocabulary_keeps_the_corpus_tokens_and_the_markers(tokenizer):
    corpus = [[2000, 2001, 7592], [7592, 29000]]
    vocabulary = mlm.Vocabulary.from_corpus(corpus, tokenizer)
    assert vocabulary.size == 4 + 5 + 4 and vocabulary.pad == 0
    assert vocabulary.wordpiece_ids[1:5] == mlm.MARKERS  # the entity markers keep their ids 1..4
    assert vocabulary.wordpiece_ids[vocabulary.mask] == tokenizer.mask_token_id
    assert vocabulary.wordpiece_ids[vocabulary.cls] == tokenizer.cls_token_id
    encoded = vocabulary.encode(corpus + [[3000]])
    assert [[vocabulary.wordpiece_ids[i] for i in ids] for ids in encoded[:2]] == corpus
    assert encoded[2] == [vocabulary.unk]  # a token outside the corpus reads [UNK]
    assert torch.equal(vocabulary.lookup()[torch.tensor(corpus[0])], torch.tensor(encoded[0]))


def test_paragraph_chunks_never_cross_paragraphs():
    chunks = mlm.paragraph_chunks([[5] * 7, [6] * 2], length=6, cls_id=101, sep_id=102, pad_id=0)
    assert chunks.tolist() == [[101, 5, 5, 5, 5, 102], [101, 5, 5, 5, 102, 0], [101, 6, 6, 102, 0, 0]]


def test_corpus_subsets_have_equal_tokens_different_paragraphs_and_hold_out_the_eval_set():
    rng = np.random.default_rng(0)
    token_ids = [[7] * int(n) for n in rng.integers(10, 300, size=2000)]
    split = mlm.corpus_subsets(token_ids, token_budget=30000, eval_paragraphs=100, seed=3)
    tokens = {name: sum(len(token_ids[i]) for i in split[name]) for name in ("few", "many")}
    assert all(abs(t - 30000) < 300 for t in tokens.values())
    assert len(split["many"]) > 1.5 * len(split["few"])
    assert not set(split["eval"]) & (set(split["few"]) | set(split["many"]))
    assert not set(split["few"]) & set(split["many"])
    again = mlm.corpus_subsets(token_ids, token_budget=30000, eval_paragraphs=100, seed=3)
    assert all(np.array_equal(split[k], again[k]) for k in split)


def test_masked_only_logits_give_the_full_mlm_loss():
    model = mlm.small_bert(vocab_size=50, hidden=16, layers=2, heads=2, intermediate=32, max_length=12, seed=0).eval()
    ids = torch.randint(5, 50, (3, 12))
    labels = torch.full_like(ids, mlm.IGNORE)
    labels[:, 3] = ids[:, 3]
    labels[1, 7] = ids[1, 7]
    logits, targets = mlm.masked_logits(model, ids, labels)
    full = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    assert torch.allclose(nn.functional.cross_entropy(logits, targets), full.loss, atol=1e-5)


def test_prunable_groups_cover_the_stated_layers():
    model = mlm.small_bert(vocab_size=50, hidden=16, layers=3, heads=2, intermediate=32, max_length=12, seed=0)
    groups = mlm.prunable_groups(model)
    assert len(groups["later_blocks"]) == 6 and len(groups["qkv"]) == 6 and len(groups["first_block"]) == 6
    later = {id(m) for m, _ in groups["later_blocks"]}
    assert not later & {id(m) for m, _ in groups["qkv"]} and not later & {id(m) for m, _ in groups["first_block"]}
    assert groups["head"][0][0] is model.cls.predictions.transform.dense


def test_head_pruning_from_cached_encoder_states_equals_the_full_evaluation():
    # prune_bert evaluates head-only pruning from the unpruned encoder's states: the same numbers
    model = mlm.small_bert(vocab_size=50, hidden=16, layers=2, heads=2, intermediate=32, max_length=12, seed=0)
    ids = torch.randint(5, 50, (10, 12), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, mlm.IGNORE)
    labels[:, 2::3] = ids[:, 2::3]
    ids[:, 2::3] = 4
    states = mlm.encoder_states(model, ids, labels, torch.device("cpu"), batch_size=4)
    assert torch.equal(mlm.head_correct(model, states), mlm.token_correct(model, ids, labels, torch.device("cpu"), batch_size=4))
    groups = mlm.prunable_groups(model)
    assert mlm.in_head(model, groups["head"])
    assert not any(mlm.in_head(model, groups[name]) for name in ("later_blocks", "qkv", "first_block"))
    prune_by_magnitude(groups["head"], 0.9)
    pruned_direct = mlm.token_correct(model, ids, labels, torch.device("cpu"), batch_size=4)
    assert torch.equal(mlm.head_correct(model, states), pruned_direct)
    prune_by_magnitude(groups["first_block"], 0.9)  # the encoder changes: cached states no longer apply
    assert not torch.equal(mlm.encoder_states(model, ids, labels, torch.device("cpu"), batch_size=4)[0][0], states[0][0])


def test_later_block_pruning_with_the_first_block_replayed_equals_the_full_evaluation():
    # prune_bert replays the unpruned first block's outputs when only later blocks are pruned
    model = mlm.small_bert(vocab_size=50, hidden=16, layers=3, heads=2, intermediate=32, max_length=12, seed=0)
    ids = torch.randint(5, 50, (10, 12), generator=torch.Generator().manual_seed(0))
    ids[:3, 9:] = 0  # padding
    labels = torch.full_like(ids, mlm.IGNORE)
    labels[:, 2::3] = ids[:, 2::3]
    ids[:, 2::3] = 4
    first_block: list = []
    unpruned = mlm.encoder_states(model, ids, labels, torch.device("cpu"), batch_size=4, first_block_into=first_block)
    assert len(first_block) == 3 and not model.bert.encoder.layer[0]._forward_hooks
    groups = mlm.prunable_groups(model)
    assert mlm.leaves_first_block(model, groups["later_blocks"]) and mlm.leaves_first_block(model, groups["qkv"])
    assert not mlm.leaves_first_block(model, groups["first_block"])
    for group in ("later_blocks", "qkv"):
        pruned = copy.deepcopy(model)
        prune_by_magnitude(mlm.prunable_groups(pruned)[group], 0.7)
        direct = mlm.encoder_states(pruned, ids, labels, torch.device("cpu"), batch_size=4)
        replayed = mlm.encoder_states(pruned, ids, labels, torch.device("cpu"), batch_size=4, first_block_from=first_block)
        assert all(torch.equal(a, b) for (a, _), (b, _) in zip(direct, replayed))
        assert not torch.equal(direct[0][0], unpruned[0][0])
        zeros = mlm.encoder_states(pruned, ids, labels, torch.device("cpu"), batch_size=4,
                                   first_block_from=[torch.zeros_like(output) for output in first_block])
        assert not torch.equal(zeros[0][0], direct[0][0])  # the recorded outputs are what the later blocks read
        assert isinstance(pruned.bert.encoder.layer[0], type(model.bert.encoder.layer[0]))  # the block is put back


def test_predicted_tokens_are_scored_as_the_argmax_scores_them_ties_and_nans_included():
    logits = torch.randn(64, 300, generator=torch.Generator().manual_seed(0))
    targets = torch.randint(300, (64,), generator=torch.Generator().manual_seed(1))
    targets[:20] = logits[:20].argmax(-1)  # right predictions
    logits[20, [5, 7]] = 50.0  # a tie: the argmax takes the first index
    targets[20] = 7
    logits[21, [5, 7]] = 50.0
    targets[21] = 5
    logits[22, 9], targets[22] = float("nan"), 9  # a NaN counts as the largest
    logits[23, 9], targets[23] = float("nan"), 3
    logits[24], logits[24, 0], targets[24] = 0.0, -0.0, 0  # signed zeros tie
    logits[25], logits[25, 0], targets[25] = 0.0, -0.0, 1
    expected = logits.argmax(-1) == targets
    assert expected[[20, 21, 22, 23, 24, 25]].tolist() == [False, True, True, False, True, False]
    assert torch.equal(mlm.predicts_target(logits, targets), expected)


# -- FewRel on the mirror's files ---------------------------------------------------------------


@pytest.fixture
def fewrel_table(mirror):
    from factstore.data import prepare

    relations = json.loads((mirror / "fewrel/val_wiki.json").read_text())
    names = json.loads((mirror / "fewrel/pid2name.json").read_text())
    # the data layer's prepare_fewrel step adds the source (which FewRel file) the same way
    return prepare.fewrel_sentences(relations, names, test_per_relation=70, seed=0).assign(source="fewrel_val_wiki")


def test_fewrel_subsets_take_labels_and_samples_and_keep_test_out_of_training(fewrel_table):
    train, test = fewrel.label_subset(fewrel_table, 4, 100, np.random.default_rng(0))
    assert train.relation.nunique() == 4 and set(test.relation) == set(train.relation)
    assert (train.groupby("relation").size() == 100).all() and (test.groupby("relation").size() == 70).all()
    assert sorted(train.label.unique()) == [0, 1, 2, 3]
    assert (train.split == "train").all() and (test.split == "test").all()
    keys = lambda t: set(zip(t.relation, t.sentence_id))
    assert not keys(train) & keys(test)
    full, _ = fewrel.label_subset(fewrel_table, 16, 630, np.random.default_rng(1))
    assert len(full) == 16 * 630
    with pytest.raises(ValueError):
        fewrel.label_subset(fewrel_table, 17, 10, np.random.default_rng(0))
    with pytest.raises(ValueError):
        fewrel.label_subset(fewrel_table, 4, 631, np.random.default_rng(0))


def test_fewrel_encoding_marks_head_and_tail(fewrel_table, tokenizer):
    train, _ = fewrel.label_subset(fewrel_table, 2, 5, np.random.default_rng(0))
    ids, markers = fewrel.encode(train, tokenizer, max_length=128)
    for row, (head, tail) in zip(ids, markers):
        assert row[0] == tokenizer.cls_token_id
        assert row[head] == fewrel.HEAD_OPEN and row[tail] == fewrel.TAIL_OPEN
        assert (row == fewrel.HEAD_CLOSE).sum() == 1 and (row == fewrel.TAIL_CLOSE).sum() == 1


def test_fine_tuning_depends_on_its_generator_not_on_the_global_random_state():
    """Dropout and the classifier's initialisation are drawn under a seed from the call's own
    generator: a different global state before the call (other fine-tunes run first in the same
    job) changes nothing, and the global state is left as it was."""
    pretrained = mlm.small_bert(40, 16, 2, 2, 32, 12, seed=0, dropout=0.5)
    ids = torch.randint(5, 40, (16, 10), generator=torch.Generator().manual_seed(0))
    data = (ids, torch.tensor([[1, 3]] * 16), torch.arange(16) % 2)

    def fine_tuned_weights(global_seed: int) -> dict[str, torch.Tensor]:
        encoder = one_block(pretrained)
        torch.manual_seed(global_seed)
        before = torch.random.get_rng_state()
        fewrel.fine_tune_diluted(encoder, data, data, 0.5, 2, 6, 4, 1e-2, torch.Generator().manual_seed(7), torch.device("cpu"))
        assert torch.equal(torch.random.get_rng_state(), before)
        return encoder.state_dict()

    first, second = fine_tuned_weights(1), fine_tuned_weights(2)
    assert all(torch.equal(first[name], second[name]) for name in first)


# -- the BERT pipeline on a handful of paragraphs -----------------------------------------------


def one_block(pretrained_mlm) -> torch.nn.Module:
    """A one-block encoder (BertModel) cut from a small random BertForMaskedLM: BERT-1's shape at test size."""
    encoder = copy.deepcopy(pretrained_mlm.bert)
    encoder.encoder.layer = encoder.encoder.layer[:1]
    encoder.config.num_hidden_layers = 1
    return encoder


def test_bert1_is_minilm_cut_to_its_first_block():
    encoder = fewrel.pretrained_one_block()
    assert len(encoder.encoder.layer) == 1 and encoder.config.hidden_size == 384
    assert encoder.embeddings.word_embeddings.num_embeddings == 30522  # MiniLM's WordPiece vocabulary, the markers' rows included


class Context:
    device = torch.device("cpu")
    threads = 1


CORPUS = {"token_budget": 250, "eval_paragraphs": 4, "length": 24, "seed": 0}
MODEL = {"hidden": 16, "layers": 2, "heads": 2, "intermediate": 32, "dropout": 0.1, "batch_size": 4, "learning_rate": 1e-3, "warmup": 1}


@pytest.fixture(scope="module")
def paragraphs(tmp_path_factory):
    words = "the cat sat on a mat while paris is the capital of france and rome of italy".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(5, 60, size=40)]
    path = tmp_path_factory.mktemp("wiki") / "paragraphs.csv"
    pd.DataFrame({"title": range(40), "topic": "", "paragraph": 0, "text": texts, "words": 0}).to_csv(path, index=False)
    return path


class Interrupted(Exception):
    pass


def test_bert_pipeline_pretrains_resumes_from_its_checkpoint_and_prunes(tmp_path, paragraphs, tokenizer, monkeypatch):
    checkpoint = tmp_path / "ckpt.pt"
    params = CORPUS | MODEL | {"subset": "many", "steps": 6, "checkpoint": str(checkpoint), "checkpoint_every": 2}

    saved = mlm.save_atomically

    def save_then_stop(payload, path):
        saved(payload, path)
        if payload["step"] == 4:
            raise Interrupted

    torch.manual_seed(0)  # what the step runner does at a process's start (dropout draws from it)
    uninterrupted = dilution_bert.pretrain(params | {"checkpoint": str(tmp_path / "other.pt")}, {"paragraphs": paragraphs}, Context)
    monkeypatch.setattr(mlm, "save_atomically", save_then_stop)
    torch.manual_seed(0)
    with pytest.raises(Interrupted):
        dilution_bert.pretrain(params, {"paragraphs": paragraphs}, Context)
    assert torch.load(checkpoint, weights_only=True)["step"] == 4
    monkeypatch.setattr(mlm, "save_atomically", saved)
    torch.manual_seed(99)  # a new process, or other work in this one, before the resumption
    out = dilution_bert.pretrain(params, {"paragraphs": paragraphs}, Context)
    assert out["subset"]["resumed_from_step"] == 4 and not checkpoint.exists()
    # the resumed run trained the same weights as the uninterrupted one (batches, optimiser and dropout masks)
    resumed_state, uninterrupted_state = (load_tensors(o["model"])["state"] for o in (out, uninterrupted))
    assert all(torch.equal(resumed_state[name], uninterrupted_state[name]) for name in resumed_state)
    assert out["log"].step.max() == 5 and out["subset"]["tokens"] >= 250
    model_path = tmp_path / "bert.pt"
    model_path.write_bytes(out["model"])

    assert out["subset"]["vocabulary_size"] < 100  # the corpus's ~20 words, not 30,522 rows

    prune_params = CORPUS | {"subset": "many", "groups": ["later_blocks", "qkv", "first_block", "head"], "rates": [0, 0.5, 1.0],
                             "retrain_steps": 1, "batch_size": 4, "learning_rate": 1e-4, "eval_maskings": 3}
    table = dilution_bert.prune_bert(prune_params, {"paragraphs": paragraphs, "model": model_path}, Context)["table"]
    assert len(table) == 12 and table.apt.between(0, 1).all()
    assert np.allclose(table.zero_fraction, table.rate, atol=0.01)  # the re-training kept the masks
    unpruned = table[table.rate == 0]
    assert np.allclose(unpruned.apt, unpruned.apt_unpruned)  # rate 0 is the unpruned model, re-training skipped
    assert (unpruned.drop_standard_error == 0).all() and (table.apt_standard_error > 0).all()
    texts = pd.read_csv(paragraphs)["text"].astype(str).tolist()
    vocabulary, token_ids, split = mlm.tokenized_corpus(texts, CORPUS["token_budget"], CORPUS["eval_paragraphs"], CORPUS["seed"])
    assert (table.masked_tokens == sum(len(token_ids[i]) for i in split["eval"])).all()  # every eval token masked once


def test_fewrel_step_reports_its_split_and_dilutes_the_block(tmp_path, fewrel_table):
    sentences = tmp_path / "fewrel.csv"
    fewrel_table.to_csv(sentences, index=False)
    params = {"sweeps": {"labels": [[2, 5], [3, 5]], "samples": [[2, 5], [2, 7]]}, "rates": [0, 0.8], "seeds": 1, "seed": 0,
              "epochs": 1, "batch_size": 4, "learning_rate": 1e-3, "max_length": 48, "tolerance": 0.05}
    tables = dilution_fewrel.fewrel_dilution(params, {"sentences": sentences}, Context)
    table, samples = tables["labels"], tables["samples"]
    assert len(table) == 4 and set(table.source) == {"fewrel_val_wiki"} and set(table.sweep) == {"labels"}
    # the shared setting (2 x 5) is fine-tuned once and lands in both sweeps' tables, the same rows
    shared = [t[(t.n_labels == 2) & (t.per_label == 5)].drop(columns="sweep").reset_index(drop=True) for t in (table, samples)]
    pd.testing.assert_frame_equal(*shared)
    assert samples.per_label.tolist() == [5, 5, 7, 7] and set(samples.sweep) == {"samples"}
    assert np.allclose(table.zero_fraction, table.rate, atol=0.01)
    assert (table.test_size == table.n_labels * 70).all()
    assert (table.steps == np.ceil(table.train_size / 4)).all()  # one epoch at every training-set size


def test_restricted_embeddings_give_the_same_encoder_outputs():
    model = mlm.small_bert(60, 16, 2, 2, 32, 12, seed=0).eval()
    ids = torch.randint(5, 60, (3, 12))
    ids[0, 8:] = 0  # padding
    encoder = one_block(model).eval()
    before = encoder(input_ids=ids, attention_mask=(ids != 0).long()).last_hidden_state
    cut, (renumbered,) = fewrel.restrict_vocabulary(encoder, ids)
    assert cut.embeddings.word_embeddings.num_embeddings == len(torch.unique(ids))
    assert torch.equal(renumbered == 0, ids == 0)  # [PAD] stays 0
    after = cut(input_ids=renumbered, attention_mask=(renumbered != 0).long()).last_hidden_state
    assert torch.allclose(before, after, atol=1e-6)


# -- claims -------------------------------------------------------------------------------------

CLAIM_IDS = ("S3.cpl-labels", "S3.cpl-data-independent", "S3.bert-prunable")
PASSING = {
    "archetype_labels_spearman": -1.0,
    "fewrel_labels_spearman": -1.0,
    "archetype_samples_kept_ratio": 1.0,
    "bert_subsets_kept_ratio": 1.5,
    "fewrel_samples_kept_ratio": 1.0,
    "bert_later_blocks_max_pruning": 0.95,
    "bert_later_minus_qkv_max_pruning_lower": 0.1,
    "bert_later_minus_first_block_max_pruning_lower": 0.2,
    "archetype_samples_abs_spearman": 0.4,
}
FAILING = {
    "archetype_labels_spearman": 0.5,
    "fewrel_labels_spearman": float("nan"),
    "archetype_samples_kept_ratio": 3.0,
    "bert_subsets_kept_ratio": 2.5,
    "fewrel_samples_kept_ratio": 5.0,
    "bert_later_blocks_max_pruning": 0.3,
    "bert_later_minus_qkv_max_pruning_lower": 0.0,
    "bert_later_minus_first_block_max_pruning_lower": -0.1,
    "archetype_samples_abs_spearman": 0.95,  # max dilution 0.1 / 0.2 / 0.4 / 0.4 at 100-800 samples per label
}


GATES_PASSING = {
    "archetype_cpw_min": 1.3,
    "fewrel_undiluted_test_accuracy_min": 0.9,
    "bert_apt_margin_se": 12.0,
    "bert_apt_standard_error": 0.0028,
    "bert_removal_drop_se": 30.0,
    "bert_first_block_removal_drop_se": 20.0,
    "archetype_samples_unresolved_settings": 0.0,
}
GATES_FAILING = {  # the unigram-stage BERT of the review, FewRel underfit, archetypes at P / W = 0.1
    "archetype_cpw_min": 0.1,
    "fewrel_undiluted_test_accuracy_min": 0.46,
    "bert_apt_margin_se": 3.5,
    "bert_apt_standard_error": 0.006,
    "bert_removal_drop_se": 0.5,
    "bert_first_block_removal_drop_se": 3.5,  # the 'many' BERT barely uses its first block
    "archetype_samples_unresolved_settings": 4.0,  # max dilution 0 at every samples-per-label setting
}


def _claim(claim_id):
    return {c["id"]: c for c in load_registry(REPOSITORY / "config/claims.yaml")}[claim_id]


def _tables(claim, values):
    return {claim["result"]: pd.DataFrame({"metric": list(values), "value": list(values.values()), "detail": ""})}


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_each_claim_check_flips_with_its_metric(claim_id):
    claim = _claim(claim_id)
    assert claim["result"] == "results/dilution/metrics.csv" and claim["checks"]
    passing = PASSING | GATES_PASSING
    assert evaluate_claim(claim, _tables(claim, passing), "paper")["status"] == "PASS"
    for check in claim["checks"]:
        one_off = passing | {check["metric"]: FAILING[check["metric"]]}
        assert evaluate_claim(claim, _tables(claim, one_off), "paper")["status"] == "FAIL", check["metric"]


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_each_gate_makes_its_claim_untestable_whatever_the_checks_give(claim_id):
    claim = _claim(claim_id)
    assert claim["gates"]
    for gate in claim["gates"]:
        for checks in (PASSING, FAILING):
            record = evaluate_claim(claim, _tables(claim, checks | GATES_PASSING | {gate["metric"]: GATES_FAILING[gate["metric"]]}), "paper")
            assert record["status"] == "UNTESTABLE", gate["metric"]
            assert record["gates"][gate["metric"]] == GATES_FAILING[gate["metric"]]
    assert {g["metric"] for g in _claim("S3.cpl-labels")["gates"]} == {"archetype_cpw_min", "fewrel_undiluted_test_accuracy_min"}
    assert {"bert_apt_margin_se", "bert_apt_standard_error", "bert_removal_drop_se"} <= {g["metric"] for g in _claim("S3.bert-prunable")["gates"]}


def _summary_tables(toy_accuracy=lambda sweep, value, rate: 1.0 if rate < 0.9 or value < 8 else 0.5) -> dict[str, pd.DataFrame]:
    """Hand-made archetype, BERT and FewRel tables as the summary reads them."""
    rates = [0.0, 0.5, 0.9, 1.0]
    toy_rows = [{"sweep": sweep, "value": v, "seed": 0, "rate": r, "test_accuracy": toy_accuracy(sweep, v, r),
                 "train_size": (v if sweep == "n_labels" else 4) * (v if sweep == "per_label" else 10), "weights": 20}
                for sweep, values in (("n_labels", [2, 4, 8]), ("per_label", [5, 10])) for v in values for r in rates]
    bert_rows = [{"subset": s, "group": g, "rate": r, "apt": 0.3 if (r < 0.9 or (g == "later_blocks" and r < 1)) else 0.1,
                  "apt_unpruned": 0.3, "most_frequent_apt": 0.06, "margin_standard_error": 0.004 if s == "few" else 0.002,
                  "apt_standard_error": 0.0025 if s == "many" else 0.002, "drop_standard_error": 0.0 if r == 0 else 0.01,
                  "masked_tokens": 14000}
                 for s in ("few", "many") for g in ("later_blocks", "qkv", "first_block", "head") for r in rates]
    fewrel_rows = [{"sweep": sw, "n_labels": n, "per_label": k, "seed": 0, "rate": r, "test_accuracy": 0.8 + 0.01 * n * (r == 0),
                    "source": "fewrel_val_wiki"}
                   for sw, settings in (("labels", [(2, 5), (3, 5), (4, 5)]), ("samples", [(2, 5), (2, 10)])) for n, k in settings for r in rates]
    return {"archetypes_all": pd.DataFrame(toy_rows), "bert_all": pd.DataFrame(bert_rows), "fewrel_all": pd.DataFrame(fewrel_rows)}


def _summary_metrics(tables: dict[str, pd.DataFrame], monkeypatch) -> pd.DataFrame:
    monkeypatch.setattr(dilution_summary, "concat_tables", lambda inputs, prefix: pd.concat([t for n, t in tables.items() if n.startswith(prefix)]))
    return dilution_summary.summary({"archetype_tolerance": 0.02, "bert_tolerance": 0.02, "fewrel_tolerance": 0.05}, {}, Context)["metrics"]


def test_summary_writes_every_metric_the_claims_and_gates_read(monkeypatch):
    table = _summary_metrics(_summary_tables(), monkeypatch)
    metrics = dict(zip(table.metric, table.value))
    claims = [c for c in load_registry(REPOSITORY / "config/claims.yaml") if c["id"] in CLAIM_IDS]
    for check in (check for claim in claims for check in claim["checks"] + claim["gates"]):
        assert check["metric"] in metrics, check["metric"]
    assert metrics["archetype_labels_spearman"] == pytest.approx(-np.sqrt(3) / 2)
    assert metrics["bert_later_blocks_max_pruning"] == 0.9 and metrics["bert_later_minus_qkv_max_pruning"] == pytest.approx(0.4)
    assert metrics["bert_later_minus_qkv_max_pruning_subset_min"] == pytest.approx(0.4)
    assert metrics["bert_first_block_removal_drop_se"] == pytest.approx(20.0)
    assert np.isnan(metrics["fewrel_labels_spearman"])  # flat: no fall, the check fails
    assert metrics["archetype_cpw_min"] == pytest.approx(20 / 20)  # 2 labels x 10 per label over 20 weights
    assert metrics["archetype_samples_unresolved_settings"] == 0  # both sample sizes hold up to 0.5
    assert metrics["bert_apt_margin_se"] == pytest.approx(0.24 / 0.004)  # the worse subset
    assert metrics["bert_apt_standard_error"] == 0.0025 and metrics["bert_removal_drop_se"] == pytest.approx(20.0)
    assert metrics["fewrel_undiluted_test_accuracy_min"] == pytest.approx(0.82)
    assert table.set_index("metric").loc["bert_apt_unpruned_many", "standard_error"] == 0.0025


def test_a_plateau_that_ends_before_the_first_diluted_rate_is_unresolved_not_independent(monkeypatch):
    """Archetypes where every samples-per-label setting falls off at the first diluted rate, so
    the kept ratio reads 1 (0 against 0); the gate makes the claim UNTESTABLE instead of PASS."""
    claim = _claim("S3.cpl-data-independent")
    for drop_at_first_rate, unresolved, status in ((True, 2, "UNTESTABLE"), (False, 0, "PASS")):
        def toy_accuracy(sweep, value, rate):
            return 0.5 if rate >= 0.9 or (drop_at_first_rate and rate > 0 and sweep == "per_label") else 1.0

        metrics = _summary_metrics(_summary_tables(toy_accuracy), monkeypatch)
        values = dict(zip(metrics.metric, metrics.value))
        assert values["archetype_samples_unresolved_settings"] == unresolved and values["archetype_samples_kept_ratio"] == 1.0
        measured = PASSING | GATES_PASSING | {name: values[name] for name in ("archetype_samples_unresolved_settings", "archetype_samples_kept_ratio")}
        assert evaluate_claim(claim, _tables(claim, measured), "paper")["status"] == status


PRUNING_RATES = [0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 1.0]


def _pruning_curves(apts: dict[tuple[str, str], list[float]], drop_se: float = 0.0005) -> pd.DataFrame:
    """Hand-made BERT pruning tables: {(subset, group): APT at each of PRUNING_RATES}, the unpruned
    APT 0.12 (a 2% plateau ends at 0.1176), every drop's paired SE `drop_se`."""
    return pd.DataFrame([{"subset": s, "group": g, "rate": r, "apt": a, "apt_unpruned": 0.12, "most_frequent_apt": 0.06,
                          "margin_standard_error": 0.002, "apt_standard_error": 0.0027,
                          "drop_standard_error": 0.0 if r == 0 else drop_se, "masked_tokens": 14000}
                         for (s, g), curve in apts.items() for r, a in zip(PRUNING_RATES, curve)])


def _holds_to(rate: float, low: float = 0.10) -> list[float]:
    """An APT curve on PRUNING_RATES that keeps 0.12 up to `rate` and reads `low` beyond it."""
    return [0.12 if r <= rate else low for r in PRUNING_RATES]


def _bert_prunable_status(curves: pd.DataFrame) -> str:
    claim = _claim("S3.bert-prunable")
    measured = {name: value for name, value, _ in readings.bert_tolerance_metrics(curves, 0.02)}
    measured |= {name: value for name, value, *_ in readings.bert_gate_metrics(curves)}
    return evaluate_claim(claim, _tables(claim, PASSING | GATES_PASSING | measured), "paper")["status"]


def test_max_dilution_interval_brackets_the_grid_read():
    rates, accuracy = PRUNING_RATES, [0.12, 0.1185, 0.1178, 0.1170, 0.11, 0.10, 0.09]
    low, high = max_dilution_interval(rates, accuracy, [0, 0.0005] + [0.001] * 5, 0.12, 0.02, 1.0)
    assert (low, max_dilution(rates, accuracy, 0.12, 0.02), high) == (0.5, 0.8, 0.9)
    assert max_dilution_interval(rates, accuracy, [0.001] * 7, 0.12, 0.02, 0.0) == (0.8, 0.8)


def test_first_block_gate_makes_the_claim_untestable_when_removing_the_block_hardly_matters():
    """The first block removed costs 'many' 0.0015 APT = 3 paired SE: the gate fails whatever the
    checks give; removed at a cost of 0.02 APT = 40 SE in both subsets, the claim is judged."""
    apts = {(s, "later_blocks"): _holds_to(0.95) for s in ("few", "many")}
    apts |= {(s, "qkv"): _holds_to(0.5) for s in ("few", "many")}
    for many_removed, status in ((0.1185, "UNTESTABLE"), (0.10, "PASS")):
        first = {("few", "first_block"): _holds_to(0.5), ("many", "first_block"): _holds_to(0.5, low=many_removed)}
        curves = _pruning_curves(apts | first)
        gates = {name: value for name, value, *_ in readings.bert_gate_metrics(curves)}
        assert gates["bert_first_block_removal_drop_se"] == pytest.approx((0.12 - many_removed) / 0.0005)
        assert _bert_prunable_status(curves) == status


def test_tolerance_differences_are_read_per_subset_with_an_interval():
    later = {(s, "later_blocks"): _holds_to(0.9) for s in ("few", "many")}
    first = {(s, "first_block"): _holds_to(0.5) for s in ("few", "many")}
    # one subset's Q/K/V fall carries the mean over subsets (0.2), the other shows none: FAIL
    one_subset = _pruning_curves(later | first | {("few", "qkv"): _holds_to(0.9), ("many", "qkv"): _holds_to(0.5)})
    metrics = {name: value for name, value, _ in readings.bert_tolerance_metrics(one_subset, 0.02)}
    assert metrics["bert_later_minus_qkv_max_pruning_subset_min"] == 0.0
    assert metrics["bert_later_minus_qkv_max_pruning_lower"] == 0.0
    assert _bert_prunable_status(one_subset) == "FAIL"
    # Q/K/V end one grid step lower in both subsets, but their APT at 0.9 is half a paired SE under
    # the plateau: the grid difference reads 0.1, the interval's lower end 0: FAIL
    near = [0.12, 0.12, 0.12, 0.1176 - 0.00025, 0.10, 0.10, 0.10]
    within_noise = _pruning_curves(later | first | {(s, "qkv"): near for s in ("few", "many")})
    metrics = {name: value for name, value, _ in readings.bert_tolerance_metrics(within_noise, 0.02)}
    assert metrics["bert_later_minus_qkv_max_pruning_subset_min"] == pytest.approx(0.1)
    assert metrics["bert_later_minus_qkv_max_pruning_lower"] == pytest.approx(0.0)
    assert _bert_prunable_status(within_noise) == "FAIL"
    # Q/K/V fall far below the plateau after 0.5 in both subsets: PASS
    clear = _pruning_curves(later | first | {(s, "qkv"): _holds_to(0.5) for s in ("few", "many")})
    metrics = {name: value for name, value, _ in readings.bert_tolerance_metrics(clear, 0.02)}
    assert metrics["bert_later_minus_qkv_max_pruning_lower"] == pytest.approx(0.4)
    assert _bert_prunable_status(clear) == "PASS"


def test_a_steady_rise_with_samples_per_label_fails_the_trend_check():
    """0.1 / 0.2 / 0.4 / 0.4 at 100-800 samples per label passes the factor-2 kept ratio (1.5) but
    not |Spearman| <= 0.8; a constant or unordered max dilution passes."""
    claim, sizes = _claim("S3.cpl-data-independent"), [100, 200, 400, 800]
    for dilutions, spearman_value, status in (([0.1, 0.2, 0.4, 0.4], 0.9487, "FAIL"), ([0.4, 0.4, 0.4, 0.4], 0.0, "PASS"),
                                              ([0.2, 0.4, 0.1, 0.3], 0.0, "PASS")):
        value = readings.abs_trend_spearman(sizes, dilutions)
        assert value == pytest.approx(spearman_value, abs=1e-4)
        measured = {"archetype_samples_abs_spearman": value, "archetype_samples_kept_ratio": kept_fraction_ratio(dilutions)}
        assert evaluate_claim(claim, _tables(claim, PASSING | GATES_PASSING | measured), "paper")["status"] == status
    assert np.isnan(readings.abs_trend_spearman([100, 200], [0.1, 0.2]))  # two points rank nothing


def test_identical_predictions_are_zero_standard_errors_apart():
    rows = pd.DataFrame([{"subset": "few", "group": "later_blocks", "rate": r, "apt": 0.01, "apt_unpruned": 0.01,
                          "most_frequent_apt": 0.01, "margin_standard_error": 0.0, "apt_standard_error": 0.001,
                          "drop_standard_error": 0.0, "masked_tokens": 100} for r in (0.0, 1.0)])
    metrics = {name: value for name, value, *_ in readings.bert_gate_metrics(rows)}
    assert metrics["bert_removal_drop_se"] == 0.0 and metrics["bert_apt_margin_se"] == 0.0  # the gates fail, not NaN


# -- configs and the smoke run ------------------------------------------------------------------


def test_a_typo_in_the_dilution_section_is_rejected_with_its_path():
    from factstore import config

    settings = yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())
    settings["dilution"]["bert"]["retrain_step"] = 3
    with pytest.raises(config.ConfigError, match="retrain_step"):
        config.validate(settings, source="smoke")


@pytest.mark.workflow
def test_smoke_config_yields_every_dilution_figure(smoke_run):
    """The smoke run of the whole workflow (the session fixture of conftest.py, in a fresh copy of the tree)."""
    from factstore.plots.dilution import FIGURES

    assert_figures(smoke_run / SMOKE_DIR / "figures", "dilution_", FIGURES)
    metrics = pd.read_csv(smoke_run / SMOKE_DIR / "results/dilution/metrics.csv")
    assert {"bert_later_blocks_max_pruning", "archetype_samples_kept_ratio"} <= set(metrics.metric)
    records = {r["id"]: r for r in json.loads((smoke_run / SMOKE_DIR / "results/claims.json").read_text())}
    # judged (PASS / FAIL) or, where a model at smoke size learned too little, UNTESTABLE by its gate
    assert all(records[claim_id]["status"] in {"PASS", "FAIL", "UNTESTABLE"} for claim_id in CLAIM_IDS)
