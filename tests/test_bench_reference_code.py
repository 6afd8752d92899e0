"""benchmarks/bench_reference_code.py's command line without the reference code: a missing or wrong
checkout and a missing package are errors that name them; a repository not given is skipped."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import REPOSITORY

sys.path.insert(0, str(REPOSITORY / "benchmarks"))
import bench_reference_code  # noqa: E402

ENVIRONMENT = [reference["env"] for reference in bench_reference_code.REFERENCES.values()]


@pytest.fixture(autouse=True)
def no_reference_in_the_environment(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for module in [name for name in sys.modules if name == "hebbian" or name.startswith("hebbian.")]:
        del sys.modules[module]


def test_a_missing_checkout_is_an_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert bench_reference_code.main(["--hebbian-mlps", str(missing), "--output", str(tmp_path / "r.json")]) == 2
    error = capsys.readouterr().err
    assert str(missing) in error and "--hebbian-mlps" in error and "does not exist" in error
    assert not (tmp_path / "r.json").exists()


def test_a_folder_that_is_not_the_checkout_is_an_error_naming_what_is_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FACTSTORE_ATTENTION_MEMORIZATION", str(tmp_path))
    assert bench_reference_code.main(["--comparisons", "attention_step", "--output", str(tmp_path / "r.json")]) == 2
    error = capsys.readouterr().err
    assert "FACTSTORE_ATTENTION_MEMORIZATION" in error and "src/attn_models.py" in error


def test_a_missing_package_of_the_reference_code_is_an_error_naming_it(tmp_path, capsys):
    module = tmp_path / "src/hebbian/mlp_core/mlp_gd.py"
    module.parent.mkdir(parents=True)
    for package in (module.parent.parent, module.parent):
        (package / "__init__.py").write_text("")
    module.write_text("import factstore_no_such_package\n")
    assert bench_reference_code.main(["--hebbian-mlps", str(tmp_path), "--comparisons", "gd_step",
                                      "--output", str(tmp_path / "r.json")]) == 2
    error = capsys.readouterr().err
    assert "factstore_no_such_package" in error and "hebbian-mlps" in error


def test_comparisons_without_their_repository_are_skipped_and_reported(tmp_path, capsys):
    output = tmp_path / "reference_code.json"
    assert bench_reference_code.main(["--quick", "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    assert report["rows"] == [] and set(report["skipped"]) == set(bench_reference_code.FLOORS)
    assert "hebbian-mlps" in report["skipped"]["gd_step"]
    assert (tmp_path / "reference_code.csv").read_text().startswith("comparison,")
    assert "skipped" in capsys.readouterr().out
