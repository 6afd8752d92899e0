"""Experiment step of the capacity-per-label (dilution) study (S3, second half): BERT-1
(MiniLM's embeddings and first block) fine-tuned on FewRel at increasing dilution rates.

The rule dilution_fewrel in workflow/rules/dilution.smk calls it through
`python -m factstore dilution_fewrel.fewrel_dilution`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from factstore.device import derived_generator
from factstore.dilution import fewrel, mlm
from factstore.dilution.pruning import search_plateau_end
from factstore.io import read_table
from factstore.training import steps_for_epochs


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
