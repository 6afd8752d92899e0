"""The claims' verdicts at a glance: `python -m factstore verdicts.draw`.

Counts the claims report's statuses per work (claims_report.verdict_counts) and draws them
(factstore.plots.overview.verdicts) as results/claims_verdicts.png and .pdf. A step of its own,
so that the claims code is no dependency of the other overview figure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factstore.claims import load_registry
from factstore.claims_report import verdict_counts, work_of
from factstore.io import read_table


def draw(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """inputs: claims=results/claims.csv (one row per claim: its id and status cell),
    registry=config/claims.yaml (each claim's work, and the works' order); params: none."""
    from factstore.plots import overview, style

    table = read_table(inputs["claims"])
    work_by_id = {claim["id"]: f"{work_of(claim)}: {claim['work']}" for claim in load_registry(inputs["registry"])}
    unknown = sorted(set(table["id"]) - set(work_by_id))
    if unknown:
        raise ValueError(f"{inputs['claims']}: claims not in {inputs['registry']}: {', '.join(unknown)}; "
                         "rerun the claims report")
    claims = pd.DataFrame({"work": table["id"].map(work_by_id), "status": table["status"]})
    counts = verdict_counts(claims, works=list(dict.fromkeys(work_by_id.values())))
    return style.outputs(overview.verdicts(counts))
