"""The conda environment and pyproject.toml ask for the same packages; torch is a range there (the
lock pins it); the release files say what the package is."""

from __future__ import annotations

import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import REPOSITORY


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]).union(*project["optional-dependencies"].values())
    environment = yaml.safe_load((REPOSITORY / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    assert set(pip_section) == wanted
    python = next(item for item in environment["dependencies"] if isinstance(item, str) and item.startswith("python"))
    assert python == "python" + project["requires-python"]  # conda and pip accept the same Python versions


def test_torch_is_a_range_so_a_cluster_or_cuda_torch_is_kept():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    torch = [Requirement(line) for line in project["dependencies"] if Requirement(line).name == "torch"]
    assert len(torch) == 1 and Version("2.13.0") in torch[0].specifier and len(torch[0].specifier) == 2


def test_dvc_and_the_slurm_plugin_are_extras_and_transformers_is_declared():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    names = {Requirement(line).name for line in project["dependencies"]}
    assert "transformers" in names and not names & {"dvc", "snakemake-executor-plugin-slurm"}
    extras = project["optional-dependencies"]
    assert {Requirement(line).name for line in extras["dvc"]} == {"dvc"}
    assert {Requirement(line).name for line in extras["slurm"]} == {"snakemake-executor-plugin-slurm"}


def test_license_citation_and_changelog_match_the_package():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert (REPOSITORY / "LICENSE").read_text().startswith("MIT License")
    citation = yaml.safe_load((REPOSITORY / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == project["version"]
    assert citation["license"] == "MIT"
    assert len(citation["references"]) == 5, "the five works the package reproduces"
    assert f"## [{project['version']}]" in (REPOSITORY / "CHANGELOG.md").read_text()
