"""The workflow as a user runs it: lint, dry runs at every scale, the smoke run end to end,
rerun-only-what-changed, and `dvc repro`. Runs in a fresh copy of the working tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPOSITORY, SMOKE, SMOKE_DIR, run, snakemake

from factstore import claims

pytestmark = pytest.mark.workflow

# The default profile's console is quiet (no job blocks); a `--quiet` list on the command line replaces the profile's.
SHOW_JOBS = ("--quiet", "host")


def planned_rules(output: str) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    if "Nothing to be done" in output:
        return {}
    table = output.split("Job stats:")[1].split("Reasons:")[0]
    rows = re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M)
    return {rule: int(count) for rule, count in rows if rule != "total"}




# The one lint we accept: "Specify a conda environment or container for each rule". The project
# has one environment for every rule (environment.yml + `pip install --no-deps -e .`, README);
# a per-rule conda directive cannot install the package itself from .snakemake/conda.
ACCEPTED_LINT = "Specify a conda environment or container for each rule"


def test_lint_is_clean():
    done = snakemake("--lint", cwd=REPOSITORY, check=False)
    titles = re.findall(r"^    \* (.+?)\.:$", done.stdout + done.stderr, flags=re.M)
    assert not [title for title in titles if title != ACCEPTED_LINT], done.stdout[-3000:]


@pytest.mark.parametrize("config", ["config/smoke.yaml", "config/config.yaml", "config/paper.yaml"])
def test_dry_run_of_figures_resolves(workspace, config):
    snakemake("-n", "--nolock", "figures", "all", "--configfile", config, cwd=workspace)


def test_the_console_is_quiet_without_hiding_the_plan(workspace):
    """The default profile prints no job blocks (a rule's input list names every code file its
    step loads: lines of thousands of characters), but the job counts; `--quiet host` on the
    command line replaces the profile's list and shows the blocks again (the flip). `--forceall`
    plans every job even where the shared workspace already holds a finished smoke run."""
    quiet = snakemake("-n", "--nolock", "--forceall", "figures", "--configfile", SMOKE, cwd=workspace)
    lines = (quiet.stdout + quiet.stderr).splitlines()
    assert not [line for line in lines if line.strip().startswith("input:")] and "Job stats:" in quiet.stdout
    full = snakemake("-n", "--nolock", "--forceall", "figures", "--configfile", SMOKE, *SHOW_JOBS, cwd=workspace)
    assert len([line for line in (full.stdout + full.stderr).splitlines() if line.strip().startswith("input:")]) >= 50
    assert len(lines) * 4 < len((full.stdout + full.stderr).splitlines())


def test_the_d128_regime_figure_is_part_of_figures(workspace):
    """mlp_seed_regime (the ntk_regime and robust_regime sweeps at d = 128) is drawn by
    the `figures` target at the default scale."""
    done = snakemake("-n", "--nolock", "figures", "--configfile", "config/config.yaml", *SHOW_JOBS, cwd=workspace)
    output = done.stdout + done.stderr
    assert "figures/mlp_seed_regime.png" in output and "figures/mlp_seed_regime.pdf" in output


def test_bad_config_stops_with_the_key_named(workspace, tmp_path):
    broken = yaml.safe_load((workspace / SMOKE).read_text())
    broken["assoc"]["trained"]["sead"] = 3
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    done = snakemake("-n", "--nolock", "all", "--configfile", str(path), cwd=workspace, check=False)
    assert done.returncode != 0
    assert "assoc.trained: unknown key 'sead'" in done.stdout + done.stderr


def test_smoke_run_yields_every_figure_and_the_claims(smoke_run):
    done = snakemake("-n", "all", "--configfile", SMOKE, cwd=smoke_run)
    assert planned_rules(done.stdout) == {}, "a finished run has nothing left to do"
    pngs = sorted((smoke_run / SMOKE_DIR / "figures").glob("*.png"))
    studies = {png.name.split("_")[0] for png in pngs}
    expected = {study for study in yaml.safe_load((smoke_run / SMOKE).read_text())
                if study != "data" and (smoke_run / f"workflow/rules/{study}.smk").is_file()} | {"overview"}
    assert expected <= studies, f"no figure of {sorted(expected - studies)}"
    for png in pngs:
        assert png.stat().st_size > 10_000
        assert png.with_suffix(".pdf").is_file()
        provenance = json.loads(Path(f"{png}.prov.json").read_text())
        assert provenance["git"]["commit"] != "unknown"
    records = json.loads((smoke_run / SMOKE_DIR / "results/claims.json").read_text())
    assert len(records) >= 34 and {r["status"] for r in records} <= set(claims.STATUSES)
    by_id = {r["id"]: r for r in records}
    for claim_id in ("S1.optimal-capacity", "S1.hebbian-typical", "S1.decoupled-equivalent", "S1.quarter-circle"):
        assert by_id[claim_id]["status"] in {"PASS", "FAIL"} and by_id[claim_id]["measured"]
    assert "| S1.hebbian-all |" in (smoke_run / SMOKE_DIR / "results/claims.md").read_text()


def test_every_metric_a_claim_reads_is_produced_by_its_summary_step(smoke_run):
    """Each metric named in config/claims.yaml is a row of its study's metrics table (smoke run)."""
    missing = []
    for claim in yaml.safe_load((smoke_run / "config/claims.yaml").read_text()):
        if not claim.get("checks"):
            continue
        produced = set(pd.read_csv(smoke_run / SMOKE_DIR / claim["result"]).metric)
        missing += [f"{claim['id']}: {check['metric']}" for check in claim["checks"] if check["metric"] not in produced]
    assert not missing, missing


def test_the_report_holds_every_figure_with_its_caption_the_claims_and_the_run_times(smoke_run):
    snakemake("--report", "report.html", "--configfile", SMOKE, cwd=smoke_run)
    html = (smoke_run / "report.html").read_text()
    for png in (smoke_run / SMOKE_DIR / "figures").glob("*.png"):
        assert png.name in html, f"{png.name} is not in the report"
    assert "Claims it supports: S1.quarter-circle" in html  # the spectrum figure's caption
    assert "Scale of this run: smoke" in html
    for name in ("claims.html", "claims.csv", "runtimes.csv", "versions.csv"):
        assert name in html
    runtimes = pd.read_csv(smoke_run / SMOKE_DIR / "results/runtimes.csv")
    assert {"assoc.trained", "claims.report", "figures.draw"} <= set(runtimes.step)
    assert (runtimes.wall_time_s >= 0).all()


def _edit(path: Path) -> tuple[bytes, float, float]:
    """Really change a module (Snakemake ignores a newer mtime when the content's checksum is the same)."""
    before = path.stat()
    content = path.read_bytes()
    path.write_bytes(content + b"\n# an edit\n")
    later = time.time() + 5
    os.utime(path, (later, later))
    return content, before.st_atime, before.st_mtime


def _restore(path: Path, saved: tuple[bytes, float, float]) -> None:
    path.write_bytes(saved[0])
    os.utime(path, saved[1:])


def _dry_run_after_editing(workspace: Path, module: str) -> str:
    """What a dry run of `all` (smoke config) prints with `module` edited; the file is restored after."""
    path = workspace / module
    saved = _edit(path)
    try:
        return snakemake("-n", "all", "--configfile", SMOKE, *SHOW_JOBS, cwd=workspace).stdout
    finally:
        _restore(path, saved)


ASSOC_FIGURE_RULES = {"assoc_figure"}


@pytest.mark.parametrize(
    "module, must_rerun, must_not_rerun",
    [
        ("src/factstore/plots/assoc.py", ASSOC_FIGURE_RULES, ("fetch_", "prepare_", "data_", "assoc_trained",
                                                               "assoc_hebbian", "assoc_summary", "claims", "ntk_", "attention_")),
        ("src/factstore/data/prepare.py", {"prepare_goodreads", "prepare_wikipedia", "prepare_fewrel", "data_manifest"},
         ("fetch_", "assoc_", "ntk_", "attention_")),
        ("src/factstore/dilution/archetypes.py", {"dilution_archetypes", "dilution_summary", "dilution_figure", "claims_report"},
         ("dilution_pretrain", "dilution_prune_bert", "dilution_fewrel", "fetch_", "prepare_", "assoc_", "ntk_", "attention_")),
        ("src/factstore/assoc/memory.py", {"assoc_hebbian", "assoc_trained", "assoc_rank", "assoc_summary", "claims_report"}
         | ASSOC_FIGURE_RULES, ("fetch_", "prepare_", "data_", "ntk_", "attention_")),
        ("src/factstore/claims.py", {"claims_report"},
         ("fetch_", "prepare_", "data_", "assoc_", "ntk_", "attention_", "mlp_", "committee_", "dilution_", "editing_",
          "usability_", "overview_")),
    ],
)
def test_editing_a_module_reruns_exactly_its_dependents(smoke_run, module, must_rerun, must_not_rerun):
    planned = set(planned_rules(_dry_run_after_editing(smoke_run, module))) - {"all"}
    assert must_rerun <= planned
    unrelated = {rule for rule in planned - must_rerun if rule.startswith(must_not_rerun)}
    assert not unrelated, f"editing {module} would also rerun {sorted(unrelated)}"


def test_changing_a_parameter_reruns_only_what_reads_it(smoke_run, tmp_path):
    changed = yaml.safe_load((smoke_run / SMOKE).read_text())
    changed["assoc"]["capacity_accuracy"] = 0.95
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(changed))
    done = snakemake("-n", "all", "--configfile", str(path), cwd=smoke_run)
    planned = set(planned_rules(done.stdout)) - {"all"}
    assert "assoc_summary" in planned
    assert not planned & {"assoc_trained", "assoc_hebbian", "assoc_rank", "fetch_file", "prepare_goodreads"}



def test_a_solver_setting_reruns_only_the_runs_of_that_solver(smoke_run, tmp_path):
    """Each committee run carries only its own solver's settings: least action's restarts rerun
    the tree runs solved by least action and least action on the exact reference's instances (the
    depth runs take depth.least_action_restarts), not back-propagation's, the LP's or the MILP's."""
    changed = yaml.safe_load((smoke_run / SMOKE).read_text())
    changed["committee"]["least_action"]["restarts"] += 1
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(changed))
    done = snakemake("-n", "all", "--configfile", str(path), *SHOW_JOBS, cwd=smoke_run)
    least_action_trees = sum("least_action" in solvers for solvers in changed["committee"]["tree"]["solvers"].values())
    assert planned_rules(done.stdout).get("committee_embedding") == least_action_trees + len(changed["committee"]["reference"]["n"])
    assert not any(run.endswith(("_milp", "_backprop", "_lp")) for run in _planned_committee_runs(done.stdout))


def _planned_committee_runs(output: str) -> set[str]:
    """The committee embedding runs a dry run plans (from the output files of its job blocks, which
    follow the opening 'Job stats' table)."""
    return set(re.findall(r"^\s+output: .*?results/committee/embedding_(\w+)\.csv", output, flags=re.M))


def _is_backprop_run(run: str) -> bool:
    return run.endswith("_backprop") or run.startswith("epochs_")  # the epoch sweep is back-propagation's


@pytest.mark.parametrize(
    "module, reruns_runs, reruns_multi_output",
    [
        ("src/factstore/committee/backprop.py", _is_backprop_run, True),
        ("src/factstore/committee/least_action.py", lambda run: not _is_backprop_run(run) and not run.endswith("_lp"), False),
        ("src/factstore/experiments/committee_summary.py", lambda run: False, False),
    ],
)
def test_editing_a_committee_solver_or_metric_reruns_only_its_jobs(smoke_run, module, reruns_runs, reruns_multi_output):
    """One step module per solver family and the summary apart: a solver's edit reruns the runs it
    solves (least action's also the function search's, which learns through it), a metric's edit
    the summary alone; the summary and what reads it rerun every time."""
    everything = snakemake("-n", "all", "--configfile", SMOKE, "--forcerun", "committee_embedding", *SHOW_JOBS, cwd=smoke_run)
    every_run = _planned_committee_runs(everything.stdout)
    done = _dry_run_after_editing(smoke_run, module)
    planned = planned_rules(done)
    assert _planned_committee_runs(done) == {run for run in every_run if reruns_runs(run)}
    assert ("committee_multi_output" in planned) == reruns_multi_output
    assert "committee_summary" in planned


def test_the_slurm_profile_sends_every_gpu_rule_to_a_gpu():
    gpu_rules = set()
    for rules in (REPOSITORY / "workflow/rules").glob("*.smk"):
        for block in re.split(r"^(?=rule )", rules.read_text(), flags=re.M):
            name = re.match(r"rule (\w+):", block)
            if name and re.search(r"^    resources:\n(?:        .*\n)*?        gpu=", block, flags=re.M):
                gpu_rules.add(name.group(1))
    assert {"assoc_trained", "mlp_capacity", "attention_capacity"} <= gpu_rules
    profile = yaml.safe_load((REPOSITORY / "workflow/profiles/slurm/config.yaml").read_text())["set-resources"]
    for rule in sorted(gpu_rules):
        assert profile.get(rule, {}).get("gpu") == 1 and profile[rule]["slurm_partition"] == "gpu", rule


def test_dvc_stages_match_snakemake_targets(workspace):
    stages = yaml.safe_load((workspace / "dvc.yaml").read_text())["stages"]
    targets = set(snakemake("--list-target-rules", cwd=workspace).stdout.split())
    for name, stage in stages.items():
        match = re.fullmatch(r"snakemake --cores all (\w+) --configfile \$\{config\}", stage["cmd"])
        assert match and match.group(1) == name and name in targets, stage["cmd"]
    with ThreadPoolExecutor(max_workers=2) as pool:  # one Snakemake start per stage, two at a time (read-only: --nolock)
        summaries = dict(zip(stages, pool.map(
            lambda name: snakemake("--nolock", "--summary", name, "--configfile", SMOKE, cwd=workspace,
                                  extra_env={"DVC_STAGE": name}).stdout, stages)))  # as DVC runs it: at the top
    produced = []
    for name, stage in stages.items():
        produced += [line.split("\t")[0] for line in summaries[name].splitlines()[1:] if line.strip()]
        outs = [next(iter(o)) if isinstance(o, dict) else o for o in stage.get("outs", []) + stage.get("metrics", [])]
        for out in outs:
            assert any(path == out or path.startswith(out.rstrip("/") + "/") for path in produced), f"{name}: {out}"
    all_outs = [next(iter(o)) if isinstance(o, dict) else o for s in stages.values() for o in s.get("outs", []) + s.get("metrics", [])]
    for path in set(produced):
        assert any(path == out or path.startswith(out + "/") for out in all_outs), f"{path} is not a DVC output"
    for study in yaml.safe_load((workspace / SMOKE).read_text()):
        if (workspace / f"workflow/rules/{study}.smk").is_file():
            assert study in stages, f"study {study} has no DVC stage"


def _file_digests(root: Path, folders) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for folder in folders
            for path in sorted((root / folder).rglob("*")) if path.is_file()}


def test_dvc_exp_run_keeps_a_finished_run_it_has_no_lock_entry_for(smoke_run):
    """Under DVC every run is at the top (dvc.yaml's outs). The smoke run's files copied there
    (mtimes kept, so they are up to date) are a finished run that dvc.lock does not record:
    `dvc exp run` checks out every output from the lock before it runs and removes what the lock
    lacks, so every output holding computed results is `cache: false` and survives byte for byte;
    the figures (cached) come back. Then `dvc repro` finds everything up to date."""
    for folder in ("data", "results", "figures", "logs"):
        shutil.copytree(smoke_run / SMOKE_DIR / folder, smoke_run / folder, dirs_exist_ok=True)
    assert not (smoke_run / "dvc.lock").exists()
    kept = _file_digests(smoke_run, ("data", "results"))
    figures = sorted(path.name for path in (smoke_run / "figures").iterdir())
    run(sys.executable, "-m", "dvc", "exp", "run", "-S", f"config={SMOKE}", cwd=smoke_run)
    after = _file_digests(smoke_run, ("data", "results"))
    changed = [path for path, content in kept.items() if after.get(path) != content
               and not path.endswith((".prov.json", "runtimes.csv", "versions.csv"))]
    assert not changed, f"dvc exp run changed or removed {len(changed)} files of the finished run: {changed[:5]}"
    assert sorted(path.name for path in (smoke_run / "figures").iterdir()) == figures
    env = {"FACTSTORE_CONFIG": SMOKE}
    run(sys.executable, "-m", "dvc", "repro", cwd=smoke_run, extra_env=env)
    status = run(sys.executable, "-m", "dvc", "status", cwd=smoke_run, extra_env=env).stdout
    assert "up to date" in status
    metrics = run(sys.executable, "-m", "dvc", "metrics", "show", cwd=smoke_run, extra_env=env).stdout
    assert "claims_summary.json" in metrics


def test_a_local_run_selects_jobs_only_when_one_finishes(smoke_run):
    """Snakemake's rate limit re-runs its job selection on a timer while jobs wait for a core (each
    round stats every waiting job's inputs); the Snakefile's onstart hook drops it for local runs,
    so a selection round follows only the start and each finished job. The flip: with the hook
    skipped (--no-hooks) and a 1 s timespan, the rounds outnumber the finished jobs."""
    targets = sorted(str(path.relative_to(smoke_run)) for path in (smoke_run / SMOKE_DIR / "figures").glob("ntk_*.png"))
    assert len(targets) >= 3

    def rounds_and_finished(*extra: str) -> tuple[int, int]:
        done = snakemake("--cores", "1", "--configfile", SMOKE, "--forcerun", "ntk_figure", "--verbose",
                         "--max-jobs-per-timespan", "100/1s", *extra, *targets, cwd=smoke_run)
        log = done.stdout + done.stderr
        return log.count("Ready jobs"), log.count("Finished jobid")

    rounds, finished = rounds_and_finished()
    assert finished == len(targets) and rounds <= finished + 1, (rounds, finished)
    rounds, finished = rounds_and_finished("--no-hooks")
    assert finished == len(targets) and rounds > finished + 1, (rounds, finished)
