"""`benchmarks/device_wheels.sh` pins every wheel it fetches for the GPU machine (it runs
pip with --no-deps, so nothing else keeps them compatible): each pin must satisfy what the
other pinned packages declare, mlflow-skinny 3.17.2's limits first (importlib-metadata 10
and cachetools 8 broke MLflow's start there)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "device_wheels.sh"
MARKERS = {"python_version": "3.12", "sys_platform": "linux", "platform_system": "Linux"}


def _pins() -> dict[str, Version]:
    text = SCRIPT.read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    fetched = re.findall(r"^dl ((?:\\\n|[^\n])*)", body, re.MULTILINE)  # `dl NAME==V ...`
    names = [tok for chunk in fetched for tok in chunk.replace("\\\n", " ").split()]
    pins = {}
    for tok in names:
        name, sep, ver = tok.partition("==")
        assert sep, f"{tok!r} in {SCRIPT.name} is not pinned (name==version)"
        pins[canonicalize_name(name)] = Version(ver)
    return pins


def test_every_wheel_is_pinned_and_mlflow_is_among_them():
    pins = _pins()
    assert pins["mlflow-skinny"] == Version("3.17.2") and "cachetools" in pins


def test_the_pins_satisfy_each_others_requirements():
    pins = _pins()
    checked = 0
    for name, pinned in pins.items():
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        if Version(dist.version) != pinned:
            continue  # only the metadata of the pinned version itself says what it needs
        for text in dist.requires or []:
            req = Requirement(text)
            dep = canonicalize_name(req.name)
            if dep not in pins or (
                req.marker and not req.marker.evaluate({**MARKERS, "extra": ""})
            ):
                continue
            assert req.specifier.contains(pins[dep], prereleases=True), (
                f"{name} {pinned} needs {text}; {SCRIPT.name} pins {dep}=={pins[dep]}"
            )
            checked += 1
    if checked == 0:
        pytest.skip("none of the pinned versions is installed here to read its requirements")
    assert checked >= 10
