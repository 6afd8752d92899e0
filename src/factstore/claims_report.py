"""The claims report as a reader sees it, from the records of `factstore.claims.evaluate`.

One document, two renderings (results/claims.md and results/claims.html, the latter in the
Snakemake report): a headline counting PASS / FAIL / UNTESTABLE / NOT RUN (and how many verdicts
are fragile), the scale note once, then one section per work (S0 ... S4) with a one-line count
and one row per claim: its short statement, status, measured value(s) with their standard errors
against the expected range, the margin in standard errors, the figures that show it and a note
only where one says something about that claim. Revisions are footnotes of their claim. A study's
result warnings (factstore.claims.with_warnings puts them on every claim the study decides) are
written once per study, under its work's table, each of its claims marked with the warnings' label
(W1, W2, ...) in its note.

Also here: the flat {claim id: {metric: value}} that DVC reads as a metric
(results/claims_metrics.json) and what changed between two runs' records (`changes`, which
`factstore.run_comparison` prints).
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from factstore.claims import STATUSES
from factstore.robustness import CLASSES

Record = dict[str, Any]


def work_of(record: Record) -> str:
    """The study a claim belongs to, from its id: 'S1.hebbian-all' -> 'S1'."""
    return record["id"].split(".", 1)[0]


def counts(records: list[Record]) -> dict[str, int]:
    """{status: number of records with it}, in STATUSES order (zeros included)."""
    return {status: sum(r["status"] == status for r in records) for status in STATUSES}


def verdict_counts(records: list[Record]) -> pd.DataFrame:
    """Claims per work and status: the figure claims_verdicts draws, the report's per-work count
    lines (`counts`) as one table. Rows 'S0: <title>' in the report's order, columns STATUSES in
    their order, zeros included, so two runs' tables line up."""
    works = sorted({work_of(r) for r in records})
    rows = {f"{work}: {next(r['work'] for r in records if work_of(r) == work)}":
            counts([r for r in records if work_of(r) == work]) for work in works}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(STATUSES)).rename_axis("work").astype(int)


def count_line(records: list[Record]) -> str:
    """'23 PASS, 8 FAIL, 1 UNTESTABLE, 2 NOT RUN' (plus ', 3 fragile' when some are)."""
    line = ", ".join(f"{count} {status}" for status, count in counts(records).items())
    fragile = sum(is_fragile(r) for r in records)
    return line + (f" ({fragile} fragile)" if fragile else "")


def format_number(value: float | str | None) -> str:
    """4 significant digits; 'inf' / '-inf' as given; None (not measurable) as 'nan'."""
    if isinstance(value, str):
        return value
    return "nan" if value is None or not math.isfinite(value) else f"{value:.4g}"


def is_fragile(record: Record) -> bool:
    """A PASS or FAIL within one standard error of a bound, or one that resampling flips in more
    than 1 - robustness.ROBUST_FREQUENCY of the draws."""
    return record["status"] in ("PASS", "FAIL") and (
        bool(record.get("fragile")) or (record.get("robustness") or {}).get("class") == "fragile")


def status_text(record: Record) -> str:
    """The status cell: 'PASS', 'FAIL, fragile', 'UNTESTABLE (checks: PASS)'."""
    if record["status"] == "UNTESTABLE":
        return f"UNTESTABLE (checks: {record['check_status']})"
    if is_fragile(record):
        return f"{record['status']}, fragile"
    return record["status"]


def robustness_counts(records: list[Record]) -> dict[str, int]:
    """{class: number of records}, in robustness.CLASSES order (records without one are left out)."""
    classes = [(r.get("robustness") or {}).get("class") for r in records]
    return {name: classes.count(name) for name in CLASSES}


def robustness_line(records: list[Record]) -> str:
    """'Robust: 12 PASS, 5 FAIL; 6 depend on a choice; 4 fragile (seeds); 2 not probed; 6 UNTESTABLE
    (a gate); 1 NOT RUN'."""
    n = robustness_counts(records)
    return (f"Robust: {n['robust PASS']} PASS, {n['robust FAIL']} FAIL; {n['depends on a choice']} depend on a "
            f"choice; {n['fragile']} fragile (seeds); {n['not probed']} not probed; {n['UNTESTABLE']} UNTESTABLE "
            f"(a gate); {n['NOT RUN']} NOT RUN")


def _percent(frequency: float) -> str:
    """'100%', or one decimal rounded down: 94.96% must not read as the 95% a robust verdict needs."""
    return "100%" if frequency == 1 else f"{math.floor(1000 * frequency) / 10:.1f}%"


def robustness_text(record: Record) -> str:
    """The robustness cell: 'robust (2 of 3 alternatives evaluated; 100% of resamples)', 'depends
    on: spectrum family', 'fragile: 71% of resamples'."""
    robustness = record.get("robustness")
    if not robustness:
        return "-"
    rows = robustness["alternatives"]
    evaluated = sum(row["status"] != "not evaluated" for row in rows)
    frequency = robustness["resampling"]["frequency"]
    resampled = f"{_percent(frequency)} of resamples" if frequency is not None else "no resampling"
    if robustness["class"] == "depends on a choice":
        return "depends on: " + ", ".join(robustness["depends_on"])
    if robustness["class"] == "fragile":
        return f"fragile: {resampled}"
    if robustness["class"].startswith("robust"):
        return f"robust ({evaluated} of {len(rows)} alternatives evaluated; {resampled})"
    if robustness["class"] == "not probed":
        return f"not probed (0 of {len(rows)} alternatives evaluated; no resampling)"
    return f"{robustness['class']} ({evaluated} of {len(rows)} alternatives evaluated)"


def choice_lines(record: Record) -> list[str]:
    """One line per declared alternative: 'spectrum family: geometric -> linspace: FAIL
    (ntk_break_kappa_budget = nan)', or '... : not evaluated (needs the paper's sizes)'; then why
    the verdict has no resampling, where it has none."""
    robustness = record.get("robustness") or {}
    lines = []
    for row in robustness.get("alternatives", []):
        before = " (the value before results were seen)" if row["pre_result"] else ""
        if row["status"] == "not evaluated":
            outcome = f"not evaluated ({row['note']})"
        else:
            measured = "; ".join(f"{metric} = {format_number(value)}" for metric, value in (row["measured"] or {}).items())
            outcome = row["status"] + (f" ({measured})" if measured else "")
        lines.append(f"{row['choice']}: {row['value']} -> {row['alternative']}{before}: {outcome}")
    resampling = robustness.get("resampling") or {}
    if robustness and resampling.get("frequency") is None and record["status"] in ("PASS", "FAIL", "UNTESTABLE"):
        lines.append(f"no resampling: {resampling.get('why_none')}")
    return lines


def measured_text(record: Record) -> str:
    """'slope = -0.52 ± 0.03; r2 = 0.98' (the ± where the metrics table gives a standard error)."""
    errors = record.get("standard_errors") or {}
    parts = []
    for metric, value in (record.get("measured") or {}).items():
        error = errors.get(metric)
        parts.append(f"{metric} = {format_number(value)}" + (f" ± {format_number(error)}" if error is not None else ""))
    return "; ".join(parts) or "-"


def margin_text(record: Record) -> str:
    """The margins in standard errors, '+3.2' per metric that has one, '-' where none has."""
    margins = {m: v for m, v in (record.get("margins") or {}).items() if v is not None}
    if not margins:
        return "-"
    if len(margins) == 1:
        return f"{next(iter(margins.values())):+.1f}"
    return "; ".join(f"{metric} {margin:+.1f}" for metric, margin in margins.items())


def _range_text(bounds: dict) -> str:
    if "min" in bounds and "max" in bounds:
        return f"in [{format_number(bounds['min'])}, {format_number(bounds['max'])}]"
    return f">= {format_number(bounds['min'])}" if "min" in bounds else f"<= {format_number(bounds['max'])}"


def check_texts(record: Record) -> list[str]:
    """One line per check, measured against expected: 'slope = -0.52 ± 0.03, expected <= -0.4
    (+4.0 SE) ✓'; ✓ / ✗ whether the check holds, '?' where the metric is missing."""
    measured, errors = record.get("measured") or {}, record.get("standard_errors") or {}
    margins = record.get("margins") or {}
    lines = []
    for metric, bounds in (record.get("ranges") or {}).items():
        if metric not in measured:
            lines.append(f"{metric}: missing, expected {_range_text(bounds)} ?")
            continue
        value = measured[metric]
        number = math.nan if value is None else float(value)
        holds = math.isfinite(number) and bounds.get("min", -math.inf) <= number <= bounds.get("max", math.inf)
        error = errors.get(metric)
        margin = margins.get(metric)
        lines.append(f"{metric} = {format_number(value)}" + (f" ± {format_number(error)}" if error is not None else "")
                     + f", expected {_range_text(bounds)}" + (f" ({margin:+.1f} SE)" if margin is not None else "")
                     + (" ✓" if holds else " ✗"))
    return lines or ["no check yet"]


def header_lines(records: list[Record]) -> list[str]:
    """The headline and what holds for every row (statuses, scales, margins), once."""
    run_scales = sorted({r["run_scale"] for r in records})
    other_scale = sorted({r["scale"] for r in records if r["scale"] not in ("any", *run_scales)})
    scale_note = (f"The expected ranges are the papers' claims at the scale each claim names "
                  f"({', '.join(other_scale)} for most); this run is {', '.join(run_scales)} scale, so a FAIL "
                  "may be a scale effect: compare with a run at the claim's scale." if other_scale else
                  f"This run is {', '.join(run_scales)} scale, the scale of every claim's range.")
    return [
        f"**{count_line(records)}** of {len(records)} claims.",
        "",
        f"**{robustness_line(records)}.**",
        "",
        scale_note,
        "PASS / FAIL: every check / some check holds; UNTESTABLE: a testability gate declared before the run "
        "(the model learned; the measurement can decide) does not hold, the checks' own verdict beside it; "
        "NOT RUN: no result yet. Each check: the measured value ± one standard error where the study gives "
        "one, the expected range, the margin (distance to the nearer bound in standard errors, negative "
        "outside the range) and ✓ / ✗; 'fragile': a value within one standard error of a bound, or a verdict "
        "that resampling the values within their standard errors flips more than once in twenty draws. "
        "Robustness: the verdict read again under every alternative declared for the free choices it rests on "
        "(config/claims.yaml) whose value this run measured, and under resampling; robust when it survives "
        "both, not probed when this run could try neither; each claim's alternatives are listed under its "
        "work's table (docs/claims-report.md).",
    ]


WARNING_NOTE = "WARNING ("  # how factstore.claims.with_warnings starts the warning it adds to a note


def own_note(record: Record) -> str:
    """The record's note without the study's warnings appended to it (those are shown once per
    study, study_warning_lines)."""
    note = record.get("note", "")
    if not record.get("warnings") or WARNING_NOTE not in note:
        return note
    return note[:note.index(WARNING_NOTE)].rstrip("; ")


def study_warning_labels(rows: list[Record], first: int = 1) -> dict[tuple[str, tuple[str, ...]], str]:
    """{(result, warnings): 'W<n>'} for each study (result file) of `rows` with warnings, numbered
    from `first` in the order of the rows."""
    labels: dict[tuple[str, tuple[str, ...]], str] = {}
    for r in rows:
        key = (str(r.get("result")), tuple(r.get("warnings") or ()))
        if key[1] and key not in labels:
            labels[key] = f"W{first + len(labels)}"
    return labels


def warning_label(record: Record, labels: dict[tuple[str, tuple[str, ...]], str]) -> str:
    """The record's study-warning label ('W1'), or '' where its study logged none."""
    return labels.get((str(record.get("result")), tuple(record.get("warnings") or ())), "")


def note_text(record: Record, labels: dict[tuple[str, tuple[str, ...]], str]) -> str:
    """The note cell: what is specific to the claim, then '⚠ W1' where its study logged warnings."""
    label = warning_label(record, labels)
    return "; ".join(filter(None, [own_note(record), f"⚠ {label}" if label else ""]))


def study_warning_lines(rows: list[Record], labels: dict[tuple[str, tuple[str, ...]], str]) -> list[str]:
    """One line per study with warnings: its label, the claims it marks, and every warning once."""
    lines = []
    for (result, messages), label in labels.items():
        marked = [r["id"] for r in rows if warning_label(r, labels) == label]
        lines.append(f"⚠ {label}: WARNING ({len(messages)} in the logs of the study behind {result}, for its "
                     f"{len(marked)} claim{'s' if len(marked) != 1 else ''}: {', '.join(marked)}): "
                     + "; ".join(f"({n}) {m}" for n, m in enumerate(messages, 1)))
    return lines


FEWREL_SETS = {"fewrel_val_wiki": "FewRel 1.0 val_wiki.json (16 relations x 700 sentences)",
               "fewrel_train_wiki": "FewRel 1.0 train_wiki.json (64 relations x 700 sentences, the paper's set)"}
FEWREL_METRICS = ("fewrel_labels_spearman", "fewrel_samples_kept_ratio")  # their detail starts '<source>: '


def data_source_line(metrics: dict[str, Any]) -> str:
    """Which FewRel set S3's FewRel results were measured on, in one line ('' before the dilution
    study ran). metrics: {result: metrics table} (factstore.claims.read_metrics); the dilution
    summary starts these metrics' details with the processed table's `source` column."""
    table = metrics.get("results/dilution/metrics.csv")
    if table is None:
        return ""
    details = table.loc[table["metric"].isin(FEWREL_METRICS), "detail"].astype(str)
    names = sorted({name for detail in details for name in detail.split(":")[0].split(",") if name in FEWREL_SETS})
    if not names:
        return ""
    return f"Data: S3's FewRel results were measured on {' and '.join(FEWREL_SETS[n] for n in names)}."


def markdown(records: list[Record], data_source: str = "") -> str:
    """results/claims.md: the headline, the data-source line (`data_source_line`) where given, then
    one section per work with its claims' rows and their revisions as footnotes."""
    lines = ["# Claims report", "", *header_lines(records), *(["", data_source] if data_source else [])]
    footnote, warned = 0, 0
    for work in sorted({work_of(r) for r in records}):
        rows = [r for r in records if work_of(r) == work]
        labels = study_warning_labels(rows, warned + 1)
        warned += len(labels)
        lines += ["", f"## {work}: {rows[0]['work']}", "", count_line(rows), "",
                  "| id | status | robustness | claim | checks: measured ± SE, expected (margin in SE) | figures | note |",
                  "|---|---|---|---|---|---|---|"]
        notes, choices = [], []
        for r in rows:
            marks = ""
            for revision in r.get("revised", []):
                footnote += 1
                marks += f"[^{footnote}]"
                notes.append(f"[^{footnote}]: {r['id']} {revision}")
            figures = ", ".join(f"[{name}](../figures/{name}.png)" for name in r.get("figures", [])) or "-"
            cells = [r["id"], status_text(r), robustness_text(r), r["short"] + marks, "<br>".join(check_texts(r)),
                     figures, note_text(r, labels)]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
            choices += [f"- {r['id']}: {line}" for line in choice_lines(r)]
        lines += ["", *study_warning_lines(rows, labels)] if labels else []
        lines += ["", f"Declared choices of {work}, each alternative's verdict:", "", *choices] if choices else []
        lines += ["", *notes] if notes else []
    lines += ["", "Statements, ranges and gates: config/claims.yaml; metrics: results/<study>/metrics.csv."]
    return "\n".join(lines) + "\n"


def html_page(records: list[Record]) -> str:
    """results/claims.html, the same content as `markdown` for the Snakemake report."""
    escape = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Claims report</title><style>"
             "body{font-family:sans-serif;font-size:14px}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}th{background:#eee}"
             ".PASS{color:#176117}.FAIL{color:#a11}.UNTESTABLE{color:#a66a00}.fragile{font-style:italic}"
             "</style></head><body><h1>Claims report</h1>"]
    header = header_lines(records)
    parts += [f"<p><b>{escape(count_line(records))}</b> of {len(records)} claims.</p>",
              f"<p><b>{escape(robustness_line(records))}.</b></p>"]
    parts += [f"<p>{escape(line)}</p>" for line in header[4:]]
    warned = 0
    for work in sorted({work_of(r) for r in records}):
        rows = [r for r in records if work_of(r) == work]
        labels = study_warning_labels(rows, warned + 1)
        warned += len(labels)
        parts += [f"<h2>{escape(work)}: {escape(rows[0]['work'])}</h2><p>{escape(count_line(rows))}</p>",
                  "<table><tr><th>id</th><th>status</th><th>robustness</th><th>claim</th>"
                  "<th>checks: measured ± SE, expected (margin in SE)</th><th>figures</th><th>note</th></tr>"]
        for r in rows:
            css = r["status"].replace(" ", "_") + (" fragile" if is_fragile(r) else "")
            revisions = "".join(f"<br><small>{escape(revision)}</small>" for revision in r.get("revised", []))
            choices = "".join(f"<br><small>{escape(line)}</small>" for line in choice_lines(r))
            cells = [escape(r["id"]), f"<span class='{css}'>{escape(status_text(r))}</span>",
                     escape(robustness_text(r)) + choices, escape(r["short"]) + revisions, "<br>".join(map(escape, check_texts(r))),
                     escape(", ".join(r.get("figures", [])) or "-"), escape(note_text(r, labels))]
            parts.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
        parts.append("</table>")
        parts += [f"<p>{escape(line)}</p>" for line in study_warning_lines(rows, labels)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def flat_metrics(records: list[Record]) -> dict[str, dict[str, float | str | None]]:
    """{claim id: {metric: measured value}} for every measured claim (its gates' values too): the
    shape `dvc metrics show / diff` and `dvc exp show` read (claims.json is a list, which they skip)."""
    return {r["id"]: dict(r.get("measured") or {}) | dict(r.get("gates") or {})
            for r in records if r.get("measured") or r.get("gates")}


def changes(before: list[Record], after: list[Record]) -> list[dict[str, str]]:
    """One row per claim id of either run: both runs' status and measured values, and what changed
    ('status', 'value', 'only in A' / 'only in B', or '' when nothing did)."""
    a, b = {r["id"]: r for r in before}, {r["id"]: r for r in after}
    rows = []
    for claim_id in list(a) + [i for i in b if i not in a]:
        ra, rb = a.get(claim_id), b.get(claim_id)
        if ra is None or rb is None:
            changed = "only in B" if ra is None else "only in A"
        elif ra["status"] != rb["status"]:
            changed = "status"
        elif (ra.get("measured") or {}) != (rb.get("measured") or {}):
            changed = "value"
        else:
            changed = ""
        rows.append({
            "id": claim_id,
            "status_a": status_text(ra) if ra else "-", "measured_a": measured_text(ra) if ra else "-",
            "status_b": status_text(rb) if rb else "-", "measured_b": measured_text(rb) if rb else "-",
            "changed": changed,
        })
    return rows
