# The claims report (json: a list of records; summary: counts per status, for `dvc metrics show`):
# every claim of SPEC.md's table, PASS / FAIL / NOT RUN with measured values.

CLAIMS_REPORT = ["results/claims.json", "results/claims.md", "results/claims_summary.json", "results/claims.csv"]


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
    params:
        step="claims.report",
        json=as_json({"scale": config["scale"]}),
        io=runner_io,
    log:
        "logs/claims.log",
    shell:
        STEP


rule runtimes:
    """Measured wall time of every step and the package versions of the run (from the sidecars)."""
    input:
        lambda w: FIGURES,
        rules.claims_report.output.json,
        code=step_code("runtimes"),
    output:
        runtimes=report("results/runtimes.csv", caption="../report/runtimes.rst", category="Run times and versions"),
        versions=report("results/versions.csv", caption="../report/runtimes.rst", category="Run times and versions"),
    params:
        step="runtimes.table",
        json=as_json({"folders": ["results", "figures"]}),
        io=runner_io,
    log:
        "logs/runtimes.log",
    shell:
        STEP
