"""No silent nonsense from in-range settings. Adam learning rates (and the
editing target optimisation's) are capped at 1; a capacity search whose every probe fails and a
training that ends far from its target are reported in the job's log, the sidecars and the
claims' notes; the editing v* optimisation stops on a non-finite loss."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest
import torch

from factstore import __main__ as runner
from factstore import claims, claims_report, config, io
from factstore.__main__ import main
from factstore.editing.corpus import templated_corpus
from factstore.editing.protocol import target_residuals
from factstore.errors import ResultWarning
from factstore.search import binary_search_smallest, bracket_search_smallest_together, search_largest
from factstore.training import DivergenceError, warn_if_far_from_target
from conftest import REPOSITORY, SMOKE


def smoke() -> dict:
    return config.load(REPOSITORY / SMOKE)


@pytest.mark.parametrize("section, key", [
    (("attention", "training"), "learning_rate"), (("mlp", "gd"), "learning_rate"),
    (("assoc", "trained"), "learning_rate"), (("editing", "training"), "learning_rate"),
    (("usability", "training"), "learning_rate"), (("editing", "fact_expert"), "learning_rate"),
])
def test_an_adam_learning_rate_above_1_is_refused(section, key):
    edited = smoke()
    edited[section[0]][section[1]][key] = 10
    with pytest.raises(config.ConfigError, match=rf"{'.'.join(section)}\.{key} = 10: must be <= 1"):
        config.validate(edited)
    edited[section[0]][section[1]][key] = 1.0
    config.validate(edited)


def test_the_editing_target_learning_rate_is_capped():
    edited = smoke()
    edited["editing"]["grid"]["target_learning_rate"] = [0.5, 1e30]
    with pytest.raises(config.ConfigError, match=r"editing\.grid\.target_learning_rate\[1\] = 1e\+30: must be <= 1"):
        config.validate(edited)


def test_a_search_whose_every_probe_fails_warns_and_one_that_passes_does_not():
    with pytest.warns(ResultWarning, match="every probe of a capacity search failed the target 1"):
        answer, probes = binary_search_smallest(lambda width: 0.5, 1.0, 1, 64)
    assert answer is None and probes == {64: 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultWarning)
        assert binary_search_smallest(lambda width: float(width >= 9), 1.0, 1, 64)[0] == 9
    with pytest.warns(ResultWarning):
        outcomes = bracket_search_smallest_together(lambda probes: [0.0] * len(probes), 1.0, [4, 8], high=32)
    assert [answer for answer, _ in outcomes] == [None, None]
    with pytest.warns(ResultWarning, match="capacity 0"):
        assert search_largest(lambda sizes: [0.0] * len(sizes), start=4).capacity == 0


def test_a_training_far_from_its_target_warns():
    with pytest.warns(ResultWarning, match="far from its target 0.99"):
        assert warn_if_far_from_target(0.62, 0.99, where="a run")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultWarning)
        assert not warn_if_far_from_target(0.95, 0.99, where="a run")
    with pytest.warns(ResultWarning):
        warn_if_far_from_target(math.nan, 0.99, where="a run")


def test_the_runner_logs_a_result_warning_and_keeps_it_in_the_sidecars(tmp_path, capsys, monkeypatch):
    def searching(params, inputs, context):
        binary_search_smallest(lambda width: 0.0, 1.0, 1, 8)
        return {"table": pd.DataFrame({"a": [1]})}

    monkeypatch.setattr(runner, "resolve_step", lambda name: searching)
    target = tmp_path / "study" / "capacity.csv"
    assert main(["study.capacity", "--output", f"table={target}"]) == 0
    err = capsys.readouterr().err
    assert "factstore: warning: step study.capacity: every probe of a capacity search failed" in err
    assert io.read_json(io.sidecar_path(target))["warnings"][0].startswith("every probe")
    metrics = tmp_path / "study" / "metrics.csv"
    pd.DataFrame({"metric": ["capacity"], "value": [3.0], "detail": [""]}).to_csv(metrics, index=False)
    assert claims.study_warnings(metrics) == io.read_json(io.sidecar_path(target))["warnings"]


def test_the_claims_note_carries_the_study_warnings(tmp_path):
    metrics = tmp_path / "metrics.csv"
    pd.DataFrame({"metric": ["capacity"], "value": [3.0], "detail": [""]}).to_csv(metrics, index=False)
    claim = {"id": "X1", "work": "w", "statement": "s", "scale": "any", "result": metrics.as_posix(),
             "checks": [{"metric": "capacity", "min": 1}]}
    clean, = claims.evaluate([claim], {metrics.as_posix(): metrics}, "smoke")
    warned, = claims.evaluate([claim], {metrics.as_posix(): metrics}, "smoke",
                              warnings={metrics.as_posix(): ["every probe failed"]})
    assert clean["status"] == warned["status"] == "PASS" and "WARNING" not in clean["note"]
    assert "WARNING (1 in this study's logs): every probe failed" in warned["note"]
    assert "WARNING" in claims_report.markdown([warned])


def test_the_target_optimisation_stops_on_a_non_finite_loss():
    from test_editing import N_FACTS, toy_model

    model, vocabulary = toy_model()
    with torch.no_grad():
        model.logit_log_gain.fill_(math.nan)
    corpus = templated_corpus(vocabulary, torch.arange(N_FACTS), torch.arange(4), [0])
    with pytest.raises(DivergenceError, match=r"editing.target_residuals\(learning_rate=0.5\).*step 0"):
        target_residuals(model, corpus, steps=3, learning_rate=0.5)
