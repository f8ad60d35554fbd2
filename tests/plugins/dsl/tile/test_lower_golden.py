"""Golden files for the Triton lowering. Refresh with ARGUS_UPDATE_GOLDEN=1 and read the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from argus_core.types import Policy
from argus_plugins.dsl.tile.frontend import TileFrontend

HERE = Path(__file__).parent
GEMM = HERE.parents[3] / "argus_core" / "kernels" / "gemm" / "kernel.py"
POLICY = Policy({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, {"num_warps": 4})


def check_golden(name: str, text: str) -> None:
    path = HERE / "golden" / name
    if os.environ.get("ARGUS_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with ARGUS_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"lowering changed; diff against {path} (ARGUS_UPDATE_GOLDEN=1 refreshes)"
    )


@pytest.fixture(scope="module")
def gemm_ir():
    return TileFrontend().parse(GEMM.read_text(), "gemm", str(GEMM))


def test_gemm_lowers_to_the_golden_triton(gemm_ir):
    lowered = TileFrontend().lower(gemm_ir, POLICY, "triton", {})
    check_golden("gemm.triton.expected", lowered.source)
    assert lowered.grid == "(triton.cdiv(M, BM) * triton.cdiv(N, BN),)"
    assert lowered.constexprs == POLICY.tiles
    assert [p.binding for p in lowered.params[:6]] == [
        ("tensor", "a"),
        ("tensor", "b"),
        ("tensor", "c"),
        ("shape", "a", 0),
        ("shape", "a", 1),
        ("shape", "b", 1),
    ]


def test_interpreter_lowering_upcasts_only_the_dot(gemm_ir):
    plain = TileFrontend().lower(gemm_ir, POLICY, "triton", {}).source.splitlines()
    upcast = (
        TileFrontend()
        .lower(gemm_ir, POLICY, "triton", {"dot_upcast_fp32": True})
        .source.splitlines()
    )
    changed = [(a, b) for a, b in zip(plain, upcast) if a != b]
    assert len(plain) == len(upcast) and len(changed) == 1
    assert "tl.dot(x.to(tl.float32), y.to(tl.float32), acc)" in changed[0][1]


def test_lowered_source_is_valid_python_and_defines_the_jit_kernel(gemm_ir):
    src = TileFrontend().lower(gemm_ir, POLICY, "triton", {}).source
    compile(src, "lowered.py", "exec")
    assert "@triton.jit\ndef gemm(a, b, c, M, K, N," in src


def test_policy_must_bind_exactly_the_kernel_constexprs(gemm_ir):
    from argus_core.errors import DSLError

    with pytest.raises(DSLError, match=r"missing \['GROUP'\], unknown \['BX'\]"):
        TileFrontend().lower(gemm_ir, Policy({"BM": 64, "BN": 64, "BK": 32, "BX": 1}), "triton", {})
