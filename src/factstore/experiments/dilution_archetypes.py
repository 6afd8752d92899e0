"""Experiment step of the capacity-per-label (dilution) study (S3, second half): the archetype toy model.

The rule dilution_archetypes in workflow/rules/dilution.smk calls it through
`python -m factstore dilution_archetypes.archetypes`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from factstore.device import derived_generator
from factstore.dilution import archetypes as toy
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
