"""The GEMM family's kernel as each backend lowers it: the mi300x compile, the interpreter
check."""

from __future__ import annotations

import pytest

from argus_core.evaluate.correctness import check_correctness
from argus_core.types import Policy
from argus_plugins.backends.interpret import InterpretBackend
from argus_plugins.backends.mi300x import Mi300xBackend
from argus_plugins.kernels.gemm import GemmFamily

frontend = pytest.importorskip("argus_plugins.dsl.tile.frontend")


@pytest.fixture(scope="module")
def gemm_ir():
    family = GemmFamily()
    return frontend.TileFrontend().parse(family.source(), family.entry, str(family.source_path))


def test_lowered_gemm_compiles_for_gfx942_with_mfma(gemm_ir):
    policy = Policy({"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}, {"num_warps": 4})
    backend = Mi300xBackend()
    lowered = backend.lower(gemm_ir, policy, {"dtype": "bf16"})
    untyped = backend.compile(lowered, {}, policy)
    assert not untyped.ok and "no element dtype" in untyped.error
    report = backend.compile(lowered, dict.fromkeys("abc", "bf16"), policy)
    assert report.ok, report.error
    assert report.mma_count > 0 and report.spills == 0


def test_lowered_gemm_is_correct_in_the_interpreter(gemm_ir):
    policy = Policy({"BM": 32, "BN": 32, "BK": 16, "GROUP": 2}, {"num_warps": 4})
    # the interpreter runs the mi300x lowering (plus its fp32 dot operands) on the CPU
    lowered = InterpretBackend(Mi300xBackend()).lower(gemm_ir, policy, {"dtype": "bf16"})
    shapes = [{"M": 67, "N": 45, "K": 83}, {"M": 64, "N": 64, "K": 32}]
    report = check_correctness(lowered, "gemm", shapes, "bf16", trials=1, seed=0)
    assert report.ok, report.error
