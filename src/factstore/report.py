"""What the Snakemake report (`snakemake --report report.html`) says beside each figure.

A figure's caption is the first paragraph of its function's docstring in
factstore/plots/<study>.py (read with `ast`, nothing imported), followed by the claims whose
`figures` list names it in config/claims.yaml and the scale of the run
(workflow/report/figure.rst renders them).
"""

from __future__ import annotations

import ast
from pathlib import Path


def figure_functions(plots_file: Path) -> dict[str, ast.FunctionDef]:
    """figure name -> the function node, from the module's `FIGURES = {"name": function, ...}`."""
    tree = ast.parse(plots_file.read_text(), filename=str(plots_file))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FIGURES" for t in node.targets):
            if not isinstance(node.value, ast.Dict):
                raise ValueError(f"{plots_file}: FIGURES must be a dict literal")
            return {key.value: functions[value.id] for key, value in zip(node.value.keys, node.value.values)}
    raise ValueError(f"{plots_file} defines no FIGURES")


def figure_caption(plots_file: Path, figure: str) -> str:
    """The first paragraph of the figure function's docstring, on one line."""
    functions = figure_functions(plots_file)
    if figure not in functions:
        raise ValueError(f"{plots_file}: no figure '{figure}' in FIGURES ({', '.join(sorted(functions))})")
    docstring = ast.get_docstring(functions[figure]) or ""
    return " ".join(docstring.split("\n\n")[0].split())
