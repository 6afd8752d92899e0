"""The workflow through workflow/profiles/slurm on a real one-node SLURM (.ci/slurm): one job of
every study is sent to SLURM (to the GPU partition where the profile says so), the summaries and
the claims report run locally (`localrules`), and the claims come out as in the local run.

Where SLURM is not running and cannot be started (not root, no package registry), the test skips
and says why; FACTSTORE_REQUIRE_SLURM=1 turns that skip into a failure (CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPOSITORY, SMOKE, SMOKE_DIR, snakemake
from factstore.preflight import workflow_rules

pytestmark = pytest.mark.workflow

SLURM_SCRIPT = str(REPOSITORY / ".ci" / "slurm")
REQUIRED = os.environ.get("FACTSTORE_REQUIRE_SLURM") == "1"

# One cheap job per study whose outputs only its summary (and figures) read, so forcing it reruns
# that job on SLURM, then the study's summary and the claims report locally.
ONE_RULE_PER_STUDY = {
    "assoc": "assoc_hebbian",
    "ntk": "ntk_convergence",
    "attention": "attention_capacity",
    "mlp": "mlp_anisotropy",
    "committee": "committee_multi_output",
    "dilution": "dilution_archetypes",
    "usability": "usability_whitening",
    "editing": "editing_edit",
}


def _slurm(command: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([SLURM_SCRIPT, command], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running SLURM: the one .ci/run started, else one started here (and stopped after)."""
    if _slurm("status", 60).returncode == 0:
        yield
        return
    started = _slurm("start", 1500)
    if started.returncode != 0:
        reason = (started.stderr.strip().splitlines() or ["no reason given"])[-1]
        message = f"no SLURM here ({reason}); FACTSTORE_REQUIRE_SLURM=1 makes this a failure"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    yield
    _slurm("stop", 120)


def test_every_summary_and_figure_rule_is_a_local_rule():
    snakefile = (REPOSITORY / "workflow/Snakefile").read_text()
    local = set(re.findall(r"^    (\w+),$", snakefile.split("localrules:")[1].split("\n\n")[0], flags=re.M))
    rules = set(workflow_rules(REPOSITORY / "workflow"))  # every rule that runs a step, figure rules included
    tiny = {rule for rule in rules if re.search(r"_(summary|figure)$", rule)} | {"claims_report", "claims_verdicts", "runtimes"}
    assert tiny <= local, f"not local: {sorted(tiny - local)}"
    assert local <= rules, f"no such rule: {sorted(local - rules)}"


def _output_of(rule: str, summary: str) -> str:
    """The first output file of `rule` in a `snakemake --summary` table."""
    for line in summary.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) > 2 and fields[2] == rule and fields[0].startswith(f"{SMOKE_DIR}/results/"):
            return fields[0]
    raise AssertionError(f"{rule} has no output in the smoke run")


def run_on_slurm(run_dir: Path, one_rule_per_study: dict[str, str], targets: list[str]) -> tuple[dict[str, str], set[str]]:
    """Force one job of each given rule in a finished run (`run_dir`) and rebuild `targets` with the
    SLURM profile; assert that exactly those jobs went to SLURM, each to the partition the profile
    names and with a GPU exactly when that is the GPU partition, and that the studies' summaries
    ran locally. Returns (SLURM job id -> rule, the rules that ran locally)."""
    summary = snakemake("--nolock", "--summary", "all", "--configfile", SMOKE, cwd=run_dir).stdout
    forced = [_output_of(rule, summary) for rule in one_rule_per_study.values()]
    done = snakemake(
        *targets, "--configfile", SMOKE, "--profile", "workflow/profiles/slurm", "--quiet", "host",  # the job blocks
        "--slurm-init-seconds-before-status-checks", "1", "--forcerun", *forced,
        cwd=run_dir, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]

    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/", output))
    assert sorted(submitted.values()) == sorted(one_rule_per_study.values()), output[-6000:]
    accounting = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(submitted), "-o", "JobID,Partition,State,AllocTRES"],
        capture_output=True, text=True, check=True,
    ).stdout
    profile = yaml.safe_load((REPOSITORY / "workflow/profiles/slurm/config.yaml").read_text())
    for line in accounting.strip().splitlines():
        job, partition, state, tres = line.split("|")
        rule = submitted[job]
        wanted = profile["set-resources"].get(rule, {}).get("slurm_partition", profile["default-resources"]["slurm_partition"])
        assert state == "COMPLETED" and partition == wanted, f"{rule}: {line}"
        assert ("gres/gpu=1" in tres) == (wanted == "gpu"), f"{rule}: {line}"
    ran_locally = set(re.findall(r"^localrule (\w+):", output, flags=re.M))
    assert {f"{study}_summary" for study in one_rule_per_study} <= ran_locally, output[-6000:]
    return submitted, ran_locally


def test_one_job_of_every_study_runs_on_slurm_and_the_claims_stay_the_same(slurm_cluster, smoke_run, tmp_path):
    studies = {study for study in yaml.safe_load((smoke_run / SMOKE).read_text())
               if (smoke_run / f"workflow/rules/{study}.smk").is_file() and study not in {"data", "overview"}}
    assert studies <= set(ONE_RULE_PER_STUDY), f"no SLURM job for {sorted(studies - set(ONE_RULE_PER_STUDY))}"
    cluster_run = tmp_path / "cluster"
    shutil.copytree(smoke_run, cluster_run, symlinks=True)  # keeps mtimes and .snakemake metadata
    before = {r["id"]: (r["status"], r["measured"]) for r in json.loads((cluster_run / SMOKE_DIR / "results/claims.json").read_text())}
    _, ran_locally = run_on_slurm(cluster_run, ONE_RULE_PER_STUDY, ["claims"])
    assert "claims_report" in ran_locally
    after = {r["id"]: (r["status"], r["measured"]) for r in json.loads((cluster_run / SMOKE_DIR / "results/claims.json").read_text())}
    assert after == before, "the same seeds on the same machine give the same claims, on SLURM or not"
