"""Probe: overlapping column tiles, so that a one-wave GEMM fills every SM (#15).

    python3 benchmarks/overlap_probe.py [--rounds 5] [--shapes MxNxK,...] [--plain]   # on the H200
    python benchmarks/overlap_probe.py --compile-only     # CPU: cross-compile for sm_90

128x14336x4096 (a decode-batch projection) is bound by reading B (117 MB). In 128x128 tiles
it is 112 tiles on 132 SMs: 20 SMs idle for the whole kernel. Tile widths are powers of two
in Triton/Gluon, so the 112-column tile that would give 128 tiles cannot be declared;
cuBLAS runs 64x224 tiles there (128 CTAs). Here tile j of a row block starts at column
j * NS with NS < BN: the CTA loads and multiplies BN columns (the extra BN - NS are
L2 hits, loaded by the neighbouring tile in the same wave) and stores only the first NS.
NS = 112 at BN 128 gives 128 tiles of 128x112; NS = 224 at BM 64, BN 256 gives cuBLAS's
64x224 grid. NS must be a multiple of 8 (TMA's 16-byte column alignment of a bf16 box).

Epilogues: `dup` stores the whole BN columns by TMA (the overlapped columns are written by
two CTAs with the same values: a write-write race no shipped kernel may have, measured only
as the lower bound of the store's cost); `blk` converts the accumulator to a blocked layout
and stores the NS columns with masked vector stores; `acc` stores them masked straight from
the wgmma accumulator layout. Timed against the shipped schedule (NS = BN, TMA store) and
cuBLAS in alternation, as replays of a CUDA graph of 20 calls (`--plain`: plain launches),
each variant checked against torch on fresh inputs with a poisoned output first. Table
printed last; `--out` writes JSON.
"""

from __future__ import annotations

import math
import sys

from streamk_probe import (
    SWIZZLED,
    _load_steps,
    _mma_steps,
    _tile_offsets,
    compile_report,
    desc_launcher,
    make_runner,
    probe_main,
    ring_setup,
    ring_teardown,
    tile_label,
)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, tma

EPILOGUES = {"dup": 0, "blk": 1, "acc": 2}


# fmt: off
@gluon.jit
def _ov_mma(a_desc, c_desc, c_ptr, M, N, K, a_ring, b_ring, c_smem, ready, empty,
            BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
            GROUP: gl.constexpr, NUM_WARPS: gl.constexpr, EPI: gl.constexpr, NS: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16])
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BN, BN // 8], [NUM_WARPS, 1], [1, 0])
    KST = gl.cdiv(K, BK)
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, NS)
    it = 0
    for tile in range(gl.program_id(0), tiles, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, NS, GROUP)  # column tiles every NS
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        acc, it = _mma_steps(a_ring, b_ring, ready, empty, acc, it, 0, KST, STAGES)
        if EPI == 0:
            tma.store_wait(0)
            c_smem.store(acc.to(c_smem.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
        elif EPI == 1:
            out = gl.convert_layout(acc.to(gl.bfloat16), blk)
            rr = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, blk))
            cc = gl.arange(0, BN, layout=gl.SliceLayout(0, blk))
            mask = (rr[:, None] < M) & (cc[None, :] < NS) & (off_n + cc[None, :] < N)
            gl.store(c_ptr + rr[:, None] * N + off_n + cc[None, :], out, mask=mask)
        else:
            rr = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
            cc = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
            mask = (rr[:, None] < M) & (cc[None, :] < NS) & (off_n + cc[None, :] < N)
            gl.store(c_ptr + rr[:, None] * N + off_n + cc[None, :], acc.to(gl.bfloat16), mask=mask)
    tma.store_wait(0)


@gluon.jit
def _ov_load(a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty,
             BM: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP: gl.constexpr,
             NS: gl.constexpr):
    KST = gl.cdiv(K, BK)
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, NS)
    it = 0
    for tile in range(gl.program_id(0), tiles, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, NS, GROUP)
        it = _load_steps(a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, it, 0, KST,
                         BK, STAGES)


@gluon.jit
def gemm_overlap(a_desc, b_desc, c_desc, c_ptr, M, N, K,
                 BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                 GROUP: gl.constexpr, NUM_WARPS: gl.constexpr, EPI: gl.constexpr,
                 NS: gl.constexpr):
    a_ring, b_ring, ready, empty = ring_setup(a_desc, BM, BN, BK, STAGES)
    c_smem = gl.allocate_shared_memory(a_desc.dtype, [BM if EPI == 0 else 8, BN], SWIZZLED)
    gl.warp_specialize([
        (_ov_mma, (a_desc, c_desc, c_ptr, M, N, K, a_ring, b_ring, c_smem, ready, empty,
                   BM, BN, BK, STAGES, GROUP, NUM_WARPS, EPI, NS)),
        (_ov_load, (a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty,
                    BM, BK, STAGES, GROUP, NS)),
    ], [1], [24])
    ring_teardown(ready, empty, STAGES)
# fmt: on


# per shape: (BM, BN, BK, STAGES, num_warps) of the shipped schedule, and the overlapped
# (configuration, NS) candidates
SHIPPED = {"128x14336x4096": (128, 128, 64, 5, 4)}
OVERLAP = {
    "128x14336x4096": [
        ((128, 128, 64, 5, 4), 112),
        ((128, 128, 64, 4, 4), 112),
        ((128, 128, 64, 6, 4), 112),
        ((128, 128, 128, 3, 4), 112),
        ((64, 256, 64, 4, 4), 224),
    ],
}


def overlap_runner(shape, cfg: tuple, ns: int, epi: int, sms: int, torch):
    """(run, info, None) of `gemm_overlap` at `cfg` with column stride `ns`."""
    m, n, k = shape
    bm, bn, bk, stages, warps = cfg
    if ns % 8 or not 0 < ns <= bn:
        raise ValueError(f"invalid NS {ns}: a multiple of 8 in (0, BN={bn}]")
    tiles = math.ceil(m / bm) * math.ceil(n / ns)
    ctas = min(sms, tiles)

    def launch(da, db, dc, c):
        gemm_overlap[(ctas,)](
            da, db, dc, c, m, n, k, bm, bn, bk, stages, 8, warps, epi, ns, num_warps=warps
        )

    run = desc_launcher(launch, (bm, bk), (bk, bn), (bm, bn), pass_c=True)
    return run, {"tiles": tiles, "ctas": ctas, "ns": ns, "epi": epi}, None


def compile_only() -> int:
    """Cross-compile every overlapped candidate for sm_90 (no GPU) and print its report."""
    from argus_plugins.backends.hopper.gluon import nvmma_desc_type

    for name, cands in OVERLAP.items():
        for cfg, ns in cands:
            bm, bn, bk, stages, warps = cfg
            for label, epi in EPILOGUES.items():
                sig = {
                    "a_desc": nvmma_desc_type("bf16", bm, bk),
                    "b_desc": nvmma_desc_type("bf16", bk, bn),
                    "c_desc": nvmma_desc_type("bf16", bm, bn),
                    "c_ptr": "*bf16",
                    **{s: "i32" for s in ("M", "N", "K")},
                }
                consts = dict(BM=bm, BN=bn, BK=bk, STAGES=stages, GROUP=8, NUM_WARPS=warps)
                consts.update(EPI=epi, NS=ns)
                rep = compile_report(gemm_overlap, sig, consts, warps)
                rep.pop("ptx")
                print(name, tile_label(cfg), f"ns{ns} {label}", rep, flush=True)
    return 0


def build(name, shape, sms, torch, rows):
    """The candidates of shape `name` (label -> (run, info, counters or None))."""
    cfg = SHIPPED[name]
    cands = {f"shipped {tile_label(cfg)}": make_runner(shape, cfg, False, sms, torch)}
    for ocfg, ns in OVERLAP.get(name, []):
        for label, epi in EPILOGUES.items():
            cands[f"ns{ns} {label} {tile_label(ocfg)}"] = overlap_runner(
                shape, ocfg, ns, epi, sms, torch
            )
    return cands


def main(argv=None) -> int:
    return probe_main(__doc__, SHIPPED, "overlap_probe.json", 5, compile_only, build, argv)


if __name__ == "__main__":
    sys.exit(main())
