# Shared helpers (config validation, step invocation, code dependencies, global targets).
# There are no conda directives: every step runs in the one environment of the project (the README
# says how to make it with conda: environment.yml, then `pip install --no-deps -e .`).

import json
import sys
from pathlib import Path

from factstore import config as factstore_config
from factstore import memory_estimate
from factstore import run_directory
from factstore.claims import claims_shown_in, load_registry
from factstore.code_dependencies import source_files
from factstore.report import figure_caption
from factstore.data.fetch import MIRROR_ENVIRONMENT_VARIABLE

# Under DVC, params.yaml selects the config file (passed as --configfile); a $FACTSTORE_CONFIG
# naming another file would be silently overridden: stop instead.
conflict = factstore_config.dvc_config_conflict(workflow.overwrite_configfiles)
if conflict:
    sys.exit(f"factstore: {conflict}")

# --config values: nested ones arrive as strings (Snakemake's YAML base loader) and are typed here;
# an invalid one is blamed on --config, not on the config file.
try:
    factstore_config.validate_workflow_config(
        config,
        files=list(workflow.overwrite_configfiles or workflow.configfiles),
        overrides=workflow.config_settings.config,
    )
except factstore_config.ConfigError as error:
    sys.exit(f"factstore: {error}")

# The mirror is passed through the environment, not as a parameter: verified bytes are the same
# either way, so switching mirror <-> download must not rerun anything.
if config["data"].get("mirror") and not os.environ.get(MIRROR_ENVIRONMENT_VARIABLE):
    os.environ[MIRROR_ENVIRONMENT_VARIABLE] = str(config["data"]["mirror"])

# The config file this run reads, relative to the repository where it lies inside it, and the
# --config values set over it.
CONFIG_FILE = ", ".join(
    os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    for path in (workflow.overwrite_configfiles or workflow.configfiles)
)
CONFIG_OVERRIDES = workflow.config_settings.config or {}

# This run's directory (workflow/Snakefile moves every rule's paths there); a step that is given a
# folder or a file as a parameter rather than as an input gets it through in_run.
RUN_DIR = config["run_dir"]
if problem := run_directory.run_dir_problem(RUN_DIR):
    sys.exit(f"factstore: {problem}")


def in_run(folder):
    """`folder` (e.g. "results") inside this run's directory."""
    return run_directory.in_run(RUN_DIR, folder)


# Every study appends its figure files and its metrics table here.
FIGURES = []
METRICS = {}

# Code dependencies are derived from imports (factstore.code_dependencies), never kept by hand:
# a rule lists every factstore source file its step loads, so editing one reruns exactly the
# rules that use it. Paths are relative to the repository root, where snakemake runs.
SOURCE_ROOT = Path("src")


def step_code(module):
    """Source files behind a step of factstore.experiments.<module>, the runner included."""
    return source_files(["factstore.__main__", f"factstore.experiments.{module}"], SOURCE_ROOT)


def figure_code(study):
    """Source files behind the figures of a study: the runner, the figure step, its plots module."""
    return source_files(["factstore.__main__", "factstore.experiments.figures", f"factstore.plots.{study}"], SOURCE_ROOT)


def as_json(section, **extra):
    """A rule's parameters: a config section plus wildcard values, as canonical JSON."""
    return json.dumps({**section, **extra}, sort_keys=True)


CLAIMS_REGISTRY = load_registry("config/claims.yaml")


def figure_report(study, title):
    """The report entry of a study's figure rule: the PNG, captioned (workflow/report/figure.rst)."""
    return report(
        f"figures/{study}_{{figure}}.png",
        caption="../report/figure.rst",
        category=title,
        labels={"figure": "{figure}"},
    )


def figure_report_params(study):
    """params of a study's figure rule read by the report caption -- what the figure shows (its
    function's docstring) and the claims that name it in config/claims.yaml."""
    plots_file = SOURCE_ROOT / f"factstore/plots/{study}.py"
    return {
        "caption": lambda w: figure_caption(plots_file, w.figure),
        "claims": lambda w: ", ".join(claims_shown_in(CLAIMS_REGISTRY, f"{study}_{w.figure}")) or "none (context)",
    }


# Every study with a figure rule: study -> its figures' inputs and parameters (add_figure_rule);
# workflow/rules/figures.smk makes the rule <study>_figure of each.
FIGURE_STUDIES = {}


def add_figure_rule(study, title, inputs_by_figure, params_by_figure):
    """Ask for the figure rule of a study, made in workflow/rules/figures.smk. `inputs_by_figure`
    {figure: {input name: table}}, each figure a function of factstore.plots.<study>;
    `params_by_figure` {figure: the config section it reads}; `title` its category in the report."""
    FIGURE_STUDIES[study] = {"title": title, "inputs": inputs_by_figure, "params": params_by_figure}


def figure_inputs(study):
    """input of a study's figure rule: the tables its {figure} reads, by name."""
    return lambda wildcards: FIGURE_STUDIES[study]["inputs"][wildcards.figure]


def figure_json(study):
    """params.json of a study's figure rule: its {figure}'s config section, study and figure name."""
    return lambda wildcards: as_json(FIGURE_STUDIES[study]["params"][wildcards.figure], study=study, figure=wildcards.figure)


def named_outputs(pattern, wildcards_by_name):
    """{name: pattern filled with that name's wildcard values}: the named inputs of a job that reads
    one output of many jobs of another (e.g. every width's training table)."""
    return {name: pattern.format(**wildcards) for name, wildcards in wildcards_by_name.items()}


def figure_files(study, names):
    """The PNG and PDF of every figure of a study."""
    return [f"figures/{study}_{name}.{ext}" for name in names for ext in ("png", "pdf")]


def trained_loads_and_seeds(trained, problem, d):
    """The loads and seeds of one full-rank S1 run (assoc.trained): the original problem at a d of
    trained.fine gets the finer loads near capacity added to the grid, and that section's seeds."""
    fine = trained["fine"]
    if problem == "original" and d in fine["d"]:
        return {"alphas": sorted(set(trained["alphas"]) | set(fine["alphas"])), "seeds": fine["seeds"]}
    return {"alphas": trained["alphas"], "seeds": trained["seeds"]}


def without_keys(section, keys):
    """A config section less `keys`: the lists a rule spreads over its jobs (a wildcard, one job
    per value) and the settings that are no parameter of its step."""
    return {key: value for key, value in section.items() if key not in keys}


# The config sections as their steps read them, each without the keys its rules spread over jobs.
def get_assoc_training_params(*more_keys):
    """assoc.trained without the runs' sizes (d, decoupled_d), the finer grid (fine) and the loads
    (alphas; a job's own come with it), nor `more_keys`."""
    return without_keys(config["assoc"]["trained"], ("d", "decoupled_d", "fine", "alphas") + more_keys)


def get_ntk_training_params():
    """ntk.training without its width list (one job per width)."""
    return without_keys(config["ntk"]["training"], ("widths",))


def get_mlp_capacity_params():
    """mlp.capacity without its method list (one job per method)."""
    return without_keys(config["mlp"]["capacity"], ("methods",))


def get_mlp_ntk_regime_params():
    """mlp.ntk_regime without its method list (one job per method)."""
    return without_keys(config["mlp"]["ntk_regime"], ("methods",))


def get_mlp_anisotropy_params():
    """mlp.anisotropy without its kappa list (one job per kappa)."""
    return without_keys(config["mlp"]["anisotropy"], ("kappas",))


def get_mlp_whitening_params():
    """mlp.whitening without its alpha list (one job per alpha)."""
    return without_keys(config["mlp"]["whitening"], ("alphas",))


def get_dilution_archetypes_params():
    """dilution.archetypes without its sweeps (one job per swept setting)."""
    return without_keys(config["dilution"]["archetypes"], ("sweeps",))


def get_dilution_pretrain_params():
    """dilution.bert without the pruning settings (groups, rates, retrain_steps, eval_maskings),
    which are no parameter of the pretraining."""
    return without_keys(config["dilution"]["bert"], ("groups", "rates", "retrain_steps", "eval_maskings"))


def get_usability_whitening_params():
    """usability.whitening without its per-kind settings (real, synthetic: one job per kind)."""
    return without_keys(config["usability"]["whitening"], ("real", "synthetic"))


def runner_io(wildcards, input, output):
    """The --input/--output pairs of all named inputs (except code) and outputs."""
    parts = [f"--input {name}={path}" for name, path in input.items() if name != "code"]
    parts += [f"--output {name}={path}" for name, path in output.items()]
    return " ".join(parts)


def memory_request(name):
    """`mem_mb` (MB) of the rule `name`, whose jobs hold a tensor that factstore.memory_estimate
    estimates at this run's sizes -- baseline + safety factor x the estimate (memory_request_mb says
    which). A cluster executor (workflow/profiles/slurm) asks for it; a local run enforces it only
    under --resources mem_mb=N. Only rules with an estimate declare it (others get the profile's default)."""
    request = memory_estimate.memory_request_mb(config, name)
    # None: this config empties the sizes the estimate reads (the rule then has no jobs)
    return memory_estimate.FLOOR_MB if request is None else request


# Every rule runs one step of factstore.experiments through the same command line.
STEP = "python -m factstore {params.step} --params {params.json:q} {params.io} --threads {threads} > {log} 2>&1"
