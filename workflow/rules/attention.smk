# Multi-head attention memorisation (SPEC S4): capacity vs heads H, context size n, head dim d_h.
# One capacity search per distinct (context kind, layer shape): sweep points that meet share a job.

ATTENTION = config["attention"]
ATTENTION_CODE = ["attention", "experiments/attention"]
ATTENTION_FIGURE_CODE = code("attention", "experiments/attention", "plots/style", "plots/attention")
# A sweep's figure exists when the config runs that sweep; the assumptions figure always does.
ATTENTION_SWEEP_FIGURES = {"heads": "heads", "context": "n_context", "head_dim": "d_head"}
ATTENTION_FIGURES = [name for name, sweep in ATTENTION_SWEEP_FIGURES.items() if sweep in ATTENTION["sweeps"]] + ["assumptions"]
ATTENTION_LAYER = "{context}_d{d}_H{heads}_n{n_context}_dh{d_head}_dv{d_value}"

FIGURES += [f"figures/attention_{name}.{ext}" for name in ATTENTION_FIGURES for ext in ("png", "pdf")]
METRICS["attention"] = "results/attention/metrics.csv"


# Named inputs capacity__<sweep>__<context>__<value> and probes__... for every sweep point; a point's
# sizes are the base layer, then the sweep's fixed sizes, then the swept value.
ATTENTION_TABLES = {
    f"{kind}__{sweep}__{context}__{value}": "results/attention/layers/{}_{}.csv".format(
        kind,
        ATTENTION_LAYER.format(context=context, **{**ATTENTION["layer"], **section.get("fixed", {}), sweep: value}),
    )
    for sweep, section in ATTENTION["sweeps"].items()
    for context in section["contexts"]
    for value in section["values"]
    for kind in ("capacity", "probes")
}


rule attention:
    """Every result of the multi-head attention study (its figures: `snakemake figures`)."""
    input:
        METRICS["attention"],


rule attention_capacity:
    output:
        capacity=f"results/attention/layers/capacity_{ATTENTION_LAYER}.csv",
        probes=f"results/attention/layers/probes_{ATTENTION_LAYER}.csv",
    wildcard_constraints:
        context="shared|per_example",
        d=r"\d+",
        heads=r"\d+",
        n_context=r"\d+",
        d_head=r"\d+",
        d_value=r"\d+",
    input:
        code=code(*ATTENTION_CODE),
    params:
        step="attention.capacity",
        json=lambda w: as_json(
            {k: ATTENTION[k] for k in ("seed", "n_classes", "training", "search", "assumption_subsets")},
            context=w.context,
            layer={k: int(w[k]) for k in ("d", "heads", "n_context", "d_head", "d_value")},
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        f"logs/attention/capacity_{ATTENTION_LAYER}.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule attention_summary:
    output:
        capacity="results/attention/capacity.csv",
        probes="results/attention/probes.csv",
        metrics=METRICS["attention"],
    input:
        **ATTENTION_TABLES,
        code=code(*ATTENTION_CODE),
    params:
        step="attention.summary",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/attention/summary.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


ATTENTION_FIGURE_PARAMS = as_json({"training": ATTENTION["training"]})


rule attention_figure_heads:
    output:
        png="figures/attention_heads.png",
        pdf="figures/attention_heads.pdf",
    input:
        capacity="results/attention/capacity.csv",
        code=ATTENTION_FIGURE_CODE,
    params:
        step="attention.figure_heads",
        json=ATTENTION_FIGURE_PARAMS,
        io=runner_io,
    log:
        "logs/attention/figure_heads.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule attention_figure_context:
    output:
        png="figures/attention_context.png",
        pdf="figures/attention_context.pdf",
    input:
        capacity="results/attention/capacity.csv",
        code=ATTENTION_FIGURE_CODE,
    params:
        step="attention.figure_context",
        json=ATTENTION_FIGURE_PARAMS,
        io=runner_io,
    log:
        "logs/attention/figure_context.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule attention_figure_head_dim:
    output:
        png="figures/attention_head_dim.png",
        pdf="figures/attention_head_dim.pdf",
    input:
        capacity="results/attention/capacity.csv",
        code=ATTENTION_FIGURE_CODE,
    params:
        step="attention.figure_head_dim",
        json=ATTENTION_FIGURE_PARAMS,
        io=runner_io,
    log:
        "logs/attention/figure_head_dim.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule attention_figure_assumptions:
    output:
        png="figures/attention_assumptions.png",
        pdf="figures/attention_assumptions.pdf",
    input:
        capacity="results/attention/capacity.csv",
        code=ATTENTION_FIGURE_CODE,
    params:
        step="attention.figure_assumptions",
        json=ATTENTION_FIGURE_PARAMS,
        io=runner_io,
    log:
        "logs/attention/figure_assumptions.log",
    conda:
        ENVIRONMENT
    shell:
        STEP
