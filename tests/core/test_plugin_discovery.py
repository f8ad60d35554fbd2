"""A third-party plugin package, installed for real, is found through the `argus` entry point.

tests/fixtures/argus_example_plugin is pip-installed into a temporary site directory; child
processes that put it on PYTHONPATH see its backend `example_cpu` in the registry and its
config option conf/backend/example_cpu.yaml in Hydra's search path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from argus_core.cli import EXIT_BAD_INPUT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "argus_example_plugin"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory holding the installed example plugin (its dist-info included)."""
    work = tmp_path_factory.mktemp("example_plugin")
    source = work / "src"
    # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    shutil.copytree(
        FIXTURE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    site = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return site


@pytest.fixture
def plugin_env(plugin_site: Path) -> dict[str, str | None]:
    path = os.pathsep.join(p for p in (str(plugin_site), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": None}


REGISTRY_SCRIPT = textwrap.dedent(
    """
    import json
    from argus_core.plugin_manager import Registry, config_search_paths, make_plugin_manager
    pm = make_plugin_manager()
    print(json.dumps({"backends": Registry(pm).names("backend"),
                      "search_paths": config_search_paths(pm)}))
    """
)


def registry_in_child(env: dict[str, str | None]) -> dict[str, list[str]]:
    child_env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    proc = subprocess.run(
        [sys.executable, "-c", REGISTRY_SCRIPT],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_registry_lists_the_plugin_backend(plugin_env):
    found = registry_in_child(plugin_env)
    assert "example_cpu" in found["backends"]
    assert "pkg://argus_example_plugin.conf" in found["search_paths"]


def test_autoload_can_be_turned_off(plugin_env, run_argus):
    off = {**plugin_env, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    found = registry_in_child(off)
    assert "example_cpu" not in found["backends"] and found["search_paths"] == []
    proc = run_argus("+kernel=gemm", "backend=example_cpu", env=off)
    assert proc.returncode == EXIT_BAD_INPUT
    assert "unknown backend 'example_cpu'; valid choices: " in proc.stderr
    assert "example_cpu," not in proc.stderr and not proc.stderr.rstrip().endswith("example_cpu")


def test_an_unknown_backend_lists_the_plugin_option(plugin_env, run_argus):
    proc = run_argus("+kernel=gemm", "backend=nope", env=plugin_env)
    assert proc.returncode == EXIT_BAD_INPUT
    choices = proc.stderr.split("valid choices: ", 1)[1].strip().split(", ")
    assert {"example_cpu", "interpret", "mi300x"} <= set(choices)


def test_the_plugin_option_composes(plugin_env, run_argus):
    proc = run_argus("+kernel=gemm", "backend=example_cpu", "--cfg", "job", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    backend = yaml.safe_load(proc.stdout)["backend"]
    assert backend["name"] == "example_cpu" and backend["target"] == "cpu"
    assert backend["policy_grid"] == {"num_warps": [1, 2, 4], "num_stages": [1]}


def test_multirun_sees_the_plugin_option(plugin_env, run_argus):
    # the job composes only if the plugin's search path reached Hydra; then validation fails
    proc = run_argus("-m", "+kernel=gemm", "backend=example_cpu", "progress=loud", env=plugin_env)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "invalid progress 'loud'" in proc.stderr
    assert "Could not find" not in proc.stderr


def test_an_option_without_a_registered_plugin_is_refused(plugin_env, run_argus, tmp_path):
    conf = tmp_path / "conf" / "backend"
    conf.mkdir(parents=True)
    (conf / "ghost.yaml").write_text("name: ghost\ntarget: cpu\n")
    searchpath = f"hydra.searchpath=['file://{tmp_path / 'conf'}']"
    proc = run_argus("+kernel=gemm", "backend=ghost", searchpath, env=plugin_env)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "unknown backend 'ghost'; valid choices: " in proc.stderr
    assert "example_cpu" in proc.stderr


# ----------------------------------------------------------------- the plugin itself works


@pytest.fixture
def backend(plugin_site: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    from argus_example_plugin.backend import ExampleCPUBackend

    return ExampleCPUBackend()


def test_example_backend_follows_the_protocol(backend):
    from argus_core.errors import PolicyError
    from argus_core.protocols import Backend
    from argus_core.types import Policy

    assert isinstance(backend, Backend) and backend.name == "example_cpu"
    backend.validate_policy(Policy(tiles={"BM": 64}, compiler={"num_warps": 2}))
    with pytest.raises(PolicyError, match=r"invalid num_warps 3; valid: \[1, 2, 4\]"):
        backend.validate_policy(Policy(compiler={"num_warps": 3}))
    with pytest.raises(
        PolicyError, match=r"unknown compiler option 'kpack'; valid: num_warps, num_stages"
    ):
        backend.validate_policy(Policy(compiler={"kpack": 1}))


def test_example_backend_compile_checks_the_kernel_is_defined(backend):
    from argus_core.types import LoweredKernel, Policy

    source = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n"
    good = LoweredKernel(name="k", source=source, params=[], grid="(1,)", outputs=[])
    assert backend.compile(good, {}, Policy()).ok
    missing = backend.compile(LoweredKernel("other", source, [], "(1,)", []), {}, Policy())
    assert not missing.ok and "no @triton.jit function 'other'; found: ['k']" in missing.error
    broken = backend.compile(LoweredKernel("k", "def k(:\n", [], "(1,)", []), {}, Policy())
    assert not broken.ok and broken.error.startswith("syntax error at line 1")


def test_example_backend_estimate_is_a_labelled_roofline(backend):
    from argus_core.types import Policy

    class Gemm:  # the two members estimate() reads from a KernelFamily
        def flops(self, shape):
            return 2.0 * shape["M"] * shape["N"] * shape["K"]

        def bytes(self, shape, dtype):
            return 2.0 * (
                shape["M"] * shape["K"] + shape["K"] * shape["N"] + shape["M"] * shape["N"]
            )

    shape = {"M": 1024, "N": 1024, "K": 1024}
    t = backend.estimate(Gemm(), shape, "bf16", Policy(), None)
    assert t.estimated and t.model == "example_cpu roofline"
    assert t.ms == pytest.approx(2 * 1024**3 / 1.0e12 * 1e3)  # compute-bound at this shape
    assert t.tflops == pytest.approx(1.0)
