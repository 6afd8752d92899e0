"""One-line errors for a mistyped device, a GPU run without CUDA, and pairs of config values out of
order."""

from __future__ import annotations

import copy
import json
import sys

import pytest
import torch
import yaml

from factstore import config, device, memory_estimate
from factstore.__main__ import main
from factstore.errors import DeviceUnavailable
from conftest import MIRROR, REPOSITORY, SMOKE, fresh_copy, run

HEBBIAN = {"d": [8], "alphas": [0.1], "seeds": 1, "seed": 0, "chunk_size": 64}


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cpu0", "cuda:", "tpu"])
def test_a_mistyped_device_is_refused_naming_the_accepted_values(monkeypatch, name):
    monkeypatch.setenv("FACTSTORE_DEVICE", name)
    with pytest.raises(DeviceUnavailable, match=rf"FACTSTORE_DEVICE={name} is not a device name: use auto, cpu, cuda or cuda:N"):
        device.select_device()


@pytest.mark.parametrize("name", ["auto", "cpu", "CPU", " cpu "])
def test_accepted_device_names(monkeypatch, name):
    monkeypatch.setenv("FACTSTORE_DEVICE", name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device.select_device().type == "cpu"


def test_a_mistyped_device_is_one_line_from_the_runner(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FACTSTORE_DEVICE", "gpu")
    status = main(["assoc.hebbian", "--params", json.dumps(HEBBIAN), "--output", f"table={tmp_path / 't.csv'}"])
    error = capsys.readouterr().err.strip()
    assert status == 1 and "Traceback" not in error and len(error.splitlines()) == 1, error
    assert "FACTSTORE_DEVICE=gpu" in error and "auto, cpu, cuda or cuda:N" in error
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_request_without_cuda_is_refused():
    asked = dict(environ={}, host_bytes=1e12, cuda_available=False)
    smoke = yaml.safe_load((REPOSITORY / SMOKE).read_text())
    assert "gpu=1" in memory_estimate.workflow_problem(smoke, gpu_resource=1, **asked)
    assert "FACTSTORE_DEVICE=cuda" in memory_estimate.workflow_problem(smoke, **asked | {"environ": {"FACTSTORE_DEVICE": "cuda"}})
    assert memory_estimate.workflow_problem(smoke, gpu_resource=1, **asked | {"environ": {"FACTSTORE_DEVICE": "cpu"}}) is None
    assert memory_estimate.workflow_problem(smoke, gpu_resource=1, **asked | {"cuda_available": True}) is None


@pytest.mark.workflow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch has no CUDA")
def test_the_gpu_profile_without_cuda_stops_the_workflow_in_one_line(tmp_path):
    """A real run (in a copy of the tree; its one target a cheap fetch, had the check not fired)
    stops before any job with one line; a dry run plans as usual."""
    copy = fresh_copy(tmp_path)
    environment = {"FACTSTORE_DEVICE": ""} | ({"FACTSTORE_DATA_MIRROR": str(MIRROR)} if MIRROR else {})
    target = "runs/smoke/data/raw/book_authors.csv"
    done = run(sys.executable, "-m", "snakemake", "--cores", "1", target, "--configfile", SMOKE,
               "--profile", "workflow/profiles/gpu", cwd=copy, extra_env=environment, check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output and not (copy / target).exists()
    line = next(line for line in output.splitlines() if line.startswith("factstore:"))
    assert "gpu=1" in line and "install torch's CUDA build" in line and "drop the GPU profile" in line
    run(sys.executable, "-m", "snakemake", "-n", target, "--configfile", SMOKE, "--profile", "workflow/profiles/gpu",
        cwd=copy, extra_env=environment)


@pytest.fixture
def smoke():
    return yaml.safe_load((REPOSITORY / SMOKE).read_text())


@pytest.mark.parametrize("low, high, values", [
    ("usability.lengths.prefix_min", "usability.lengths.prefix_max", (9, 3)),
    ("usability.lengths.suffix_min", "usability.lengths.suffix_max", (5, 4)),
    ("committee.backprop.beta_start", "committee.backprop.beta_end", (64.0, 1.0)),
    ("committee.multi_output.beta_start", "committee.multi_output.beta_end", (16.0, 2.0)),
    ("attention.search.start", "attention.search.max_size", (4096, 2048)),
])
def test_a_pair_out_of_order_is_named_with_both_values(smoke, low, high, values):
    broken = copy.deepcopy(smoke)
    for path, value in zip((low, high), values):
        *parents, leaf = path.split(".")
        section = broken
        for part in parents:
            section = section[part]
        section[leaf] = value
    with pytest.raises(config.ConfigError) as error:
        config.validate(broken, "smoke.yaml")
    assert f"{low} = {values[0]} is larger than {high} = {values[1]}" in str(error.value)


def test_equal_ends_of_a_pair_are_valid(smoke):
    smoke["usability"]["lengths"].update(prefix_min=4, prefix_max=4)
    config.validate(smoke, "smoke.yaml")


def test_a_fit_range_with_fewer_than_two_sizes_is_refused(smoke):
    smoke["ntk"]["scaling"]["fit_min_train_size"] = max(smoke["ntk"]["scaling"]["train_sizes"])
    with pytest.raises(config.ConfigError, match=r"ntk\.scaling\.fit_min_train_size = \d+ leaves fewer than two"):
        config.validate(smoke, "smoke.yaml")
