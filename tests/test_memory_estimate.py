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
    from factstore import assoc

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
