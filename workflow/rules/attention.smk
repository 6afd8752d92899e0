# Multi-head attention memorisation (S4): capacity vs heads H, context size n, head dim d_h.
# One capacity search per distinct (context kind, layer shape): sweep points that meet share a job.

ATTENTION = config["attention"]
ATTENTION_LAYER = "{context}_d{d}_H{heads}_n{n_context}_dh{d_head}_dv{d_value}"


# Named inputs capacity__<sweep>__<context>__<value> and probes__... for every sweep point; a point's
# sizes are the base layer, then the sweep's fixed sizes, then the swept value.
ATTENTION_TABLES = {
    f"{kind}__{sweep}__{context}__{value}": "results/attention/layers/{}_{}.csv".format(
        kind,
        ATTENTION_LAYER.format(context=context, **{**ATTENTION["layer"], **section.get("fixed", {}), sweep: value}),
    )
    for sweep, section in ATTENTION["sweeps"].items()
    for context in section["contexts"]
    for value in section.get("context_values", {}).get(context, section["values"])
    for kind in ("capacity", "probes")
}


rule attention:
    """Every result of the multi-head attention study (its figures: `snakemake figures`)."""
    input:
        "results/attention/metrics.csv",


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
        code=step_code("attention"),
    params:
        step="attention.capacity",
        json=lambda w: as_json(
            {k: ATTENTION[k] for k in ("seed", "n_classes", "training", "budget_check", "search", "assumption_subsets")},
            context=w.context,
            layer={k: int(w[k]) for k in ("d", "heads", "n_context", "d_head", "d_value")},
            score_scale=ATTENTION["layer"]["score_scale"],
            biases=ATTENTION["layer"]["biases"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("attention_capacity"),
    log:
        f"logs/attention/capacity_{ATTENTION_LAYER}.log",
    shell:
        STEP


rule attention_summary:
    output:
        capacity="results/attention/capacity.csv",
        probes="results/attention/probes.csv",
        metrics="results/attention/metrics.csv",
    input:
        **ATTENTION_TABLES,
        code=step_code("attention_summary"),
    params:
        step="attention_summary.summary",
        json=as_json({"relative_resolution": ATTENTION["search"]["relative_resolution"]}),
        io=runner_io,
    log:
        "logs/attention/summary.log",
    shell:
        STEP


METRICS["attention"] = rules.attention_summary.output.metrics

# A sweep's figure exists when the config runs that sweep; the assumptions figure always does.
ATTENTION_SWEEP_FIGURES = {"heads": "heads", "context": "n_context", "head_dim": "d_head"}
ATTENTION_FIGURE_INPUTS = {
    name: {"capacity": rules.attention_summary.output.capacity}
    for name, sweep in ATTENTION_SWEEP_FIGURES.items() if sweep in ATTENTION["sweeps"]
} | {"assumptions": {"capacity": rules.attention_summary.output.capacity}}
FIGURES += figure_files("attention", ATTENTION_FIGURE_INPUTS)


# the rule attention_figure (workflow/rules/figures.smk)
add_figure_rule(
    "attention",
    "S4 multi-head attention",
    ATTENTION_FIGURE_INPUTS,
    dict.fromkeys(
        ATTENTION_FIGURE_INPUTS, {"training": ATTENTION["training"], "budget_check": ATTENTION["budget_check"]}
    ),
)
