# The claims report (json: a list of records; summary: counts per status, for `dvc metrics show`):
# every claim of SPEC.md's table, PASS / FAIL / NOT RUN with measured values.

CLAIMS_REPORT = ["results/claims.json", "results/claims.md", "results/claims_summary.json"]


rule claims_report:
    input:
        unpack(lambda w: {f"metrics_{study}": path for study, path in METRICS.items()}),
        registry="config/claims.yaml",
        code=step_code("claims"),
    output:
        json=CLAIMS_REPORT[0],
        markdown=CLAIMS_REPORT[1],
        summary=CLAIMS_REPORT[2],
    params:
        step="claims.report",
        json=as_json({"scale": config["scale"]}),
        io=runner_io,
    log:
        "logs/claims.log",
    conda:
        ENVIRONMENT
    shell:
        STEP
