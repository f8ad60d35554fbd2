"""The DSL's own lowering of the GEMM, through the mi300x compile and the interpreter check."""

from __future__ import annotations

import pytest

from argus_core.evaluate.correctness import check_correctness
from argus_core.kernels.gemm import GemmFamily
from argus_core.types import Policy
from argus_plugins.backends.interpret import InterpretBackend
from argus_plugins.backends.mi300x import Mi300xBackend

frontend = pytest.importorskip("argus_plugins.dsl.tile.frontend")


@pytest.fixture(scope="module")
def gemm_ir():
    family = GemmFamily()
    return frontend.TileFrontend().parse(family.source(), family.entry, str(family.source_path))


def test_lowered_gemm_compiles_for_gfx942_with_mfma(gemm_ir):
    policy = Policy({"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}, {"num_warps": 4})
    backend = Mi300xBackend()
    lowered = frontend.TileFrontend().lower(gemm_ir, policy, "triton", backend.lowering_options)
    untyped = backend.compile(lowered, {}, policy)
    assert not untyped.ok and "no element dtype" in untyped.error
    report = backend.compile(lowered, dict.fromkeys("abc", "bf16"), policy)
    assert report.ok, report.error
    assert report.mma_count > 0 and report.spills == 0


def test_lowered_gemm_is_correct_in_the_interpreter(gemm_ir):
    policy = Policy({"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}, {"num_warps": 4})
    options = InterpretBackend.lowering_options
    lowered = frontend.TileFrontend().lower(gemm_ir, policy, "triton", options)
    shapes = [{"M": 67, "N": 45, "K": 83}, {"M": 64, "N": 64, "K": 32}]
    report = check_correctness(lowered, "gemm", shapes, "bf16", trials=1, seed=0)
    assert report.ok, report.error
