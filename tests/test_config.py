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
    ],
)
def test_bad_values_are_named(smoke, edit, message):
    broken = copy.deepcopy(smoke)
    edit(broken)
    with pytest.raises(config.ConfigError) as error:
        config.validate(broken, "smoke.yaml")
    assert message in str(error.value)
