"""The conda environment and pyproject.toml ask for the same packages; torch stays pinned."""

from __future__ import annotations

import tomllib

import yaml

from conftest import REPOSITORY


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | set(project["optional-dependencies"]["test"])
    environment = yaml.safe_load((REPOSITORY / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    assert set(pip_section) == wanted
    assert "python=3.11" in environment["dependencies"]


def test_torch_is_pinned():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
