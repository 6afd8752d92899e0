# Usability of fact-storing MLPs inside a Transformer (S0 "Usability inside a Transformer").
#
# One capacity job per method (the smallest MLP a Transformer can read, searched from the
# method's standalone capacity, which comes from the fact-storing-MLP study: a rule input, not
# recomputed here), one whitening job per embedding kind (real MiniLM, anisotropic synthetic), a
# summary with the Lipschitz threshold over every MLP, and ONE figure rule.

USABILITY = config["usability"]
# Settings every usability evaluation shares, and the fact-storing-MLP settings its MLPs use.
USABILITY_SHARED = {key: USABILITY[key] for key in ("seed", "target", "n_junk", "lengths", "training", "runs_per_batch", "lipschitz_samples")} | {
    "ntk_degree": USABILITY["ntk_degree"],
    "gd": config["mlp"]["gd"],
}
USABILITY_D = USABILITY["capacity"]["d"]

# The standalone capacities at USABILITY_D: the fact-storing-MLP study's capacity table when that
# study ran at this d, else its capacity step (same code, same settings) run at this d and these F.
if USABILITY_D == config["mlp"]["capacity"]["d"]:
    USABILITY_STANDALONE_TABLE = rules.mlp_capacity.output.table
else:

    rule usability_standalone:
        """The fact-storing-MLP study's capacity step (its code and settings) at this study's d and F."""
        output:
            table="results/usability/standalone/{method}.csv",
        wildcard_constraints:
            method=r"[a-z_]+",
        input:
            code=step_code("mlp"),
        params:
            step="mlp.capacity",
            # Only what this study reads (the usability target, the hosted NTK degree): the other
            # target and degree of the mlp study's search would cost a second search here (GD: a
            # second bracketing towards 1.0) and change no number of the rows read, which are
            # searched first (targets in increasing order, every degree on its own generator).
            json=lambda w: as_json(
                MLP_SHARED, method=w.method, ntk_degrees=[USABILITY["ntk_degree"]],
                capacity=get_mlp_capacity_params()
                | {"d": USABILITY_D, "log2_facts": USABILITY["capacity"]["log2_facts"], "targets": [USABILITY["target"]]},
            ),
            io=runner_io,
        threads: config["threads"]
        resources:
            gpu=lambda w: int(w.method.startswith("gd")),  # as mlp_capacity: GD trains on the GPU
        log:
            "logs/usability/standalone_{method}.log",
        shell:
            STEP

    USABILITY_STANDALONE_TABLE = rules.usability_standalone.output.table


rule usability:
    """Every result of the usability study (its figures: `snakemake figures`)."""
    input:
        "results/usability/metrics.csv",


rule usability_capacity:
    output:
        capacity="results/usability/capacity_{method}.csv",
        probes="results/usability/probes_{method}.csv",
    wildcard_constraints:
        method=r"[a-z_]+",
    input:
        standalone=lambda w: USABILITY_STANDALONE_TABLE.format(method=w.method),  # the mlp study's table
        code=step_code("usability"),
    params:
        step="usability.capacity",
        json=lambda w: as_json(USABILITY_SHARED | USABILITY["capacity"], method=w.method),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/usability/capacity_{method}.log",
    shell:
        STEP


rule usability_whitening:
    output:
        table="results/usability/whitening_{kind}.csv",
    wildcard_constraints:
        kind="real|synthetic",
    input:
        unpack(lambda w: {"embeddings": rules.mlp_embeddings.output.embeddings} if w.kind == "real" else {}),
        code=step_code("usability"),
    params:
        step="usability.whitening",
        json=lambda w: as_json(
            USABILITY_SHARED | get_usability_whitening_params(),
            **USABILITY["whitening"][w.kind], kind=w.kind,
            mlp_search=config["mlp"]["search"] | {"ntk_max_width": USABILITY["whitening"]["ntk_max_width"]},
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("usability_whitening"),
    log:
        "logs/usability/whitening_{kind}.log",
    shell:
        STEP


USABILITY_METHODS = USABILITY["capacity"]["methods"]
USABILITY_KINDS = ("real", "synthetic")
USABILITY_CAPACITY = named_outputs(rules.usability_capacity.output.capacity, {f"capacity_{m}": {"method": m} for m in USABILITY_METHODS})
USABILITY_PROBES = named_outputs(rules.usability_capacity.output.probes, {f"probes_{m}": {"method": m} for m in USABILITY_METHODS})
USABILITY_WHITENING = named_outputs(rules.usability_whitening.output.table, {f"whitening_{k}": {"kind": k} for k in USABILITY_KINDS})
USABILITY_STANDALONE = named_outputs(USABILITY_STANDALONE_TABLE, {f"standalone_{m}": {"method": m} for m in USABILITY_METHODS})
USABILITY_TABLES = USABILITY_CAPACITY | USABILITY_PROBES | USABILITY_WHITENING | USABILITY_STANDALONE
USABILITY_SUMMARY_PARAMS = {
    "target": USABILITY["target"],
    "lipschitz_on": USABILITY["lipschitz_on"],
    "standalone_target": USABILITY["whitening"]["standalone_target"],
    "d": USABILITY_D,
    "ntk_degree": USABILITY["ntk_degree"],
}


rule usability_summary:
    output:
        usable="results/usability/usable.csv",
        mlps="results/usability/mlps.csv",
        metrics="results/usability/metrics.csv",
    input:
        **USABILITY_TABLES,
        code=step_code("usability_summary"),
    params:
        step="usability_summary.summary",
        json=as_json(USABILITY_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/usability/summary.log",
    shell:
        STEP


METRICS["usability"] = rules.usability_summary.output.metrics

# figure name (a key of factstore.plots.usability.FIGURES) -> the tables it reads, by name.
USABILITY_FIGURE_INPUTS = {
    "usable_capacity": {"usable": rules.usability_summary.output.usable} | USABILITY_CAPACITY,
    "recall": {"mlps": rules.usability_summary.output.mlps},
    "whitening": USABILITY_WHITENING,
    "lipschitz": {"mlps": rules.usability_summary.output.mlps},
}
FIGURES += figure_files("usability", USABILITY_FIGURE_INPUTS)


# the rule usability_figure (workflow/rules/figures.smk)
add_figure_rule(
    "usability",
    "S0 usability inside a Transformer",
    USABILITY_FIGURE_INPUTS,
    dict.fromkeys(USABILITY_FIGURE_INPUTS, USABILITY_SUMMARY_PARAMS),
)
