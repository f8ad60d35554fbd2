"""Hopper's Gluon lowering, cross-compiled for sm_90 with no GPU: the warp-specialized
GEMM becomes SASS with warpgroup MMAs (HGMMA), TMA loads and no spills, at each tile
configuration the benchmark times; a kernel that cannot compile reports the error."""

from __future__ import annotations

import pytest

from argus_core.ir import explicit as x
from argus_plugins.backends.hopper.gluon import compile_explicit
from argus_plugins.backends.hopper.spec import H100
from argus_plugins.kernels.gemm.kernel_explicit import build


@pytest.mark.parametrize(
    ("warps", "consts"),
    [(4, {}), (8, {"BN": 256, "BK": 64, "STAGES": 3}), (4, {"BM": 128, "BN": 64, "STAGES": 5})],
)
@pytest.mark.parametrize("in_flight", [1, 0])
def test_ws_gemm_cross_compiles_to_hgmma_and_tma(warps, consts, in_flight):
    kernel = build(warps, in_flight)
    report = compile_explicit(kernel, consts)
    assert report.ok, report.error
    assert report.target == "cuda:90" and report.asm_kind == "sass"
    assert report.mma_count and report.mma_count > 0  # HGMMA in the SASS
    assert report.instructions["hgmma"] == report.mma_count
    assert report.instructions["utmaldg"] >= 2  # A and B by TMA
    assert report.instructions["ldg"] == 0  # no plain global loads of operands
    assert report.spills == 0
    assert (
        kernel.shared_bytes({**kernel.consts, **consts})
        <= report.shared_bytes
        <= H100.lds_bytes_per_cu
    )


def test_a_block_over_the_swizzle_width_fails_with_the_compilers_message():
    kernel = build()
    bad = x.replace_op(
        kernel,
        "mma/tile/5:ZeroAcc",
        x.ZeroAcc("acc", "BM", "BN", x.WgmmaAcc((4, 1))),
    ).with_consts(BN=512)  # wgmma N is at most 256
    report = compile_explicit(bad)
    assert not report.ok
    assert report.error


@pytest.mark.parametrize(
    ("d", "causal", "stages", "consumers", "overlap"),
    [
        (128, False, 2, 1, False),
        (128, True, 2, 1, False),
        (64, False, 2, 1, False),
        (128, False, 3, 2, False),
        (64, True, 4, 2, False),
        (128, True, 2, 2, True),
    ],
)
def test_ws_attention_cross_compiles_to_hgmma_and_tma(d, causal, stages, consumers, overlap):
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention

    report = compile_explicit(build_attention(d, causal, stages, consumers, overlap))
    assert report.ok, report.error
    assert report.instructions["hgmma"] > 0  # both S = QK^T and O += PV
    assert report.instructions["utmaldg"] >= 3  # Q, K, V by TMA
    assert report.instructions["ldg"] == 0
    assert report.spills == 0
    assert report.shared_bytes <= H100.lds_bytes_per_cu


def test_attention_lowering_reads_k_transposed_and_p_from_registers():
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention

    src = lower(build_attention(128, causal=True))
    assert "k_ring.index(it % STAGES).permute((1, 0)), s_acc, use_acc=False" in src
    assert "o_acc = warpgroup_mma(p, v_ring.index(it % STAGES), o_acc, is_async=True)" in src
    assert "(_cols[None, :] <= _rows[:, None])" in src  # the causal mask
    # causal programs stop at the diagonal and start with the longest rows
    assert "gl.minimum(gl.cdiv((gl.cdiv(S, BM) - 1 - gl.program_id(0) + 1) * BM, BN)" in src
    for bar in ("q_bar", "k_ready", "v_ready", "kv_empty"):
        assert f"mbarrier.init({bar}.index(_i), count=1)" in src
    # only blocks reaching past SKV or the first query row are masked; the scale is folded
    assert "if (j * BN + BN > SKV) | (j * BN + BN > " in src
    assert "_p = gl.exp2(_qk * 0.12751743082459868 - _m_new[:, None])" in src
    assert "gl.store(lse_ptr + _lse_rows, (m_i + gl.log2(l_i)) * 0.6931471805599453)" in src


def test_two_consumer_attention_forks_two_warpgroups_that_both_release():
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention

    src = lower(build_attention(128, causal=False, stages=3, consumers=2))
    assert "mbarrier.init(kv_empty.index(_i), count=2)" in src
    assert "], [4, 1], [232, 24])" in src  # the second warpgroup and the load warp
    for w in (0, 1):  # each stores O through its own Q buffer and releases every stage
        assert f"q{w}_smem.store((o_acc{w} / " in src
        assert f"o_acc{w} = warpgroup_mma(p{w}, v_ring.index(it % STAGES), o_acc{w}" in src
    assert src.count("mbarrier.arrive(kv_empty.index(it % STAGES), count=1)") == 2


def test_overlapped_attention_issues_the_next_s_with_this_pv():
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention

    src = lower(build_attention(128, causal=True, consumers=2, overlap=True))
    body = src[src.index("def _part_softmax0") : src.index("def _part_softmax1")]
    loop = body[body.index("    for j in range") :]
    order = [
        "s_acc0 = warpgroup_mma(q0_smem, k_ring.index(it % STAGES)",
        "o_acc0 = warpgroup_mma(p0, v_ring.index(it % STAGES), o_acc0, is_async=True)",
        "s_acc0 = warpgroup_mma_wait(1, deps=(s_acc0,))",
        "pn0 = gl.convert_layout(_p.to(gl.bfloat16)",
        "o_acc0, p0 = warpgroup_mma_wait(0, deps=(o_acc0, p0,))",  # P_j kept alive
        "mbarrier.arrive(kv_empty.index(it % STAGES), count=1)",
        "o_acc0 = o_acc0 * alpha0[:, None]",  # the deferred rescale
        "p0 = pn0",
    ]
    assert [loop.index(line) for line in order] == sorted(loop.index(line) for line in order)
    # the producer brings K block j + 1 with V block j; K block 0 once, before the loop
    assert "[kv_row + (j + 1) * BN, 0], k_ready.index(it % STAGES)" in src
    assert "tma.async_copy_global_to_shared(k_desc, [kv_row, 0], k0_bar.index(0), k0_smem)" in src


@pytest.mark.parametrize(("d", "overlap", "bn"), [(128, False, 128), (64, False, 256)])
def test_pingpong_attention_takes_turns_and_cross_compiles(d, overlap, bn):
    """The two consumer warpgroups take turns issuing their wgmmas: warpgroup 0 starts
    (its first wait passes a fresh barrier), each hands the turn on right after issuing."""
    from argus_plugins.backends.hopper.gluon import lower
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention

    kernel = build_attention(d, False, 2, 2, overlap, pingpong=True).with_consts(BN=bn)
    src = lower(kernel)
    for w, phase in ((0, "(it + 1) % 2"), (1, "it % 2")):
        body = src[src.index(f"def _part_softmax{w}") :]
        loop = body[body.index("    for j in range") : body.index("it += 1")]
        order = [
            f"mbarrier.wait(turn{w}.index(0), {phase})",
            f"s_acc{w} = warpgroup_mma(q{w}_smem, k_ring.index(it % STAGES)",
            f"mbarrier.arrive(turn{1 - w}.index(0), count=1)",
            f"s_acc{w} = warpgroup_mma_wait(0, deps=(s_acc{w},))",
        ]
        assert [loop.index(line) for line in order] == sorted(loop.index(line) for line in order)
    report = compile_explicit(kernel)
    assert report.ok, report.error
    assert report.spills == 0 and report.instructions["hgmma"] > 0


@pytest.mark.parametrize(
    ("warps", "consts"),
    [(4, {"STAGES": 6, "NS": 112}), (4, {"BM": 64, "BN": 256, "NS": 224}), (8, {"BN": 256})],
)
def test_overlapping_column_tiles_store_from_registers_without_a_tma_store(warps, consts):
    """`build(column_stride=1)`: the lowered epilogue masks the stores to the tile's first
    NS columns and to the tensor; no c_smem, no TMA store, and a sixth 32 KiB stage fits
    at 128x128x64 in what the TMA epilogue's buffer took."""
    from argus_plugins.backends.hopper.gluon import lower

    kernel = build(warps, 1, 1)
    consts = {"STAGES": 3, **consts} if warps == 8 else consts
    src = lower(kernel.with_consts(**consts))
    assert "mask=(_r[:, None] < M) & (_cc[None, :] < N) & (_c[None, :] < NS)" in src
    assert "off_n = local // group_rows * NS" in src and "c_smem" not in src
    assert "async_copy_shared_to_global" not in src
    report = compile_explicit(kernel, consts)
    assert report.ok, report.error
    assert report.spills == 0 and report.instructions["stg"] > 0
    assert report.instructions["hgmma"] == report.mma_count > 0
    assert report.shared_bytes <= H100.lds_bytes_per_cu
