"""Shared fixtures: repository paths, the offline data mirror, and the smoke run of the whole
workflow in a fresh copy of the tree (session-wide: every test that reads it shares one run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from factstore.kernel_path import pin_cpu_kernels

pin_cpu_kernels()  # before torch and numpy load: the tests compute on the steps' kernel path, on any host

import pytest  # noqa: E402
import torch  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
# The offline copy of the real data sets: only where FACTSTORE_DATA_MIRROR names it (None otherwise).
MIRROR = Path(os.environ["FACTSTORE_DATA_MIRROR"]) if os.environ.get("FACTSTORE_DATA_MIRROR") else None
SMOKE = "config/smoke.yaml"
SMOKE_DIR = "runs/smoke"  # config/smoke.yaml's run_dir: the smoke run's data/, results/, figures/, logs/
BIN = str(Path(sys.executable).parent)

torch.set_num_threads(1)


@pytest.fixture
def mirror() -> Path:
    """The offline copy of the real data sets (skips where FACTSTORE_DATA_MIRROR names none)."""
    if MIRROR is None:
        pytest.skip("no data mirror: set FACTSTORE_DATA_MIRROR")
    if not (MIRROR / "hebbian-mlps" / "book_authors.csv").is_file():
        pytest.skip(f"no data mirror at {MIRROR}; set FACTSTORE_DATA_MIRROR")
    return MIRROR

from hypothesis import settings  # noqa: E402

# Shared 2-core machines: timing deadlines would make property tests flaky.
settings.register_profile("factstore", deadline=None, max_examples=60)
settings.load_profile("factstore")


def claim_verdict(claim_id: str, metric_rows) -> str:
    """The verdict (PASS / FAIL / UNTESTABLE / NOT RUN) the claims report gives `claim_id` of
    config/claims.yaml on a hand-made metrics table: metric_rows is {name: value} or
    [(name, value, detail), ...]. A table that holds none of the claim's gate metrics is judged on
    its checks alone (the gates are then left out), so a check's flip test need not build them."""
    import pandas as pd

    from factstore import claims

    rows = metric_rows.items() if isinstance(metric_rows, dict) else [(name, value) for name, value, *_ in metric_rows]
    claim = next(c for c in claims.load_registry(REPOSITORY / "config/claims.yaml") if c["id"] == claim_id)
    table = pd.DataFrame([{"metric": name, "value": float(value)} for name, value in rows], columns=["metric", "value"])
    if not {gate["metric"] for gate in claim.get("gates", [])} & set(table["metric"]):
        claim = claim | {"gates": []}
    tables = {claim["result"]: table} | {gate["result"]: table for gate in claim.get("gates", []) if "result" in gate}
    return claims.evaluate_claim(claim, tables, "smoke")["status"]


def assert_figures(folder: Path, prefix: str, names) -> None:
    """Every figure `{prefix}{name}` of `names` in `folder` is a drawn PNG (> 10 kB) with its PDF beside it."""
    for name in names:
        png = folder / f"{prefix}{name}.png"
        assert png.stat().st_size > 10_000 and png.with_suffix(".pdf").is_file(), png.name


def run(*command: str, cwd: Path, extra_env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command with this venv on PATH; FACTSTORE_CONFIG and DVC_STAGE are dropped unless
    `extra_env` sets them (a test's own run must not inherit the caller's selection)."""
    env = os.environ | {"PATH": BIN + os.pathsep + os.environ["PATH"], "DVC_NO_ANALYTICS": "1"}
    for name in ("FACTSTORE_CONFIG", "DVC_STAGE"):
        env.pop(name, None)
    env |= extra_env or {}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def snakemake(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "snakemake", *args, cwd=cwd, **kwargs)


def fresh_copy(root: Path, message: str = "clone", before_commit=None) -> Path:
    """The tracked and not-ignored files of the repository copied into `root`, committed as a new
    git repository (like a clone); `before_commit(root)` may add files first."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPOSITORY, capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    for name in filter(None, listing):
        source = REPOSITORY / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    if before_commit is not None:
        before_commit(root)
    for command in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]):
        subprocess.run(command, cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A fresh copy of the tracked and not-ignored files, as a new git repository (like a clone)."""
    return fresh_copy(tmp_path_factory.mktemp("clone"))


@pytest.fixture(scope="session")
def smoke_run(workspace) -> Path:
    """The workspace after a whole smoke run: commands run here, the run's files are under SMOKE_DIR."""
    if MIRROR is None or not MIRROR.is_dir():
        pytest.skip("the smoke run needs the offline data mirror (set FACTSTORE_DATA_MIRROR)")
    snakemake("--cores", "2", "all", "--configfile", SMOKE, cwd=workspace)
    return workspace
