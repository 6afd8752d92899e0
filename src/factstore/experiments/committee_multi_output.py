"""The committee study's many-outputs step: `committee_multi_output.multi_output` (an N -> H -> O
net trained by back-propagation through the whole anneal, for every O, beside the floor of a
random hidden layer with fitted output perceptrons on the same patterns)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from factstore.committee import multi_output as many, patterns
from factstore.device import derived_generator


def multi_output(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """Saturated training accuracy of an N -> H -> O net on P random patterns, for every O, and the
    floor (committee.multi_output.random_hidden_floor) on the same patterns and labels.

    params: n, hidden, patterns, outputs (list), instances, seed, max_epochs, patience,
    learning_rate, beta_start, beta_end.
    """
    rows = []
    n, hidden, p = params["n"], params["hidden"], params["patterns"]
    for outputs in tqdm(params["outputs"], desc="multi_output", mininterval=5):
        generator = derived_generator(params["seed"], "multi_output", outputs)
        counts = [p] * params["instances"]
        x, y, _ = patterns.load_batch(counts, n, generator, n_outputs=outputs, device=context.device)
        weights = many.initial_weights(params["instances"], n, hidden, outputs, generator, context.device)
        result = many.train_through_anneal(
            weights, x, y, max_epochs=params["max_epochs"], learning_rate=params["learning_rate"],
            beta_start=params["beta_start"], beta_end=params["beta_end"], patience=params["patience"],
        )
        floor = many.random_hidden_floor(x, y, hidden, derived_generator(params["seed"], "multi_output_floor", outputs))
        w = many.weight_count(n, hidden, outputs)
        for instance, (accuracy, label_accuracy, floor_accuracy) in enumerate(zip(
                result.accuracy.cpu().tolist(), result.label_accuracy.cpu().tolist(), floor.cpu().tolist())):
            rows.append({
                "outputs": outputs, "n": n, "hidden": hidden, "patterns": p, "weights": w, "instance": instance,
                "accuracy": accuracy, "above_chance": accuracy - 0.5, "floor_above_chance": floor_accuracy - 0.5,
                "label_accuracy": label_accuracy,
                "epochs": result.epochs, "saturated_at": result.saturated_at, "saturated": result.saturated,
                "bits_per_weight": many.stored_bits_per_weight(accuracy, p, outputs, w),
            })
    return {"table": pd.DataFrame(rows)}
