"""Where a run's files go: the config's `run_dir`, and the folders that may never be one.

A run directory holds one run's data/, results/, figures/ and logs/ (workflow/Snakefile prefixes
every rule's paths with it). "." is the default run at the top of the repository; any other run
directory must be a folder of its own, not one of the package's folders (src, workflow, config,
...) nor one of the top run's output folders (results, data, ...): a run there would write its
files among the package's code or inside another run's results.
"""

from __future__ import annotations

from pathlib import PurePosixPath

PACKAGE_FOLDERS = frozenset({
    ".ci", ".dvc", ".git", ".snakemake", "benchmarks", "config", "docs", "src", "tests", "workflow",
})
TOP_RUN_FOLDERS = frozenset({"data", "figures", "logs", "results"})


def run_dir_problem(run_dir: str) -> str | None:
    """Why `run_dir` (relative to the repository, as the config schema requires) cannot hold a
    run, or None when it can: "." or a path whose first folder is none of the package's folders
    and none of the top run's output folders."""
    if run_dir == ".":
        return None
    first = PurePosixPath(run_dir).parts[0]
    if first in PACKAGE_FOLDERS:
        return (f"run_dir = {run_dir!r} is inside the package folder {first}/: "
                f"a run needs a folder of its own, e.g. runs/{PurePosixPath(run_dir).name}")
    if first in TOP_RUN_FOLDERS:
        return (f"run_dir = {run_dir!r} is inside the top run's {first}/ folder: "
                f"a run needs a folder of its own, e.g. runs/{PurePosixPath(run_dir).name}")
    return None


def in_run(run_dir: str, folder: str) -> str:
    """`folder` (e.g. "results") inside the run directory `run_dir`."""
    return folder if run_dir == "." else f"{run_dir}/{folder}"
