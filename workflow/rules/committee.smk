# Committee machines (S3, first half): capacity per weight of tree committee machines (K = 1,
# 3, 5; several N and an extrapolation in 1/N), depth (a second hidden layer; fully connected
# machines with 1-3 hidden layers), and many outputs with a finite training error.
#
# Each embedding run is one architecture and one solver over all its N and loads; the summary
# turns the runs into capacities and metrics; ONE figure rule draws every figure of the study.

COMMITTEE = config["committee"]
COMMITTEE_SHARED = {key: COMMITTEE[key] for key in ("seed", "instances", "backprop", "least_action")}


# {run name: the embedding step's params}: tree_k<K>_<solver>, depth_tree, fc_l<layers>_<solver>.
COMMITTEE_TREE, COMMITTEE_DEPTH = COMMITTEE["tree"], COMMITTEE["depth"]
COMMITTEE_RUNS = {
    f"tree_{key}_{solver}": COMMITTEE_SHARED | {
        "architecture": {"kind": "tree", "hidden": int(key[1:])}, "solver": solver,
        "alphas": COMMITTEE_TREE["alphas"][key],
        "n": [n for n in COMMITTEE_TREE["n"] if solver != "backprop" or n <= COMMITTEE_TREE["backprop_max_n"]],
    }
    for key in ("k1", "k3", "k5")
    for solver in COMMITTEE_TREE["solvers"][key]
}
# Depth: the 9 -> 3 -> output tree and the one-layer K = 3 tree, least action, on the same N and loads;
# every depth run takes depth.least_action_restarts, and the trees the search when depth.least_action_search.
COMMITTEE_DEPTH_LEAST_ACTION = {key: value for key, value in COMMITTEE["least_action"].items()
                                if key != "search" or COMMITTEE_DEPTH["least_action_search"]} | {"restarts": COMMITTEE_DEPTH["least_action_restarts"]}
COMMITTEE_RUNS["depth_tree"] = COMMITTEE_SHARED | {
    "architecture": {"kind": "tree", "hidden": COMMITTEE_DEPTH["tree"]["hidden"], "groups": COMMITTEE_DEPTH["tree"]["groups"]},
    "solver": "least_action", "n": COMMITTEE_DEPTH["tree"]["n"], "alphas": COMMITTEE_DEPTH["tree"]["alphas"],
    "least_action": COMMITTEE_DEPTH_LEAST_ACTION,
}
# (instance_key: the reference learns the depth tree's patterns and labels.)
COMMITTEE_RUNS["depth_reference"] = COMMITTEE_RUNS["depth_tree"] | {"architecture": {"kind": "tree", "hidden": 3}, "instance_key": "depth_tree"}
# Fully connected: fc_l<layers>_<solver> (least_action: multilayer least action + one LP per unit;
# function_search: least action + LP polish through each function the upper layers realise),
# each solver on its own grid of loads (config.cross_field_problems: one per solver).
COMMITTEE_RUNS |= {
    f"fc_l{layers}_{solver}": COMMITTEE_SHARED | {
        "architecture": {"kind": "fc", "hidden": COMMITTEE_DEPTH["fc"]["hidden"], "layers": layers},
        "solver": solver, "n": [COMMITTEE_DEPTH["fc"]["n"]], "alphas": COMMITTEE_DEPTH["fc"]["alphas"][solver],
        "least_action": COMMITTEE_DEPTH_LEAST_ACTION | {"epochs": COMMITTEE_DEPTH["fc_least_action_epochs"]},
    }
    for layers in COMMITTEE_DEPTH["fc"]["layers"]
    for solver in COMMITTEE_DEPTH["fc_solvers"]
}
# The exact reference at small N: reference_k<K>_milp, and least action (restarts, search) on its instances.
COMMITTEE_REFERENCE = COMMITTEE["reference"]
for key in ("k3", "k5"):
    COMMITTEE_RUNS[f"reference_{key}_milp"] = COMMITTEE_SHARED | {
        "architecture": {"kind": "tree", "hidden": int(key[1:])}, "solver": "milp", "n": [COMMITTEE_REFERENCE["n"][key]],
        "alphas": COMMITTEE_REFERENCE["alphas"][key], "instances": COMMITTEE_REFERENCE["instances"],
        "milp": {"node_limit": COMMITTEE_REFERENCE["node_limit"], "time_limit": COMMITTEE_REFERENCE["time_limit"]},
    }
    COMMITTEE_RUNS[f"reference_{key}_least_action"] = COMMITTEE_RUNS[f"reference_{key}_milp"] | {
        "solver": "least_action", "instance_key": f"reference_{key}_milp"}
# K = 3 back-propagation with other epoch budgets on the instances of tree_k3_backprop at one N.
COMMITTEE_SWEEP = COMMITTEE_TREE["epoch_sweep"]
COMMITTEE_RUNS |= {
    f"epochs_k3_e{epochs}": COMMITTEE_RUNS["tree_k3_backprop"] | {
        "n": [COMMITTEE_SWEEP["n"]], "instance_key": "tree_k3_backprop",
        "backprop": COMMITTEE["backprop"] | {"epochs": epochs},
    }
    for epochs in COMMITTEE_SWEEP["epochs"]
}
# Each run keeps only its own solver's settings: editing back-propagation's reruns only its runs,
# and least action's only its runs (the function search is least action: it reads those settings).
COMMITTEE_SETTINGS_OF = {"backprop": "backprop", "least_action": "least_action", "function_search": "least_action", "lp": None,
                         "milp": "milp"}
COMMITTEE_SOLVER_SETTINGS = {settings for settings in COMMITTEE_SETTINGS_OF.values() if settings}
COMMITTEE_RUNS = {
    name: {key: value for key, value in run_settings.items()
           if key not in COMMITTEE_SOLVER_SETTINGS or key == COMMITTEE_SETTINGS_OF[run_settings["solver"]]} | {"run": name}
    for name, run_settings in COMMITTEE_RUNS.items()
}

# The step module of each solver (one per solver family, the summary and the many-outputs step
# apart): a rule's code inputs are what its module imports, so editing back-propagation reruns
# only its runs, least action's only the least-action and function-search runs, a metric only
# the summary.
COMMITTEE_STEP_MODULE = {"backprop": "committee_backprop", "least_action": "committee_least_action",
                         "function_search": "committee_least_action", "lp": "committee_lp", "milp": "committee_milp"}


rule committee:
    """Every result of the committee-machine study (its figures: `snakemake committee_figures`)."""
    input:
        "results/committee/metrics.csv",


rule committee_embedding:
    output:
        table="results/committee/embedding_{run}.csv",
    wildcard_constraints:
        run="|".join(COMMITTEE_RUNS),
    input:
        code=lambda w: step_code(COMMITTEE_STEP_MODULE[COMMITTEE_RUNS[w.run]["solver"]]),
    params:
        step=lambda w: f'{COMMITTEE_STEP_MODULE[COMMITTEE_RUNS[w.run]["solver"]]}.embedding',
        json=lambda w: as_json(COMMITTEE_RUNS[w.run]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/committee/embedding_{run}.log",
    shell:
        STEP


rule committee_multi_output:
    output:
        table="results/committee/multi_output.csv",
    input:
        code=step_code("committee_multi_output"),
    params:
        step="committee_multi_output.multi_output",
        json=as_json(COMMITTEE["multi_output"], seed=COMMITTEE["seed"]),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("committee_multi_output"),
    log:
        "logs/committee/multi_output.log",
    shell:
        STEP


COMMITTEE_EMBEDDINGS = {f"embedding_{run}": rules.committee_embedding.output.table.format(run=run) for run in COMMITTEE_RUNS}
COMMITTEE_SUMMARY_PARAMS = {
    "solvers": COMMITTEE_TREE["solvers"],
    "depth": {"tree_run": "depth_tree", "reference_run": "depth_reference"},
    "reference": {key: {"milp": f"reference_{key}_milp", "least_action": f"reference_{key}_least_action"} for key in ("k3", "k5")},
    "fc_runs": [f"fc_l{layers}_{solver}" for layers in COMMITTEE_DEPTH["fc"]["layers"] for solver in COMMITTEE_DEPTH["fc_solvers"]],
    "epoch_sweep": {
        "n": COMMITTEE_SWEEP["n"],
        "runs": [["tree_k3_backprop", COMMITTEE["backprop"]["epochs"]]]
        + [[f"epochs_k3_e{epochs}", epochs] for epochs in COMMITTEE_SWEEP["epochs"]],
    },
}


rule committee_summary:
    output:
        fractions="results/committee/fractions.csv",
        capacity="results/committee/capacity.csv",
        extrapolation="results/committee/extrapolation.csv",
        outputs="results/committee/outputs.csv",
        metrics="results/committee/metrics.csv",
    input:
        **COMMITTEE_EMBEDDINGS,
        multi_output=rules.committee_multi_output.output.table,
        code=step_code("committee_summary"),
    params:
        step="committee_summary.summary",
        json=as_json(COMMITTEE_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/committee/summary.log",
    shell:
        STEP


METRICS["committee"] = rules.committee_summary.output.metrics

# figure name (a key of factstore.plots.committee.FIGURES) -> the tables it reads, by name.
COMMITTEE_FIGURE_INPUTS = {
    "fraction_embedded": {"fractions": rules.committee_summary.output.fractions},
    "capacity_extrapolation": {
        "capacity": rules.committee_summary.output.capacity,
        "extrapolation": rules.committee_summary.output.extrapolation,
    },
    "depth": {"capacity": rules.committee_summary.output.capacity, "fractions": rules.committee_summary.output.fractions},
    "solver_reach": {"capacity": rules.committee_summary.output.capacity, "fractions": rules.committee_summary.output.fractions},
    "multi_output": {"outputs": rules.committee_summary.output.outputs, "table": rules.committee_multi_output.output.table},
}
COMMITTEE_FIGURE_PARAMS = COMMITTEE_SUMMARY_PARAMS
FIGURES += figure_files("committee", COMMITTEE_FIGURE_INPUTS)


rule committee_figures:
    """Every figure of the committee-machine study."""
    input:
        figure_files("committee", COMMITTEE_FIGURE_INPUTS),


# the rule committee_figure (workflow/rules/figures.smk)
add_figure_rule(
    "committee",
    "S3 committee machines (capacity per weight)",
    COMMITTEE_FIGURE_INPUTS,
    dict.fromkeys(COMMITTEE_FIGURE_INPUTS, COMMITTEE_FIGURE_PARAMS),
)
