# The whole workflow of one run: every study's rules and the global targets. workflow/Snakefile
# loads it as a module whose output paths live in the run directory (docs/claims-report.md).

include: "common.smk"
include: "data.smk"
include: "assoc.smk"
include: "ntk.smk"
include: "attention.smk"
include: "mlp.smk"
include: "committee.smk"
include: "dilution.smk"
include: "usability.smk"
include: "editing.smk"
include: "figures.smk"  # every study's figure rule, from what its rules file registered
include: "overview.smk"
include: "claims.smk"


rule all:
    """The prepared data, every figure, the claims report and the run's measured times."""
    default_target: True
    input:
        rules.data.input,
        lambda wildcards: FIGURES,
        CLAIMS_REPORT,
        rules.claims_verdicts.output,
        rules.runtimes.output,


rule figures:
    """Every figure of every study."""
    input:
        lambda wildcards: FIGURES,


rule claims:
    """The claims report: results/claims.json, .md and .csv, and its figure claims_verdicts."""
    input:
        CLAIMS_REPORT,
        rules.claims_verdicts.output,
