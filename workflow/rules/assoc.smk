# Linear associative memory (SPEC S1): Hebbian vs trained W, original vs decoupled, rank-constrained.

ASSOC = config["assoc"]
ASSOC_CODE = ["assoc", "experiments/assoc"]
ASSOC_TRAINED = [("original", d) for d in ASSOC["trained"]["d"]] + [
    ("decoupled", d) for d in ASSOC["trained"]["decoupled_d"]
]
ASSOC_FIGURES = ["accuracy", "capacity_extrapolation", "spectrum", "rank_capacity"]

FIGURES += [f"figures/assoc_{name}.{ext}" for name in ASSOC_FIGURES for ext in ("png", "pdf")]
METRICS["assoc"] = "results/assoc/metrics.csv"


def assoc_curves(kind):
    """Named inputs for every trained table (kind='table') or spectrum table (kind='spectra')."""
    prefix = "trained" if kind == "table" else "spectra"
    files = {f"{prefix}_{problem}_d{d}": f"results/assoc/{kind}_{problem}_d{d}.csv" for problem, d in ASSOC_TRAINED}
    files |= {
        f"{prefix}_rank{kappa:g}": f"results/assoc/{kind}_rank{kappa:g}_d{ASSOC['rank']['d']}.csv"
        for kappa in ASSOC["rank"]["kappa"]
    }
    return files


rule assoc:
    """Every result and figure of the linear-associative-memory study."""
    input:
        METRICS["assoc"],
        [f for f in FIGURES if f.startswith("figures/assoc_")],


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
    shell:
        STEP


rule assoc_summary:
    output:
        capacity="results/assoc/capacity.csv",
        metrics=METRICS["assoc"],
    input:
        unpack(lambda w: assoc_curves("table") | assoc_curves("spectra")),
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
    shell:
        STEP


FIGURE_PARAMS = {"capacity_accuracy": ASSOC["capacity_accuracy"], "spectrum_d": ASSOC["spectrum_d"], "rank_d": ASSOC["rank"]["d"]}


rule assoc_figure_accuracy:
    output:
        png="figures/assoc_accuracy.png",
        pdf="figures/assoc_accuracy.pdf",
    input:
        unpack(lambda w: assoc_curves("table")),
        hebbian="results/assoc/hebbian.csv",
        code=code("experiments/assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_accuracy",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_accuracy.log",
    shell:
        STEP


rule assoc_figure_capacity_extrapolation:
    output:
        png="figures/assoc_capacity_extrapolation.png",
        pdf="figures/assoc_capacity_extrapolation.pdf",
    input:
        capacity="results/assoc/capacity.csv",
        metrics=METRICS["assoc"],
        code=code("experiments/assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_extrapolation",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_capacity_extrapolation.log",
    shell:
        STEP


rule assoc_figure_spectrum:
    output:
        png="figures/assoc_spectrum.png",
        pdf="figures/assoc_spectrum.pdf",
    input:
        unpack(lambda w: assoc_curves("spectra")),
        capacity="results/assoc/capacity.csv",
        code=code("experiments/assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_spectrum",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_spectrum.log",
    shell:
        STEP


rule assoc_figure_rank_capacity:
    output:
        png="figures/assoc_rank_capacity.png",
        pdf="figures/assoc_rank_capacity.pdf",
    input:
        capacity="results/assoc/capacity.csv",
        code=code("experiments/assoc", "plots/style", "plots/assoc"),
    params:
        step="assoc.figure_rank",
        json=as_json(FIGURE_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/figure_rank_capacity.log",
    shell:
        STEP
