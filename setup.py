"""Package mapping: `plugins/` ships as `argus_plugins`, `conf/` as `argus_conf`.

The top-level folder names are fixed by the project; the import names must not clash with
other distributions, so setuptools maps them here (pyproject.toml holds everything else).
"""

from setuptools import find_namespace_packages, setup


def _mapped(folder: str, import_name: str) -> list[str]:
    found = find_namespace_packages(include=[folder, f"{folder}.*"])
    return [import_name + name[len(folder) :] for name in found if "__pycache__" not in name]


setup(
    packages=[p for p in find_namespace_packages(include=["argus_core", "argus_core.*"])]
    + _mapped("plugins", "argus_plugins")
    + _mapped("conf", "argus_conf")
    + _mapped("kb", "argus_kb"),
    package_dir={"argus_plugins": "plugins", "argus_conf": "conf", "argus_kb": "kb"},
)
