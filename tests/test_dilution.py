"""Capacity per label (dilution study, SPEC S3 second half): archetype statistics, pruning masks
that stay applied, BERT's MLM masking, the FewRel loader on the mirror's files, the BERT pipeline
on a handful of paragraphs (checkpoint and resume included), the claim checks, the smoke figures."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from torch import nn

from conftest import REPOSITORY, assert_figures
from factstore.claims import evaluate_claim, load_registry
from factstore.dilution import archetypes as toy
from factstore.dilution import fewrel, mlm
from factstore.dilution.pruning import kept_fraction_ratio, max_dilution, prune_by_magnitude, zero_fraction
from factstore.experiments import dilution as steps


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
    runs = toy.train_diluted(train, test, rates, hidden=8, depth=2, epochs=3, learning_rate=0.05, batch_size=16, generator=generator)
    assert [run.rate for run in runs] == rates
    for run in runs:
        assert abs(run.zero_fraction - run.rate) < 0.01
        assert 0 <= run.test_accuracy <= 1
    assert runs[0].train_accuracy > 0.5  # the undiluted net learns


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


@pytest.fixture(scope="module")
def tokenizer():
    try:
        return mlm.wordpiece_tokenizer()
    except ImportError as error:
        pytest.skip(f"offline tokenizer unavailable: {error}")


def test_fewrel_encoding_marks_head_and_tail(fewrel_table, tokenizer):
    train, _ = fewrel.label_subset(fewrel_table, 2, 5, np.random.default_rng(0))
    ids, markers = fewrel.encode(train, tokenizer, max_length=128)
    for row, (head, tail) in zip(ids, markers):
        assert row[0] == tokenizer.cls_token_id
        assert row[head] == fewrel.HEAD_OPEN and row[tail] == fewrel.TAIL_OPEN
        assert (row == fewrel.HEAD_CLOSE).sum() == 1 and (row == fewrel.TAIL_CLOSE).sum() == 1


# -- the BERT pipeline on a handful of paragraphs -----------------------------------------------


class Context:
    device = torch.device("cpu")
    threads = 1


CORPUS = {"token_budget": 250, "eval_paragraphs": 4, "length": 24, "seed": 0}
MODEL = {"hidden": 16, "layers": 2, "heads": 2, "intermediate": 32, "batch_size": 4, "learning_rate": 1e-3, "warmup": 1}


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

    monkeypatch.setattr(mlm, "save_atomically", save_then_stop)
    with pytest.raises(Interrupted):
        steps.pretrain(params, {"paragraphs": paragraphs}, Context)
    assert torch.load(checkpoint, weights_only=True)["step"] == 4
    monkeypatch.setattr(mlm, "save_atomically", saved)
    out = steps.pretrain(params, {"paragraphs": paragraphs}, Context)
    assert out["subset"]["resumed_from_step"] == 4 and not checkpoint.exists()
    assert out["log"].step.max() == 5 and out["subset"]["tokens"] >= 250
    model_path = tmp_path / "bert.pt"
    model_path.write_bytes(out["model"])

    prune_params = CORPUS | {"subset": "many", "groups": ["later_blocks", "qkv", "first_block", "head"], "rates": [0, 0.5, 0.9],
                             "retrain_steps": 1, "batch_size": 4, "learning_rate": 1e-4}
    table = steps.prune_bert(prune_params, {"paragraphs": paragraphs, "model": model_path}, Context)["table"]
    assert len(table) == 12 and table.apt.between(0, 1).all()
    assert np.allclose(table.zero_fraction, table.rate, atol=0.01)  # the re-training kept the masks
    unpruned = table[table.rate == 0]
    assert np.allclose(unpruned.apt, unpruned.apt_unpruned)  # rate 0 is the unpruned model, re-training skipped


def test_fewrel_step_reports_its_split_and_dilutes_the_block(tmp_path, fewrel_table, tokenizer):
    model = mlm.small_bert(tokenizer.vocab_size, 16, 2, 2, 32, 48, seed=0)
    path = tmp_path / "bert.pt"
    path.write_bytes(mlm.state_bytes(mlm.model_payload(model)))
    sentences = tmp_path / "fewrel.csv"
    fewrel_table.to_csv(sentences, index=False)
    params = {"sweep": "labels", "settings": [[2, 5], [3, 5]], "rates": [0, 0.8], "seeds": 1, "seed": 0, "steps": 2,
              "batch_size": 4, "learning_rate": 1e-3, "max_length": 48}
    table = steps.fewrel_dilution(params, {"model": path, "sentences": sentences}, Context)["table"]
    assert len(table) == 4 and set(table.source) == {"fewrel_val_wiki"}
    assert np.allclose(table.zero_fraction, table.rate, atol=0.01)
    assert (table.test_size == table.n_labels * 70).all()


# -- claims -------------------------------------------------------------------------------------

CLAIM_IDS = ("S3.cpl-labels", "S3.cpl-data-independent", "S3.bert-prunable")
PASSING = {
    "archetype_labels_spearman": -1.0,
    "fewrel_labels_spearman": -1.0,
    "archetype_samples_kept_ratio": 1.0,
    "bert_subsets_kept_ratio": 1.5,
    "fewrel_samples_kept_ratio": 1.0,
    "bert_later_blocks_max_pruning": 0.95,
    "bert_later_minus_qkv_max_pruning": 0.1,
    "bert_later_minus_first_block_max_pruning": 0.2,
}
FAILING = {
    "archetype_labels_spearman": 0.5,
    "fewrel_labels_spearman": float("nan"),
    "archetype_samples_kept_ratio": 3.0,
    "bert_subsets_kept_ratio": 2.5,
    "fewrel_samples_kept_ratio": 5.0,
    "bert_later_blocks_max_pruning": 0.3,
    "bert_later_minus_qkv_max_pruning": 0.0,
    "bert_later_minus_first_block_max_pruning": -0.1,
}


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_each_claim_check_flips_with_its_metric(claim_id):
    claim = {c["id"]: c for c in load_registry(REPOSITORY / "config/claims.yaml")}[claim_id]
    assert claim["result"] == "results/dilution/metrics.csv" and claim["checks"]
    table = lambda values: {claim["result"]: pd.DataFrame({"metric": list(values), "value": list(values.values()), "detail": ""})}
    assert evaluate_claim(claim, table(PASSING), "paper")["status"] == "PASS"
    for check in claim["checks"]:
        one_off = PASSING | {check["metric"]: FAILING[check["metric"]]}
        assert evaluate_claim(claim, table(one_off), "paper")["status"] == "FAIL", check["metric"]


def test_summary_writes_every_metric_the_claims_read():
    rates = [0.0, 0.5, 0.9]
    toy_rows = [{"sweep": sweep, "value": v, "seed": 0, "rate": r, "test_accuracy": 1.0 if r < 0.9 or v < 8 else 0.5}
                for sweep, values in (("n_labels", [2, 4, 8]), ("per_label", [5, 10])) for v in values for r in rates]
    bert_rows = [{"subset": s, "group": g, "rate": r, "apt": 0.3 if (r < 0.9 or g == "later_blocks") else 0.1, "apt_unpruned": 0.3}
                 for s in ("few", "many") for g in ("later_blocks", "qkv", "first_block", "head") for r in rates]
    fewrel_rows = [{"sweep": sw, "n_labels": n, "per_label": k, "seed": 0, "rate": r, "test_accuracy": 0.8, "source": "fewrel_val_wiki"}
                   for sw, settings in (("labels", [(2, 5), (3, 5), (4, 5)]), ("samples", [(2, 5), (2, 10)])) for n, k in settings for r in rates]
    tables = {"archetypes_all": pd.DataFrame(toy_rows), "bert_all": pd.DataFrame(bert_rows), "fewrel_all": pd.DataFrame(fewrel_rows)}
    import factstore.experiments.dilution as module

    original = module.concat_tables
    module.concat_tables = lambda inputs, prefix: pd.concat([t for n, t in tables.items() if n.startswith(prefix)])
    try:
        out = steps.summary({"archetype_tolerance": 0.02, "bert_tolerance": 0.02, "fewrel_tolerance": 0.05}, {}, Context)
    finally:
        module.concat_tables = original
    metrics = dict(zip(out["metrics"].metric, out["metrics"].value))
    claims = [c for c in load_registry(REPOSITORY / "config/claims.yaml") if c["id"] in CLAIM_IDS]
    for check in (check for claim in claims for check in claim["checks"]):
        assert check["metric"] in metrics, check["metric"]
    assert metrics["archetype_labels_spearman"] == pytest.approx(-np.sqrt(3) / 2)
    assert metrics["bert_later_blocks_max_pruning"] == 0.9 and metrics["bert_later_minus_qkv_max_pruning"] == pytest.approx(0.4)
    assert np.isnan(metrics["fewrel_labels_spearman"])  # flat: no fall, the check fails


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

    assert_figures(smoke_run / "figures", "dilution_", FIGURES)
    metrics = pd.read_csv(smoke_run / "results/dilution/metrics.csv")
    assert {"bert_later_blocks_max_pruning", "archetype_samples_kept_ratio"} <= set(metrics.metric)
    records = {r["id"]: r for r in json.loads((smoke_run / "results/claims.json").read_text())}
    assert all(records[claim_id]["status"] in {"PASS", "FAIL"} for claim_id in CLAIM_IDS)
