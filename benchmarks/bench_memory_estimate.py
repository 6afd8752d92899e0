"""The memory estimates (factstore.memory_estimate) against a finished run's measured peaks.

    python benchmarks/bench_memory_estimate.py [RUN_DIR] [--configfile config/config.yaml]

RUN_DIR (default: the current directory) is a finished run's directory: every result file has a
provenance sidecar `<file>.prov.json` whose peak_memory_mib["cpu"] is its step process's peak
resident memory. Each job (bench_default_run.job_table) is matched to the workflow rule that ran
it (RULE_OF_STEP), and
every rule with an estimate at the run's config (--configfile: the config the run used) gets one
row: its largest estimated term (MB), its memory request (memory_request_mb, MB), the largest
measured peak over its jobs (MiB and MB), and measured / (baseline + estimate).

The checks, per rule: `covered`: the request is at least the measured peak (a cluster job would
not be killed for memory); `tight`: baseline + estimate is at most 10x the measured peak (the
estimate is not so loose that requests waste a node). An estimate under the measured peak minus
the baseline (ratio > 1) names a tensor its docstring's shapes missed. Exits 1 where a check fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml
from bench_default_run import job_table

from factstore import memory_estimate

MIB = 1024 * 1024 / 1e6  # MB per MiB
TIGHTNESS = 10  # baseline + estimate may be at most this many times the measured peak

# The step each estimated rule runs (workflow/rules/*.smk `step=`); a step that two rules share
# is told apart by `split`: (rule if the sidecar matches, else rule_otherwise).
RULE_OF_STEP = {
    "assoc.hebbian": "assoc_hebbian",
    "assoc.trained": "assoc_trained",  # assoc_rank when params.rank_fraction < 1
    "attention.capacity": "attention_capacity",
    "committee_multi_output.multi_output": "committee_multi_output",
    "editing.train": "editing_train",
    "mlp.capacity": "mlp_capacity",  # usability_standalone when written under results/usability/
    "mlp.anisotropy": "mlp_anisotropy",
    "mlp.whitening": "mlp_whitening",
    "mlp.whitening_regime": "mlp_whitening_regime",
    "ntk.convergence": "ntk_convergence",
    "ntk.training": "ntk_training",
    "ntk.scaling": "ntk_scaling",
    "usability.whitening": "usability_whitening",
}


def rule_of(step: str, params: dict, output: Path) -> str | None:
    """The rule whose job ran `step` with `params` and wrote `output` (a path inside the run
    directory), or None for a rule not estimated."""
    if step == "assoc.trained" and params.get("rank_fraction", 1.0) < 1:
        return "assoc_rank"
    if step == "mlp.capacity" and "usability" in output.parts:
        return "usability_standalone"
    return RULE_OF_STEP.get(step)


def measured_peaks(run_dir: Path) -> dict[str, tuple[float, int]]:
    """{rule: (largest host peak over its jobs in MiB, number of jobs)}, from the run's job table
    (bench_default_run.job_table: one row per job, whatever the number of its outputs)."""
    jobs = job_table([str(run_dir / "results")])
    peaks: dict[str, list[float]] = {}
    for job in jobs.itertuples():
        rule = rule_of(job.step, job.params, Path(job.outputs[0]).relative_to(run_dir))
        if rule and pd.notna(job.peak_memory_mib):
            peaks.setdefault(rule, []).append(float(job.peak_memory_mib))
    return {rule: (max(values), len(values)) for rule, values in peaks.items()}


def table(config: dict, run_dir: Path) -> list[dict]:
    """One row per rule with an estimate at `config` (see the module docstring)."""
    peaks = measured_peaks(run_dir)
    rules = sorted({rule for term in memory_estimate.peak_terms(config) for rule in term.rules})
    rows = []
    for rule in rules:
        estimate = max(term.bytes for term in memory_estimate.rule_terms(config, rule)) / 1e6
        request = memory_estimate.memory_request_mb(config, rule)
        peak_mib, jobs = peaks.get(rule, (None, 0))
        row = {"rule": rule, "jobs": jobs, "estimate_mb": estimate, "request_mb": request, "peak_mib": peak_mib}
        if peak_mib is not None:
            peak_mb = peak_mib * MIB
            row["ratio"] = peak_mb / (memory_estimate.BASELINE_MB + estimate)
            row["covered"] = request >= peak_mb
            row["tight"] = memory_estimate.BASELINE_MB + estimate <= TIGHTNESS * peak_mb
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", default=".", type=Path)
    parser.add_argument("--configfile", default="config/config.yaml", type=Path)
    args = parser.parse_args()
    rows = table(yaml.safe_load(args.configfile.read_text()), args.run_dir)
    print(f"baseline {memory_estimate.BASELINE_MB} MB, factor {memory_estimate.SAFETY_FACTOR}, floor "
          f"{memory_estimate.FLOOR_MB} MB; ratio = measured / (baseline + estimate)")
    print(f"{'rule':24} {'jobs':>4} {'estimate MB':>12} {'request MB':>11} {'peak MiB':>9} {'ratio':>6}  covered  tight")
    failed = False
    for row in rows:
        if row["peak_mib"] is None:
            print(f"{row['rule']:24} {0:>4} {row['estimate_mb']:>12.1f} {row['request_mb']:>11} {'-':>9} {'-':>6}  (no sidecar)")
            continue
        failed |= not (row["covered"] and row["tight"])
        print(f"{row['rule']:24} {row['jobs']:>4} {row['estimate_mb']:>12.1f} {row['request_mb']:>11} "
              f"{row['peak_mib']:>9.1f} {row['ratio']:>6.2f}  {'yes' if row['covered'] else 'NO':7}  {'yes' if row['tight'] else 'NO'}")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
