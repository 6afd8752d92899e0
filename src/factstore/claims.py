"""Evaluate the claims registry (config/claims.yaml) against the metrics tables of the studies.

A claim has one or more checks; each check reads one metric (a row of a study's metrics.csv with
columns metric, value, detail) and compares it with an expected range. A claim is PASS when every
check holds, FAIL when one does not, NOT RUN when its result file or metric does not exist.
Where the metrics table gives a metric's `standard_error`, the record carries it and the margin of
the value from its nearest bound in standard errors (positive inside the range, negative outside);
a verdict whose value lies within one standard error of a bound is `fragile`.

A claim may also declare `gates`: testability conditions on the model or the measurement (the
model learned something; the resolution can decide), never on the claim's own metric, written in
the registry before a run with the same shape as a check (`metric`, `min` / `max`, `why`, and an
optional `result` when the gate's metric lives in another study's table). When a gate fails, the
claim reads UNTESTABLE, whatever its checks gave: the record keeps the gate's measured value and,
beside it, the status the checks alone gave (`check_status`). A passing gate changes nothing.
The expected ranges are the papers' claims, written before the runs: never tuned to pass.

A claim whose wording or range changed after results were seen keeps one `revised` record per
change (date, the previous wording and ranges, the reason for the revision,
and the checks as that revision set them); the report prints them under the claim, and
`unrecorded_range_changes` finds a range that differs from its last revision.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from factstore.io import read_yaml

STATUSES = ("PASS", "FAIL", "UNTESTABLE", "NOT RUN")
CLAIM_KEYS = {"id", "short", "work", "statement", "result", "checks", "gates", "scale", "figures", "revised", "choices"}
CHECK_KEYS = {"metric", "min", "max", "why", "no_standard_error"}
GATE_KEYS = CHECK_KEYS | {"result"}
REVISION_KEYS = {"date", "previous_statement", "previous_checks", "reason", "checks"}
CHOICE_KEYS = {"name", "value", "why", "decided", "pre_result", "alternatives"}
ALTERNATIVE_KEYS = {"value", "metrics", "not_evaluated"}
DECIDED = ("before results", "after results")


class ClaimsError(ValueError):
    """The registry itself is malformed."""


def load_registry(path: str | Path) -> list[dict[str, Any]]:
    """Read and check the registry: valid YAML, a list of claims with unique ids and known keys,
    checks and gates with a metric and at least one finite numeric bound (min <= max), revised
    records and declared choices of the right shape. A problem raises ClaimsError, one line naming
    the file, the claim and the key."""
    try:
        claims = read_yaml(path)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ClaimsError(f"{path}: not valid YAML{where}: {getattr(error, 'problem', None) or error}") from None
    if not isinstance(claims, list) or not all(isinstance(claim, dict) for claim in claims):
        raise ClaimsError(f"{path}: expected a list of claims, each a mapping")
    seen = set()
    for claim in claims:
        missing = {"id", "work", "statement", "scale"} - set(claim)
        unknown = set(claim) - CLAIM_KEYS
        if missing or unknown:
            raise ClaimsError(f"{path}: claim {claim.get('id', '?')}: missing {sorted(missing)}, unknown {sorted(unknown)}")
        if claim["id"] in seen:
            raise ClaimsError(f"{path}: claim id {claim['id']} appears twice")
        seen.add(claim["id"])
        for kind, entries in (("check", claim.get("checks", [])), ("gate", claim.get("gates", []))):
            for entry in entries:
                if problem := _bound_problem(entry, kind):
                    raise ClaimsError(f"{path}: claim {claim['id']}: {problem}")
        for gate in claim.get("gates", []):
            if gate["metric"] in {check["metric"] for check in claim.get("checks", [])}:
                raise ClaimsError(f"{path}: claim {claim['id']}: gate {gate['metric']} is one of the claim's own metrics; "
                                  "a gate is about the model or the measurement")
        for revision in claim.get("revised", []):
            if set(revision) != REVISION_KEYS:
                raise ClaimsError(f"{path}: claim {claim['id']}: a revised record needs exactly {sorted(REVISION_KEYS)}")
        for problem in choice_problems(claim):
            raise ClaimsError(f"{path}: claim {claim['id']}: {problem}")
    return claims


def _bound_problem(entry: Any, kind: str) -> str | None:
    """What is wrong with a check or gate (None when nothing is): its keys, its metric, its bounds
    (real, finite numbers, at least one, min <= max)."""
    keys = CHECK_KEYS if kind == "check" else GATE_KEYS
    if not isinstance(entry, dict) or not isinstance(entry.get("metric"), str):
        return f"a {kind} needs a 'metric' name"
    name = f"{kind} {entry['metric']}"
    if unknown := sorted(set(entry) - keys):
        return f"{name}: unknown key {unknown[0]!r} (a {kind} may have {sorted(keys)})"
    if kind == "gate" and "why" not in entry:
        return f"{name} needs a 'why'"
    bounds = {bound: entry[bound] for bound in ("min", "max") if bound in entry}
    if not bounds:
        return f"{name} needs a 'min' or a 'max'"
    for bound, value in bounds.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            hint = " (YAML reads 1e3 as text: write 1000 or 1.0e+3)" if isinstance(value, str) else ""
            return f"{name}: {bound} must be a finite number, got {value!r}{hint}"
    if bounds.get("min", -math.inf) > bounds.get("max", math.inf):
        return f"{name} has min > max"
    return None


def choice_problems(claim: dict) -> list[str]:
    """What is wrong with the claim's declared `choices` (empty when nothing is).

    A choice is a free decision the verdict rests on (a budget, a stopping rule, an input family, a
    fit window, a threshold): its `name`, the `value` the run uses, whether it was `decided` before
    or after results were seen (after: `pre_result` is the value held before, and one alternative
    has it), and at least one alternative. An alternative is evaluated from `metrics`
    ({metric of a check or gate: the metric that holds the alternative's value, in the same
    table}) or says why not (`not_evaluated`, e.g. it needs the paper's sizes).
    """
    problems = []
    known = {check["metric"] for check in claim.get("checks", []) + claim.get("gates", [])}
    for choice in claim.get("choices", []):
        name = choice.get("name", "?")
        if set(choice) - CHOICE_KEYS or not {"name", "value", "decided", "alternatives"} <= set(choice):
            problems.append(f"choice '{name}' needs name, value, decided, alternatives and may have {sorted(CHOICE_KEYS)}")
            continue
        if choice["decided"] not in DECIDED:
            problems.append(f"choice '{name}': decided must be one of {list(DECIDED)}")
        alternatives = choice["alternatives"]
        if not isinstance(alternatives, list) or not alternatives:
            problems.append(f"choice '{name}' needs at least one alternative")
            continue
        if choice["decided"] == "after results" and choice.get("pre_result") not in [a.get("value") for a in alternatives]:
            problems.append(f"choice '{name}' was decided after results: its pre_result must be one of its alternatives")
        for alternative in alternatives:
            if set(alternative) - ALTERNATIVE_KEYS or "value" not in alternative or \
                    ("metrics" in alternative) == ("not_evaluated" in alternative):
                problems.append(f"choice '{name}': an alternative needs a value and either metrics or not_evaluated")
            elif unknown := set(alternative.get("metrics", {})) - known:
                problems.append(f"choice '{name}': alternative metrics {sorted(unknown)} are not the claim's checks or gates")
    return problems


def _ranges(checks: list[dict]) -> list[tuple]:
    return [(check["metric"], check.get("min"), check.get("max")) for check in checks]


def unrecorded_range_changes(claims: list[dict[str, Any]]) -> list[str]:
    """Ids of revised claims whose current checks differ (metric or range) from the checks their
    last `revised` record set: a range changed without saying when and why."""
    return [
        claim["id"] for claim in claims
        if claim.get("revised") and _ranges(claim.get("checks", [])) != _ranges(claim["revised"][-1]["checks"])
    ]


def short_statement(claim: dict) -> str:
    """The claim's `short` line, or, without one, its statement's first clause (up to the first
    parenthesis, colon or semicolon)."""
    if claim.get("short"):
        return claim["short"]
    return re.split(r"\s*[(:;]", claim["statement"], maxsplit=1)[0].strip()


def claims_shown_in(claims: list[dict[str, Any]], figure: str) -> list[str]:
    """Ids of the claims whose `figures` list `figure` (e.g. 'assoc_accuracy'), in registry order."""
    return [claim["id"] for claim in claims if figure in claim.get("figures", [])]


def _format(value: float | str | None) -> str:
    if isinstance(value, str):
        return value
    return "nan" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _expected(check: dict) -> str:
    low, high = check.get("min"), check.get("max")
    if low is not None and high is not None:
        return f"{check['metric']} in [{low}, {high}]"
    return f"{check['metric']} >= {low}" if low is not None else f"{check['metric']} <= {high}"


def _revision_note(revision: dict) -> str:
    previous = "; ".join(_expected(check) for check in revision["previous_checks"]) or "no check"
    return f"revised {revision['date']}: was \"{revision['previous_statement']}\" ({previous}); why: {revision['reason']}"


def _json_number(value: float) -> float | str | None:
    # JSON has no infinity: an infinite measurement (a bound with nothing to bound it) is the
    # string "inf" / "-inf"; NaN (not measurable) is null.
    return float(value) if math.isfinite(value) else (None if math.isnan(value) else str(value))


def _as_float(value: float | str | None) -> float:
    """A JSON number of `_json_number` back to a float (null -> NaN, "inf" -> inf)."""
    return math.nan if value is None else float(value)


def in_range(value: float, check: dict) -> bool:
    return math.isfinite(value) and check.get("min", -math.inf) <= value <= check.get("max", math.inf)


def evaluate_gates(claim: dict, metrics: dict[str, pd.DataFrame]) -> tuple[bool | None, dict[str, Any]]:
    """(every gate holds, the gates' measured values); None instead of a bool when a gate's
    metric or table is missing (the claim then cannot be called testable or not)."""
    measured, passed = {}, True
    for gate in claim.get("gates", []):
        table = metrics.get(gate.get("result", claim.get("result")))
        values = {} if table is None else dict(zip(table["metric"], table["value"]))
        if gate["metric"] not in values:
            return None, measured
        value = float(values[gate["metric"]])
        measured[gate["metric"]] = _json_number(value)
        passed &= in_range(value, gate)
    return passed, measured


def margin_in_standard_errors(value: float, check: dict, standard_error: float) -> float:
    """(distance of `value` from the nearer bound of `check`'s range) / standard_error: >= 0
    inside the range, < 0 outside (as `in_range` decides); NaN without a finite, positive
    standard error."""
    if not (math.isfinite(value) and math.isfinite(standard_error) and standard_error > 0):
        return math.nan
    distances = [value - check["min"]] if "min" in check else []
    distances += [check["max"] - value] if "max" in check else []
    if not distances:
        return math.nan
    nearest = min(distances)
    margin = nearest / standard_error
    if margin == 0 and nearest < 0:  # outside by less than the quotient can show: still outside
        return -math.ulp(0.0)
    return margin


def _table_values(table: pd.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """{metric: value} and {metric: standard_error} (NaN where the table gives none)."""
    values = dict(zip(table["metric"], table["value"].astype(float)))
    errors = table["standard_error"] if "standard_error" in table else pd.Series(math.nan, index=table.index)
    return values, dict(zip(table["metric"], errors.astype(float)))


def _uncertainty(checks: list[dict], values: dict, errors: dict) -> dict[str, Any]:
    """The measured checks' standard errors and margins (in standard errors) and whether any
    value lies within one standard error of its bound (`fragile`)."""
    margins = {check["metric"]: margin_in_standard_errors(values[check["metric"]], check,
                                                          errors.get(check["metric"], math.nan))
               for check in checks}
    return {
        "standard_errors": {check["metric"]: _json_number(errors.get(check["metric"], math.nan)) for check in checks},
        "margins": {metric: _json_number(margin) for metric, margin in margins.items()},
        "fragile": any(math.isfinite(margin) and abs(margin) < 1 for margin in margins.values()),
    }


def evaluate_claim(claim: dict, metrics: dict[str, pd.DataFrame], run_scale: str) -> dict[str, Any]:
    """One record of the report for `claim`, given the metrics tables by result path.

    `note` says only what is specific to this claim (a missing metric, a failed gate); that the
    ranges hold at the claim's scale is the report header's (the record keeps both scales).
    """
    record = {
        "id": claim["id"],
        "short": short_statement(claim),
        "work": claim["work"],
        "statement": claim["statement"],
        "scale": claim["scale"],
        "run_scale": run_scale,
        "result": claim.get("result"),
        "figures": list(claim.get("figures", [])),
        "expected": "; ".join(_expected(check) for check in claim.get("checks", [])) or "not yet specified",
        "ranges": {check["metric"]: {bound: check[bound] for bound in ("min", "max") if bound in check}
                   for check in claim.get("checks", [])},
        "revised": [_revision_note(revision) for revision in claim.get("revised", [])],
    }
    checks = claim.get("checks", [])
    table = metrics.get(claim.get("result"))
    if not checks or table is None:
        return record | {"status": "NOT RUN", "measured": None, "note": "study not run (or not yet implemented)"}
    values, errors = _table_values(table)
    missing = [check["metric"] for check in checks if check["metric"] not in values]
    if missing:
        measured = {m: _json_number(values[m]) for m in (c["metric"] for c in checks) if m in values}
        return record | {"status": "NOT RUN", "measured": measured or None, "note": f"metric {missing[0]} missing"}
    measured = {check["metric"]: _json_number(values[check["metric"]]) for check in checks}
    check_status = "PASS" if all(in_range(values[check["metric"]], check) for check in checks) else "FAIL"
    record |= {"measured": measured} | _uncertainty(checks, values, errors)
    if not claim.get("gates"):
        return record | {"status": check_status, "note": ""}
    gates_hold, gates_measured = evaluate_gates(claim, metrics)
    record |= {"gates": gates_measured, "check_status": check_status}
    if gates_hold is None:
        return record | {"status": "NOT RUN", "note": "a testability gate's metric is missing"}
    if not gates_hold:
        failed = "; ".join(f"{_expected(gate)} (measured {_format(gates_measured[gate['metric']])})"
                           for gate in claim["gates"] if not in_range(_as_float(gates_measured[gate["metric"]]), gate))
        return record | {"status": "UNTESTABLE", "note": f"untestable: gate {failed} does not hold "
                                                         f"(the checks alone give {check_status})"}
    return record | {"status": check_status, "note": ""}


def with_warnings(record: dict[str, Any], messages: list[str]) -> dict[str, Any]:
    """`record` with the study's result warnings (factstore.errors.ResultWarning) in its note:
    a verdict read from a search that found nothing, or from a model that ended far from its
    training target, must not look like a clean one."""
    if not messages:
        return record
    shown = f"WARNING ({len(messages)} in this study's logs): {messages[0]}" + (" ..." if len(messages) > 1 else "")
    return record | {"warnings": messages, "note": "; ".join(filter(None, [record.get("note", ""), shown]))}


def read_metrics(metric_files: dict[str, str | Path]) -> dict[str, pd.DataFrame]:
    """{result: its metrics table} for each of `metric_files` (a claim's `result` -> this run's
    file) that exists; a missing file leaves its claims NOT RUN."""
    return {result: pd.read_csv(path) for result, path in metric_files.items() if Path(path).exists()}


def evaluate_tables(claims: list[dict], metrics: dict[str, pd.DataFrame], run_scale: str,
                    warnings: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Evaluate every claim on the metrics tables of `read_metrics`.
    warnings: result -> the ResultWarnings of the steps that made that study's results."""
    records = [evaluate_claim(claim, metrics, run_scale) for claim in claims]
    return [with_warnings(record, (warnings or {}).get(record["result"], []) if record["status"] != "NOT RUN" else [])
            for record in records]


def evaluate(claims: list[dict], metric_files: dict[str, str | Path], run_scale: str,
             warnings: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Evaluate every claim; metric_files maps a claim's `result` (results/<study>/metrics.csv) to
    the file of this run that holds it (`read_metrics`, then `evaluate_tables`)."""
    return evaluate_tables(claims, read_metrics(metric_files), run_scale, warnings)


def study_warnings(metrics_file: str | Path) -> list[str]:
    """The distinct ResultWarnings in the provenance sidecars of the study folder that holds
    `metrics_file` (results/<study>/metrics.csv -> results/<study>/**/*.prov.json), whose file
    still exists, in file order."""
    messages: list[str] = []
    for sidecar in sorted(Path(metrics_file).parent.rglob("*.prov.json")):
        if not Path(sidecar.as_posix().removesuffix(".prov.json")).exists():
            continue
        for message in json.loads(sidecar.read_text()).get("warnings", []):
            if message not in messages:
                messages.append(message)
    return messages
