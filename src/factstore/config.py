"""Load and validate the workflow configuration against its JSON schema.

Errors name the offending key by its full path and say what is allowed, e.g.
    config/smoke.yaml: assoc.trained.seeds = 0: must be >= 1
    config/smoke.yaml: assoc.trained: unknown key 'sead' (allowed: alphas, d, ...)
and they blame the source that holds the bad value: the config file(s), or Snakemake's
`--config KEY=VALUE` overrides (see `validate_workflow_config`).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from factstore.io import read_yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration breaks the schema or a cross-field rule; the message lists every problem."""


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    return read_yaml(path)


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = []
    for part in error.absolute_path:
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    """One readable line per schema violation."""
    where = _key_path(error)
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key {', '.join(repr(u) for u in unknown)} (allowed: {', '.join(allowed)})"
    if kind == "required":
        missing = [key for key in expected if key not in error.instance]
        return f"{where}: missing key {', '.join(repr(m) for m in missing)}"
    if kind == "enum":
        return f"{where} = {error.instance!r}: must be one of {', '.join(map(str, expected))}"
    if kind == "type":
        return f"{where} = {error.instance!r}: must be of type {expected}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"{where} = {error.instance!r}: must be {bounds[kind]} {expected}"
    return f"{where}: {error.message}"


def cross_field_problems(config: dict[str, Any]) -> list[str]:
    """Rules a JSON schema cannot express: values that must appear in other lists, and ordered pairs."""
    problems = []
    assoc = config.get("assoc", {})
    trained_d = assoc.get("trained", {}).get("d", [])
    for key in ("decoupled_d",):
        for d in assoc.get("trained", {}).get(key, []):
            if d not in trained_d:
                problems.append(f"assoc.trained.{key} = {d}: must also be in assoc.trained.d {trained_d}")
    if "rank" in assoc and assoc["rank"].get("d") not in trained_d:
        problems.append(f"assoc.rank.d = {assoc['rank'].get('d')}: must be one of assoc.trained.d {trained_d} (its full-rank point)")
    if "spectrum_d" in assoc and assoc["spectrum_d"] not in trained_d:
        problems.append(f"assoc.spectrum_d = {assoc['spectrum_d']}: must be one of assoc.trained.d {trained_d}")
    rank = assoc.get("rank", {})
    if "check_kappa" in rank and rank["check_kappa"] not in rank.get("kappa", []):
        problems.append(f"assoc.rank.check_kappa = {rank['check_kappa']}: must be one of assoc.rank.kappa {rank.get('kappa')} "
                        "(the check retrains that rank run)")
    problems += ordered_pair_problems(config)
    depth = config.get("committee", {}).get("depth", {})
    grids = depth.get("fc", {}).get("alphas", {})
    for solver in depth.get("fc_solvers", []):
        if solver not in grids:
            problems.append(f"committee.depth.fc.alphas has no grid of loads for the solver {solver!r} of committee.depth.fc_solvers: give one")
    return problems


ORDERED_PAIRS = [
    ("usability.lengths.prefix_min", "usability.lengths.prefix_max"),
    ("usability.lengths.suffix_min", "usability.lengths.suffix_max"),
    ("committee.backprop.beta_start", "committee.backprop.beta_end"),
    ("committee.multi_output.beta_start", "committee.multi_output.beta_end"),
    ("attention.search.start", "attention.search.max_size"),
]
"""(low, high) key paths whose values must satisfy low <= high: a junk length is drawn uniformly
from [min, max], beta is annealed up from start to end (towards the sign), and a capacity search
starts at or below the largest size it may probe."""


def _lookup(config: dict[str, Any], path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def ordered_pair_problems(config: dict[str, Any]) -> list[str]:
    """One message per ORDERED_PAIRS pair out of order, naming both keys and values; and the NTK
    scaling fit's lower end, which must leave at least two train sizes to fit the power law over."""
    problems = []
    for low_key, high_key in ORDERED_PAIRS:
        low, high = _lookup(config, low_key), _lookup(config, high_key)
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
            problems.append(f"{low_key} = {low} is larger than {high_key} = {high}: must be <= it")
    scaling = _lookup(config, "ntk.scaling") or {}
    sizes, fit_min = scaling.get("train_sizes"), scaling.get("fit_min_train_size")
    if isinstance(sizes, list) and isinstance(fit_min, (int, float)) and sum(size >= fit_min for size in sizes) < 2:
        problems.append(f"ntk.scaling.fit_min_train_size = {fit_min} leaves fewer than two of ntk.scaling.train_sizes "
                        f"{sizes} to fit the power law over: must be <= the second largest")
    return problems


def _is_integer(checker, instance) -> bool:
    """A schema `integer` is a whole number written as one: JSON Schema also accepts 2.0, which a
    step then passes to range() or torch.randn as a float (a TypeError mid-run)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def validate(config: dict[str, Any], source: str = "config", schema: dict | None = None) -> dict[str, Any]:
    """Raise ConfigError listing every problem; return the config unchanged when it is valid."""
    validator = Validator(schema or load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_describe(error) for error in errors]
    if not problems:
        problems = cross_field_problems(config)
    if problems:
        raise ConfigError(f"invalid configuration in {source}:\n  " + "\n  ".join(problems))
    return config


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a config file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if not isinstance(config, dict):
        raise ConfigError(f"{path} must hold a mapping of keys, not {type(config).__name__}")
    return validate(config, str(path))


def typed_overrides(overrides: Any) -> Any:
    """Snakemake's `--config` values with their nested leaves typed as YAML would type them.

    Snakemake parses a top-level value as int, float, bool, then YAML with the *base* loader,
    which leaves every nested value a string: `--config 'data={retries: 2}'` arrives as
    {'data': {'retries': '2'}}. Each string leaf is parsed again with YAML's safe loader
    ('2' -> 2, '0.5' -> 0.5, 'true' -> True, 'null' -> None); other strings stay strings.
    """
    if isinstance(overrides, dict):
        return {key: typed_overrides(value) for key, value in overrides.items()}
    if isinstance(overrides, list):
        return [typed_overrides(value) for value in overrides]
    if isinstance(overrides, str):
        try:
            value = yaml.safe_load(overrides)
        except yaml.YAMLError:
            return overrides
        return value if value is None or isinstance(value, (bool, int, float)) else overrides
    return overrides


def merge(base: dict, overrides: dict) -> dict:
    """`base` updated in place by `overrides`, nested mappings merged key by key (as Snakemake does)."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _describe_overrides(overrides: dict, prefix: str = "") -> list[str]:
    items = []
    for key, value in overrides.items():
        if isinstance(value, dict) and value:
            items += _describe_overrides(value, f"{prefix}{key}.")
        else:
            items.append(f"{prefix}{key}={value!r}")
    return items


def validate_workflow_config(config: dict[str, Any], files: list[str], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Type the `--config` overrides into `config` (in place), then validate it.

    config: Snakemake's merged config (files, then `--config`); files: the config files read;
    overrides: the `--config` values as Snakemake parsed them. When the merged config is invalid
    but the files alone are valid, the error blames `--config`, not the files.
    """
    overrides = typed_overrides(dict(overrides or {}))
    merge(config, overrides)
    files_source = " + ".join(map(str, files)) or "config"
    if not overrides:
        return validate(config, files_source)
    try:
        return validate(config, f"{files_source} with --config {' '.join(_describe_overrides(overrides))}")
    except ConfigError as merged_error:
        file_config: dict[str, Any] = {}
        for path in files:
            loaded = yaml.safe_load(Path(path).read_text()) if Path(path).is_file() else None
            merge(file_config, loaded if isinstance(loaded, dict) else {})
        try:
            validate(file_config, files_source)
        except ConfigError:
            raise merged_error from None
        shown = " ".join(_describe_overrides(overrides))
        raise ConfigError(str(merged_error).replace(
            f"invalid configuration in {files_source} with --config {shown}",
            f"invalid --config value ({shown}; {files_source} itself is valid)", 1)) from None


def dvc_config_conflict(configfiles: list, environ: dict | None = None) -> str | None:
    """Under DVC (which sets $DVC_STAGE), the message to stop with when $FACTSTORE_CONFIG names
    another file than the --configfile that dvc.yaml passes (params.yaml's `config`); else None.

    DVC cannot read environment variables, so it tracks params.yaml's choice; a run that silently
    used another file would leave `dvc status` tracking the wrong parameters.
    """
    environ = os.environ if environ is None else environ
    chosen = environ.get("FACTSTORE_CONFIG")
    if not environ.get("DVC_STAGE") or not chosen or not configfiles:
        return None
    if os.path.realpath(chosen) in {os.path.realpath(path) for path in configfiles}:
        return None
    return (f"FACTSTORE_CONFIG={chosen}, but DVC runs with {' + '.join(map(str, configfiles))} (params.yaml's "
            "`config`). DVC cannot see environment variables: select the config with "
            "params.yaml's `config:` (then `dvc repro`), and unset FACTSTORE_CONFIG.")
