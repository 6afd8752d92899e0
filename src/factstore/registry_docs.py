"""The documentation written from the claims registry (config/claims.yaml), so that it cannot drift.

Two kinds of section, each between markers the hand-written text around it keeps:
- docs/science.md: per work (S0 ... S4), every claim with its id, statement, scale, figures and
  each check's range with where it comes from (the check's `why`);
- docs/methods/<study>.md: the "Declared choices" section, every free choice a verdict of the
  study rests on (value, when it was decided, each alternative and whether the report evaluates
  it) and the checks that carry no standard error, with why.

`python -m factstore docs` rewrites them; `python -m factstore docs --check` (and the tests) fail
when a file differs from what the registry gives.
"""

from __future__ import annotations

import re
from pathlib import Path

from factstore import claims

SCIENCE = Path("docs/science.md")
METHODS = Path("docs/methods")
CHOICES_HEADING = "## Declared choices"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def study_of(claim: dict) -> str:
    """The study whose metrics table a claim reads (results/<study>/metrics.csv)."""
    return re.fullmatch(r"results/(\w+)/metrics\.csv", claim["result"]).group(1)


def _bounds(check: dict) -> str:
    if "min" in check and "max" in check:
        return f"in [{check['min']:g}, {check['max']:g}]"
    return f">= {check['min']:g}" if "min" in check else f"<= {check['max']:g}"


def work_claims_section(work: str, registry: list[dict]) -> str:
    """The generated claims of one work (e.g. 'S0') for docs/science.md: one entry per claim."""
    lines = []
    for claim in (c for c in registry if c["id"].split(".")[0] == work):
        figures = ", ".join(f"`{name}`" for name in claim.get("figures", [])) or "none"
        lines += [f"### {claim['id']}", "", f"{claim['statement']}", "",
                  f"Scale: {claim['scale']}. Figures: {figures}. Measured in `{claim['result']}`.", ""]
        for kind, checks in (("check", claim.get("checks", [])), ("gate", claim.get("gates", []))):
            for check in checks:
                lines.append(f"- {kind} `{check['metric']}` {_bounds(check)}: {check.get('why', '').strip()}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def declared_choices_section(study: str, registry: list[dict]) -> str:
    """The '## Declared choices' section of docs/methods/<study>.md."""
    items = [claim for claim in registry if study_of(claim) == study]
    lines = [CHOICES_HEADING, "",
             "The free choices each claim's verdict rests on, as `config/claims.yaml` declares them (the claims report reads "
             "each evaluated alternative again under the claim's own ranges, and lists every alternative under the claim). "
             "\"after results\" marks a choice made after an earlier value's results had been seen; that earlier value is "
             f"among the alternatives. *evaluated*: `results/{study}/metrics.csv` already holds the alternative's value "
             "(the metrics it reads instead are named); otherwise the alternative says what it needs.", "",
             "| claim | choice | value used | decided | alternatives |", "|---|---|---|---|---|"]
    for claim in items:
        for choice in claim.get("choices", []):
            decided = choice["decided"] + (f" (before: {choice['pre_result']})" if choice["decided"] == "after results" else "")
            alternatives = []
            for alternative in choice["alternatives"]:
                if "metrics" in alternative:
                    mapped = ", ".join(f"`{k}` -> `{v}`" for k, v in alternative["metrics"].items())
                    alternatives.append(f"{alternative['value']}: *evaluated* ({mapped})")
                else:
                    alternatives.append(f"{alternative['value']}: not evaluated ({alternative['not_evaluated']})")
            cells = [claim["id"], choice["name"], choice["value"], decided, "<br>".join(alternatives)]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    reasons = [(claim["id"], check["metric"], check["no_standard_error"]) for claim in items
               for check in claim.get("checks", []) + claim.get("gates", []) if check.get("no_standard_error")]
    if reasons:
        lines += ["", "Checks without a standard error, and why (the report says so where it cannot resample a verdict):", "",
                  "| claim | metric | why no standard error |", "|---|---|---|"]
        lines += ["| " + " | ".join(_cell(cell) for cell in reason) + " |" for reason in reasons]
    return "\n".join(lines) + "\n"


def _with_choices(text: str, section: str) -> str:
    """A method note with its Declared choices section (the note's last section) replaced."""
    marker = f"\n{CHOICES_HEADING}\n"
    if marker in text:
        text = text[: text.index(marker)]
    return text.rstrip("\n") + "\n\n" + section


def _with_work_claims(text: str, work: str, section: str) -> str:
    """docs/science.md with the generated block of `work` (between its markers) replaced."""
    start, end = f"<!-- claims {work}: generated from config/claims.yaml -->\n", f"<!-- end of claims {work} -->"
    if start not in text or end not in text:
        raise ValueError(f"{SCIENCE}: the markers of {work}'s claims are missing ({start.strip()} ... {end})")
    head, rest = text.split(start, 1)
    return head + start + "\n" + section + "\n" + end + rest.split(end, 1)[1]


def rendered(root: Path) -> dict[Path, str]:
    """{path under root: the text it should hold} for docs/science.md and every method note whose
    study has claims in the registry."""
    registry = claims.load_registry(root / "config/claims.yaml")
    texts = {}
    science = (root / SCIENCE).read_text()
    for work in sorted({claim["id"].split(".")[0] for claim in registry}):
        science = _with_work_claims(science, work, work_claims_section(work, registry))
    texts[SCIENCE] = science
    for study in sorted({study_of(claim) for claim in registry}):
        path = METHODS / f"{study}.md"
        texts[path] = _with_choices((root / path).read_text(), declared_choices_section(study, registry))
    return texts


def _stale_texts(root: Path) -> dict[Path, str]:
    return {path: text for path, text in rendered(root).items() if (root / path).read_text() != text}


def stale(root: Path) -> list[Path]:
    """The generated documents that differ from what the registry gives."""
    return list(_stale_texts(root))


def write(root: Path) -> list[Path]:
    """Rewrite every stale generated document; returns those written."""
    texts = _stale_texts(root)
    for path, text in texts.items():
        (root / path).write_text(text)
    return list(texts)
