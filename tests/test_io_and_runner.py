"""Atomic writes, provenance sidecars and the step runner's contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from factstore import io
from factstore.__main__ import UsageError, main, run_step


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []


def test_table_round_trip_and_sidecar_name(tmp_path):
    table = pd.DataFrame({"metric": ["a", "b"], "value": [0.5, 1.25]})
    io.write_table(table, tmp_path / "t.csv")
    pd.testing.assert_frame_equal(io.read_table(tmp_path / "t.csv"), table)
    assert io.sidecar_path(tmp_path / "t.csv").name == "t.csv.prov.json"


def test_run_step_writes_outputs_with_provenance(tmp_path):
    outputs = {"table": str(tmp_path / "hebbian.csv")}
    params = {"d": [8], "alphas": [0.1, 0.3], "seeds": 2, "seed": 3, "chunk_size": 64}
    run_step("assoc.hebbian", params, {}, outputs)
    sidecar = json.loads(io.sidecar_path(outputs["table"]).read_text())
    assert sidecar["params"] == params and sidecar["seed"] == 3
    assert {"commit", "dirty"} <= set(sidecar["git"])
    assert {"python", "torch", "numpy"} <= set(sidecar["versions"])
    assert sidecar["device"] == "cpu" and sidecar["wall_time_s"] >= 0


def test_same_seed_same_numbers(tmp_path):
    params = {"d": [8], "alphas": [0.2], "seeds": 2, "seed": 1, "chunk_size": 64}
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    run_step("assoc.hebbian", params, {}, {"table": str(first)})
    run_step("assoc.hebbian", params, {}, {"table": str(second)})
    assert first.read_bytes() == second.read_bytes()


def test_failing_step_writes_nothing(tmp_path):
    with pytest.raises(KeyError):
        run_step("assoc.hebbian", {"d": [8]}, {}, {"table": str(tmp_path / "x.csv")})
    assert list(tmp_path.iterdir()) == []


def test_missing_input_is_named(tmp_path):
    with pytest.raises(UsageError, match="input 'capacity' is missing"):
        run_step("figures.draw", {"study": "assoc", "figure": "rank_capacity"}, {"capacity": str(tmp_path / "nope.csv")}, {})


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["nosuch.step"], "no experiment module"),
        (["assoc.nosuch"], "experiment module 'assoc' has no step 'nosuch'"),
        (["assoc.hebbian", "--params", "{not json"], "--params is not valid JSON"),
        (["assoc.hebbian", "--output", "table"], "--output expects NAME=PATH"),
        (["assoc.hebbian", "--threads", "0"], "--threads must be at least 1"),
    ],
)
def test_command_line_errors_are_clear(arguments, message, capsys):
    assert main(arguments) == 2
    assert f"factstore: error: {message}" in capsys.readouterr().err


def test_the_real_command_line_exits_2_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "factstore", "assoc.nosuch"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "has no step 'nosuch'" in done.stderr and "Traceback" not in done.stderr


def test_runtimes_gathers_one_row_per_step_run_from_the_sidecars(tmp_path):
    from factstore.experiments.runtimes import table

    run_step("assoc.hebbian", {"d": [8], "alphas": [0.1], "seeds": 1, "seed": 0, "chunk_size": 64}, {},
             {"table": str(tmp_path / "results/a.csv")})
    out = table({"folders": [str(tmp_path / "results")]}, {}, None)
    assert list(out["runtimes"].step) == ["assoc.hebbian"] and out["runtimes"].wall_time_s.iloc[0] >= 0
    assert "torch" in set(out["versions"].package)


def test_a_step_whose_module_needs_no_torch_runs_without_loading_it_and_records_its_cpu_time(tmp_path):
    """Figures, claims and run-time steps skip torch's ~1.3 s of imports; every sidecar records the
    step's CPU time and the whole process's (their difference: the job's fixed cost)."""
    script = (
        "import sys; from factstore.__main__ import main; "
        f"code = main(['runtimes.table', '--params', '{{\"folders\": [\"{tmp_path}/none\"]}}', "
        f"'--output', 'runtimes={tmp_path}/r.csv', '--output', 'versions={tmp_path}/v.csv']); "
        "assert code == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    sidecar = json.loads((tmp_path / "r.csv.prov.json").read_text())
    assert sidecar["device"] == "cpu"
    assert 0 <= sidecar["cpu_time_s"]["step"] <= sidecar["cpu_time_s"]["process"]
