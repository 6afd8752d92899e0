# Shared helpers (config validation, step invocation, code dependencies, global targets).
# Every conda directive points at the one environment of the project (used with --sdm conda).

ENVIRONMENT = "../../environment.yml"

import json
import sys

from factstore import config as factstore_config
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

# Every study appends its figure files and its metrics table here.
FIGURES = []
METRICS = {}

# Modules every step imports: the runner, atomic I/O and provenance, the device choice.
CORE_CODE = [
    "src/factstore/__main__.py",
    "src/factstore/io.py",
    "src/factstore/provenance.py",
    "src/factstore/device.py",
]


def code(*modules):
    """Source files that a step imports. Editing one reruns exactly the rules listing it."""
    return CORE_CODE + [f"src/factstore/{module}.py" for module in modules]


def as_json(section, **extra):
    """A rule's parameters: a config section plus wildcard values, as canonical JSON."""
    return json.dumps({**section, **extra}, sort_keys=True)


def runner_io(wildcards, input, output):
    """The --input/--output pairs of all named inputs (except code) and outputs."""
    parts = [f"--input {name}={path}" for name, path in input.items() if name != "code"]
    parts += [f"--output {name}={path}" for name, path in output.items()]
    return " ".join(parts)


# Every rule runs one step of factstore.experiments through the same command line.
STEP = "python -m factstore {params.step} --params {params.json:q} {params.io} --threads {threads} > {log} 2>&1"
