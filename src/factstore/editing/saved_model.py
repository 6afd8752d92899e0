"""The trained language model of the editing study as plain data and back: what the train step
writes and the edit steps read (no pickled objects, so it loads with weights_only=True)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pandas as pd
import torch

from factstore.editing.model import FactLanguageModel
from factstore.editing.vocabulary import FactVocabulary
from factstore.io import load_tensors
from factstore.mlp import serialisation


def model_bytes(model: FactLanguageModel, options: dict, vocabulary: FactVocabulary, facts: pd.DataFrame) -> bytes:
    """The trained language model as plain data (no pickled objects, so `load_trained` reads it
    with weights_only=True): its state dict, its fact expert's structure (mlp.serialisation), its
    constructor options, the vocabulary's fields and the facts' columns."""
    buffer = io.BytesIO()
    torch.save({"state": model.state_dict(), "expert": serialisation.describe(model.fact_expert), "options": dict(options),
                "vocabulary": dataclasses.asdict(vocabulary), "facts": facts.to_dict("list")}, buffer)
    return buffer.getvalue()


def load_trained(path: Path, device) -> dict:
    """{"model", "vocabulary", "facts"} of `model_bytes`; a file holding anything but tensors and
    plain data is refused (torch's UnpicklingError, reported by the runner as unsafe)."""
    saved = load_tensors(path)
    state = saved["state"]
    expert = serialisation.skeleton(saved["expert"])
    model = FactLanguageModel(state["embedding.weight"], expert, mlp_input_scale=1.0, **saved["options"])
    model.load_state_dict(state, strict=True)
    return {"model": model.to(device).eval(), "vocabulary": FactVocabulary(**saved["vocabulary"]),
            "facts": pd.DataFrame(saved["facts"])}
