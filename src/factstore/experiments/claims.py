"""The claims step: evaluate config/claims.yaml against every study's metrics table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore import claims


def report(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """inputs: registry=config/claims.yaml and metrics_<study>=results/<study>/metrics.csv."""
    registry = claims.load_registry(inputs["registry"])
    metric_files = [path.as_posix() for name, path in inputs.items() if name.startswith("metrics_")]
    records = claims.evaluate(registry, metric_files, params["scale"],
                              warnings={path: claims.study_warnings(path) for path in metric_files})
    counts = {status: sum(r["status"] == status for r in records) for status in claims.STATUSES}
    table = pd.DataFrame(
        [{k: r.get(k) for k in ("id", "status", "expected", "scale", "run_scale", "note")}
         | {"measured": "; ".join(f"{k} = {v}" for k, v in (r["measured"] or {}).items())} for r in records]
    )
    return {"json": records, "markdown": claims.markdown(records), "summary": counts, "table": table}
