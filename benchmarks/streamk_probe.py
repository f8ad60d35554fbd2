"""Probe: does a stream-K schedule lift the explicit-level Hopper GEMM (#15)?

    python3 benchmarks/streamk_probe.py [--rounds 5] [--shapes MxNxK,...] [--plain]   # on the H200
    python benchmarks/streamk_probe.py --compile-only     # CPU: cross-compile for sm_90, print the report

The explicit-level GEMM (`plugins/kernels/gemm/kernel_explicit.py`) runs one persistent CTA
per SM over whole output tiles. Where the tiles do not divide into the SMs the last wave is
partly idle: 128x14336x4096 in 128x128 tiles is 112 tiles on 132 SMs (15% idle for the whole
kernel), 8192^3 in 128x256 tiles 2048 = 15.5 waves. Stream-K (Osama et al., PPoPP 2023;
CUTLASS's `StreamKScheduler`) gives every CTA the same number of K steps: the last
`T % P + P` tiles (or all of them when T < P) are cut into P equal ranges of the
(tile, K step) space; a CTA whose range ends inside a tile writes its fp32 partial to a
workspace slot and raises a flag, the CTA that holds the tile's last K step waits for the
flags of the tile's other CTAs, adds their partials and stores the tile. Each CTA walks its
pieces last piece first, so a partial is published before its own CTA finishes a tile:
no CTA waits for another's whole range (CUTLASS orders the same way).

This is a hand-written Gluon kernel, the same warp-specialized structure as the lowered
explicit kernel (one TMA load warp, a ring of STAGES stages, wgmma with one group in
flight, the epilogue through shared memory by TMA), with the stream-K schedule added. It
measures the schedule before the DSL gets the ops (flag waits and partial tiles) that would
let the verifier prove it. Timed against the same kernel with the stream-K region empty
(every tile data-parallel: the shipped schedule) and cuBLAS, in alternation, on rotated
inputs, as replays of a CUDA graph of 20 calls (`--plain`: plain launches); each variant
checked against torch before timing (fresh random inputs, poisoned output). A table is
printed last; `--out` writes JSON. Measured: docs/performance.md (2026-12-04, stream-K).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

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
def _gdc_wait():
    """`griddepcontrol.wait`: block until the grids this one depends on (the previous kernel
    in the stream, under programmatic dependent launch) have finished and their writes are
    visible; returns at once when there is none."""
    gl.inline_asm_elementwise(
        "griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1
    )


@gluon.jit
def _gdc_launch_dependents():
    """`griddepcontrol.launch_dependents`: the next kernel in the stream (launched with
    programmatic stream serialization) may be scheduled once every CTA of this grid has
    issued it or exited; it still waits in its own `griddepcontrol.wait` for this grid."""
    gl.inline_asm_elementwise(
        "griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32,
        is_pure=False, pack=1,
    )  # fmt: skip


# the probes' shared layout of bf16 blocks (operand rings and the epilogue buffer)
SWIZZLED = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))


@gluon.jit
def ring_setup(a_desc, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr):
    """The probes' operand ring: STAGES stages of the A and B blocks (128-byte swizzled) and
    the ready/empty mbarrier of each stage, initialised and fenced."""
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], SWIZZLED)
    b_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BK, BN], SWIZZLED)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    return a_ring, b_ring, ready, empty


@gluon.jit
def ring_teardown(ready, empty, STAGES: gl.constexpr):
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


@gluon.jit
def _tile_offsets(tile, M, N, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr):
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    first_m = tile // (GROUP * num_n) * GROUP
    group_rows = gl.minimum(num_m - first_m, GROUP)
    local = tile % (GROUP * num_n)
    return (first_m + local % group_rows) * BM, local // group_rows * BN


@gluon.jit
def _sk_range(DP_TILES, SK_ITERS, KST):
    """(first tile, number of pieces, a, b) of this CTA's stream-K range [a, b)."""
    c = gl.program_id(0)
    P = gl.num_programs(0)
    a = c * SK_ITERS // P
    b = (c + 1) * SK_ITERS // P
    t_first = a // KST
    t_last = gl.where(b > a, (b - 1) // KST, t_first - 1)
    return t_last, t_last - t_first + 1, a, b


@gluon.jit
def _piece(
    q, t_last, a, b, KST, DP_TILES, M, N, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr
):
    """Piece `q` (last first) of the range [a, b): its stream-K tile t, K steps [ks, ke) and
    the tile's offsets."""
    t = t_last - q
    ks = gl.maximum(a, t * KST) - t * KST
    ke = gl.minimum(b, (t + 1) * KST) - t * KST
    off_m, off_n = _tile_offsets(DP_TILES + t, M, N, BM, BN, GROUP)
    return t, ks, ke, off_m, off_n


@gluon.jit
def _mma_steps(a_ring, b_ring, ready, empty, acc, it, k0, k1, STAGES: gl.constexpr):
    """K steps [k0, k1) of one tile (ring iterations from `it`): wgmma with one group in
    flight, each stage released once the next wgmma is issued, the last after the loop."""
    for kk in range(k0, k1):
        mbarrier.wait(ready.index(it % STAGES), it // STAGES % 2)
        acc = warpgroup_mma(
            a_ring.index(it % STAGES), b_ring.index(it % STAGES), acc, is_async=True
        )
        acc = warpgroup_mma_wait(1, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kk > k0)
        it += 1
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
    return acc, it


@gluon.jit
def _load_steps(
    a_desc,
    b_desc,
    a_ring,
    b_ring,
    ready,
    empty,
    off_m,
    off_n,
    it,
    k0,
    k1,
    BK: gl.constexpr,
    STAGES: gl.constexpr,
):
    """The producer's K steps [k0, k1) of the tile at (off_m, off_n), from ring iteration `it`."""
    for kk in range(k0, k1):
        mbarrier.wait(empty.index(it % STAGES), (it // STAGES + 1) % 2)
        mbarrier.expect(
            ready.index(it % STAGES), a_desc.block_type.nbytes + b_desc.block_type.nbytes
        )
        tma.async_copy_global_to_shared(
            a_desc, [off_m, kk * BK], ready.index(it % STAGES), a_ring.index(it % STAGES)
        )
        tma.async_copy_global_to_shared(
            b_desc, [kk * BK, off_n], ready.index(it % STAGES), b_ring.index(it % STAGES)
        )
        it += 1
    return it


@gluon.jit
def _store_tile(c_desc, c_smem, acc, off_m, off_n, EPI: gl.constexpr = 1):
    """The epilogue: the finished tile through shared memory by a TMA store; `EPI` 2 in
    two column halves through a buffer of half the tile (the second half written once the
    first half's store has read the buffer), leaving shared memory for a ring stage."""
    if EPI == 1:
        tma.store_wait(0)
        c_smem.store(acc.to(c_smem.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
    else:
        BM: gl.constexpr = acc.shape[0]
        BN: gl.constexpr = acc.shape[1]
        lo, hi = gl.split(gl.permute(gl.reshape(acc, [BM, 2, BN // 2]), [0, 2, 1]))
        tma.store_wait(0)
        c_smem.store(lo.to(c_smem.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(0)
        c_smem.store(hi.to(c_smem.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n + BN // 2], c_smem)


@gluon.jit
def _part_mma(
    a_desc, b_desc, c_desc, ws, flags, M, N, K, DP_TILES, SK_ITERS, a_ring, b_ring, c_smem,
    ready, empty, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP: gl.constexpr, NUM_WARPS: gl.constexpr, EPI: gl.constexpr,
):  # fmt: skip
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16]
    )
    KST = gl.cdiv(K, BK)
    it = 0
    for tile in range(gl.program_id(0), DP_TILES, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        acc, it = _mma_steps(a_ring, b_ring, ready, empty, acc, it, 0, KST, STAGES)
        _store_tile(c_desc, c_smem, acc, off_m, off_n, EPI)
    # the stream-K region: this CTA's pieces, last piece first
    t_last, pieces, a, b = _sk_range(DP_TILES, SK_ITERS, KST)
    P = gl.num_programs(0)
    for q in range(0, pieces):
        t, ks, ke, off_m, off_n = _piece(q, t_last, a, b, KST, DP_TILES, M, N, BM, BN, GROUP)
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        acc, it = _mma_steps(a_ring, b_ring, ready, empty, acc, it, ks, ke, STAGES)
        if ke < KST:  # the tile goes on in a later CTA: publish the partial
            rr = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
            cc = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
            gl.store(ws + gl.program_id(0) * (BM * BN) + rr[:, None] * BN + cc[None, :], acc)
            gl.thread_barrier()
            gl.atomic_xchg(flags + gl.program_id(0), 1, sem="release", scope="gpu")
        else:  # this CTA holds the tile's last K step: add the earlier CTAs' partials
            first = ((t * KST + 1) * P - 1) // SK_ITERS
            for c2 in range(first, gl.program_id(0)):
                while gl.atomic_add(flags + c2, 0, sem="acquire", scope="gpu") == 0:
                    pass
                gl.atomic_xchg(flags + c2, 0, sem="relaxed", scope="gpu")
                rr = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
                cc = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
                acc = acc + gl.load(ws + c2 * (BM * BN) + rr[:, None] * BN + cc[None, :])
            _store_tile(c_desc, c_smem, acc, off_m, off_n, EPI)
    tma.store_wait(0)


@gluon.jit
def _part_load(
    a_desc, b_desc, M, N, K, DP_TILES, SK_ITERS, a_ring, b_ring, ready, empty,
    BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP: gl.constexpr,
):  # fmt: skip
    KST = gl.cdiv(K, BK)
    it = 0
    for tile in range(gl.program_id(0), DP_TILES, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
        it = _load_steps(
            a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, it, 0, KST, BK, STAGES
        )
    t_last, pieces, a, b = _sk_range(DP_TILES, SK_ITERS, KST)
    for q in range(0, pieces):
        t, ks, ke, off_m, off_n = _piece(q, t_last, a, b, KST, DP_TILES, M, N, BM, BN, GROUP)
        it = _load_steps(
            a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, it, ks, ke, BK, STAGES
        )


# fmt: off
@gluon.jit
def gemm_streamk(a_desc, b_desc, c_desc, ws, flags, M, N, K, DP_TILES, SK_ITERS,
                 BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                 GROUP: gl.constexpr, NUM_WARPS: gl.constexpr, PDL: gl.constexpr = 0,
                 EPI: gl.constexpr = 1):
    a_ring, b_ring, ready, empty = ring_setup(a_desc, BM, BN, BK, STAGES)
    c_smem = gl.allocate_shared_memory(a_desc.dtype, [BM, BN // EPI], SWIZZLED)
    if PDL >= 1:  # the set-up above ran under the previous kernel's tail; no memory touched
        _gdc_wait()
    if PDL == 2:  # let the next kernel's CTAs take the SMs this grid leaves idle
        _gdc_launch_dependents()
    gl.warp_specialize([
        (_part_mma, (a_desc, b_desc, c_desc, ws, flags, M, N, K, DP_TILES, SK_ITERS, a_ring,
                     b_ring, c_smem, ready, empty, BM, BN, BK, STAGES, GROUP, NUM_WARPS, EPI)),
        (_part_load, (a_desc, b_desc, M, N, K, DP_TILES, SK_ITERS, a_ring, b_ring, ready, empty,
                      BM, BN, BK, STAGES, GROUP)),
    ], [1], [24])
    ring_teardown(ready, empty, STAGES)
# fmt: on


def schedule(tiles: int, k_steps: int, ctas: int, stream_k: bool) -> tuple[int, int]:
    """(data-parallel tiles, stream-K iterations): without stream-K every tile is data
    parallel; with it the last `tiles % ctas + ctas` tiles (all of them below two waves)
    are split evenly over the CTAs, none when the tiles fill whole waves."""
    if not stream_k or tiles % ctas == 0:
        return tiles, 0
    sk = tiles if tiles < 2 * ctas else tiles % ctas + ctas
    return tiles - sk, sk * k_steps


# (BM, BN, BK, STAGES, num_warps) per shape: the best explicit configuration of the
# 2026-12-04 H200 runs (docs/performance.md), and 128x128 tiles where 128x256 leave the
# most SMs idle
SHAPES = {
    "8192x8192x8192": (128, 256, 64, 3, 8),
    "4096x4096x4096": (128, 256, 64, 3, 8),
    "4096x14336x4096": (128, 256, 64, 3, 8),
    "4096x4096x14336": (128, 256, 64, 3, 8),
    "16384x7168x2048": (128, 256, 64, 3, 8),
    "128x14336x4096": (128, 128, 64, 5, 4),
    "128x4096x4096": (64, 64, 128, 5, 4),
}
EXTRA = {  # more tiles to try under stream-K (its balance changes which tile is best)
    "128x14336x4096": [
        (128, 256, 64, 3, 8),
        (128, 64, 128, 4, 4),
        (128, 128, 128, 3, 4),
        (64, 128, 64, 6, 4),
    ],
    "128x4096x4096": [
        (128, 128, 64, 5, 4),
        (128, 64, 128, 4, 4),
        (64, 128, 64, 6, 4),
        (64, 64, 64, 8, 4),
    ],
}


def tile_label(cfg: tuple) -> str:
    """A configuration (BM, BN, BK, STAGES, num_warps) as the probes' tables name it."""
    bm, bn, bk, stages, warps = cfg
    return f"{bm}x{bn}x{bk} s{stages} w{warps}"


def make_runner(
    shape: tuple[int, int, int], cfg: tuple, stream_k: bool, sms: int, torch, pdl: int = 0,
    epi: int = 1,
):  # fmt: skip
    """(run, info, flags) of `gemm_streamk` at `cfg`; `pdl` 1 or 2 launches it with
    programmatic dependent launch (see `gemm_streamk`'s PDL); `epi` 2 stores each tile in
    column halves (`_store_tile`)."""
    m, n, k = shape
    bm, bn, bk, stages, warps = cfg
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    k_steps = math.ceil(k / bk)
    ctas = sms if stream_k else min(sms, tiles)
    dp, sk_iters = schedule(tiles, k_steps, ctas, stream_k)
    ws = torch.empty(ctas * bm * bn, device="cuda", dtype=torch.float32)
    flags = torch.zeros(ctas, device="cuda", dtype=torch.int32)

    def launch(da, db, dc):
        gemm_streamk[(ctas,)](
            da, db, dc, ws, flags, m, n, k, dp, sk_iters, bm, bn, bk, stages, 8, warps, pdl,
            epi, num_warps=warps, launch_pdl=pdl > 0,
        )  # fmt: skip

    run = desc_launcher(launch, (bm, bk), (bk, bn), (bm, bn // epi))
    return run, {"tiles": tiles, "ctas": ctas, "dp_tiles": dp, "sk_iters": sk_iters}, flags


REPLAYS = 20  # calls per captured graph: launch gaps out of the timing of 20-40 us kernels


def graph_ms(step, torch, triton) -> float:
    """Median ms of one call of `step`, timed as replays of a CUDA graph of REPLAYS calls
    (each call rotating to the next input set), as a serving engine runs small GEMMs."""
    step()  # compile, build descriptors outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPLAYS):
            step()
    g.replay()
    torch.cuda.synchronize()
    return triton.testing.do_bench(g.replay, warmup=25, rep=100, return_mode="median") / REPLAYS


def input_sets(m: int, n: int, k: int, torch) -> list[tuple]:
    """Rotating (a, b, c) bf16 sets for timing: three below 2^33 MACs, one above."""
    return [
        (
            torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
            torch.randn(k, n, device="cuda", dtype=torch.bfloat16),
            torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(3 if m * n * k < 2**33 else 1)
    ]


def measure_shape(name, cands, rounds, graph, torch, triton, rows, table, trials=3) -> None:
    """Check each candidate of shape `name` (label -> (run, info, counters or None)) on
    `trials` fresh input sets against torch (poisoned output, every element; counters must
    be back to zero), then time the correct ones and cuBLAS in turn `rounds` times (CUDA-graph
    replays when `graph`, else plain launches). Appends a JSON row per variant to `rows`
    (failures too) and (shape, label, median ms, TFLOP/s, cuBLAS/ours) to `table`."""
    m, n, k = (int(v) for v in name.split("x"))
    variants = {}
    for label, (run, info, counters) in cands.items():
        try:
            err = 0.0
            for _trial in range(trials):
                a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                run(a, b, c)
                torch.cuda.synchronize()
                ref = a.float() @ b.float()
                err = max(err, ((c.float() - ref).norm() / ref.norm()).item())
            left = 0 if counters is None else int(counters.abs().sum().item())
            if not (err < 1e-2) or left:
                print(f"{name} {label}: WRONG rel err {err} counters {left}", flush=True)
                rows.append({"shape": name, "variant": label, "error": err, **info})
                continue
            variants[label] = (run, info, err)
        except Exception as exc:  # a failed variant is reported, the others go on
            print(f"{name} {label}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            rows.append({"shape": name, "variant": label, "failed": str(exc)[:500]})
    variants["cuBLAS"] = (lambda a, b, c: torch.matmul(a, b, out=c), {}, 0.0)
    sets = input_sets(m, n, k, torch)
    times = {v: [] for v in variants}
    for _round in range(rounds):  # alternate: each variant once per round, rotating inputs
        for label, (run, _, _) in variants.items():
            i = [0]

            def step(run=run, i=i):
                a, b, c = sets[i[0] % len(sets)]
                i[0] += 1
                run(a, b, c)

            if graph:
                ms = graph_ms(step, torch, triton)
            else:
                ms = triton.testing.do_bench(step, warmup=25, rep=100, return_mode="median")
            times[label].append(ms)
    blas = statistics.median(times["cuBLAS"])
    flops = 2.0 * m * n * k
    for label, (_, info, err) in variants.items():
        med = statistics.median(times[label])
        rows.append(
            {
                "shape": name,
                "variant": label,
                "ms": times[label],
                "median_ms": med,
                "tflops": flops / med / 1e9,
                "vs_cublas": blas / med,
                "error": err,
                **info,
            }
        )
        table.append((name, label, med, flops / med / 1e9, blas / med))
    print(f"{name}: done", flush=True)


def write_results(path: str, rows: list, rounds: int, graph: bool, torch, triton) -> None:
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "device": torch.cuda.get_device_name(0),
        "sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "commit": os.environ.get("ARGUS_COMMIT", ""),
        "triton": triton.__version__,
        "rounds": rounds,
        "graph": graph,
    }
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


def print_table(table: list) -> None:
    print(f"\n{'shape':18} {'variant':28} {'median ms':>10} {'TFLOP/s':>8} {'cuBLAS/ours':>11}")
    for name, label, med, tf, ratio in table:
        print(f"{name:18} {label:28} {med:10.4f} {tf:8.1f} {ratio:11.3f}")


def desc_launcher(launch, block_a, block_b, block_c=None, pass_c: bool = False):
    """`run(a, b, c)` calling `launch(da, db, dc_or_c)` with TMA descriptors of a, b (and c
    when `block_c` is given; else c itself), built once per input set; `pass_c` also
    passes c itself last (a kernel storing through both)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    lay = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    cache = {}

    def run(a, b, c):
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr())
        if key not in cache:
            cache[key] = (
                TensorDescriptor.from_tensor(a, list(block_a), lay),
                TensorDescriptor.from_tensor(b, list(block_b), lay),
                c if block_c is None else TensorDescriptor.from_tensor(c, list(block_c), lay),
            )
        launch(*cache[key], *((c,) if pass_c else ()))

    return run


def shipped_candidate(cfg: tuple, shape, sms: int, torch) -> dict:
    """{label: (run, info, flags)} of the shipped data-parallel schedule at `cfg`."""
    return {f"shipped {tile_label(cfg)}": make_runner(shape, cfg, False, sms, torch)}


def probe_args(doc: str, shapes, out_name: str, rounds: int, graph_default: bool, argv=None):
    """The probes' common command line: --compile-only, --rounds, --shapes, --out, and
    --graph (when plain launches are the default) or --plain (when graph replays are)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--rounds", type=int, default=rounds)
    if graph_default:
        ap.add_argument("--plain", dest="graph", action="store_false", help="plain launches")
    else:
        ap.add_argument("--graph", action="store_true", help="CUDA-graph replays of 20 calls")
    ap.add_argument("--shapes", default=",".join(shapes))
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), out_name))
    return ap, argv


def probe_main(
    doc: str, shapes, out_name: str, rounds: int, compile_only, build, argv=None, trials: int = 3
) -> int:
    """A probe's whole command line (`probe_args`, graph replays by default):
    `compile_only()` under --compile-only, else `run_shapes` with `build`."""
    ap, argv = probe_args(doc, shapes, out_name, rounds, True, argv)
    args = ap.parse_args(argv)
    if args.compile_only:
        return compile_only()
    return run_shapes(args, build, trials)


def run_shapes(args, build, trials: int = 3) -> int:
    """For each of `args.shapes`: `build(name, (m, n, k), sms, torch, rows)` gives the
    candidates (label -> (run, info, counters or None)); check and time them
    (`measure_shape`), write the JSON after each shape, print the table last."""
    import torch
    import triton

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, table = [], []
    for name in args.shapes.split(","):
        shape = tuple(int(v) for v in name.split("x"))
        cands = build(name, shape, sms, torch, rows)
        measure_shape(name, cands, args.rounds, args.graph, torch, triton, rows, table, trials)
        write_results(args.out, rows, args.rounds, args.graph, torch, triton)
    print_table(table)
    return 0


def compile_report(fn, sig: dict, consts: dict, warps: int) -> dict:
    """Cross-compile a probe kernel for sm_90 (no GPU): registers, spills, shared bytes, and
    the PTX (for callers that look for instructions in it)."""
    from argus_plugins.backends.hopper.cubin import report_fields
    from argus_plugins.backends.hopper.gluon import cross_compile

    out = cross_compile(fn, sig, consts, warps)
    rep = report_fields(out.asm["cubin"], out.metadata)
    return {**{k: rep[k] for k in ("registers", "spills", "shared_bytes")}, "ptx": out.asm["ptx"]}


def compile_kernel(cfg: tuple, pdl: int = 0, epi: int = 1) -> dict:
    """`gemm_streamk` at one (BM, BN, BK, STAGES, num_warps) cross-compiled for sm_90 (no
    GPU): `compile_report`'s registers, spills, shared bytes and PTX."""
    from argus_plugins.backends.hopper.gluon import nvmma_desc_type

    bm, bn, bk, stages, warps = cfg
    sig = {"a_desc": nvmma_desc_type("bf16", bm, bk), "b_desc": nvmma_desc_type("bf16", bk, bn)}
    sig["c_desc"] = nvmma_desc_type("bf16", bm, bn // epi)
    sig.update({"ws": "*fp32", "flags": "*i32"})
    sig.update({s: "i32" for s in ("M", "N", "K", "DP_TILES", "SK_ITERS")})
    consts = dict(BM=bm, BN=bn, BK=bk, STAGES=stages, GROUP=8, NUM_WARPS=warps, PDL=pdl, EPI=epi)
    return compile_report(gemm_streamk, sig, consts, warps)


def compile_config(cfg: tuple) -> dict:
    """Cross-compile one (BM, BN, BK, STAGES, num_warps) for sm_90 (no GPU): registers,
    spills and shared bytes from the cubin, and whether the PTX holds the fixup protocol
    (a release exchange publishing a partial, an acquire load polling for it)."""
    rep = compile_kernel(cfg)
    ptx = rep.pop("ptx")
    return {
        **rep,
        "release": "atom.global.gpu.release.exch" in ptx,
        "acquire": "ld.global.gpu.acquire" in ptx,
    }


def compile_only() -> int:
    """Cross-compile every configuration for sm_90 and print its report."""
    cfgs = sorted(set(SHAPES.values()) | {c for v in EXTRA.values() for c in v})
    for cfg in cfgs:
        t0 = time.perf_counter()
        print(f"{cfg}: {compile_config(cfg)} ({time.perf_counter() - t0:.1f} s)")
    return 0


def build(name, shape, sms, torch, rows):
    """The candidates of shape `name` (label -> (run, info, counters or None))."""
    cands = {}
    for cfg in [SHAPES[name], *EXTRA.get(name, [])]:
        for sk in (False, True):
            cands[f"{'SK' if sk else 'DP'} {tile_label(cfg)}"] = make_runner(
                shape, cfg, sk, sms, torch
            )
    return cands


def main(argv=None) -> int:
    return probe_main(__doc__, SHAPES, "streamk_probe.json", 5, compile_only, build, argv)


if __name__ == "__main__":
    sys.exit(main())
