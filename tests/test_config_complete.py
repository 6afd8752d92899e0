"""A config file is complete on its own: nothing is inherited from
config/config.yaml, which loads only when no --configfile is given, so what DVC tracks (the
selected file's sections) is what runs."""

from __future__ import annotations

import sys

import pytest
import yaml

from conftest import REPOSITORY, run


def leaves(tree, prefix: str = "") -> dict[str, object]:
    """{dotted key: value} of every leaf of a nested mapping."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    found: dict[str, object] = {}
    for key, value in tree.items():
        found |= leaves(value, f"{prefix}.{key}" if prefix else str(key))
    return found


@pytest.mark.parametrize("name", ["config/smoke.yaml", "config/paper.yaml"])
def test_every_key_of_the_default_config_is_set_by_each_scale_file(name):
    default = leaves(yaml.safe_load((REPOSITORY / "config/config.yaml").read_text()))
    scale = leaves(yaml.safe_load((REPOSITORY / name).read_text()))
    assert [key for key in default if key not in scale] == []


def test_the_paper_n_context_sweep_runs_at_the_papers_d_head():
    paper = yaml.safe_load((REPOSITORY / "config/paper.yaml").read_text())["attention"]
    assert paper["sweeps"]["n_context"]["fixed"]["d_head"] == paper["layer"]["d_head"] == 64


@pytest.mark.workflow
def test_a_config_file_missing_a_key_is_not_completed_from_the_default(tmp_path):
    smoke = yaml.safe_load((REPOSITORY / "config/smoke.yaml").read_text())
    del smoke["assoc"]["hebbian"]["seeds"]
    partial = tmp_path / "partial.yaml"
    partial.write_text(yaml.safe_dump(smoke))
    done = run(sys.executable, "-m", "snakemake", "-n", "--nolock", "--cores", "1", "assoc", "--configfile", str(partial),
               cwd=REPOSITORY, check=False)
    assert done.returncode != 0
    assert "assoc.hebbian: missing key 'seeds'" in done.stdout + done.stderr
