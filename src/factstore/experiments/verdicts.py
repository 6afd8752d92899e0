"""The claims' verdicts at a glance: `python -m factstore verdicts.draw`.

Counts the claims report's statuses per work (claims_report.verdict_counts) and draws them
(factstore.plots.overview.verdicts) as results/claims_verdicts.png and .pdf. A step of its own,
so that the claims code is no dependency of the other overview figure.
"""

from __future__ import annotations

import json
from pathlib import Path

from factstore.claims_report import verdict_counts


def draw(params: dict, inputs: dict[str, Path], context) -> dict[str, object]:
    """inputs: claims=results/claims.json (the claims report's records: each claim's id, work and
    status); params: none."""
    from factstore.plots import overview, style

    return style.outputs(overview.verdicts(verdict_counts(json.loads(Path(inputs["claims"]).read_text()))))
