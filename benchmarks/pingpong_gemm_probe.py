"""Probe: does a ping-pong schedule (two consumer warpgroups on alternate tiles) lift the
explicit-level Hopper GEMM (#15)?

    python3 benchmarks/pingpong_gemm_probe.py [--rounds 5] [--shapes MxNxK,...] [--graph]   # H200
    python benchmarks/pingpong_gemm_probe.py --compile-only     # CPU: cross-compile for sm_90

The shipped explicit GEMM (`plugins/kernels/gemm/kernel_explicit.py`, best at 128x256 tiles
with two warpgroups cooperating on one tile) leaves the tensor cores idle while its
warpgroups write a finished tile out (the accumulator to shared memory, the TMA store) and
until the next tile's first stage arrives. Ping-pong (CUTLASS's `KernelTmaWarpSpecialized
Pingpong`, FA3's GEMM form) gives each of two consumer warpgroups whole tiles of its own,
alternately: the CTA's local tiles 0, 2, 4, ... to warpgroup 0, 1, 3, 5, ... to warpgroup 1,
so one warpgroup's epilogue runs under the other's main loop. The single K ring is filled by
one TMA warp in tile order; warpgroup j reads ring iterations `(2 r + j) * KST + kk` of its
round r. A turn barrier per warpgroup orders the main loops: warpgroup 1 starts round r
after warpgroup 0 has issued round r's last wgmma, warpgroup 0 starts round r + 1 after
warpgroup 1 has issued round r's. That order is also what makes the ring's parity waits
exact: a warpgroup never waits on a stage more than one phase ahead of its last
completion (without it, warpgroup 1 would wait on phases the producer has not reached and
an mbarrier's parity cannot tell them from completed ones).

`gemm_deferred` (`--no-pingpong` times it alone): the shipped cooperative kernel with its
epilogue deferred: a finished tile kept as bf16 registers and written out (shared buffer, TMA
store) right after the next tile's first wgmma is issued, so the store runs under that MMA.

A hand-written Gluon kernel (the ring, loader and epilogue of `streamk_probe.py`, whose
data-parallel variant is the shipped schedule), measured before the DSL gets the
schedule: each variant checked against torch (fresh random inputs, poisoned output), then
every variant and cuBLAS timed in turn `--rounds` times (median kept). Table printed last;
`--out` writes JSON. Measured: docs/performance.md (2026-12-05: both schedules lost).
"""

from __future__ import annotations

import sys

from streamk_probe import (
    SWIZZLED,
    _load_steps,
    _store_tile,
    _tile_offsets,
    compile_report,
    desc_launcher,
    probe_args,
    ring_setup,
    ring_teardown,
    run_shapes,
    shipped_candidate,
)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit
def _pp_consumer(
    c_desc, M, N, K, a_ring, b_ring, c_smem, ready, empty, mine, other, J: gl.constexpr,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP: gl.constexpr,
):  # fmt: skip
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
    )
    KST = gl.cdiv(K, BK)
    num_tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    P = gl.num_programs(0)
    r = 0
    for tile in range(gl.program_id(0) + J * P, num_tiles, 2 * P):
        off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
        # my turn: warpgroup 1 waits for warpgroup 0's round r; warpgroup 0 for warpgroup
        # 1's round r - 1 (parity 1 on a fresh barrier passes: round 0 goes at once)
        if J == 1:
            mbarrier.wait(other.index(0), r % 2)
        else:
            mbarrier.wait(other.index(0), (r + 1) % 2)
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        it = (2 * r + J) * KST
        for kk in range(0, KST):
            s = it % STAGES
            mbarrier.wait(ready.index(s), it // STAGES % 2)
            acc = warpgroup_mma(a_ring.index(s), b_ring.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kk > 0)
            it += 1
        mbarrier.arrive(mine.index(0), count=1)  # the other warpgroup's main loop may start
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        _store_tile(c_desc, c_smem, acc, off_m, off_n)
        r += 1
    tma.store_wait(0)


@gluon.jit
def _pp_load(
    a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP: gl.constexpr,
):  # fmt: skip
    KST = gl.cdiv(K, BK)
    num_tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    it = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
        it = _load_steps(
            a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, it, 0, KST, BK, STAGES
        )


# fmt: off
@gluon.jit
def gemm_pingpong(a_desc, b_desc, c_desc, M, N, K,
                  BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                  GROUP: gl.constexpr):
    layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], layout)
    b_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BK, BN], layout)
    c0 = gl.allocate_shared_memory(a_desc.dtype, [BM, BN], layout)
    c1 = gl.allocate_shared_memory(a_desc.dtype, [BM, BN], layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn0 = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    turn1 = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    mbarrier.init(turn0.index(0), count=1)
    mbarrier.init(turn1.index(0), count=1)
    fence_async_shared()
    gl.warp_specialize([
        (_pp_consumer, (c_desc, M, N, K, a_ring, b_ring, c0, ready, empty, turn0, turn1, 0,
                        BM, BN, BK, STAGES, GROUP)),
        (_pp_consumer, (c_desc, M, N, K, a_ring, b_ring, c1, ready, empty, turn1, turn0, 1,
                        BM, BN, BK, STAGES, GROUP)),
        (_pp_load, (a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty, BM, BN, BK, STAGES,
                    GROUP)),
    ], [4, 1], [232, 24])
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    mbarrier.invalidate(turn0.index(0))
    mbarrier.invalidate(turn1.index(0))
# fmt: on


@gluon.jit
def _de_mma(
    c_desc, M, N, K, a_ring, b_ring, c_smem, ready, empty, BM: gl.constexpr, BN: gl.constexpr,
    BK: gl.constexpr, STAGES: gl.constexpr, GROUP: gl.constexpr, NUM_WARPS: gl.constexpr,
):  # fmt: skip
    """The shipped cooperative consumer with its epilogue deferred: a finished tile is kept
    as bf16 registers and written out (shared buffer, TMA store) right after the next tile's
    first wgmma is issued, so the store runs under that MMA instead of between tiles."""
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16]
    )
    KST = gl.cdiv(K, BK)
    num_tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    first = gl.program_id(0)
    it = 0
    prev = gl.zeros((BM, BN), c_desc.dtype, acc_layout)
    prev_m = 0
    prev_n = 0
    for tile in range(first, num_tiles, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        mbarrier.wait(ready.index(it % STAGES), it // STAGES % 2)
        acc = warpgroup_mma(
            a_ring.index(it % STAGES), b_ring.index(it % STAGES), acc, is_async=True
        )
        if tile != first:  # the previous tile out, under this tile's first MMA
            tma.store_wait(0)
            c_smem.store(prev)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [prev_m, prev_n], c_smem)
        acc = warpgroup_mma_wait(1, deps=(acc,))
        it += 1
        for _kk in range(1, KST):
            mbarrier.wait(ready.index(it % STAGES), it // STAGES % 2)
            acc = warpgroup_mma(
                a_ring.index(it % STAGES), b_ring.index(it % STAGES), acc, is_async=True
            )
            acc = warpgroup_mma_wait(1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            it += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        prev = acc.to(c_desc.dtype)
        prev_m = off_m
        prev_n = off_n
    if first < num_tiles:
        tma.store_wait(0)
        c_smem.store(prev)
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [prev_m, prev_n], c_smem)
    tma.store_wait(0)


# fmt: off
@gluon.jit
def gemm_deferred(a_desc, b_desc, c_desc, M, N, K,
                  BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                  GROUP: gl.constexpr, NUM_WARPS: gl.constexpr):
    a_ring, b_ring, ready, empty = ring_setup(a_desc, BM, BN, BK, STAGES)
    c_smem = gl.allocate_shared_memory(a_desc.dtype, [BM, BN], SWIZZLED)
    gl.warp_specialize([
        (_de_mma, (c_desc, M, N, K, a_ring, b_ring, c_smem, ready, empty, BM, BN, BK, STAGES,
                   GROUP, NUM_WARPS)),
        (_pp_load, (a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty, BM, BN, BK, STAGES,
                    GROUP)),
    ], [1], [24])
    ring_teardown(ready, empty, STAGES)
# fmt: on


# (BM, BN, BK, STAGES, num_warps, GROUP) of the deferred-epilogue kernel
DE_CONFIGS = [(128, 256, 64, 3, 8, 8), (128, 256, 64, 3, 8, 16)]


def make_de_runner(shape, cfg, sms):
    m, n, k = shape
    bm, bn, bk, stages, warps, group = cfg
    tiles = -(-m // bm) * -(-n // bn)
    ctas = min(sms, tiles)

    def launch(da, db, dc):
        gemm_deferred[(ctas,)](
            da, db, dc, m, n, k, bm, bn, bk, stages, group, warps, num_warps=warps
        )

    run = desc_launcher(launch, (bm, bk), (bk, bn), (bm, bn))
    return run, {"tiles": tiles, "ctas": ctas}, None


# (BM, BN, BK, STAGES) per warpgroup tile: 128x128 (half the shared bytes per flop of the
# cooperative 128x256's 64x256 warpgroup halves), 64x256 (the cooperative one's halves)
PP_CONFIGS = [(128, 128, 64, 4), (128, 128, 64, 5), (64, 256, 64, 4), (128, 128, 128, 2)]
# the shipped (data-parallel, cooperative) best per shape, docs/performance.md 2026-12-04
SHIPPED = {
    "8192x8192x8192": (128, 256, 64, 3, 8),
    "4096x4096x4096": (128, 256, 64, 3, 8),
    "4096x14336x4096": (128, 256, 64, 3, 8),
    "4096x4096x14336": (128, 256, 64, 3, 8),
    "16384x7168x2048": (128, 256, 64, 3, 8),
    "128x14336x4096": (128, 128, 64, 5, 4),
    "128x4096x4096": (64, 64, 128, 5, 4),
}


def make_pp_runner(shape, cfg, sms):
    m, n, k = shape
    bm, bn, bk, stages = cfg
    tiles = -(-m // bm) * -(-n // bn)
    ctas = min(sms, tiles)

    def launch(da, db, dc):
        gemm_pingpong[(ctas,)](da, db, dc, m, n, k, bm, bn, bk, stages, 8, num_warps=4)

    run = desc_launcher(launch, (bm, bk), (bk, bn), (bm, bn))
    return run, {"tiles": tiles, "ctas": ctas}, None


def compile_only() -> int:
    from argus_plugins.backends.hopper.gluon import nvmma_desc_type

    def sig(bm, bn, bk):
        return {
            "a_desc": nvmma_desc_type("bf16", bm, bk),
            "b_desc": nvmma_desc_type("bf16", bk, bn),
            "c_desc": nvmma_desc_type("bf16", bm, bn),
            **{s: "i32" for s in ("M", "N", "K")},
        }

    for bm, bn, bk, stages in PP_CONFIGS:
        consts = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "GROUP": 8}
        rep = compile_report(gemm_pingpong, sig(bm, bn, bk), consts, 4)
        rep.pop("ptx")
        print(f"{(bm, bn, bk, stages)}: {rep}")
    for bm, bn, bk, stages, warps, group in DE_CONFIGS:
        consts = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "GROUP": group}
        consts["NUM_WARPS"] = warps
        rep = compile_report(gemm_deferred, sig(bm, bn, bk), consts, warps)
        rep.pop("ptx")
        print(f"deferred {(bm, bn, bk, stages, warps, group)}: {rep}")
    return 0


def main(argv=None) -> int:
    ap, argv = probe_args(__doc__, SHIPPED, "pingpong.json", 5, False, argv)
    ap.add_argument("--no-pingpong", dest="pingpong", action="store_false")
    args = ap.parse_args(argv)
    if args.compile_only:
        return compile_only()

    def build(name, shape, sms, torch, rows):
        cands = shipped_candidate(SHIPPED[name], shape, sms, torch)
        if shape[0] > 128:  # the deferred epilogue: the large shapes' cooperative kernel
            for cfg in DE_CONFIGS:
                label = f"deferred {cfg[0]}x{cfg[1]}x{cfg[2]} s{cfg[3]} w{cfg[4]} g{cfg[5]}"
                cands[label] = make_de_runner(shape, cfg, sms)
        for cfg in PP_CONFIGS if args.pingpong else []:
            cands[f"pingpong {cfg[0]}x{cfg[1]}x{cfg[2]} s{cfg[3]}"] = make_pp_runner(
                shape, cfg, sms
            )
        return cands

    return run_shapes(args, build, trials=2)


if __name__ == "__main__":
    sys.exit(main())
