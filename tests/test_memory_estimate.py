"""Memory estimates of each study's dominant allocations, and the workflow-start refusal of sizes
whose memory cannot fit (factstore.memory_estimate)."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from factstore import memory_estimate
from conftest import REPOSITORY

LAPTOP = 16e9


def load(name: str) -> dict:
    return yaml.safe_load((REPOSITORY / name).read_text())


@pytest.mark.parametrize("name", ["config/smoke.yaml", "config/config.yaml"])
def test_the_shipped_laptop_configs_fit_a_16_gb_laptop(name):
    config = load(name)
    assert memory_estimate.workflow_problem(config, environ={}, host_bytes=LAPTOP, cuda_available=False) is None
    assert max(term.bytes for term in memory_estimate.peak_terms(config)) < LAPTOP / 4


def test_the_paper_config_has_a_peak_per_study():
    peaks = memory_estimate.peak_per_study(load("config/paper.yaml"))
    assert {"assoc", "ntk", "attention", "committee", "mlp", "editing", "usability"} <= set(peaks)
    assert all(term.bytes > 0 and term.key for term in peaks.values())


def test_a_huge_size_is_refused_naming_its_key():
    config = load("config/smoke.yaml")
    config["assoc"]["trained"]["decoupled_d"] = [512]
    message = memory_estimate.workflow_problem(config, environ={}, host_bytes=LAPTOP, cuda_available=False)
    assert message.startswith("factstore: assoc.trained.decoupled_d = 512 needs about ")
    assert "(host has 16 GB): lower assoc.trained.decoupled_d" in message and "\n" not in message


def test_a_size_that_fits_the_host_but_not_the_gpu_is_refused_on_cuda():
    config = load("config/smoke.yaml")
    config["ntk"]["convergence"]["widths"] = [64, 2**24]
    kwargs = dict(environ={}, host_bytes=1e12, gpu_bytes=16e9)
    assert "(GPU has 16 GB): lower ntk.convergence.widths" in memory_estimate.workflow_problem(config, cuda_available=True, **kwargs)
    assert memory_estimate.workflow_problem(config, cuda_available=False, **kwargs) is None


@given(st.integers(16, 4096), st.integers(1, 4))
def test_the_estimate_grows_with_the_size(d, factor):
    config = load("config/smoke.yaml")
    small, large = copy.deepcopy(config), copy.deepcopy(config)
    small["assoc"]["trained"]["decoupled_d"] = [d]
    large["assoc"]["trained"]["decoupled_d"] = [d * (factor + 1)]
    small["ntk"]["convergence"]["widths"] = [d]
    large["ntk"]["convergence"]["widths"] = [d * (factor + 1)]
    for key in ("trained.decoupled_d", "convergence.widths"):
        before, after = (next(t for t in memory_estimate.peak_terms(c) if t.key == key) for c in (small, large))
        assert after.bytes > before.bytes, key


def test_facts_for_load_matches_the_assoc_module():
    from factstore.assoc import memory as assoc

    for alpha, d in [(0.1, 16), (1.5, 128), (1.5, 1024), (0.02, 32)]:
        assert abs(memory_estimate.facts_for_load(alpha, d) - assoc.facts_for_load(alpha, d)) <= 1


def test_the_usability_whitening_estimate_is_one_batch_not_every_probe():
    """The whitening step holds one batch of probes: its estimate grows with runs_per_batch and the
    width cap, and not with the number of probes (alphas x seeds x methods)."""
    config = load("config/paper.yaml")
    term = memory_estimate.peak_per_study(config)["usability"]
    assert term.key == "whitening.ntk_max_width" and term.value == config["usability"]["whitening"]["ntk_max_width"]
    more_probes, larger_batch = copy.deepcopy(config), copy.deepcopy(config)
    more_probes["usability"]["whitening"]["alphas"] = [i / 20 for i in range(21)]
    more_probes["usability"]["whitening"]["seeds"] = 16
    larger_batch["usability"]["runs_per_batch"] = 2 * config["usability"]["runs_per_batch"]
    estimate = lambda c: memory_estimate.peak_per_study(c)["usability"].bytes  # noqa: E731
    assert estimate(more_probes) == estimate(config) < estimate(larger_batch)
    config["usability"]["whitening"]["ntk_max_width"] = 2**24
    message = memory_estimate.workflow_problem(config, environ={}, host_bytes=LAPTOP, cuda_available=False)
    assert message.startswith("factstore: usability.whitening.ntk_max_width = 16777216 needs about ")


RULES = REPOSITORY / "workflow/rules"
PROFILE = REPOSITORY / "workflow/profiles/slurm/config.yaml"
NODE_MB = 128_000  # the node memory workflow/profiles/slurm/config.yaml's comment assumes


def estimated_rules(config: dict) -> set[str]:
    return {rule for term in memory_estimate.peak_terms(config) for rule in term.rules}


@given(st.integers(16, 2048), st.integers(1, 4))
def test_a_request_grows_with_the_knob_of_its_term(width, factor):
    """memory_request_mb never shrinks as the size its term reads grows, and grows once the term
    dominates the floor."""
    config = load("config/smoke.yaml")
    requests = []
    for scale in (1, factor + 1, 64 * (factor + 1)):
        sized = copy.deepcopy(config)
        sized["ntk"]["convergence"]["widths"] = [width * scale * 64]
        requests.append(memory_estimate.memory_request_mb(sized, "ntk_convergence"))
    assert requests[0] <= requests[1] < requests[2]
    assert all(request % memory_estimate.REQUEST_STEP_MB == 0 and request >= memory_estimate.FLOOR_MB
               for request in requests)


def test_a_request_covers_baseline_and_factor_times_the_largest_term():
    config = load("config/paper.yaml")
    for rule in estimated_rules(config):
        largest = max(term.bytes for term in memory_estimate.rule_terms(config, rule)) / 1e6
        request = memory_estimate.memory_request_mb(config, rule)
        needed = memory_estimate.BASELINE_MB + memory_estimate.SAFETY_FACTOR * largest
        assert needed <= request < max(needed, memory_estimate.FLOOR_MB) + memory_estimate.REQUEST_STEP_MB, rule


def test_a_rule_without_a_term_has_no_request():
    config = load("config/paper.yaml")
    assert memory_estimate.memory_request_mb(config, "assoc_summary") is None
    assert memory_estimate.memory_request_mb(config, "dilution_pretrain") is None
    no_decoupled = copy.deepcopy(config)
    no_decoupled["assoc"]["trained"]["decoupled_d"] = []
    assert memory_estimate.memory_request_mb(no_decoupled, "assoc_trained") < memory_estimate.memory_request_mb(config, "assoc_trained")


def test_every_term_names_rules_of_the_workflow_and_those_rules_declare_the_request():
    """Each term's rules exist in workflow/rules/*.smk and declare mem_mb=memory_request("rule");
    the SLURM profile does not override those requests."""
    text = "\n".join(path.read_text() for path in RULES.glob("*.smk"))
    rules = estimated_rules(load("config/paper.yaml"))
    assert rules >= {"assoc_trained", "assoc_rank", "ntk_convergence", "ntk_training", "ntk_scaling", "attention_capacity",
                     "committee_multi_output", "editing_train", "usability_whitening", "mlp_capacity"}
    for rule in rules:
        assert f"rule {rule}:" in text, rule
        assert f'mem_mb=memory_request("{rule}")' in text, rule
    set_resources = yaml.safe_load(PROFILE.read_text())["set-resources"]
    assert not [rule for rule in rules if "mem_mb" in set_resources.get(rule, {})]


def test_smoke_requests_fit_the_ci_slurm_node_and_paper_requests_fit_the_assumed_node():
    """Smoke scale: at most the profile's default (16,000 MB, under the 65,536 MB node of .ci/slurm).
    Paper scale: every request under the 128 GB node the profile assumes (its comment says so)."""
    smoke, paper = load("config/smoke.yaml"), load("config/paper.yaml")
    default = yaml.safe_load(PROFILE.read_text())["default-resources"]["mem_mb"]
    assert default == 16000
    assert all(memory_estimate.memory_request_mb(smoke, rule) <= default for rule in estimated_rules(smoke))
    assert all(memory_estimate.memory_request_mb(paper, rule) <= NODE_MB for rule in estimated_rules(paper))
    comments = "\n".join(line for line in PROFILE.read_text().splitlines() if line.lstrip().startswith("#"))
    assert "128 GB" in comments and "preflight" in comments


def test_the_decoupled_term_holds_one_load_at_a_time():
    """The step frees each load's problem before drawing the next: only the largest load counts."""
    config = load("config/config.yaml")
    term = next(t for t in memory_estimate.peak_terms(config) if t.key == "trained.decoupled_d")
    alone = copy.deepcopy(config)
    alone["assoc"]["trained"]["alphas"] = [max(config["assoc"]["trained"]["alphas"])]
    single = next(t for t in memory_estimate.peak_terms(alone) if t.key == "trained.decoupled_d")
    assert single.bytes == term.bytes
