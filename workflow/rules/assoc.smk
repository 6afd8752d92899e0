# Linear associative memory (SPEC S1): Hebbian vs trained W, original vs decoupled, rank-constrained.

ASSOC = config["assoc"]
ASSOC_CODE = ["assoc", "experiments/assoc"]
ASSOC_TRAINED = [("original", d) for d in ASSOC["trained"]["d"]] + [
    ("decoupled", d) for d in ASSOC["trained"]["decoupled_d"]
]
ASSOC_FIGURES = ["accuracy", "capacity_extrapolation", "spectrum", "rank_capacity"]

FIGURES += [f"figures/assoc_{name}.{ext}" for name in ASSOC_FIGURES for ext in ("png", "pdf")]
METRICS["assoc"] = "results/assoc/metrics.csv"


# Named inputs of every trained table and every spectrum table (full rank and rank-constrained).
ASSOC_RUNS = [f"{problem}_d{d}" for problem, d in ASSOC_TRAINED] + [
    f"rank{kappa:g}_d{ASSOC['rank']['d']}" for kappa in ASSOC["rank"]["kappa"]
]
ASSOC_TABLES = {f"trained_{run}": f"results/assoc/table_{run}.csv" for run in ASSOC_RUNS}
ASSOC_SPECTRA = {f"spectra_{run}": f"results/assoc/spectra_{run}.csv" for run in ASSOC_RUNS}


rule assoc:
    """Every result of the linear-associative-memory study (its figures: `snakemake figures`)."""
    input:
        METRICS["assoc"],


rule assoc_hebbian:
    output:
        table="results/assoc/hebbian.csv",
    input:
        code=code(*ASSOC_CODE),
    params:
        step="assoc.hebbian",
        json=as_json(ASSOC["hebbian"], seed=ASSOC["seed"]),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/assoc/hebbian.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_trained:
    output:
        table="results/assoc/table_{problem}_d{d}.csv",
        spectra="results/assoc/spectra_{problem}_d{d}.csv",
    wildcard_constraints:
        problem="original|decoupled",
        d=r"\d+",
    input:
        code=code(*ASSOC_CODE),
    params:
        step="assoc.trained",
        json=lambda w: as_json(
            {k: v for k, v in ASSOC["trained"].items() if k not in ("d", "decoupled_d")},
            d=int(w.d), problem=w.problem, seed=ASSOC["seed"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/assoc/trained_{problem}_d{d}.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_rank:
    output:
        table="results/assoc/table_rank{kappa}_d{d}.csv",
        spectra="results/assoc/spectra_rank{kappa}_d{d}.csv",
    wildcard_constraints:
        kappa=r"[0-9.]+",
        d=r"\d+",
    input:
        code=code(*ASSOC_CODE),
    params:
        step="assoc.trained",
        json=lambda w: as_json(
            {k: v for k, v in ASSOC["trained"].items() if k not in ("d", "decoupled_d", "alphas")},
            alphas=ASSOC["rank"]["alphas"], d=int(w.d), problem="original",
            rank_fraction=float(w.kappa), seed=ASSOC["seed"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/assoc/rank{kappa}_d{d}.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_summary:
    output:
        capacity="results/assoc/capacity.csv",
        metrics=METRICS["assoc"],
    input:
        **ASSOC_TABLES,
        **ASSOC_SPECTRA,
        hebbian="results/assoc/hebbian.csv",
        code=code(*ASSOC_CODE),
    params:
        step="assoc.summary",
        json=as_json(
            {"capacity_accuracy": ASSOC["capacity_accuracy"], "spectrum_d": ASSOC["spectrum_d"], "rank_d": ASSOC["rank"]["d"]}
        ),
        io=runner_io,
    log:
        "logs/assoc/summary.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


FIGURE_PARAMS = {"capacity_accuracy": ASSOC["capacity_accuracy"], "spectrum_d": ASSOC["spectrum_d"], "rank_d": ASSOC["rank"]["d"]}


rule assoc_figure_accuracy:
    output:
        png="figures/assoc_accuracy.png",
        pdf="figures/assoc_accuracy.pdf",
    input:
        **ASSOC_TABLES,
        hebbian="results/assoc/hebbian.csv",
        code=code("experiments/assoc", "assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_accuracy",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_accuracy.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_figure_capacity_extrapolation:
    output:
        png="figures/assoc_capacity_extrapolation.png",
        pdf="figures/assoc_capacity_extrapolation.pdf",
    input:
        capacity="results/assoc/capacity.csv",
        metrics=METRICS["assoc"],
        code=code("experiments/assoc", "assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_extrapolation",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_capacity_extrapolation.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_figure_spectrum:
    output:
        png="figures/assoc_spectrum.png",
        pdf="figures/assoc_spectrum.pdf",
    input:
        **ASSOC_SPECTRA,
        capacity="results/assoc/capacity.csv",
        code=code("experiments/assoc", "assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_spectrum",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_spectrum.log",
    conda:
        ENVIRONMENT
    shell:
        STEP


rule assoc_figure_rank_capacity:
    output:
        png="figures/assoc_rank_capacity.png",
        pdf="figures/assoc_rank_capacity.pdf",
    input:
        capacity="results/assoc/capacity.csv",
        code=code("experiments/assoc", "assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_rank",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_rank_capacity.log",
    conda:
        ENVIRONMENT
    shell:
        STEP
