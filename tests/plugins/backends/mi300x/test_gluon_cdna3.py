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


def test_cdna3_attention_cross_compiles_with_mfma_lds_and_no_spills():
    """One benchmark case (D128 causal): MFMA 32x32x8 for both products, the K/V blocks by
    buffer loads, Q/K/V in LDS within the CU's 64 KiB, no spills."""
    from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attention

    kernel = attention(128, causal=True)
    report = compile_explicit(kernel)
    assert report.ok, report.error
    assert report.spills == 0
    # S (BM x BN = 128x32, K=128) and PV (128x128, K=32) per warp: 16 + 16 32x32x8 MFMAs
    assert report.mma_count and report.mma_count >= 32
    assert report.buffer_loads and report.buffer_loads > 0
    assert report.instructions["s_barrier"] >= 2  # before and after the K/V stores
    assert kernel.shared_bytes() == report.shared_bytes <= MI300X.lds_bytes_per_cu
    assert report.occupancy and report.occupancy >= 1


def test_cdna3_attention_lowering_reads_k_transposed_and_p_from_registers():
    from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attention

    src = lower(attention(64))
    assert "k_lds.permute((1, 0)).load(gl.DotOperandLayout(1," in src
    assert "o_acc = cdna3.mfma(p, v_lds.load(" in src
    assert "cdna3.buffer_store(o_acc.to(" in src


def test_cdna3_moe_grouped_gemm_cross_compiles():
    from argus_plugins.kernels.moe.kernel_explicit import build_cdna3 as moe

    kernel = moe()
    report = compile_explicit(kernel)
    assert report.ok, report.error
    assert report.spills == 0 and report.mma_count and report.mma_count > 0
    assert "expert = gl.load(expert_ptr + off_m // BM)" in lower(kernel)


def test_a_masked_store_tile_lowers_to_a_masked_buffer_store_and_cross_compiles():
    """`StoreTile(limits=, cols=)` on CDNA3: one masked buffer store over the index vectors
    (the unmasked store, the shipped kernels', is unchanged)."""
    from dataclasses import replace

    from argus_core.ir.expr import Sym

    kernel = build_cdna3()
    st = next(o for _, o in kernel.ops() if isinstance(o, x.StoreTile))
    assert "mask=" not in lower(kernel)
    m, n = Sym("M", "shape", 1), Sym("N", "shape", 1)
    masked = x.replace_op(kernel, st.point, replace(st, cols=96, limits=(m, n)))
    src = lower(masked)
    assert "c_ptr, _r[:, None] * N + _cc[None, :], mask=(_r[:, None] < M) & " in src
    assert "(_c[None, :] < 96)" in src
    report = compile_explicit(masked, {})
    assert report.ok, report.error
    assert report.spills == 0
