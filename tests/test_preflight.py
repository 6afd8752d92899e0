"""The preflight: every rule that runs a step, its estimated memory at a config's sizes against one
node and one GPU, with a one-line refusal naming the key to lower (factstore.preflight)."""

from __future__ import annotations

import copy
import re

import pytest

from conftest import REPOSITORY
from factstore import config as config_module
from factstore import preflight
from factstore.__main__ import main

GB = 1e9


@pytest.fixture(scope="module")
def paper() -> dict:
    return config_module.load(REPOSITORY / "config/paper.yaml")


def test_every_rule_that_runs_a_step_is_listed_with_its_device():
    rules = preflight.workflow_rules(REPOSITORY / "workflow")
    assert rules["usability_standalone"] is True  # a rule inside a config branch, GD methods on the GPU
    assert rules["attention_capacity"] is True and rules["assoc_hebbian"] is False
    assert "all" not in rules and "figures" not in rules  # targets run no step
    rule_files = [path.read_text() for path in (REPOSITORY / "workflow/rules").glob("*.smk") if path.name != "figures.smk"]
    steps = sum(len(re.findall(r"^\s*step\s*=", text, re.MULTILINE)) for text in rule_files)
    figure_rules = sum(len(re.findall(r"^add_figure_rule\(", text, re.MULTILINE)) for text in rule_files)
    assert figure_rules == 8 and rules["ntk_figure"] is False  # made in figures.smk's loop, one per study
    assert len(rules) == steps + figure_rules  # one step per rule


def test_the_default_scale_fits_and_every_estimated_rule_asks_for_what_it_holds(monkeypatch, capsys):
    monkeypatch.chdir(REPOSITORY)
    assert main(["preflight", "--configfile", "config/config.yaml"]) == 0
    shown = capsys.readouterr()
    assert shown.err == ""
    rows = {line.split()[0]: line.split() for line in shown.out.splitlines()[2:]}
    assert set(rows) == set(preflight.workflow_rules(REPOSITORY / "workflow"))
    assert rows["assoc_trained"][-2:] == ["2,000", "yes"] and rows["usability_whitening"][-2:] == ["5,000", "yes"]


def test_the_paper_scale_fits_one_node_and_one_gpu_and_a_smaller_node_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.chdir(REPOSITORY)
    assert main(["preflight", "--configfile", "config/paper.yaml"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["preflight", "--configfile", "config/paper.yaml", "--node-memory-gb", "64"]) == 1
    shown = capsys.readouterr()
    assert shown.err.count("\n") == 1  # usability_whitening's 79,500 MB; assoc_trained's 58,500 fits
    assert "rule usability_whitening asks for 79,500 MB" in shown.err and "lower usability.whitening.ntk_max_width" in shown.err


def test_a_gpu_too_small_is_named_per_rule(paper):
    fits = preflight.rule_fits(paper, preflight.workflow_rules(REPOSITORY / "workflow"))
    over = {fit.rule for fit in fits if any("GPU" in line for line in fit.problems(1e12, 30 * GB))}
    assert over == {"assoc_trained", "usability_whitening"}  # 38 and 52 GB on the GPU at the paper's sizes
    cpu_rule = next(fit for fit in fits if fit.rule == "assoc_hebbian")
    assert cpu_rule.problems(1e12, 1.0) == []  # a rule without a GPU resource is never held to the GPU


def test_raising_the_named_key_makes_a_rule_not_fit_and_lowering_it_fits_again(paper):
    rules = {"assoc_trained": True}
    [before] = preflight.rule_fits(paper, rules)
    assert before.problems(128 * GB, 80 * GB) == []
    raised = copy.deepcopy(paper)
    raised["assoc"]["trained"]["decoupled_d"] = [32, 64, 256]
    [after] = preflight.rule_fits(raised, rules)
    assert after.request_mb > before.request_mb
    node, gpu = after.problems(128 * GB, 80 * GB)
    assert "over the 128 GB of one node" in node and "over the 80 GB of one GPU" in gpu
    assert "lower assoc.trained.decoupled_d" in node and "lower assoc.trained.decoupled_d" in gpu


def test_a_missing_config_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPOSITORY)
    assert main(["preflight", "--configfile", str(tmp_path / "absent.yaml")]) == 2
    shown = capsys.readouterr()
    assert shown.out == "" and shown.err.count("\n") == 1 and "absent.yaml does not exist" in shown.err
