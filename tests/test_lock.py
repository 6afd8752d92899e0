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


# The Pythons the lock is made to install on (pyproject.toml's requires-python, .ci/lock's header).
PYTHONS = ["3.11", "3.12", "3.13"]


def test_the_lock_is_not_limited_to_python_3_11():
    """No pin carries a marker that leaves 3.12 or 3.13 out, and pyproject.toml and .ci/lock both
    name the whole range, so the lock made on 3.11 is the one each of them installs."""
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet

    text = (REPOSITORY / "requirements.lock").read_text()
    for line in text.splitlines():
        if "==" in line and ";" in line:
            marker = Marker(line.split(";", 1)[1].strip().rstrip("\\").strip())
            for python in PYTHONS:
                assert marker.evaluate({"python_version": python, "python_full_version": f"{python}.0",
                                        "sys_platform": "linux", "platform_machine": "x86_64"}), line
    requires = SpecifierSet(tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["requires-python"])
    assert all(f"{python}.0" in requires for python in PYTHONS) and "3.14.0" not in requires
    assert "Python 3.11, 3.12 and 3.13" in (REPOSITORY / ".ci/lock").read_text()


def index_files(index: str, name: str) -> list[dict]:
    """The files the package index lists for `name` (PEP 691 JSON: filename, hashes, requires-python)."""
    import json
    import urllib.request

    request = urllib.request.Request(f"{index.rstrip('/')}/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["files"]


def usable_on(python: str, file: dict) -> bool:
    """Whether a distribution file installs on CPython `python` on Linux x86_64: a wheel whose tags
    the interpreter supports, or an sdist; and its requires-python admits the version."""
    from packaging.specifiers import SpecifierSet
    from packaging.tags import compatible_tags, cpython_tags
    from packaging.utils import parse_wheel_filename

    if file.get("requires-python") and f"{python}.0" not in SpecifierSet(file["requires-python"]):
        return False
    if not file["filename"].endswith(".whl"):
        return file["filename"].endswith((".tar.gz", ".zip"))
    version = tuple(int(part) for part in python.split("."))
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    supported = set(cpython_tags(version, platforms=platforms))
    supported |= set(compatible_tags(version, f"cp{version[0]}{version[1]}", platforms=platforms))
    return bool(parse_wheel_filename(file["filename"])[3] & supported)


def test_every_pin_but_torch_has_a_hashed_file_for_python_3_12_and_3_13():
    """For each pin (torch 2.13.0+cpu lives on the PyTorch CPU index, with cp312 and cp313 wheels),
    the package index holds a file whose sha256 the lock names and that installs on 3.12 and 3.13.
    Needs the package index (PIP_INDEX_URL, else PyPI); skips where it cannot be reached."""
    import os
    import urllib.error
    from concurrent.futures import ThreadPoolExecutor

    import pytest

    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
    try:
        index_files(index, "pip")
    except (urllib.error.URLError, OSError, ValueError) as error:
        pytest.skip(f"package index {index} unreachable: {error}")
    pins = {name: pin for name, pin in locked().items() if name != "torch"}
    with ThreadPoolExecutor(8) as pool:
        listed = dict(zip(pins, pool.map(lambda name: index_files(index, name), pins)))
    for python in ["3.12", "3.13"]:
        missing = [f"{name}=={version}" for name, (version, hashes) in pins.items()
                   if not any(file["hashes"].get("sha256") in hashes and usable_on(python, file)
                              for file in listed[name])]
        assert not missing, f"no hashed file for Python {python}: {missing}"
