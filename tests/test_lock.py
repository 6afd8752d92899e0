"""requirements.lock pins every dependency of pyproject.toml (within its ranges) with hashes, and
.ci/run installs from it."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import REPOSITORY


def locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) from requirements.lock."""
    text = (REPOSITORY / "requirements.lock").read_text()
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", block)
        if match:
            pins[canonicalize_name(match.group(1))] = (Version(match.group(2)), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


def test_every_requirement_is_pinned_within_its_range_with_hashes():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    pins = locked()
    assert len(pins) > 50, "the lock holds the transitive dependencies too"
    for line in project["dependencies"] + sum(project["optional-dependencies"].values(), []):
        requirement = Requirement(line)
        version, _ = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), f"{line}: locked {version}"
    for name, (version, hashes) in pins.items():
        assert hashes, f"{name}=={version} has no hash"


def test_torch_is_the_cpu_build():
    assert locked()["torch"][0] == Version("2.13.0+cpu")


def test_ci_installs_from_the_lock_with_hashes():
    script = (REPOSITORY / ".ci/run").read_text()
    assert "pip install --quiet --require-hashes -r requirements.lock" in script
    assert "pip install --quiet --no-deps -e ." in script
