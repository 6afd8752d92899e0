# The claims report: every claim of config/claims.yaml, PASS / FAIL / UNTESTABLE / NOT RUN with its
# measured values (json: a list of records, what `python -m factstore compare` reads; md and html:
# the report a reader reads, the html in the Snakemake report; summary: counts per status; metrics:
# {claim id: {metric: value}}, DVC's metric; csv: one row per claim).

CLAIMS_REPORT = ["results/claims.json", "results/claims.md", "results/claims_summary.json", "results/claims.csv",
                 "results/claims_metrics.json", "results/claims.html"]


rule claims_report:
    input:
        unpack(lambda w: {f"metrics_{study}": path for study, path in METRICS.items()}),
        registry="config/claims.yaml",
        code=step_code("claims"),
    output:
        json=CLAIMS_REPORT[0],
        markdown=CLAIMS_REPORT[1],
        summary=CLAIMS_REPORT[2],
        table=report(CLAIMS_REPORT[3], caption="../report/claims.rst", category="Claims"),
        flat=CLAIMS_REPORT[4],
        html=report(CLAIMS_REPORT[5], caption="../report/claims.rst", category="Claims"),
    params:
        step="claims.report",
        # what the run was asked for, recorded in the sidecar (`compare` shows it): the scale, the
        # config file and any --config values set over it
        json=as_json({"scale": config["scale"], "config_file": CONFIG_FILE, "config_overrides": CONFIG_OVERRIDES}),
        io=runner_io,
    log:
        "logs/claims.log",
    shell:
        STEP


# The verdicts at a glance: claims per work (paper) and status, beside the claims report in the
# Snakemake report. Made by the `claims` and `all` targets, not by `figures` (it needs the claims
# report, which `figures` does not).
rule claims_verdicts:
    """Claims per work and status: results/claims_verdicts.png and .pdf."""
    input:
        claims=rules.claims_report.output.json,
        code=step_code("verdicts"),
    output:
        png=report("results/claims_verdicts.png", caption="../report/figure.rst", category="Claims",
                   labels={"figure": "verdicts"}),
        pdf="results/claims_verdicts.pdf",
    params:
        step="verdicts.draw",
        json=as_json({}),
        io=runner_io,
        # what the report's caption reads (workflow/report/figure.rst)
        caption=figure_caption(SOURCE_ROOT / "factstore/plots/overview.py", "verdicts"),
        claims="every claim of config/claims.yaml, by its status",
    log:
        "logs/claims_verdicts.log",
    shell:
        STEP


rule runtimes:
    """Measured wall time of every step and the package versions of the run (from the sidecars)."""
    input:
        lambda w: FIGURES,
        rules.claims_report.output.json,
        rules.claims_verdicts.output,
        code=step_code("runtimes"),
    output:
        runtimes=report("results/runtimes.csv", caption="../report/runtimes.rst", category="Run times and versions"),
        versions=report("results/versions.csv", caption="../report/runtimes.rst", category="Run times and versions"),
    params:
        step="runtimes.table",
        json=as_json({"folders": [in_run("results"), in_run("figures")]}),
        io=runner_io,
    log:
        "logs/runtimes.log",
    shell:
        STEP
