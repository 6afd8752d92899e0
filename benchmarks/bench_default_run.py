"""Where a finished run's time went: CPU-s per study and per job, the fixed cost per job, the critical path.

Reads what a run leaves behind, and runs nothing itself:
- the provenance sidecars (`results/**/*.prov.json`, `figures/*.prov.json`): per job its step, its
  inputs, its wall time and CPU time (the step's own, and the whole process's: interpreter start
  and imports included, so their difference is the job's fixed cost). The process's CPU is read
  just before the outputs are written, so writing them (a figure's PNG and PDF) is not in it;
  the interpreter's teardown after them (~1.2-1.8 CPU-s with torch loaded) is skipped
  (`factstore.__main__.exit_without_teardown`), so it costs nothing;
- optionally Snakemake's log of the run (`.snakemake/log/<date>.snakemake.log`): the run's wall
  time from its first to its last time stamp.

The critical path is the longest chain of jobs through their inputs (each job weighted by its
wall time): no number of cores finishes the run faster than it.

    python benchmarks/bench_default_run.py                      # data/, results/ and figures/ of the last run
    python benchmarks/bench_default_run.py --snakemake-log .snakemake/log/2026-12-01T210000.snakemake.log \\
        --report benchmarks/out/default_run.json
"""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import torch

from factstore import provenance

from common import write_report


def job_table(folders: list[str]) -> pd.DataFrame:
    """One row per job (the sidecars of one command): study, step, params, outputs, inputs,
    wall_time_s, cpu_time_s (the step's), process_cpu_time_s (the job's), peak_memory_mib (the
    process's peak resident memory on the host); CPU and memory columns NaN for sidecars written
    before they were recorded."""
    jobs: dict[str, dict] = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.prov.json")):
            record = json.loads(path.read_text())
            if record.get("step", "").startswith("runtimes."):
                continue
            cpu = record.get("cpu_time_s") or {}
            job = jobs.setdefault(json.dumps(record.get("command")), {
                "study": provenance.study_of(record["step"]), "step": record["step"],
                "params": record.get("params", {}), "outputs": [],
                "inputs": sorted(str(Path(p)) for p in record.get("inputs", {}).values()),
                "wall_time_s": record["wall_time_s"], "cpu_time_s": cpu.get("step"),
                "process_cpu_time_s": cpu.get("process"),
                "peak_memory_mib": (record.get("peak_memory_mib") or {}).get("cpu"),
            })
            job["outputs"].append(str(Path(path.as_posix().removesuffix(".prov.json"))))
    return pd.DataFrame(list(jobs.values()), columns=["study", "step", "params", "outputs", "inputs", "wall_time_s",
                                                      "cpu_time_s", "process_cpu_time_s", "peak_memory_mib"])


def critical_path(jobs: pd.DataFrame) -> tuple[float, list[int]]:
    """(seconds, job indices from first to last) of the longest wall-time chain through inputs.

    A job depends on the jobs that wrote its inputs (a figure's `.png` stands for its `.pdf`
    too); inputs no job wrote (code, config, raw data) are sources."""
    producer = {}
    for index, outputs in jobs.outputs.items():
        for output in outputs:
            producer[output] = index
            producer[str(Path(output).with_suffix(""))] = index
    finish: dict[int, tuple[float, int | None]] = {}

    def longest(index: int) -> float:  # the job's finish time if every job started when its inputs existed
        if index not in finish:
            parents = {producer[i] for i in jobs.inputs[index] if i in producer and producer[i] != index}
            best_parent = max(parents, key=longest, default=None)
            start = longest(best_parent) if best_parent is not None else 0.0
            finish[index] = (start + float(jobs.wall_time_s[index]), best_parent)
        return finish[index][0]

    if jobs.empty:
        return 0.0, []
    last = max(jobs.index, key=longest)
    chain, node = [], last
    while node is not None:
        chain.append(node)
        node = finish[node][1]
    return finish[last][0], chain[::-1]


def snakemake_wall_time_s(log: Path) -> float:
    """Seconds from the first to the last `[Tue Dec  1 21:00:00 2026]` stamp of a Snakemake log."""
    stamps = [datetime.strptime(" ".join(m.split()), "%a %b %d %H:%M:%S %Y")
              for m in re.findall(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]", log.read_text(), flags=re.M)]
    if len(stamps) < 2:
        raise ValueError(f"{log}: fewer than two time stamps; is it a Snakemake log?")
    return (max(stamps) - min(stamps)).total_seconds()


def summarise(jobs: pd.DataFrame, log: Path | None = None) -> dict:
    """The report: totals, per study, the 10 costliest jobs, the fixed cost per job, the critical path."""
    jobs = jobs.assign(fixed_cpu_time_s=jobs.process_cpu_time_s - jobs.cpu_time_s)
    per_study = (jobs.groupby("study")
                 .agg(jobs=("step", "size"), wall_time_s=("wall_time_s", "sum"),
                      process_cpu_time_s=("process_cpu_time_s", "sum"), fixed_cpu_time_s=("fixed_cpu_time_s", "sum"))
                 .sort_values("process_cpu_time_s", ascending=False).round(1))
    length, chain = critical_path(jobs)
    costliest = jobs.sort_values("process_cpu_time_s", ascending=False).head(10)
    report = {
        "jobs": len(jobs),
        "process_cpu_time_s": round(float(jobs.process_cpu_time_s.sum()), 1),
        "step_cpu_time_s": round(float(jobs.cpu_time_s.sum()), 1),
        "fixed_cpu_time_s": {"total": round(float(jobs.fixed_cpu_time_s.sum()), 1),
                             "median_per_job": round(float(jobs.fixed_cpu_time_s.median()), 2)},
        "jobs_of_15_s_or_less": int((jobs.wall_time_s <= 15).sum()),
        "per_study": per_study.reset_index().to_dict(orient="records"),
        "costliest_jobs": [{"step": r.step, "output": r.outputs[0], "process_cpu_time_s": r.process_cpu_time_s,
                            "wall_time_s": r.wall_time_s} for r in costliest.itertuples()],
        "critical_path": {"wall_time_s": round(length, 1),
                          "jobs": [{"step": jobs.step[i], "output": jobs.outputs[i][0],
                                    "wall_time_s": float(jobs.wall_time_s[i])} for i in chain]},
    }
    if log is not None:
        report["snakemake_wall_time_s"] = snakemake_wall_time_s(log)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", nargs="+", default=["data", "results", "figures"])
    parser.add_argument("--snakemake-log", type=Path, default=None)
    parser.add_argument("--report", default="benchmarks/out/default_run.json")
    args = parser.parse_args()
    started = time.perf_counter()
    jobs = job_table(args.folders)
    if jobs.empty:
        raise SystemExit(f"no provenance sidecars under {args.folders}: run the workflow first")
    report = summarise(jobs, args.snakemake_log)
    print(f"{report['jobs']} jobs, {report['process_cpu_time_s']:.0f} CPU-s in their processes "
          f"({report['step_cpu_time_s']:.0f} in the steps; fixed cost {report['fixed_cpu_time_s']['total']:.0f} s, "
          f"median {report['fixed_cpu_time_s']['median_per_job']:.2f} s per job)")
    if "snakemake_wall_time_s" in report:
        print(f"wall time of the run: {report['snakemake_wall_time_s'] / 60:.1f} min")
    print(pd.DataFrame(report["per_study"]).to_string(index=False))
    print(f"critical path {report['critical_path']['wall_time_s']:.0f} s:")
    for job in report["critical_path"]["jobs"]:
        print(f"  {job['wall_time_s']:8.1f} s  {job['step']}  {job['output']}")
    write_report(report, args.report, "bench_default_run", vars(args) | {"snakemake_log": str(args.snakemake_log)},
                 torch.device("cpu"), 1, time.perf_counter() - started)


if __name__ == "__main__":
    main()
