"""The layering contract of docs/ARCHITECTURE.md holds (import-linter, contracts in pyproject.toml):
library modules never import steps or plots, plots never import steps, step modules never import
each other, and every top-level module has its place in a layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPOSITORY


def test_the_import_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=REPOSITORY, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPOSITORY / "src"), "PATH": str(Path(sys.executable).parent)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_a_broken_contract_is_reported(tmp_path):
    """The check can fail: a plots module that imports a step breaks it."""
    copy = tmp_path / "src"
    shutil.copytree(REPOSITORY / "src" / "factstore", copy / "factstore", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "factstore/plots/assoc.py").write_text((copy / "factstore/plots/assoc.py").read_text()
                                                  + "\nfrom factstore.experiments import assoc as _step\n")
    shutil.copy(REPOSITORY / "pyproject.toml", tmp_path / "pyproject.toml")
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)})
    assert done.returncode != 0 and "factstore.plots.assoc -> factstore.experiments.assoc" in done.stdout
