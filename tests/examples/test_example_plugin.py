"""The example plugin package examples/argus-rowsoftmax, installed for real, extends Argus.

It is pip-installed into a temporary site directory (as tests/core/test_plugin_discovery.py
installs its fixture); child processes that put that directory on PYTHONPATH find it
through the `argus` entry point: its kernel family and backend options compose, the
pipeline runs its kernel end to end (verified by z3, compiled for gfx942, checked in the
interpreter), and its KB entry loads next to the built-in ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from argus_core.cli import EXIT_BAD_INPUT

PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "argus-rowsoftmax"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory holding the installed example package (its dist-info included)."""
    work = tmp_path_factory.mktemp("rowsoftmax_plugin")
    source = work / "src"
    # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    shutil.copytree(
        PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
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
    return {"PYTHONPATH": path, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": None, "ARGUS_KB_PATH": None}


def python_in_child(code: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------------ configuration


def test_the_kernel_option_composes(plugin_env, run_argus):
    proc = run_argus("+kernel=row_softmax", "--cfg", "job", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    kernel = yaml.safe_load(proc.stdout)["kernel"]
    assert kernel["name"] == "row_softmax" and kernel["shape"] == {"M": 8192, "N": 1024}
    assert kernel["tiles"] == {"BM": [16, 32], "BN": [1024]}
    assert {"M": 37, "N": 100} in kernel["check_shapes"]


def test_the_backend_option_composes(plugin_env, run_argus):
    proc = run_argus("+kernel=row_softmax", "backend=mi300x_lowocc", "--cfg", "job", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    backend = yaml.safe_load(proc.stdout)["backend"]
    assert backend["name"] == "mi300x_lowocc" and backend["target"] == "gfx942"
    assert backend["policy_grid"]["waves_per_eu"] == [1, 2]


def test_bad_choices_list_the_plugin_options(plugin_env, run_argus):
    proc = run_argus("+kernel=row_softmax", "backend=nope", env=plugin_env)
    assert proc.returncode == EXIT_BAD_INPUT
    choices = proc.stderr.split("valid choices: ", 1)[1].strip().split(", ")
    assert {"mi300x_lowocc", "mi300x", "interpret"} <= set(choices)
    proc = run_argus("+kernel=nope", env=plugin_env)
    assert proc.returncode == EXIT_BAD_INPUT
    assert "row_softmax" in proc.stderr.split("valid choices: ", 1)[1]


def test_without_autoload_the_options_are_gone(plugin_env, run_argus):
    off = {**plugin_env, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = run_argus("+kernel=row_softmax", "--cfg", "job", env=off)
    assert proc.returncode != 0
    assert "row_softmax" in proc.stderr and "gemm" in proc.stderr


# ---------------------------------------------------------------------------- pipeline


def run_results(stdout: str) -> list[dict]:
    """The run's results.json, found through the `Run directory:` line argus prints."""
    found = re.search(r"^Run directory: (.+)$", stdout, re.M)
    assert found, stdout
    return json.loads((Path(found.group(1).strip()) / "results.json").read_text())


@pytest.mark.slow
def test_the_pipeline_runs_the_plugin_kernel_end_to_end(plugin_env, run_argus):
    """CPU defaults: backend mi300x (real gfx942 compile), correctness in the interpreter."""
    proc = run_argus("+kernel=row_softmax", "budget=2", "tracking=none", env=plugin_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kernel=row_softmax backend=mi300x" in proc.stdout
    results = run_results(proc.stdout)
    assert len(results) == 2
    for r in results:
        assert r["failure"] is None, r["failure"]
        assert r["verify"]["status"] == "verified" and r["verify"]["assertions"] > 0
        assert r["compile"]["ok"] and r["compile"]["spills"] == 0
        assert r["correctness"]["ok"] and r["correctness"]["runner"] == "interpret"
        assert {"M": 37, "N": 100} in r["correctness"]["shapes"]
        assert r["timing"]["estimated"] and r["timing"]["ms"] > 0


@pytest.mark.slow
def test_the_plugin_backend_compiles_with_its_own_policies(plugin_env, run_argus):
    proc = run_argus(
        "+kernel=row_softmax",
        "backend=mi300x_lowocc",
        "budget=2",
        "tracking=none",
        "evaluate.correctness=off",
        env=plugin_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = run_results(proc.stdout)
    for r in results:
        assert r["failure"] is None and r["compile"]["ok"]
        assert r["candidate"]["policy"]["compiler"]["waves_per_eu"] in (1, 2)
        # waves_per_eu is the fewest waves per SIMD the register allocator must fit
        assert r["compile"]["occupancy"] >= r["candidate"]["policy"]["compiler"]["waves_per_eu"]


# ----------------------------------------------------------------------- knowledge base

KB_SCRIPT = """
    import json
    from argus_core import kb
    base = kb.load()
    found = base.query(family="row_softmax", target="mi300x_lowocc", shape={"M": 8192, "N": 1024})
    long_rows = base.query(family="row_softmax", shape={"M": 8192, "N": 8192})
    print(json.dumps({
        "ids": [t.id for t in found],
        "long_rows": [t.id for t in long_rows],
        "path": base.get("softmax_rows_per_program").path,
        "builtin": len(kb.load(kb.default_paths()[:1])),
        "total": len(base),
    }))
"""


def test_the_plugin_kb_entry_loads_next_to_the_builtin_ones(plugin_env, plugin_site):
    proc = python_in_child(KB_SCRIPT, plugin_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "softmax_rows_per_program" in out["ids"]
    assert "waves_per_eu" in out["ids"]  # the plugin's argus_kb_targets: mi300x entries apply
    assert "softmax_rows_per_program" not in out["long_rows"]  # precondition N <= 1024
    assert Path(out["path"]).is_relative_to(plugin_site)
    assert out["total"] == out["builtin"] + 1


def test_without_the_plugin_its_family_is_unknown_to_the_kb(plugin_env):
    off = {**plugin_env, "ARGUS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = python_in_child(KB_SCRIPT, off)
    assert proc.returncode != 0
    assert "KBError" in proc.stderr and "invalid family 'row_softmax'" in proc.stderr


# ------------------------------------------------------------- the plugin's own pieces


@pytest.fixture
def plugin(plugin_site: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    import argus_rowsoftmax

    return argus_rowsoftmax


def test_the_family_follows_the_protocol_and_matches_torch(plugin):
    import torch

    from argus_core.errors import ConfigError
    from argus_core.protocols import KernelFamily

    fam = plugin.RowSoftmaxFamily()
    assert isinstance(fam, KernelFamily)
    inputs = fam.make_inputs({"M": 5, "N": 7}, "fp32", seed=3, device="cpu")
    y = fam.reference(inputs)["y"]
    torch.testing.assert_close(y.sum(-1), torch.ones(5))
    assert torch.equal(y.argmax(-1), inputs["x"].argmax(-1))
    again = fam.make_inputs({"M": 5, "N": 7}, "fp32", seed=3, device="cpu")["x"]
    assert torch.equal(again, inputs["x"])
    assert fam.flops({"M": 4, "N": 8}) == 5 * 32 and fam.bytes({"M": 4, "N": 8}, "bf16") == 128
    with pytest.raises(ConfigError, match="valid choices: bf16, fp16, fp32"):
        fam.tolerance("fp8")
    with pytest.raises(ConfigError, match=r"lacks \['N'\]"):
        fam.flops({"M": 4})


def test_the_kernel_verifies_and_a_planted_bug_is_caught(plugin):
    from argus_core.plugin_manager import Registry, make_plugin_manager
    from argus_core.types import Policy

    registry = Registry(make_plugin_manager(autoload=False))
    dsl, smt = registry.get("dsl", "tile"), registry.get("verifier", "smt")
    target = registry.get("backend", "mi300x").spec
    fam = plugin.RowSoftmaxFamily()
    policy = Policy({"BM": 16, "BN": 1024}, {})
    report = smt.verify(dsl.parse(fam.source(), fam.entry, "kernel.py"), policy, {}, target)
    assert report.status == "verified", report.summary
    # without the precondition a row may be wider than the tile: columns go unwritten
    unguarded = "\n".join(ln for ln in fam.source().splitlines() if "al.requires" not in ln)
    report = smt.verify(dsl.parse(unguarded, fam.entry, "kernel.py"), policy, {}, target)
    assert report.status == "violated"
    assert report.counterexamples[0]["assertion"] == "store_grid"
    assert report.counterexamples[0]["shapes"]["N"] > 1024


def test_the_backend_narrows_the_mi300x_policy_space(plugin):
    from argus_core.errors import PolicyError
    from argus_core.protocols import Backend
    from argus_core.types import Policy

    backend = plugin.Mi300xLowOccBackend()
    assert isinstance(backend, Backend) and backend.name == "mi300x_lowocc"
    backend.validate_policy(Policy({"BM": 16, "BN": 1024}, {"num_warps": 8, "waves_per_eu": 1}))
    with pytest.raises(PolicyError, match=r"mi300x_lowocc: .*waves_per_eu.*valid choices: 1, 2"):
        backend.validate_policy(Policy(compiler={"waves_per_eu": 0}))
    with pytest.raises(PolicyError, match=r"mi300x_lowocc: .*'kpack'"):
        backend.validate_policy(Policy(compiler={"kpack": 1}))
    with pytest.raises(PolicyError, match="power of two"):  # the mi300x checks still apply
        backend.validate_policy(Policy({"BM": 24}, {}))
