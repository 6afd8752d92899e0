"""The pinned CPU kernel path: a step computes the same bytes on a host with AVX-512 as on a host
with AVX2 alone, and the pin leaves a user's own settings alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from factstore.kernel_path import AVX2_ONLY_HOST, AVX2_PATH, OPT_OUT, kernel_path_record, pin_cpu_kernels
from conftest import SMOKE_DIR, run

# One of each kind of computation the verdicts rest on: a gated-GD width search (Adam, cross-entropy),
# a usability probe (attention trained over a frozen MLP), an S4 attention layer (its capacity
# search) and a few BERT pretraining steps (masked LM, checkpoints), each a finished smoke-run output.
REPRESENTATIVE_OUTPUTS = (
    "results/mlp/capacity/gd_gated.csv",
    "results/usability/capacity_gd_gated.csv",
    "results/attention/layers/capacity_shared_d8_H1_n4_dh4_dv1.csv",
    "results/dilution/pretrain_log_many.csv",
)


def test_the_pin_sets_every_switch_a_user_has_not_set():
    environ = {"MKL_CBWR": "COMPATIBLE"}
    in_force = pin_cpu_kernels(environ)
    assert environ["MKL_CBWR"] == "COMPATIBLE"  # the user's choice stays
    assert all(environ[name] == value for name, value in AVX2_PATH.items() if name != "MKL_CBWR")
    assert in_force == {name: environ[name] for name in AVX2_PATH}
    assert kernel_path_record(environ)["path"] == "custom"


def test_the_opt_out_leaves_the_environment_as_it_was():
    environ = {OPT_OUT: "1"}
    assert pin_cpu_kernels(environ) == {} and environ == {OPT_OUT: "1"}
    assert kernel_path_record(environ) == {"path": "native", "switches": {}}
    pinned = {}
    pin_cpu_kernels(pinned)
    assert kernel_path_record(pinned)["path"] == "pinned"


def test_the_runner_pins_before_numpy_or_torch_loads():
    """In a process whose environment sets none of the switches (the test session's own are set
    by conftest), the runner's import pins them before torch chooses its kernels."""
    probe = ("import sys, runpy; sys.argv = ['factstore', '--help']\n"
             "try:\n    runpy.run_module('factstore', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "import torch, os; print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'])")
    environment = {name: value for name, value in os.environ.items() if name not in AVX2_ONLY_HOST}
    done = subprocess.run([sys.executable, "-c", probe], env=environment, capture_output=True, text=True, check=True)
    assert done.stdout.split()[-2:] == ["AVX2", "AVX2"]


def _rerun_elsewhere(workspace: Path, output: str, folder: Path, extra_env: dict) -> Path:
    """Run the step that made `output` again, as its sidecar recorded it, with every output (and a
    checkpoint, if it keeps one) written under `folder`; returns where `output` went."""
    record = json.loads((workspace / f"{output}.prov.json").read_text())
    assert record["cpu_kernels"]["path"] == "pinned", output
    arguments = list(record["command"][1:])
    for index, argument in enumerate(arguments):
        if arguments[index - 1] == "--output":
            name, _, path = argument.partition("=")
            arguments[index] = f"{name}={folder / path}"
        elif arguments[index - 1] == "--params":
            params = json.loads(argument)
            if "checkpoint" in params:
                params["checkpoint"] = str(folder / params["checkpoint"])
            arguments[index] = json.dumps(params)
    run(sys.executable, "-m", "factstore", *arguments, cwd=workspace, extra_env=extra_env)
    return folder / output


@pytest.mark.workflow
def test_a_host_with_avx2_alone_computes_the_same_bytes(smoke_run, tmp_path):
    """The smoke run ran pinned on this host; each representative step, run again as on a host
    whose MKL and oneDNN see AVX2 alone, writes byte-identical outputs (on a host with AVX2 alone
    both runs take the same path, and the test holds trivially)."""
    narrower = dict(AVX2_ONLY_HOST)
    for output in (f"{SMOKE_DIR}/{output}" for output in REPRESENTATIVE_OUTPUTS):
        again = _rerun_elsewhere(smoke_run, output, tmp_path / "avx2-only", narrower)
        assert again.read_bytes() == (smoke_run / output).read_bytes(), output
