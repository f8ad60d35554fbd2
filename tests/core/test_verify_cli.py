"""`python -m argus_core.verify`: the DSL, the verifier and the target are plugins found by
name; kernels and default tiles come from the DSL front end; the backend's declared target
is what counterexamples name warps and lanes of. (Exit codes through a subprocess:
tests/plugins/verifiers/smt/test_verifier.py::test_cli_exit_codes.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_core.plugin_manager import Registry, default_plugin_manager
from argus_core.verify import run

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "plugins" / "verifiers" / "smt" / "planted" / "wrong_k_offset.py"

TWO_KERNELS = """\
from argus_plugins.dsl.tile import lang as al

DEFAULT_POLICY = {"B": 32}


@al.kernel
def first(a: al.Tensor["M"], B: al.constexpr, C: al.constexpr):
    (p,) = al.program_ids((al.cdiv(a.shape[0], B),))
    al.store(a.tile(B)[p], al.load(a.tile(B)[p]))


@al.kernel
def second(a: al.Tensor["M"], B: al.constexpr):
    (p,) = al.program_ids((al.cdiv(a.shape[0], B),))
    al.store(a.tile(B)[p], al.load(a.tile(B)[p]))
"""


@pytest.mark.parametrize(("backend", "lanes"), [("mi300x", 64), ("h200", 32)])
def test_counterexamples_name_lanes_of_the_backends_target(backend, lanes):
    code, out = run([str(PLANTED), "--backend", backend])
    spec = Registry(default_plugin_manager()).get("backend", backend).spec
    assert (code, out["status"], out["backend"], out["target"]) == (
        1,
        "violated",
        backend,
        spec.name,
    )
    assert spec.wave_size == lanes
    for cex in out["counterexamples"]:
        assert 0 <= cex["thread"]["lane"] < lanes


def test_unknown_plugin_names_are_errors_that_list_the_choices():
    for flag, name, valid in (
        ("--dsl", "tyle", "tile"),
        ("--verifier", "smtt", "smt"),
        ("--backend", "mi3000x", "mi300x"),
    ):
        code, out = run([str(PLANTED), flag, name])
        assert (code, out["status"]) == (2, "unknown")
        assert name in out["error"] and valid in out["error"], out["error"]


def test_kernels_and_default_tiles_come_from_the_dsl_front_end(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(TWO_KERNELS)
    code, out = run([str(path)])
    assert (
        code == 2
        and "choose a kernel with --kernel; kernels found: first, second" in (out["error"])
    )
    code, out = run([str(path), "--kernel", "third"])
    assert (
        code == 2 and "no @al.kernel named 'third'; kernels found: first, second" in (out["error"])
    )
    code, out = run([str(path), "--kernel", "first"])
    assert (code, out["kernel"], out["policy"]) == (0, "first", {"B": 32, "C": 64})


def test_verifier_none_is_never_verified():
    code, out = run([str(PLANTED), "--verifier", "none"])
    assert (code, out["status"]) == (2, "skipped")


def test_a_counterexample_names_its_cause_and_is_minimized():
    """The planted `k + 1` on line 21 fails at the dot (line 23): the printed summary names
    the use and line 21 as the likely cause, with the ranked slice and the smallest shapes
    that still fail (K = BK + 1: one element past the first tile)."""
    code, out = run([str(PLANTED), "--policy", "BM=64,BN=32,BK=32,GROUP=4"])
    assert code == 1
    cex = out["counterexamples"][0]
    assert cex["program_point"]["line"] == 23
    assert cex["causes"][0]["line"] == 21 and cex["cause"] == cex["causes"][0]
    assert "wrong_k_offset.py:23" in out["summary"]
    assert "likely cause: line 21 (x = al.load(a.tile(BM, BK)[pm, k + 1])" in out["summary"]
    assert cex["minimized"] and cex["shapes"] == {"M": 1, "K": 33, "N": 1}
    assert cex["program_id"] == 0 and cex["element"] == [0, 0]
