# Neural tangent kernel (SPEC S2): empirical vs analytic NTK, lazy training, linearised dynamics,
# kernel-regression scaling law. One training job per width; the rest are single cheap jobs.

NTK = config["ntk"]
NTK_CODE = ["ntk_theory", "experiments/ntk"]
NTK_FIGURE_CODE = code("ntk_theory", "experiments/ntk", "plots/style", "plots/ntk")
NTK_FIGURES = ["convergence", "lazy_training", "linearised", "kernel_scaling"]

FIGURES += [f"figures/ntk_{name}.{ext}" for name in NTK_FIGURES for ext in ("png", "pdf")]
METRICS["ntk"] = "results/ntk/metrics.csv"


# Named inputs for every width's training summary and trajectories.
NTK_TRAINING = {f"training_w{width}": f"results/ntk/training_w{width}.csv" for width in NTK["training"]["widths"]}
NTK_TRAJECTORIES = {
    f"trajectories_w{width}": f"results/ntk/trajectories_w{width}.csv" for width in NTK["training"]["widths"]
}
# The training section without its width list, plus the study seed.
NTK_TRAINING_SECTION = {k: v for k, v in NTK["training"].items() if k != "widths"}


rule ntk:
    """Every result of the NTK study (its figures: `snakemake figures`)."""
    input:
        METRICS["ntk"],


rule ntk_convergence:
    output:
        table="results/ntk/convergence.csv",
    input:
        code=code(*NTK_CODE),
    params:
        step="ntk.convergence",
        json=as_json(NTK["convergence"], seed=NTK["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/ntk/convergence.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_training:
    output:
        summary="results/ntk/training_w{width}.csv",
        trajectories="results/ntk/trajectories_w{width}.csv",
    wildcard_constraints:
        width=r"\d+",
    input:
        code=code(*NTK_CODE),
    params:
        step="ntk.training",
        json=lambda w: as_json(NTK_TRAINING_SECTION, seed=NTK["seed"], width=int(w.width)),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/ntk/training_w{width}.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_scaling:
    output:
        table="results/ntk/scaling.csv",
    input:
        code=code(*NTK_CODE),
    params:
        step="ntk.scaling",
        json=as_json(NTK["scaling"], seed=NTK["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/ntk/scaling.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_summary:
    output:
        metrics=METRICS["ntk"],
    input:
        **NTK_TRAINING,
        convergence="results/ntk/convergence.csv",
        scaling="results/ntk/scaling.csv",
        code=code(*NTK_CODE),
    params:
        step="ntk.summary",
        json=as_json(NTK_TRAINING_SECTION, seed=NTK["seed"], fit_min_train_size=NTK["scaling"]["fit_min_train_size"]),
        io=runner_io,
    log:
        "logs/ntk/summary.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_figure_convergence:
    output:
        png="figures/ntk_convergence.png",
        pdf="figures/ntk_convergence.pdf",
    input:
        table="results/ntk/convergence.csv",
        code=NTK_FIGURE_CODE,
    params:
        step="ntk.figure_convergence",
        json=as_json(NTK["convergence"]),
        io=runner_io,
    log:
        "logs/ntk/figure_convergence.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_figure_lazy_training:
    output:
        png="figures/ntk_lazy_training.png",
        pdf="figures/ntk_lazy_training.pdf",
    input:
        **NTK_TRAINING,
        code=NTK_FIGURE_CODE,
    params:
        step="ntk.figure_lazy",
        json=as_json(NTK_TRAINING_SECTION, seed=NTK["seed"]),
        io=runner_io,
    log:
        "logs/ntk/figure_lazy_training.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_figure_linearised:
    output:
        png="figures/ntk_linearised.png",
        pdf="figures/ntk_linearised.pdf",
    input:
        **NTK_TRAINING,
        **NTK_TRAJECTORIES,
        code=NTK_FIGURE_CODE,
    params:
        step="ntk.figure_linearised",
        json=as_json(NTK_TRAINING_SECTION, seed=NTK["seed"]),
        io=runner_io,
    log:
        "logs/ntk/figure_linearised.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule ntk_figure_kernel_scaling:
    output:
        png="figures/ntk_kernel_scaling.png",
        pdf="figures/ntk_kernel_scaling.pdf",
    input:
        table="results/ntk/scaling.csv",
        code=NTK_FIGURE_CODE,
    params:
        step="ntk.figure_scaling",
        json=as_json(NTK["scaling"]),
        io=runner_io,
    log:
        "logs/ntk/figure_kernel_scaling.log",
    conda:
        ENVIRONMENT
    shell:
        STEP
