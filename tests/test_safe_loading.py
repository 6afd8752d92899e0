"""No pickle anywhere: saved models and checkpoints hold only tensors and plain
data, load with torch.load(weights_only=True), and a planted `__reduce__` payload is refused with
UnsafeFile naming the file, before it runs."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest
import torch

from factstore import io
from factstore.__main__ import main
from factstore.errors import UnsafeFile
from factstore.editing.saved_model import load_trained, model_bytes
from factstore.mlp import serialisation
from factstore.mlp.modules import EncoderDecoderMLP, GatedMLP, LinearMemory, PlainMLP
from conftest import REPOSITORY


class Payload:
    """What an attacker places in results/: unpickling it calls os.system."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def planted(path, marker) -> None:
    torch.save({"state": {"w": torch.zeros(2)}, "step": 4, "extra": Payload(marker)}, path)


def test_a_planted_checkpoint_is_refused_by_name_and_never_runs(tmp_path):
    checkpoint, marker = tmp_path / "ckpt.pt", tmp_path / "ran"
    planted(checkpoint, marker)
    with pytest.raises(UnsafeFile, match=re.escape(str(checkpoint))):
        io.load_tensors(checkpoint)
    assert not marker.exists()


def test_plain_tensors_and_containers_load(tmp_path):
    saved = {"state": {"w": torch.arange(3.0)}, "log": [{"step": 1, "loss": 0.5}], "pieces": ((torch.ones(1),),)}
    torch.save(saved, tmp_path / "ok.pt")
    loaded = io.load_tensors(tmp_path / "ok.pt")
    assert torch.equal(loaded["state"]["w"], saved["state"]["w"]) and loaded["log"] == saved["log"]


def test_the_runner_reports_a_planted_editing_model_in_one_line_exit_1(tmp_path, capsys):
    model, marker = tmp_path / "model.pt", tmp_path / "ran"
    planted(model, marker)
    outputs = ["--output", f"edits={tmp_path / 'edits.csv'}", "--output", f"grid={tmp_path / 'grid.csv'}"]
    status = main(["editing.edit", "--params", json.dumps({"seed": 0, "fraction": 0.1}),
                   "--input", f"model={model}", *outputs])
    error = capsys.readouterr().err.strip()
    assert status == 1 and len(error.splitlines()) == 1
    assert "editing.edit" in error and str(model) in error and "pickled" in error
    assert not marker.exists() and not (tmp_path / "edits.csv").exists()


@pytest.mark.parametrize("build", [
    lambda: GatedMLP(5, 7, 3, "silu", dtype=torch.float32),
    lambda: PlainMLP(5, 7, 3, "hermite", degree=2, bias=True),
    lambda: LinearMemory(torch.randn(3, 5, dtype=torch.float64)),
    lambda: EncoderDecoderMLP(GatedMLP(5, 7, 4, bias=True), torch.randn(3, 4, dtype=torch.float64)),
], ids=["gated", "plain", "linear", "encoder_decoder"])
def test_every_expert_module_rebuilds_from_plain_data(build, tmp_path):
    torch.manual_seed(0)
    module = build()
    torch.save({"expert": serialisation.describe(module), "state": module.state_dict()}, tmp_path / "m.pt")
    saved = io.load_tensors(tmp_path / "m.pt")
    rebuilt = serialisation.rebuild(saved["expert"], saved["state"])
    x = torch.randn(4, 5, dtype=next(module.parameters()).dtype)
    assert type(rebuilt) is type(module) and torch.equal(rebuilt(x), module(x))


def test_the_editing_model_round_trips_without_pickle(tmp_path):
    from test_editing import toy_model

    model, vocabulary = toy_model()
    facts = pd.DataFrame({"book": [f"b{i}" for i in range(12)], "author": [f"a{i}" for i in range(12)]})
    path = tmp_path / "model.pt"
    path.write_bytes(model_bytes(model.eval(), {"rank": 2, "projection_hidden": 8, "router_hidden": 4}, vocabulary, facts))
    loaded = load_trained(path, "cpu")
    tokens = torch.randint(0, len(vocabulary.tokenizer_ids), (3, 6), generator=torch.Generator().manual_seed(0))
    for got, want in zip(loaded["model"](tokens), model(tokens)):
        assert torch.equal(got, want)
    assert loaded["facts"].equals(facts) and torch.equal(loaded["vocabulary"].book_tokens, vocabulary.book_tokens)
    assert loaded["vocabulary"].template_pieces[1][1].tolist() == vocabulary.template_pieces[1][1].tolist()


def test_no_source_file_unpickles():
    unsafe = re.compile(r"weights_only\s*=\s*False|pickle\.loads?\(|allow_pickle\s*=\s*True")
    offenders = [f"{path.relative_to(REPOSITORY)}:{number}"
                 for path in sorted((REPOSITORY / "src").rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1) if unsafe.search(line)]
    assert offenders == []
    calls = [f"{path.relative_to(REPOSITORY)}" for path in sorted((REPOSITORY / "src").rglob("*.py"))
             if re.search(r"torch\.load\((?![^)]*weights_only=True)", path.read_text())]
    assert calls == [], "every torch.load passes weights_only=True"
