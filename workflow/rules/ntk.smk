# Neural tangent kernel (S2): empirical vs analytic NTK, lazy training, linearised dynamics,
# kernel-regression scaling law. One training job per width; the rest are single cheap jobs.

NTK = config["ntk"]
# The training section without its width list (one job per width).
NTK_TRAINING_SECTION = get_ntk_training_params()


rule ntk:
    """Every result of the NTK study (its figures: `snakemake figures`)."""
    input:
        "results/ntk/metrics.csv",


rule ntk_convergence:
    output:
        table="results/ntk/convergence.csv",
    input:
        code=step_code("ntk"),
    params:
        step="ntk.convergence",
        json=as_json(NTK["convergence"], seed=NTK["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("ntk_convergence"),
    log:
        "logs/ntk/convergence.log",
    shell:
        STEP


rule ntk_training:
    output:
        summary="results/ntk/training_w{width}.csv",
        trajectories="results/ntk/trajectories_w{width}.csv",
    wildcard_constraints:
        width=r"\d+",
    input:
        code=step_code("ntk"),
    params:
        step="ntk.training",
        json=lambda w: as_json(NTK_TRAINING_SECTION, seed=NTK["seed"], width=int(w.width)),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("ntk_training"),
    log:
        "logs/ntk/training_w{width}.log",
    shell:
        STEP


rule ntk_scaling:
    output:
        table="results/ntk/scaling.csv",
    input:
        code=step_code("ntk"),
    params:
        step="ntk.scaling",
        json=as_json(NTK["scaling"], seed=NTK["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("ntk_scaling"),
    log:
        "logs/ntk/scaling.log",
    shell:
        STEP


NTK_TRAINING = named_outputs(rules.ntk_training.output.summary, {f"training_w{w}": {"width": w} for w in NTK["training"]["widths"]})
NTK_TRAJECTORIES = named_outputs(
    rules.ntk_training.output.trajectories, {f"trajectories_w{w}": {"width": w} for w in NTK["training"]["widths"]}
)


rule ntk_summary:
    output:
        metrics="results/ntk/metrics.csv",
    input:
        **NTK_TRAINING,
        convergence=rules.ntk_convergence.output.table,
        scaling=rules.ntk_scaling.output.table,
        code=step_code("ntk_summary"),
    params:
        step="ntk_summary.summary",
        json=as_json(NTK_TRAINING_SECTION, seed=NTK["seed"], fit_min_train_size=NTK["scaling"]["fit_min_train_size"]),
        io=runner_io,
    log:
        "logs/ntk/summary.log",
    shell:
        STEP


METRICS["ntk"] = rules.ntk_summary.output.metrics

# figure name (a key of factstore.plots.ntk.FIGURES) -> the tables it reads / the parameters its
# caption states (each figure reruns only when its own section changes).
NTK_FIGURE_INPUTS = {
    "convergence": {"table": rules.ntk_convergence.output.table},
    "lazy_training": NTK_TRAINING,
    "linearised": NTK_TRAINING | NTK_TRAJECTORIES,
    "kernel_scaling": {"table": rules.ntk_scaling.output.table},
}
NTK_FIGURE_PARAMS = {
    "convergence": NTK["convergence"],
    "lazy_training": NTK_TRAINING_SECTION,
    "linearised": NTK_TRAINING_SECTION,
    "kernel_scaling": NTK["scaling"],
}
FIGURES += figure_files("ntk", NTK_FIGURE_INPUTS)


# the rule ntk_figure (workflow/rules/figures.smk)
add_figure_rule(
    "ntk",
    "S2 neural tangent kernel",
    NTK_FIGURE_INPUTS,
    NTK_FIGURE_PARAMS,
)
