"""The source files a workflow step depends on, derived from its imports.

A rule lists these files as inputs, so editing a module reruns exactly the rules whose step
imports it (directly or through other factstore modules), and no hand-kept list can forget one.
Imports are read from the source with `ast` (nothing is executed), wherever they appear: imports
inside functions count too. Only modules of the `factstore` package are followed.

    source_files(["factstore.__main__", "factstore.experiments.assoc"], Path("src"))
    -> ["src/factstore/__init__.py", "src/factstore/__main__.py", "src/factstore/allocator.py", ...]
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "factstore"


def module_path(module: str, source_root: Path) -> Path | None:
    """The file of a dotted module name under `source_root` (a module file or a package's
    __init__.py), or None when it is not a module of the source tree."""
    base = source_root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _absolute(level: int, imported: str | None, module: str, is_package: bool) -> str:
    """The absolute module name `from <level dots><imported> import ...` inside `module` refers
    to (resolving relative imports)."""
    if not level:
        return imported or ""
    parts = module.split(".")
    package = parts if is_package else parts[:-1]
    anchor = package[: len(package) - (level - 1)]
    return ".".join(anchor + ([imported] if imported else []))


@functools.lru_cache(maxsize=None)
def _import_statements(source: str, filename: str) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    """Every import statement of a module's source as (level, module, names): level -1 for
    `import X, Y` (names X, Y), else `from <level dots><module> import names`.

    Cached on the source text (with the path), so an edited file is parsed again: the workflow
    asks for the same modules ~1,000 times while it parses, and parsing them was half its start-up.
    """
    statements = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            statements.append((-1, None, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            statements.append((node.level, node.module, tuple(alias.name for alias in node.names)))
    return tuple(statements)


def imported_modules(module: str, source_root: Path) -> set[str]:
    """The factstore modules that `module` imports anywhere in its source (one level deep).

    `from factstore.plots import style` names the submodule factstore.plots.style when it is one,
    else the package factstore.plots (it imports a name from it).
    """
    path = module_path(module, source_root)
    if path is None:
        raise ValueError(f"no module {module} under {source_root}")
    found: set[str] = set()
    for level, imported, names in _import_statements(path.read_text(), str(path)):
        if level < 0:
            found.update(names)
            continue
        parent = _absolute(level, imported, module, path.name == "__init__.py")
        for name in names:
            child = f"{parent}.{name}"
            found.add(child if module_path(child, source_root) else parent)
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def _with_parents(module: str) -> list[str]:
    """A module and every package above it: importing a.b.c runs a/__init__ and a/b/__init__."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def source_files(modules: Iterable[str], source_root: Path) -> list[str]:
    """Every source file that importing `modules` loads from the factstore package, transitively,
    as sorted paths (relative to the current directory when `source_root` is)."""
    pending = [parent for module in modules for parent in _with_parents(module)]
    seen: set[str] = set()
    while pending:
        module = pending.pop()
        if module in seen or module_path(module, source_root) is None:
            continue
        seen.add(module)
        for imported in imported_modules(module, source_root):
            pending.extend(_with_parents(imported))
    return sorted(module_path(module, source_root).as_posix() for module in seen)
