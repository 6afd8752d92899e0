"""Whether every rule of a configuration fits the machines that will run it, checked before any job
starts: `python -m factstore preflight --configfile config/paper.yaml`.

For each rule of the workflow that runs a step (workflow/rules/*.smk, every branch's), its dominant
allocation at the config's sizes (factstore.memory_estimate, estimated from shapes: nothing is
allocated), the memory its cluster job asks for (memory_request_mb) and whether that fits one node,
and, for a rule that declares `resources: gpu`, whether its tensors fit one GPU. A rule that does
not fit is named in one line with the config key to lower. Rules without an estimate (their largest
tensors are small, or not modelled: memory_estimate's docstring lists them) ask for the profile's
default request.

This module imports no torch: it runs in a second, before a run is planned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from factstore.memory_estimate import GB, Term, memory_request_mb, rule_terms

NODE_MEMORY_GB = 128  # workflow/profiles/slurm's assumption for a node
GPU_MEMORY_GB = 80  # one A100 / H100 80 GB
RULE_START = re.compile(r"^\s*(?:rule|checkpoint)\s+(\w+)\s*:", re.MULTILINE)
FIGURE_RULE = re.compile(r'^add_figure_rule\(\s*"(\w+)"', re.MULTILINE)
"""A study's figure rule, `<study>_figure`, asked for with add_figure_rule (common.smk) and made in
a loop (figures.smk): it runs the figure step on the CPU."""


def workflow_rules(workflow_dir: Path) -> dict[str, bool]:
    """{rule name: whether it declares a `gpu` resource} for every rule in `workflow_dir`'s
    rules/*.smk whose jobs run a factstore step (a `step=` param), in file order; a rule's block runs
    to the next rule's line; a study's figure rule, made in a loop, where its rules file asks for it
    (`add_figure_rule`). Targets that only gather other rules' outputs (`all`, `figures`, a
    study's name) run nothing and are left out."""
    rules: dict[str, bool] = {}
    for path in sorted((workflow_dir / "rules").glob("*.smk")):
        text = path.read_text()
        starts = list(RULE_START.finditer(text))
        for start, following in zip(starts, [*starts[1:], None]):
            block = text[start.end() : following.start() if following else len(text)]
            if re.search(r"^\s*step\s*=", block, re.MULTILINE):
                uses_gpu = re.search(r"^\s*gpu\s*=", block, re.MULTILINE) is not None
                rules[start.group(1)] = rules.get(start.group(1), False) or uses_gpu
        for figure_rule in FIGURE_RULE.finditer(text):
            rules[f"{figure_rule.group(1)}_figure"] = False
    return rules


@dataclass(frozen=True)
class RuleFit:
    """One rule at one config: its largest estimated allocation (None: not estimated) and the
    memory its cluster job asks for (None: the profile's default)."""

    rule: str
    uses_gpu: bool
    term: Term | None
    request_mb: int | None

    @property
    def gpu_bytes(self) -> float | None:
        """What the rule's largest allocation holds on a GPU (None for a CPU rule or no estimate)."""
        if not self.uses_gpu or self.term is None:
            return None
        return self.term.bytes

    def problems(self, node_bytes: float, gpu_bytes: float) -> list[str]:
        """One line for each machine this rule does not fit, naming the key to lower."""
        if self.term is None:
            return []
        knob = f"{self.term.study}.{self.term.key} = {self.term.value}"
        lines = []
        if self.request_mb is not None and self.request_mb * 1e6 > node_bytes:
            lines.append(f"factstore: rule {self.rule} asks for {self.request_mb:,} MB ({knob}: about "
                         f"{self.term.bytes / GB:.0f} GB for {self.term.what}), over the {node_bytes / GB:.0f} GB of one node: "
                         f"lower {self.term.study}.{self.term.key}, or run it where a node has more memory")
        if self.gpu_bytes is not None and self.gpu_bytes > gpu_bytes:
            lines.append(f"factstore: rule {self.rule} holds about {self.gpu_bytes / GB:.0f} GB on the GPU ({knob}: "
                         f"{self.term.what}), over the {gpu_bytes / GB:.0f} GB of one GPU: lower {self.term.study}.{self.term.key}")
        return lines


def rule_fits(config: dict, rules: dict[str, bool]) -> list[RuleFit]:
    """A RuleFit for each of `rules` ({name: uses a GPU}) at `config`'s sizes."""
    fits = []
    for rule, uses_gpu in rules.items():
        terms = rule_terms(config, rule)
        largest = max(terms, key=lambda term: term.bytes) if terms else None
        fits.append(RuleFit(rule, uses_gpu, largest, memory_request_mb(config, rule)))
    return fits


def table(fits: list[RuleFit], node_bytes: float, gpu_bytes: float) -> str:
    """The preflight as aligned text: one line a rule, estimated rules first (largest request first)."""
    header = ("rule", "device", "largest allocation (config key = value)", "host GB", "GPU GB", "mem_mb", "fits")
    lines = []
    for fit in sorted(fits, key=lambda fit: (fit.term is None, -(fit.request_mb or 0), fit.rule)):
        term = fit.term
        lines.append((
            fit.rule,
            "gpu" if fit.uses_gpu else "cpu",
            f"{term.study}.{term.key} = {term.value}" if term else "not estimated",
            f"{term.bytes / GB:.1f}" if term else "-",
            f"{fit.gpu_bytes / GB:.1f}" if fit.gpu_bytes is not None else "-",
            f"{fit.request_mb:,}" if fit.request_mb is not None else "default",
            "no" if fit.problems(node_bytes, gpu_bytes) else "yes",
        ))
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    right = {3, 4, 5}
    return "\n".join(
        "  ".join(cell.rjust(width) if i in right else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
        for row in [header, *lines]
    ) + "\n"
