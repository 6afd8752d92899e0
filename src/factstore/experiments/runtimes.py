"""The run's measured times and package versions, read from the provenance sidecars.

Every output of every step has a `<file>.prov.json` sidecar with the step's command, wall time,
peak memory, device, threads and package versions. This step gathers them (one row per step run, however many
files it wrote) so the report shows measured times instead of hand-kept tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from factstore import provenance


def _sidecars(folders: list[str]) -> list[dict]:
    """The sidecars under `folders` whose result file exists (a failed or interrupted job's
    outputs are deleted by Snakemake, an older sidecar of theirs may remain: it is no run)."""
    records = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.prov.json")):
            file = path.as_posix().removesuffix(".prov.json")
            if Path(file).exists():
                records.append(json.loads(path.read_text()) | {"file": file})
    return records


def table(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """params: folders (where the sidecars are, e.g. ["results", "figures"]).
    inputs: the run's final outputs (only to run last). Returns runtimes (one row per step run:
    study, step, files, wall_time_s, cpu_time_s (the step's), process_cpu_time_s (the job's,
    imports included), peak_memory_mib, device, threads) and versions (package, version, steps)."""
    runs: dict[str, dict] = {}
    for record in _sidecars(params["folders"]):
        if record.get("step", "").startswith("runtimes."):
            continue
        key = json.dumps(record.get("command"))
        run = runs.setdefault(key, {
            "study": provenance.study_of(record["step"]),
            "step": record["step"],
            "files": [],
            "wall_time_s": record["wall_time_s"],
            "cpu_time_s": (record.get("cpu_time_s") or {}).get("step"),
            "process_cpu_time_s": (record.get("cpu_time_s") or {}).get("process"),
            "peak_memory_mib": record.get("peak_memory_mib", {}).get("cpu"),
            "device": record["device"],
            "threads": record["threads"],
            "versions": record.get("versions", {}),
        })
        run["files"].append(record["file"])
    rows = [run | {"files": " ".join(run["files"])} for run in runs.values()]
    runtimes = pd.DataFrame(rows, columns=["study", "step", "files", "wall_time_s", "cpu_time_s", "process_cpu_time_s",
                                             "peak_memory_mib", "device", "threads", "versions"])
    versions = (
        pd.DataFrame([{"package": p, "version": v} for run in rows for p, v in run["versions"].items()],
                     columns=["package", "version"])
        .value_counts().rename("steps").reset_index().sort_values(["package", "version"])
    )
    runtimes = runtimes.drop(columns="versions").sort_values(["study", "step", "files"], ignore_index=True)
    return {"runtimes": runtimes, "versions": versions}
