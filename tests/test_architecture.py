"""The layering contract of docs/ARCHITECTURE.md holds (import-linter, contracts in pyproject.toml):
library modules never import steps or plots, plots never import steps, step modules never import
each other, the study libraries that compose others (usability, editing) sit above the ones they
compose (mlp, ...), and every top-level module has its place in a layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPOSITORY


def test_the_import_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=REPOSITORY, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPOSITORY / "src"), "PATH": str(Path(sys.executable).parent)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


@pytest.mark.parametrize("importer, imported", [
    ("plots/assoc.py", "factstore.experiments.assoc"),  # plots never import steps
    ("mlp/methods.py", "factstore.usability.probes"),  # a composed library never imports its composer
    ("tangent_kernel.py", "factstore.mlp.methods"),  # the study libraries below the composing ones stay independent
])
def test_a_broken_contract_is_reported(tmp_path, importer, imported):
    """The check can fail: an import against the layers (a plots module that imports a step; mlp,
    which usability and editing compose, importing usability; one study library importing a
    sibling) breaks it."""
    copy = tmp_path / "src"
    shutil.copytree(REPOSITORY / "src" / "factstore", copy / "factstore", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "factstore" / importer).write_text((copy / "factstore" / importer).read_text()
                                               + f"\nimport {imported} as _against_the_layers\n")
    shutil.copy(REPOSITORY / "pyproject.toml", tmp_path / "pyproject.toml")
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)})
    module = "factstore." + importer.removesuffix(".py").replace("/", ".")
    assert done.returncode != 0 and f"{module} -> {imported}" in done.stdout, done.stdout[-3000:]
