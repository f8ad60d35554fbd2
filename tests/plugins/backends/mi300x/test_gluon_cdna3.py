"""MI300X's Gluon lowering, cross-compiled for gfx942 with no GPU: the explicit-level GEMM
(buffer loads, LDS ring, MFMA 16x16x16) compiles with MFMAs, buffer loads, no spills."""

from __future__ import annotations

import pytest

from argus_core.ir import explicit as x
from argus_plugins.backends.mi300x.gluon import compile_explicit, lower
from argus_plugins.backends.mi300x.spec import MI300X
from argus_plugins.kernels.gemm.kernel_explicit import build_cdna3


@pytest.mark.parametrize("lds_stages", [2, 1])
def test_cdna3_gemm_cross_compiles_to_mfma_and_buffer_loads(lds_stages):
    kernel = build_cdna3(lds_stages)
    report = compile_explicit(kernel)
    assert report.ok, report.error
    assert report.target == "hip:gfx942" and report.asm_kind == "amdgcn"
    assert report.mma_count and report.mma_count >= 32  # 128x128x64 / (16x16x16) / 4 warps
    assert report.buffer_loads and report.buffer_loads > 0
    assert report.instructions["global_load"] == 0
    assert report.instructions["s_barrier"] >= lds_stages
    assert report.spills == 0
    assert kernel.shared_bytes() == report.shared_bytes <= MI300X.lds_bytes_per_cu


def test_cdna3_lowering_uses_the_ring_stage_and_one_barrier_per_step():
    src = lower(build_cdna3(2))
    loop = src[src.index("for kk in range") : src.index("it += 1")]
    assert loop.count("gl.thread_barrier()") == 1
    assert "a_lds.index(it % 2).store(a_regs)" in loop
    assert "cdna3.mfma(a_lds.index(it % 2).load(gl.DotOperandLayout(0," in loop


def test_an_mfma_without_an_mfma_accumulator_is_an_error():
    k = build_cdna3()
    bad = x.replace_op(k, "main/tile/5:ZeroAcc", x.ZeroAcc("acc", "BM", "BN", x.WgmmaAcc()))
    with pytest.raises(
        x.ExplicitIRError, match="accumulator 'acc' has no ZeroAcc with an MFMA layout"
    ):
        lower(bad)
