# Fact-storing MLPs (SPEC S0): capacity scaling (Fig. 7), anisotropy (Fig. 5), whitening of real
# MiniLM embeddings with the Lipschitz constant. Jobs: MiniLM embeddings once; one capacity search
# job per method (all F, seeds, targets); one anisotropy job per kappa and one whitening job per
# alpha (all methods, sharing the U* solve of their value set).

MLP = config["mlp"]
MLP_MODULES = (
    "experiments/mlp", "facts", "geometry", "mlp/__init__", "mlp/capacity", "mlp/ntk", "mlp/encoder_decoder",
    "mlp/gd", "mlp/hebbian", "mlp/lipschitz", "mlp/modules",
)
MLP_CODE = code(*MLP_MODULES)
MLP_FIGURE_CODE = code(*MLP_MODULES, "plots/style", "plots/mlp")
MLP_FIGURES = ["capacity_scaling", "bits_per_parameter", "anisotropy", "whitening"]

FIGURES += [f"figures/mlp_{name}.{ext}" for name in MLP_FIGURES for ext in ("png", "pdf")]
METRICS["mlp"] = "results/mlp/metrics.csv"

# Named inputs of the summary: one table per capacity method, per kappa, per alpha.
MLP_TABLES = (
    {f"capacity_{method}": f"results/mlp/capacity/{method}.csv" for method in MLP["capacity"]["methods"]}
    | {f"anisotropy_k{kappa:g}": f"results/mlp/anisotropy/kappa{kappa:g}.csv" for kappa in MLP["anisotropy"]["kappas"]}
    | {f"whitening_a{alpha:g}": f"results/mlp/whitening/alpha{alpha:g}.csv" for alpha in MLP["whitening"]["alphas"]}
)
# What every search job reads; each job adds its own section without the list it is one point of.
MLP_SHARED = {key: MLP[key] for key in ("seed", "ntk_degree", "search", "gd")}
MLP_SUMMARY_PARAMS = {
    "bits_per_parameter_assumed": MLP["bits_per_parameter_assumed"],
    "main_target": MLP["main_target"],
    "ntk_degree": MLP["ntk_degree"],
    "search": MLP["search"],
    "anisotropy_facts": MLP["anisotropy"]["n_facts"],
}
MLP_FIGURE_PARAMS = MLP_SUMMARY_PARAMS | {key: MLP[key] for key in ("capacity", "anisotropy", "whitening")}


rule mlp:
    """Every result of the fact-storing MLP study (its figures: `snakemake figures`)."""
    input:
        METRICS["mlp"],


rule mlp_embeddings:
    output:
        embeddings="results/mlp/embeddings.npz",
    input:
        facts=DATA_TABLES["goodreads_facts"],
        code=code("experiments/mlp", "embeddings"),
    params:
        step="mlp.embeddings",
        json=as_json(MLP["embeddings"], seed=MLP["seed"]),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/mlp/embeddings.log",
    shell:
        STEP


rule mlp_capacity:
    output:
        table="results/mlp/capacity/{method}.csv",
    wildcard_constraints:
        method=r"[a-z_]+",
    input:
        code=MLP_CODE,
    params:
        step="mlp.capacity",
        json=lambda w: as_json(
            MLP_SHARED, method=w.method, capacity={k: v for k, v in MLP["capacity"].items() if k != "methods"}
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=lambda w: int(w.method.startswith("gd")),  # GD trains on the GPU; constructions stay on the CPU
    log:
        "logs/mlp/capacity_{method}.log",
    shell:
        STEP


rule mlp_anisotropy:
    output:
        table="results/mlp/anisotropy/kappa{kappa}.csv",
    wildcard_constraints:
        kappa=r"[0-9.e+]+",
    input:
        code=MLP_CODE,
    params:
        step="mlp.anisotropy",
        json=lambda w: as_json(
            MLP_SHARED, kappa=float(w.kappa), anisotropy={k: v for k, v in MLP["anisotropy"].items() if k != "kappas"}
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,  # its GD methods train on the GPU when there is one
    log:
        "logs/mlp/anisotropy_kappa{kappa}.log",
    shell:
        STEP


rule mlp_whitening:
    output:
        table="results/mlp/whitening/alpha{alpha}.csv",
    wildcard_constraints:
        alpha=r"[0-9.e-]+",
    input:
        embeddings="results/mlp/embeddings.npz",
        code=MLP_CODE,
    params:
        step="mlp.whitening",
        json=lambda w: as_json(
            MLP_SHARED, alpha=float(w.alpha), whitening={k: v for k, v in MLP["whitening"].items() if k != "alphas"}
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,  # its GD methods train on the GPU when there is one
    log:
        "logs/mlp/whitening_alpha{alpha}.log",
    shell:
        STEP


rule mlp_summary:
    output:
        results="results/mlp/results.csv",
        fits="results/mlp/fits.csv",
        metrics=METRICS["mlp"],
    input:
        **MLP_TABLES,
        code=MLP_CODE,
    params:
        step="mlp.summary",
        json=as_json(MLP_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/summary.log",
    shell:
        STEP


rule mlp_figure_capacity_scaling:
    output:
        png="figures/mlp_capacity_scaling.png",
        pdf="figures/mlp_capacity_scaling.pdf",
    input:
        results="results/mlp/results.csv",
        fits="results/mlp/fits.csv",
        code=MLP_FIGURE_CODE,
    params:
        step="mlp.figure_capacity_scaling",
        json=as_json(MLP_FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/figure_capacity_scaling.log",
    shell:
        STEP


rule mlp_figure_bits_per_parameter:
    output:
        png="figures/mlp_bits_per_parameter.png",
        pdf="figures/mlp_bits_per_parameter.pdf",
    input:
        results="results/mlp/results.csv",
        code=MLP_FIGURE_CODE,
    params:
        step="mlp.figure_bits_per_parameter",
        json=as_json(MLP_FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/figure_bits_per_parameter.log",
    shell:
        STEP


rule mlp_figure_anisotropy:
    output:
        png="figures/mlp_anisotropy.png",
        pdf="figures/mlp_anisotropy.pdf",
    input:
        results="results/mlp/results.csv",
        code=MLP_FIGURE_CODE,
    params:
        step="mlp.figure_anisotropy",
        json=as_json(MLP_FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/figure_anisotropy.log",
    shell:
        STEP


rule mlp_figure_whitening:
    output:
        png="figures/mlp_whitening.png",
        pdf="figures/mlp_whitening.pdf",
    input:
        results="results/mlp/results.csv",
        code=MLP_FIGURE_CODE,
    params:
        step="mlp.figure_whitening",
        json=as_json(MLP_FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/figure_whitening.log",
    shell:
        STEP
