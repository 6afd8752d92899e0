# Fact-storing MLPs (S0): capacity scaling (Fig. 7), anisotropy (Fig. 5), whitening of real
# MiniLM embeddings with the Lipschitz constant. Jobs: MiniLM embeddings once; one capacity search
# job per method (all F, seeds, targets); one anisotropy job per kappa and one whitening job per
# alpha (all methods, sharing the U* solve of their value set); the sweeps at the paper's d = 128
# (the NTK's capacity, the NTK's and the encoder-decoder's kappa sweeps, the two kappa sweeps on
# every family of singular values of their `spectra`) and the whitening sweep at F >> d one job each.

MLP = config["mlp"]
# What every search job reads; each job adds its own section without the list it is one point of.
MLP_SHARED = {key: MLP[key] for key in ("seed", "ntk_degrees", "search", "gd")}
MLP_SUMMARY_PARAMS = {
    "bits_per_parameter_assumed": MLP["bits_per_parameter_assumed"],
    "main_target": MLP["main_target"],
    "ntk_degrees": MLP["ntk_degrees"],
    "search": MLP["search"],
    "anisotropy_facts": MLP["anisotropy"]["n_facts"],
    "break_width_budget": MLP["anisotropy"]["break_width_budget"],
}


rule mlp:
    """Every result of the fact-storing MLP study (its figures: `snakemake figures`)."""
    input:
        "results/mlp/metrics.csv",


rule mlp_embeddings:
    output:
        embeddings="results/mlp/embeddings.npz",
    input:
        facts=DATA_TABLES["goodreads_facts"],
        code=step_code("embeddings"),
    params:
        step="embeddings.goodreads_minilm",
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
        code=step_code("mlp"),
    params:
        step="mlp.capacity",
        json=lambda w: as_json(
            MLP_SHARED, method=w.method, capacity=get_mlp_capacity_params()
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=lambda w: int(w.method.startswith("gd")),  # GD trains on the GPU; constructions stay on the CPU
        mem_mb=memory_request("mlp_capacity"),
    log:
        "logs/mlp/capacity_{method}.log",
    shell:
        STEP


rule mlp_ntk_regime:
    """The NTK's capacity at the paper's d = 128 (S0.ntk-stores); the one-pass unit-prefix search."""
    output:
        table="results/mlp/ntk_regime/{method}.csv",
    wildcard_constraints:
        method=r"ntk[a-z_]*",
    input:
        code=step_code("mlp"),
    params:
        step="mlp.ntk_regime",
        json=lambda w: as_json(MLP_SHARED, method=w.method, ntk_regime=get_mlp_ntk_regime_params()),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/mlp/ntk_regime_{method}.log",
    shell:
        STEP


rule mlp_robust_regime:
    """The encoder-decoder's kappa sweep at the paper's d = 128 (S0.others-robust); closed forms, on
    both families of singular values (mlp.robust_regime.spectra), each read against the cost law."""
    output:
        table="results/mlp/robust_regime.csv",
    input:
        code=step_code("mlp"),
    params:
        step="mlp.robust_regime",
        json=as_json(MLP_SHARED, robust_regime=MLP["robust_regime"]),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/mlp/robust_regime.log",
    shell:
        STEP


rule mlp_anisotropy_regime:
    """The NTK methods' kappa sweep at the paper's d = 128 (S0.ntk-anisotropy-breaks, S0.ntk-ustar-gain),
    on both families of singular values (mlp.anisotropy_regime.spectra; kappa = 1 searched once)."""
    output:
        table="results/mlp/anisotropy_regime.csv",
    input:
        code=step_code("mlp"),
    params:
        step="mlp.anisotropy_regime",
        json=as_json(MLP_SHARED, anisotropy_regime=MLP["anisotropy_regime"]),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/mlp/anisotropy_regime.log",
    shell:
        STEP


rule mlp_anisotropy:
    output:
        table="results/mlp/anisotropy/kappa{kappa}.csv",
    wildcard_constraints:
        kappa=r"[0-9.e+]+",
    input:
        code=step_code("mlp"),
    params:
        step="mlp.anisotropy",
        json=lambda w: as_json(
            MLP_SHARED, kappa=float(w.kappa), anisotropy=get_mlp_anisotropy_params()
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,  # its GD methods train on the GPU when there is one
        mem_mb=memory_request("mlp_anisotropy"),
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
        embeddings=rules.mlp_embeddings.output.embeddings,
        code=step_code("mlp"),
    params:
        step="mlp.whitening",
        json=lambda w: as_json(
            MLP_SHARED, alpha=float(w.alpha), whitening=get_mlp_whitening_params()
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,  # its GD methods train on the GPU when there is one
        mem_mb=memory_request("mlp_whitening"),
    log:
        "logs/mlp/whitening_alpha{alpha}.log",
    shell:
        STEP


rule mlp_whitening_regime:
    """The whitening sweep at F >> d (S0.whitening-capacity in the paper's regime): every alpha, the
    MiniLM facts on their top d principal directions."""
    output:
        table="results/mlp/whitening_regime.csv",
    input:
        embeddings=rules.mlp_embeddings.output.embeddings,
        code=step_code("mlp"),
    params:
        step="mlp.whitening_regime",
        json=as_json(MLP_SHARED, whitening_regime=MLP["whitening_regime"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,  # its GD methods train on the GPU when there is one
        mem_mb=memory_request("mlp_whitening_regime"),
    log:
        "logs/mlp/whitening_regime.log",
    shell:
        STEP


# Named inputs of the summary: one table per capacity method, per kappa, per alpha.
MLP_TABLES = (
    named_outputs(rules.mlp_capacity.output.table, {f"capacity_{m}": {"method": m} for m in MLP["capacity"]["methods"]})
    | {"robust_regime": rules.mlp_robust_regime.output.table}
    | {"anisotropy_regime": rules.mlp_anisotropy_regime.output.table}
    | {"whitening_regime": rules.mlp_whitening_regime.output.table}
    | named_outputs(rules.mlp_ntk_regime.output.table, {f"regime_{m}": {"method": m} for m in MLP["ntk_regime"]["methods"]})
    | named_outputs(rules.mlp_anisotropy.output.table, {f"anisotropy_k{k:g}": {"kappa": f"{k:g}"} for k in MLP["anisotropy"]["kappas"]})
    | named_outputs(rules.mlp_whitening.output.table, {f"whitening_a{a:g}": {"alpha": f"{a:g}"} for a in MLP["whitening"]["alphas"]})
)


rule mlp_summary:
    output:
        results="results/mlp/results.csv",
        fits="results/mlp/fits.csv",
        metrics="results/mlp/metrics.csv",
    input:
        **MLP_TABLES,
        code=step_code("mlp_summary"),
    params:
        step="mlp_summary.summary",
        json=as_json(MLP_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/mlp/summary.log",
    shell:
        STEP


METRICS["mlp"] = rules.mlp_summary.output.metrics

# figure name (a key of factstore.plots.mlp.FIGURES) -> the tables it reads.
MLP_FIGURE_INPUTS = {
    "capacity_scaling": {"results": rules.mlp_summary.output.results, "fits": rules.mlp_summary.output.fits},
    "bits_per_parameter": {"results": rules.mlp_summary.output.results},
    "anisotropy": {"results": rules.mlp_summary.output.results},
    "anisotropy_regime": {"results": rules.mlp_summary.output.results},  # the NTK's kappa sweeps at d = 128, both families
    "whitening": {"results": rules.mlp_summary.output.results},
    "seed_regime": {"results": rules.mlp_summary.output.results},  # the d = 128 sweeps (ntk_regime, robust_regime on both families)
}
MLP_FIGURE_PARAMS = MLP_SUMMARY_PARAMS | {
    key: MLP[key]
    for key in ("capacity", "anisotropy", "anisotropy_regime", "whitening", "whitening_regime", "ntk_regime", "robust_regime")
}
FIGURES += figure_files("mlp", MLP_FIGURE_INPUTS)


# the rule mlp_figure (workflow/rules/figures.smk)
add_figure_rule(
    "mlp",
    "S0 fact-storing MLPs",
    MLP_FIGURE_INPUTS,
    dict.fromkeys(MLP_FIGURE_INPUTS, MLP_FIGURE_PARAMS),
)
