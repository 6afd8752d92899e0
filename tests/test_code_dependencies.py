"""Code dependencies derived from imports: what a rule lists is what its step loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPOSITORY
from factstore.code_dependencies import imported_modules, source_files

SOURCE = REPOSITORY / "src"
STEP_MODULES = sorted(p.stem for p in (SOURCE / "factstore/experiments").glob("*.py") if p.stem != "__init__")


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_imports_are_followed_transitively_including_relative_and_function_level_ones(tmp_path):
    _write(tmp_path, "factstore/__init__.py", "")
    _write(tmp_path, "factstore/a.py", "from factstore import b\nimport numpy\n")
    _write(tmp_path, "factstore/b.py", "def f():\n    from .sub import c\n")
    _write(tmp_path, "factstore/sub/__init__.py", "")
    _write(tmp_path, "factstore/sub/c.py", "from factstore.sub.d import name\n")
    _write(tmp_path, "factstore/sub/d.py", "name = 1\n")
    _write(tmp_path, "factstore/unused.py", "")
    files = source_files(["factstore.a"], tmp_path)
    names = {Path(f).relative_to(tmp_path).as_posix() for f in files}
    assert names == {"factstore/__init__.py", "factstore/a.py", "factstore/b.py", "factstore/sub/__init__.py",
                     "factstore/sub/c.py", "factstore/sub/d.py"}
    assert imported_modules("factstore.sub.c", tmp_path) == {"factstore.sub.d"}


def test_an_edited_import_is_seen_by_the_next_call_in_the_same_process(tmp_path):
    """The parse is cached on the source text: an edit between two calls changes the answer."""
    _write(tmp_path, "factstore/__init__.py", "")
    _write(tmp_path, "factstore/a.py", "from factstore import b\n")
    _write(tmp_path, "factstore/b.py", "")
    _write(tmp_path, "factstore/c.py", "")
    assert imported_modules("factstore.a", tmp_path) == {"factstore.b"}
    _write(tmp_path, "factstore/a.py", "from factstore import c\n")
    assert imported_modules("factstore.a", tmp_path) == {"factstore.c"}
    assert {Path(f).name for f in source_files(["factstore.a"], tmp_path)} == {"__init__.py", "a.py", "c.py"}


@pytest.mark.parametrize("module", STEP_MODULES)
def test_a_step_module_loads_no_factstore_file_its_derived_list_misses(module):
    """Import the step in a fresh interpreter: every factstore module it loads is in the list."""
    listed = {Path(f).resolve() for f in source_files(["factstore.__main__", f"factstore.experiments.{module}"], SOURCE)}
    code = (
        "import sys, factstore.__main__, factstore.experiments.%s\n"
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('factstore') and getattr(m, '__file__', None)))"
    ) % module
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPOSITORY,
                            env={"PYTHONPATH": str(SOURCE), "PATH": ""}).stdout.split()
    missing = {Path(f).resolve() for f in loaded} - listed
    assert not missing, f"experiments.{module} loads {sorted(map(str, missing))}, not in its derived code list"


@pytest.mark.parametrize("module", [m for m in STEP_MODULES if m not in ("claims", "verdicts")])
def test_no_study_step_has_the_claims_code_among_its_code_inputs(module):
    """How a claim is judged (claims.py, claims_report.py) is the claims report's code alone (the
    report and its verdicts figure): editing it reruns those, not the studies (the runner loads
    `compare`'s code by name)."""
    listed = {Path(f).name for f in source_files(["factstore.__main__", f"factstore.experiments.{module}"], SOURCE)}
    assert not listed & {"claims.py", "claims_report.py"}


def test_a_figure_caption_is_the_first_paragraph_of_its_function_docstring(tmp_path):
    from factstore.report import figure_caption

    plots = tmp_path / "plots.py"
    plots.write_text('def shown(tables, params):\n    """What it shows,\n    on two lines.\n\n    Details."""\n\n'
                     'FIGURES = {"name": shown}\n')
    assert figure_caption(plots, "name") == "What it shows, on two lines."
    with pytest.raises(ValueError, match="no figure 'other'"):
        figure_caption(plots, "other")
