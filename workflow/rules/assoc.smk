# Linear associative memory (S1): Hebbian vs trained W, original vs decoupled, rank-constrained.
#
# The worked example of a study's rules (docs/ARCHITECTURE.md): computation rules that each run one
# step of factstore.experiments.assoc, a summary rule that writes the metrics the claims read, and
# ONE figure rule whose {figure} wildcard picks a function of factstore.plots.assoc.

ASSOC = config["assoc"]
ASSOC_TRAINED = [("original", d) for d in ASSOC["trained"]["d"]] + [
    ("decoupled", d) for d in ASSOC["trained"]["decoupled_d"]
]


rule assoc:
    """Every result of the linear-associative-memory study (its figures: `snakemake figures`)."""
    input:
        "results/assoc/metrics.csv",


rule assoc_hebbian:
    output:
        table="results/assoc/hebbian.csv",
    input:
        code=step_code("assoc"),
    params:
        step="assoc.hebbian",
        json=as_json(ASSOC["hebbian"], seed=ASSOC["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        mem_mb=memory_request("assoc_hebbian"),
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
        code=step_code("assoc"),
    params:
        step="assoc.trained",
        json=lambda w: as_json(
            get_assoc_training_params("seeds"),
            **trained_loads_and_seeds(ASSOC["trained"], w.problem, int(w.d)), d=int(w.d), problem=w.problem, seed=ASSOC["seed"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("assoc_trained"),
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
    # the head of the chain assoc_rank -> assoc_rank_check (~350 CPU-s): without a priority a
    # default run can begin that chain late and end on it, a core idle meanwhile. Priority 5,
    # below the longest chain's 10 (fetch_wikipedia); Snakemake does not pass it to the jobs waited for
    priority: 5
    input:
        code=step_code("assoc"),
    params:
        step="assoc.trained",
        json=lambda w: as_json(
            get_assoc_training_params(),
            alphas=ASSOC["rank"]["alphas"], d=int(w.d), problem="original",
            rank_fraction=float(w.kappa), seed=ASSOC["seed"], **ASSOC["rank"]["training"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("assoc_rank"),
    log:
        "logs/assoc/rank{kappa}_d{d}.log",
    shell:
        STEP


rule assoc_rank_check:
    """S1.rank-capacity: is W = Q R^T trained to its optimum? Retrain the rank run of (kappa, d) with
    more steps, other learning rates and initialisations on the loads around its capacity."""
    output:
        table="results/assoc/rank_check_rank{kappa}_d{d}.csv",
    wildcard_constraints:
        kappa=r"[0-9.]+",
        d=r"\d+",
    priority: 5  # the chain's end (see assoc_rank)
    input:
        baseline=rules.assoc_rank.output.table,
        code=step_code("assoc"),
    params:
        step="assoc.rank_check",
        json=lambda w: as_json(
            get_assoc_training_params(),
            alphas=ASSOC["rank"]["alphas"], window=ASSOC["rank"]["check_window"], d=int(w.d),
            rank_fraction=float(w.kappa), seed=ASSOC["seed"], **ASSOC["rank"]["training"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/assoc/rank_check_rank{kappa}_d{d}.log",
    shell:
        STEP


# Named inputs trained_<run> / spectra_<run>: full rank per (problem, d), rank-constrained per kappa.
ASSOC_RUN_WILDCARDS = {f"{problem}_d{d}": {"problem": problem, "d": d} for problem, d in ASSOC_TRAINED}
ASSOC_RANK_WILDCARDS = {
    f"rank{kappa:g}_d{ASSOC['rank']['d']}": {"kappa": f"{kappa:g}", "d": ASSOC["rank"]["d"]} for kappa in ASSOC["rank"]["kappa"]
}
ASSOC_TABLES = named_outputs(rules.assoc_trained.output.table, {f"trained_{run}": w for run, w in ASSOC_RUN_WILDCARDS.items()}) | named_outputs(
    rules.assoc_rank.output.table, {f"trained_{run}": w for run, w in ASSOC_RANK_WILDCARDS.items()}
)
ASSOC_SPECTRA = named_outputs(rules.assoc_trained.output.spectra, {f"spectra_{run}": w for run, w in ASSOC_RUN_WILDCARDS.items()}) | named_outputs(
    rules.assoc_rank.output.spectra, {f"spectra_{run}": w for run, w in ASSOC_RANK_WILDCARDS.items()}
)
ASSOC_SUMMARY_PARAMS = {
    "seed": ASSOC["seed"],
    "capacity_accuracy": ASSOC["capacity_accuracy"],
    "spectrum_d": ASSOC["spectrum_d"],
    "rank_d": ASSOC["rank"]["d"],
    "rank_alphas": ASSOC["rank"]["alphas"],
}


rule assoc_summary:
    output:
        capacity="results/assoc/capacity.csv",
        metrics="results/assoc/metrics.csv",
    input:
        **ASSOC_TABLES,
        **ASSOC_SPECTRA,
        hebbian=rules.assoc_hebbian.output.table,
        rank_check=expand(rules.assoc_rank_check.output.table, kappa=f"{ASSOC['rank']['check_kappa']:g}", d=ASSOC["rank"]["d"]),
        code=step_code("assoc_summary"),
    params:
        step="assoc_summary.summary",
        json=as_json(ASSOC_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/assoc/summary.log",
    shell:
        STEP


METRICS["assoc"] = rules.assoc_summary.output.metrics

# figure name (a key of factstore.plots.assoc.FIGURES) -> the tables it reads, by name.
ASSOC_FIGURE_INPUTS = {
    "accuracy": ASSOC_TABLES | {"hebbian": rules.assoc_hebbian.output.table},
    "capacity_extrapolation": {"capacity": rules.assoc_summary.output.capacity},
    "spectrum": ASSOC_SPECTRA | {"capacity": rules.assoc_summary.output.capacity},
    "rank_capacity": {"capacity": rules.assoc_summary.output.capacity},
}
FIGURES += figure_files("assoc", ASSOC_FIGURE_INPUTS)


# the rule assoc_figure (workflow/rules/figures.smk)
add_figure_rule(
    "assoc",
    "S1 linear associative memory",
    ASSOC_FIGURE_INPUTS,
    dict.fromkeys(ASSOC_FIGURE_INPUTS, ASSOC_SUMMARY_PARAMS),
)
