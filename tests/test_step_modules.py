"""Step modules stay thin (docs/ARCHITECTURE.md): every public function of factstore.experiments
is a step, `step(params, inputs, context)`; a step module is short enough to read in one sitting,
and a study's summary function shorter still; tests reach the science through the libraries,
never through a step module's private helpers. Checked on the source (ast), so each check is a
plain function that a hand-made module can make fail."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPOSITORY

STEP_SIGNATURE = ["params", "inputs", "context"]
MAX_STEP_MODULE_LINES = 300
MAX_SUMMARY_LINES = 80
EXPERIMENTS = REPOSITORY / "src" / "factstore" / "experiments"


def step_modules(folder: Path = EXPERIMENTS) -> list[Path]:
    return sorted(path for path in folder.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def thin_step_problems(path: Path) -> list[str]:
    """What makes the step module at `path` not thin: a public function without the step
    signature, more than MAX_STEP_MODULE_LINES lines, a `summary` over MAX_SUMMARY_LINES lines."""
    source = path.read_text()
    problems = []
    lines = source.count("\n")
    if lines > MAX_STEP_MODULE_LINES:
        problems.append(f"{path.name}: {lines} lines (at most {MAX_STEP_MODULE_LINES})")
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        arguments = [argument.arg for argument in node.args.posonlyargs + node.args.args]
        if arguments != STEP_SIGNATURE or node.args.kwonlyargs or node.args.vararg or node.args.kwarg:
            problems.append(f"{path.name}: {node.name}({', '.join(arguments)}) is public but not a step "
                            f"({', '.join(STEP_SIGNATURE)}): move it to the study's library or make it private")
        length = node.end_lineno - node.lineno + 1
        if node.name == "summary" and length > MAX_SUMMARY_LINES:
            problems.append(f"{path.name}: summary is {length} lines (at most {MAX_SUMMARY_LINES})")
    return problems


def private_step_helpers_used(test_file: Path) -> list[str]:
    """The private names of factstore.experiments modules that `test_file` reaches: imported by
    name, or read as an attribute of an imported step module."""
    tree = ast.parse(test_file.read_text())
    step_aliases, used = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "factstore.experiments":
            step_aliases |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("factstore.experiments."):
            used += [f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in step_aliases):
            used.append(f"{node.value.id}.{node.attr}")
    return used


def test_every_step_module_is_thin():
    problems = [problem for path in step_modules() for problem in thin_step_problems(path)]
    assert not problems, "\n".join(problems)


def test_tests_reach_no_private_step_helper():
    used = {path.name: names for path in sorted((REPOSITORY / "tests").glob("*.py"))
            if (names := private_step_helpers_used(path))}
    assert not used, used


def test_the_checks_can_fail(tmp_path):
    """A hand-made step module with a public helper, a long body and a long summary is reported on
    each count; a test that reaches a private helper is reported."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_SUMMARY_LINES))
    module = tmp_path / "study.py"
    module.write_text(f"def helper(table, keys):\n    return table\n\n\ndef summary(params, inputs, context):\n{body}\n"
                      + "\n" * MAX_STEP_MODULE_LINES)
    problems = thin_step_problems(module)
    assert len(problems) == 3 and any("helper(table, keys)" in p for p in problems)
    thin = tmp_path / "thin.py"
    thin.write_text("def run(params, inputs, context):\n    return {}\n\n\ndef _helper(x):\n    return x\n")
    assert thin_step_problems(thin) == []

    test_file = tmp_path / "test_study.py"
    test_file.write_text("from factstore.experiments import assoc as steps\n"
                         "from factstore.experiments.mlp import _secret\n\n"
                         "def test_x():\n    steps._hidden(1)\n    steps.summary\n")
    assert sorted(private_step_helpers_used(test_file)) == ["factstore.experiments.mlp._secret", "steps._hidden"]
