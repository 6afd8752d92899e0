"""How far a claim's verdict can be trusted: under its declared alternatives, and under resampling.

A verdict rests on the measurement and on free choices the package made (a budget, a stopping
rule, an input family, a threshold). config/claims.yaml declares each choice with the value used
and at least one reasonable alternative (`factstore.claims.choice_problems` says what a choice
holds). This module reads the verdict again

- under each alternative whose value a metrics table already holds (the claim's checks and gates,
  same ranges, with each mapped metric replaced by the alternative's metric), and
- under resampling: each check's value redrawn from a normal distribution with its standard error
  (itself a bootstrap over seeds, or a fit's), the verdict's frequency over `RESAMPLES` draws
  made with a fixed seed, so the report is the same bytes on every run,

and classes it for the headline: robust PASS / robust FAIL (the verdict survives every evaluated
alternative and holds in at least `ROBUST_FREQUENCY` of the resamples), depends on a choice (an
evaluated alternative gives another verdict: the choice is named), fragile (resampling flips it
more often than that), not probed (this run measured no alternative and the checks have no
standard error: nothing says whether the verdict would survive), UNTESTABLE (a gate does not
hold) and NOT RUN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from factstore.claims import in_range, evaluate_claim

RESAMPLES = 2000
ROBUST_FREQUENCY = 0.95  # a verdict that one resample in twenty flips is fragile
CLASSES = ("robust PASS", "robust FAIL", "depends on a choice", "fragile", "not probed", "UNTESTABLE", "NOT RUN")


def alternative_claim(claim: dict, alternative: dict) -> dict:
    """`claim` with each metric of the alternative's `metrics` mapping replaced in its checks and
    gates (ranges and everything else unchanged)."""
    renamed = alternative["metrics"]

    def swap(entries: list[dict]) -> list[dict]:
        return [entry | {"metric": renamed.get(entry["metric"], entry["metric"])} for entry in entries]

    return claim | {"checks": swap(claim.get("checks", [])), "gates": swap(claim.get("gates", []))}


def verdicts_under_alternatives(claim: dict, metrics: dict[str, pd.DataFrame], run_scale: str) -> list[dict[str, Any]]:
    """One row per declared alternative: {choice, value (the run's), alternative, status, measured,
    note}. status is the verdict under the alternative, or 'not evaluated' with the registry's
    reason (or the metric this run's table lacks)."""
    rows = []
    for choice in claim.get("choices", []):
        for alternative in choice["alternatives"]:
            row = {"choice": choice["name"], "value": str(choice["value"]), "alternative": str(alternative["value"]),
                   "pre_result": choice["decided"] == "after results" and alternative["value"] == choice.get("pre_result")}
            if "not_evaluated" in alternative:
                rows.append(row | {"status": "not evaluated", "measured": None, "note": alternative["not_evaluated"]})
                continue
            record = evaluate_claim(alternative_claim(claim, alternative), metrics, run_scale)
            if record["status"] == "NOT RUN":
                rows.append(row | {"status": "not evaluated", "measured": None,
                                   "note": f"not in this run: {record['note']}"})
                continue
            rows.append(row | {"status": record["status"], "measured": record.get("measured"), "note": ""})
    return rows


def verdict_frequency(claim: dict, record: dict, seed: int = 0, resamples: int = RESAMPLES) -> float | None:
    """The fraction of resamples in which the checks give the record's check verdict again: each
    check's value drawn from N(value, standard error) (a check without a finite, positive standard
    error keeps its value); None when no check has one (nothing to resample)."""
    measured, errors = record.get("measured") or {}, record.get("standard_errors") or {}
    checks = claim.get("checks", [])
    draws = np.random.default_rng(seed).standard_normal((resamples, len(checks)))
    holds = np.ones(resamples, dtype=bool)
    resampled_any = False
    for column, check in enumerate(checks):
        value = math.nan if measured.get(check["metric"]) is None else float(measured[check["metric"]])
        error = math.nan if errors.get(check["metric"]) is None else float(errors[check["metric"]])
        if math.isfinite(value) and math.isfinite(error) and error > 0:
            resampled_any = True
            values = value + error * draws[:, column]
            holds &= (values >= check.get("min", -math.inf)) & (values <= check.get("max", math.inf))
        else:
            holds &= in_range(value, check)
    if not resampled_any:
        return None
    observed = record.get("check_status", record["status"]) == "PASS"
    return float(np.mean(holds == observed))


def no_resampling_reason(claim: dict, record: dict) -> str:
    """Why the verdict has no resampling frequency: each check's declared reason (`no_standard_error`)."""
    reasons = [f"{check['metric']}: {check['no_standard_error']}" for check in claim.get("checks", [])
               if check.get("no_standard_error")]
    return "; ".join(reasons) or "no check has a standard error, and the registry gives no reason"


def classify(status: str, alternatives: list[dict], frequency: float | None) -> tuple[str, list[str]]:
    """(class of CLASSES, the choices whose evaluated alternative gives another verdict)."""
    if status in ("UNTESTABLE", "NOT RUN"):
        return status, []
    flips = sorted({row["choice"] for row in alternatives if row["status"] not in ("not evaluated", status)})
    if flips:
        return "depends on a choice", flips
    if frequency is not None and frequency < ROBUST_FREQUENCY:
        return "fragile", []
    if frequency is None and not any(row["status"] != "not evaluated" for row in alternatives):
        return "not probed", []
    return f"robust {status}", []


def assess(claim: dict, record: dict, metrics: dict[str, pd.DataFrame], run_scale: str) -> dict[str, Any]:
    """`record` with its `robustness`: {class, depends_on, alternatives, resampling}."""
    alternatives = verdicts_under_alternatives(claim, metrics, run_scale) if record["status"] != "NOT RUN" else []
    frequency = verdict_frequency(claim, record) if record["status"] in ("PASS", "FAIL", "UNTESTABLE") else None
    resampling = ({"frequency": frequency, "resamples": RESAMPLES} if frequency is not None
                  else {"frequency": None, "why_none": no_resampling_reason(claim, record)})
    verdict_class, depends_on = classify(record["status"], alternatives, frequency)
    return record | {"robustness": {"class": verdict_class, "depends_on": depends_on,
                                    "alternatives": alternatives, "resampling": resampling}}


def assess_all(claims: list[dict], records: list[dict], metrics: dict[str, pd.DataFrame], run_scale: str) -> list[dict]:
    """`assess` for every record of `factstore.claims.evaluate_tables` on the same tables (same
    order as `claims`)."""
    return [assess(claim, record, metrics, run_scale) for claim, record in zip(claims, records, strict=True)]
