"""Every shipped config validates; a bad one fails with a message naming the key."""

from __future__ import annotations

import copy

import pytest
import yaml

from factstore import config
from conftest import REPOSITORY

CONFIGS = ["config/smoke.yaml", "config/config.yaml", "config/paper.yaml"]


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_are_valid(name):
    config.load(REPOSITORY / name)


def test_three_scales_have_the_same_keys():
    """Same studies and sections at every scale (two levels deep: deeper maps may vary by design)."""

    def keys(tree, prefix="", depth=0):
        if not isinstance(tree, dict) or depth == 3:
            return {prefix}
        return set().union(*(keys(v, f"{prefix}.{k}", depth + 1) for k, v in tree.items()))

    loaded = [yaml.safe_load((REPOSITORY / name).read_text()) for name in CONFIGS]
    assert keys(loaded[0]) == keys(loaded[1]) == keys(loaded[2])


@pytest.fixture
def smoke():
    return yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["assoc"]["trained"].update(sead=1), "assoc.trained: unknown key 'sead' (allowed: alphas"),
        (lambda c: c["assoc"]["trained"].update(seeds=0), "assoc.trained.seeds = 0: must be >= 1"),
        (lambda c: c["assoc"]["hebbian"].update(d="big"), "assoc.hebbian.d = 'big': must be of type array"),
        (lambda c: c.update(scale="huge"), "scale = 'huge': must be one of smoke, default, paper"),
        (lambda c: c["assoc"].pop("rank"), "assoc: missing key 'rank'"),
        (lambda c: c["assoc"].update(spectrum_d=1024), "assoc.spectrum_d = 1024: must be one of assoc.trained.d"),
        (lambda c: c["assoc"]["rank"].update(check_kappa=0.3), "assoc.rank.check_kappa = 0.3: must be one of assoc.rank.kappa"),
        (lambda c: c["committee"]["depth"]["fc"]["alphas"].pop("function_search"),
         "committee.depth.fc.alphas has no grid of loads for the solver 'function_search'"),
    ],
)
def test_bad_values_are_named(smoke, edit, message):
    broken = copy.deepcopy(smoke)
    edit(broken)
    with pytest.raises(config.ConfigError) as error:
        config.validate(broken, "smoke.yaml")
    assert message in str(error.value)


def test_data_mirror_is_a_documented_key(smoke):
    config.validate(copy.deepcopy(smoke) | {"data": smoke["data"] | {"mirror": "/srv/data-mirror"}}, "smoke.yaml")
    config.validate(copy.deepcopy(smoke) | {"data": smoke["data"] | {"mirror": None}}, "smoke.yaml")
    with pytest.raises(config.ConfigError, match="data.mirror = 3: must be of type"):
        config.validate(copy.deepcopy(smoke) | {"data": smoke["data"] | {"mirror": 3}}, "smoke.yaml")


def test_nested_config_values_are_typed():
    # What Snakemake hands over for --config threads=2 'data={retries: 2, split_seed: 1}'
    # 'assoc={hebbian: {d: [8, 16]}}' 'attention={layer: {biases: false}}' scale=smoke
    parsed = {"threads": 2, "data": {"retries": "2", "split_seed": "1", "mirror": "/m"},
              "assoc": {"hebbian": {"d": ["8", "16"], "alphas": ["0.5", "1e-1"]}},
              "attention": {"layer": {"biases": "false"}}, "scale": "smoke"}
    assert config.typed_overrides(parsed) == {
        "threads": 2, "data": {"retries": 2, "split_seed": 1, "mirror": "/m"},
        "assoc": {"hebbian": {"d": [8, 16], "alphas": [0.5, "1e-1"]}},
        "attention": {"layer": {"biases": False}}, "scale": "smoke"}


def test_a_bad_config_value_is_blamed_on_config_not_the_file(smoke, tmp_path):
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(smoke))
    merged = config.merge(copy.deepcopy(smoke), {"data": {"retries": "0"}})  # as Snakemake merged it
    with pytest.raises(config.ConfigError) as error:
        config.validate_workflow_config(merged, [str(path)], {"data": {"retries": "0"}})
    assert str(error.value).startswith(f"invalid --config value (data.retries=0; {path} itself is valid)")
    assert "data.retries = 0: must be >= 1" in str(error.value)


def test_a_bad_file_is_still_blamed_on_the_file(smoke, tmp_path):
    smoke["data"]["retries"] = 0
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(smoke))
    merged = config.merge(copy.deepcopy(smoke), {"threads": 2})
    with pytest.raises(config.ConfigError, match=f"invalid configuration in {path} with --config threads=2"):
        config.validate_workflow_config(merged, [str(path)], {"threads": 2})


def test_good_config_values_are_merged_typed(smoke, tmp_path):
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(smoke))
    merged = config.merge(copy.deepcopy(smoke), {"data": {"retries": "4"}})
    config.validate_workflow_config(merged, [str(path)], {"data": {"retries": "4"}})
    assert merged["data"]["retries"] == 4 and merged["data"]["split_seed"] == smoke["data"]["split_seed"]


@pytest.mark.workflow
def test_snakemake_blames_a_bad_config_value_on_config():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--nolock", "data", "--configfile",
                           "config/smoke.yaml", "--config", "data={retries: 0}"],
                          cwd=REPOSITORY, capture_output=True, text=True)
    assert done.returncode != 0
    assert "factstore: invalid --config value (data.retries=0;" in done.stdout + done.stderr


def test_factstore_config_must_agree_with_dvc():
    dvc_run = {"DVC_STAGE": "assoc"}
    assert config.dvc_config_conflict(["config/smoke.yaml"], dvc_run | {"FACTSTORE_CONFIG": "config/smoke.yaml"}) is None
    assert config.dvc_config_conflict(["config/smoke.yaml"], {"FACTSTORE_CONFIG": "config/paper.yaml"}) is None  # no DVC
    assert config.dvc_config_conflict(["config/smoke.yaml"], dvc_run) is None
    message = config.dvc_config_conflict(["config/smoke.yaml"], dvc_run | {"FACTSTORE_CONFIG": "config/paper.yaml"})
    assert message.startswith("FACTSTORE_CONFIG=config/paper.yaml, but DVC runs with config/smoke.yaml")
