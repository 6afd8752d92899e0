"""Entry point that every workflow rule calls: `python -m factstore STEP [options]`.

STEP is `<module>.<function>` inside `factstore.experiments`, e.g. `assoc.train`. A step is a
plain function `step(params, inputs, context) -> {output_name: object}`; this runner parses the
command line, fixes threads, seed and device, times the step, then writes every returned object
atomically to the path given for its name (DataFrame -> table, Figure -> PNG + PDF, dict -> JSON,
str -> text, bytes -> file) with a provenance sidecar. If the step fails, nothing is written;
leftover temporary files of an earlier killed run of the same outputs are deleted first.
Exit status: 0 done, 1 the step failed (a training run that diverged, see factstore.training,
bad or missing data, an unsafe saved model, a requested device that is absent, a full disk or a
permission error are reported in one line naming the step and the file), 2 a bad command line.

    python -m factstore assoc.train --params '{"d": 64, "seed": 0}' \
        --output table=results/assoc/train_d64.csv --threads 1

`python -m factstore compare RUN_A RUN_B` prints the claims of two runs side by side (status and
measured values) and what changed, under each run's scale, config file and commit as its own files
record them (factstore.run_comparison); a run is a run directory ('.', 'runs/paper') or a
claims.json; one that is not a claims report is refused in one line, exit status 2.

`python -m factstore preflight [--configfile FILE]` lists each rule's estimated memory at the
config's sizes and whether it fits one node and one GPU (factstore.preflight); exit status 1 names
each rule that does not fit and the key to lower.

`python -m factstore docs [--check]` rewrites (or checks) the documentation generated from the
claims registry: docs/science.md's claims and each method note's declared choices
(factstore.registry_docs).
"""

from __future__ import annotations

from factstore.kernel_path import kernel_path_record, pin_cpu_kernels

pin_cpu_kernels()  # before numpy (pandas) or torch loads: their kernel choice is made at load time

import argparse
import errno
import importlib
import json
import logging
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from factstore import allocator, io, provenance
from factstore.errors import DataProblem, DeviceUnavailable, ResultWarning, TrainingDiverged, WriteFailed


# File-system errors a user can act on, reported in one line with what to do.
FILE_SYSTEM_ERRORS = {
    errno.ENOSPC: "free space on that file system (or point results elsewhere) and rerun",
    errno.EDQUOT: "the disk quota is exhausted: free space and rerun",
    errno.EACCES: "the file or its folder is not writable or readable by you: fix its permissions and rerun",
    errno.EPERM: "the operation is not permitted on that file: fix its permissions and rerun",
    errno.EROFS: "that file system is read-only: write the results elsewhere",
}

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class StepContext:
    """What a step may use besides its params and inputs. device is 'cpu' (a string) for a step
    whose module does not import torch (figures, claims, run times): torch is not loaded for it."""

    device: torch.device | str
    threads: int
    log_progress: bool = True


class UsageError(Exception):
    """A bad command line: reported as one clear line, exit status 2."""


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{flag} expects NAME=PATH, got '{item}'")
        if name in pairs:
            raise UsageError(f"{flag} names '{name}' twice")
        pairs[name] = value
    return pairs


def _load_params(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        params = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--params is not valid JSON: {error}") from error
    if not isinstance(params, dict):
        raise UsageError("--params must be a JSON object")
    return params


def resolve_step(name: str):
    """'assoc.train' -> factstore.experiments.assoc.train"""
    module_name, _, function_name = name.rpartition(".")
    if not module_name:
        raise UsageError(f"step '{name}' must look like MODULE.FUNCTION (e.g. assoc.train)")
    try:
        module = importlib.import_module(f"factstore.experiments.{module_name}")
    except ModuleNotFoundError as error:
        raise UsageError(f"no experiment module 'factstore.experiments.{module_name}' for step '{name}'") from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UsageError(f"experiment module '{module_name}' has no step '{function_name}'")
    return function


def write_output(value: Any, path: str) -> list[Path]:
    """Write one returned object by its type; returns the files written."""
    if isinstance(value, pd.DataFrame):
        io.write_table(value, path)
        return [Path(path)]
    if hasattr(value, "savefig"):
        return [io.write_figure(value, path)]
    if isinstance(value, (dict, list)):
        io.write_json(value, path)
        return [Path(path)]
    if isinstance(value, str):
        io.write_text(value, path)
        return [Path(path)]
    if isinstance(value, bytes):
        with io.atomic_path(path) as tmp:
            tmp.write_bytes(value)
        return [Path(path)]
    raise TypeError(f"a step returned a {type(value).__name__} for {path}; expected DataFrame, Figure, dict, str or bytes")


WALL_CLOCK_COLUMN = re.compile(r"(^|_)(seconds|wall_time_s|time_s)$")
"""A column that holds a wall time: it differs between two identical runs, so a result table
holding it changes its bytes (and its DVC hash) on every rerun. Timings live in the sidecars;
the runtimes step gathers them into results/runtimes.csv, the one table of times."""


def refuse_wall_clock_columns(step_name: str, results: dict[str, Any]) -> None:
    """Raise RuntimeError when a step other than runtimes.* returns a table with a wall-time column."""
    if step_name.startswith("runtimes."):
        return
    for name, value in results.items():
        if isinstance(value, pd.DataFrame):
            timed = [str(column) for column in value.columns if WALL_CLOCK_COLUMN.search(str(column))]
            if timed:
                raise RuntimeError(f"step {step_name} returned table '{name}' with wall-time column(s) {timed}: "
                                   "timings belong in the sidecars (results must be byte-identical between runs)")


def report_warnings(step_name: str, caught: list[warnings.WarningMessage]) -> list[str]:
    """The distinct ResultWarnings a step raised, each printed once to stderr (the job's log) as
    `factstore: warning: step S: ...`; other warnings are shown as Python would show them."""
    messages: list[str] = []
    for warning in caught:
        if issubclass(warning.category, ResultWarning):
            if str(warning.message) not in messages:
                messages.append(str(warning.message))
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    for message in messages:
        print(f"factstore: warning: step {step_name}: {message}", file=sys.stderr)
    return messages


def run_step(
    step_name: str,
    params: dict[str, Any],
    inputs: dict[str, str],
    outputs: dict[str, str],
    threads: int = 1,
    device: str | None = None,
) -> dict[str, list[Path]]:
    """Run a step and write its outputs with sidecars; the function behind the CLI, also for tests."""
    step = resolve_step(step_name)
    for name, path in inputs.items():
        if not Path(path).exists():
            raise UsageError(f"input '{name}' is missing: {path}")
        io.check_unchanged(path)  # the bytes its writer recorded: a truncated or edited table stops here
    for path in outputs.values():  # leftovers of a killed earlier run (see factstore.io)
        io.remove_temporary_files(path)
        io.remove_temporary_files(io.sidecar_path(path))
        # An old sidecar would outlive its file if this run fails (Snakemake then deletes the
        # outputs, not their sidecars) and be counted by results/runtimes.csv.
        io.sidecar_path(path).unlink(missing_ok=True)
    # torch (~1.3 s of imports) only for the steps whose modules use it: not figures or reports
    torch = sys.modules.get("torch")
    if torch is not None:
        from factstore.device import seed_everything, select_device

        chosen = select_device(device)  # before any process-wide setting: a bad device name leaves none behind
        torch.set_num_threads(threads)
        seed_everything(int(params.get("seed", 0)))
    else:
        chosen = "cpu"
    context = StepContext(device=chosen, threads=threads)

    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        if torch is not None:
            torch.set_flush_denormal(True)  # softmax tails turn denormal near convergence: 2.5-4x slower otherwise
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResultWarning)
            results = step(params, {k: Path(v) for k, v in inputs.items()}, context)
    finally:
        if torch is not None:
            torch.set_flush_denormal(False)  # the process default: leave callers (tests) unaffected
    wall_time, cpu_time = time.perf_counter() - start, time.process_time() - cpu_start
    result_warnings = report_warnings(step_name, caught)

    refuse_wall_clock_columns(step_name, results)
    missing = sorted(set(outputs) - set(results))
    extra = sorted(set(results) - set(outputs))
    if missing or extra:
        raise RuntimeError(f"step {step_name} returned outputs {sorted(results)}, but the rule declares {sorted(outputs)}")
    record = provenance.collect(
        step=step_name, params=params, inputs=inputs, device=chosen, threads=threads, wall_time_s=wall_time,
        step_cpu_time_s=cpu_time,
    ) | {"warnings": result_warnings, "cpu_kernels": kernel_path_record()}
    written: dict[str, list[Path]] = {}
    try:
        for name, path in outputs.items():
            written[name] = write_output(results[name], path)
            rows = {"rows": len(results[name])} if isinstance(results[name], pd.DataFrame) else {}
            for file in written[name]:
                io.write_json(record | {"output": name, "sha256": io.sha256_file(file)} | rows, io.sidecar_path(file))
    except BaseException:  # a full disk or a permission error mid-way: no partial set of outputs
        for file in [file for files in written.values() for file in files]:
            file.unlink(missing_ok=True)
            io.sidecar_path(file).unlink(missing_ok=True)
        raise
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    return written


def compare(argv: list[str]) -> int:
    """`compare RUN_A RUN_B`: each run's scale, config file and commit, both runs' claims and what
    changed (exit 0), or one line naming the file that is not a claims report and why (exit 2)."""
    parser = argparse.ArgumentParser(prog=f"{program_name()} compare",
                                     description="the claims of two runs side by side, and what changed; the output "
                                                 "fits the terminal's width (100 columns when not a terminal)")
    parser.add_argument("run_a", help="a run directory ('.', runs/paper) or its results/claims.json")
    parser.add_argument("run_b", help="the run to compare it with")
    parser.add_argument("--changed-only", action="store_true",
                        help="list only the claims whose status (verdict) or measured values changed")
    args = parser.parse_args(argv)
    # Imported by name, as the steps are: an import statement here would make the claims code a
    # code input of every rule (factstore.code_dependencies reads this file's imports), so that
    # editing how a claim is judged would rerun every study instead of the claims report alone.
    run_comparison = importlib.import_module("factstore.run_comparison")
    try:
        text = run_comparison.compare_runs(args.run_a, args.run_b, args.changed_only)
    except run_comparison.RunError as error:
        print(f"factstore: error: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


def docs(argv: list[str]) -> int:
    """`docs [--check]`: rewrite the documents generated from config/claims.yaml (exit 0), or with
    --check list those that differ from it (exit 1 when any does)."""
    parser = argparse.ArgumentParser(prog="python -m factstore docs",
                                     description="the documentation generated from config/claims.yaml")
    parser.add_argument("--check", action="store_true", help="only list the documents that differ from the registry")
    args = parser.parse_args(argv)
    registry_docs = importlib.import_module("factstore.registry_docs")  # by name: see compare
    root = Path.cwd()
    paths = registry_docs.stale(root) if args.check else registry_docs.write(root)
    for path in paths:
        print(f"{'differs from config/claims.yaml' if args.check else 'rewritten'}: {path}")
    return 1 if args.check and paths else 0


def preflight(argv: list[str]) -> int:
    """`preflight [--configfile FILE]`: each rule's estimated memory at the config's sizes against one
    node and one GPU (exit 0 when every rule fits, 1 naming each that does not, 2 a bad config)."""
    parser = argparse.ArgumentParser(prog=f"{program_name()} preflight",
                                     description="whether every rule fits one node and one GPU at a config's sizes, "
                                                 "from shapes alone (nothing is allocated); run from the repository root")
    parser.add_argument("--configfile", default=os.environ.get("FACTSTORE_CONFIG", "config/config.yaml"),
                        help="the config to check (default: $FACTSTORE_CONFIG, else config/config.yaml)")
    parser.add_argument("--node-memory-gb", type=float, help="one node's memory (default 128)")
    parser.add_argument("--gpu-memory-gb", type=float, help="one GPU's memory (default 80)")
    args = parser.parse_args(argv)
    checks = importlib.import_module("factstore.preflight")  # by name: see compare
    config_module = importlib.import_module("factstore.config")
    try:
        config = config_module.load(args.configfile)
    except config_module.ConfigError as error:
        print(f"factstore: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    workflow_dir = Path.cwd() / "workflow"
    if not (workflow_dir / "rules").is_dir():
        print(f"factstore: error: no workflow/rules in {Path.cwd()}: run preflight from the repository root", file=sys.stderr)
        return 2
    node_bytes = (args.node_memory_gb or checks.NODE_MEMORY_GB) * 1e9
    gpu_bytes = (args.gpu_memory_gb or checks.GPU_MEMORY_GB) * 1e9
    fits = checks.rule_fits(config, checks.workflow_rules(workflow_dir))
    print(f"{args.configfile}: the {len(fits)} rules that run a step; one node: {node_bytes / 1e9:g} GB, one GPU: {gpu_bytes / 1e9:g} GB")
    print(checks.table(fits, node_bytes, gpu_bytes), end="")
    problems = [line for fit in fits for line in fit.problems(node_bytes, gpu_bytes)]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


COMMANDS = {"compare": compare, "docs": docs, "preflight": preflight}
# What `--help` lists under "commands", one line each.
COMMAND_HELP = {
    "compare RUN_A RUN_B [--changed-only]": "two runs' claims side by side, and what changed",
    "docs [--check]": "rewrite (or check) the docs generated from config/claims.yaml",
    "preflight [--configfile FILE]": "whether every rule fits one node and one GPU at a config's sizes",
}


def program_name() -> str:
    """How the user called the package: 'factstore' (the console script) or 'python -m factstore'."""
    called = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "factstore" if called == "factstore" else "python -m factstore"


def commands_help() -> str:
    """The `commands:` section of --help: each command and its one-line description."""
    column = max(map(len, COMMAND_HELP)) + 2
    return (f"commands ({program_name()} COMMAND ...):\n"
            + "\n".join(f"  {usage.ljust(column)}{text}" for usage, text in COMMAND_HELP.items()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(
        prog=program_name(), description=" ".join(__doc__.split("\n\n")[0].split()), epilog=commands_help(),
        usage=f"{program_name()} STEP [options] | {' | '.join(COMMAND_HELP)}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", help="experiment step, MODULE.FUNCTION inside factstore.experiments")
    parser.add_argument("--params", default="{}", help="JSON object of parameters, or @file.json")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--output", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--device", default=None, help="auto (default), cpu or cuda[:N]")
    args = parser.parse_args(argv)
    params: dict[str, Any] = {}
    allocator.keep_freed_memory()  # the step's freed tensors are reused, not page-faulted in anew
    try:
        if args.threads < 1:
            raise UsageError("--threads must be at least 1")
        params = _load_params(args.params)
        run_step(
            args.step,
            params,
            _pairs(args.input, "--input"),
            _pairs(args.output, "--output"),
            threads=args.threads,
            device=args.device,
        )
    except UsageError as error:
        print(f"factstore: error: {error}", file=sys.stderr)
        return 2
    except TrainingDiverged as error:
        shown = json.dumps(params, sort_keys=True)
        print(f"factstore: error: step {args.step} diverged (nothing written): {error}; params {shown}", file=sys.stderr)
        return 1
    except DataProblem as error:  # bad or missing data: the message names file and line
        print(f"factstore: error: step {args.step} failed (nothing written): {error}", file=sys.stderr)
        return 1
    except DeviceUnavailable as error:
        print(f"factstore: error: step {args.step} cannot run: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        if error.errno not in FILE_SYSTEM_ERRORS:
            raise
        named = " -> ".join(str(name) for name in (error.filename, error.filename2) if name)
        where = named or "writing " + ", ".join(item.partition("=")[2] for item in args.output)
        cause = str(error) if isinstance(error, WriteFailed) else f"{error.strerror} ({where})"
        print(f"factstore: error: step {args.step} failed (nothing written): {cause}; "
              f"{FILE_SYSTEM_ERRORS[error.errno]}", file=sys.stderr)
        return 1
    return 0


def exit_without_teardown(code: int) -> None:
    """End the process with `code` now, skipping the interpreter's teardown.

    By the time main() returns, every output and sidecar is written, closed and renamed into place
    (atomic writes), so nothing is left for the teardown to finish; with torch loaded it cost
    ~1.2-1.8 CPU-s per process (freeing torch's modules), ~10% of a smoke run's 125 jobs and more
    than the step itself in most figure and summary jobs. Output streams are flushed first.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
