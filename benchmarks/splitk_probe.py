"""Probe: does a split-K schedule lift the explicit-level GEMM on the M=128 shapes (#15)?

    python3 benchmarks/splitk_probe.py [--rounds 7] [--plain]   # on the H200
    python benchmarks/splitk_probe.py --compile-only            # CPU: cross-compile for sm_90

Why: at M=128 the shipped data-parallel kernel (`plugins/kernels/gemm/kernel_explicit.py`)
runs 128x4096x4096 as 128 tiles of 64x64, each CTA streaming a 64-row slice of A and a
64-column slice of B over the whole K: every CTA re-reads its half of A, so the SMs pull
~131 MB out of L2 for 34 MB of operands (A 64 MB + B 67 MB), and the kernel sits at ~14 us
where the operands take ~8 us at the DRAM bandwidth. Split-K cuts K instead: 128x128 tiles,
each split over SPLIT CTAs along K (32 tiles x 4 = 128 CTAs), each CTA reading A[:, its K
range] and B[its K range, its columns] once: ~66 MB out of L2. The price is the reduction:
each CTA writes its fp32 partial (64 KiB) to a workspace, announces it on the tile's
counter (release), waits until all SPLIT partials are announced (acquire), then sums its
own BM/SPLIT rows of the SPLIT partials and stores them as bf16 (every CTA of a tile
reduces a quarter: no CTA waits for one to reduce alone). A second counter counts the
CTAs done reading; the last resets both, so the next launch starts from zero. All CTAs
are resident at once (grid <= SMs, one CTA per SM), which the spin needs.

A hand-written Gluon kernel (the ring, loader and K-step loop of `streamk_probe.py`), checked
against torch (fresh random inputs, poisoned output, counters back to zero), then timed in
turn with the shipped data-parallel kernel and cuBLAS, as replays of a CUDA graph of 20
calls (`--plain`: plain launches). Table printed last; `--out` writes JSON.
"""

from __future__ import annotations

import sys

from streamk_probe import (
    _load_steps,
    _mma_steps,
    _tile_offsets,
    compile_report,
    desc_launcher,
    probe_main,
    ring_setup,
    ring_teardown,
    shipped_candidate,
)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _sk_mma(
    c_ptr, ws, cnt, M, N, K, a_ring, b_ring, ready, empty, BM: gl.constexpr,
    BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr,
    GROUP: gl.constexpr, NUM_WARPS: gl.constexpr,
):  # fmt: skip
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16]
    )
    u = gl.program_id(0)
    tile = u // SPLIT
    j = u % SPLIT
    KST = gl.cdiv(K, BK)
    num_tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    off_m, off_n = _tile_offsets(tile, M, N, BM, BN, GROUP)
    acc = gl.zeros((BM, BN), gl.float32, acc_layout)
    acc, it = _mma_steps(  # ring iterations from 0 (u * 0: a runtime int, not a constexpr)
        a_ring, b_ring, ready, empty, acc, u * 0, j * KST // SPLIT, (j + 1) * KST // SPLIT, STAGES
    )
    # publish this CTA's partial, then wait for the tile's other SPLIT - 1
    rr = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cc = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    gl.store(ws + u * (BM * BN) + rr[:, None] * BN + cc[None, :], acc)
    gl.thread_barrier()
    gl.atomic_add(cnt + tile, 1, sem="release", scope="gpu")
    while gl.atomic_add(cnt + tile, 0, sem="acquire", scope="gpu") < SPLIT:
        pass
    gl.thread_barrier()
    # reduce rows [j * RB, (j + 1) * RB) of the tile over its SPLIT partials
    RB: gl.constexpr = BM // SPLIT
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [NUM_WARPS, 1], [1, 0])
    r = gl.arange(0, RB, layout=gl.SliceLayout(1, blk))
    c = gl.arange(0, BN, layout=gl.SliceLayout(0, blk))
    offs = (j * RB + r)[:, None] * BN + c[None, :]
    total = gl.zeros((RB, BN), gl.float32, blk)
    for q in gl.static_range(SPLIT):
        total += gl.load(ws + (tile * SPLIT + q) * (BM * BN) + offs)
    rows = off_m + j * RB + r
    cols = off_n + c
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], total.to(gl.bfloat16), mask=mask)
    # the last CTA done reading resets the tile's counters for the next launch
    gl.thread_barrier()
    done = gl.atomic_add(cnt + num_tiles + tile, 1, sem="acq_rel", scope="gpu")
    if done == SPLIT - 1:
        gl.atomic_xchg(cnt + tile, 0, sem="relaxed", scope="gpu")
        gl.atomic_xchg(cnt + num_tiles + tile, 0, sem="relaxed", scope="gpu")


@gluon.jit
def _sk_load(
    a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty, BM: gl.constexpr, BN: gl.constexpr,
    BK: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr, GROUP: gl.constexpr,
):  # fmt: skip
    u = gl.program_id(0)
    j = u % SPLIT
    KST = gl.cdiv(K, BK)
    off_m, off_n = _tile_offsets(u // SPLIT, M, N, BM, BN, GROUP)
    _load_steps(
        a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, u * 0, j * KST // SPLIT,
        (j + 1) * KST // SPLIT, BK, STAGES,
    )  # fmt: skip


# fmt: off
@gluon.jit
def gemm_splitk(a_desc, b_desc, c_ptr, ws, cnt, M, N, K,
                BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                SPLIT: gl.constexpr, GROUP: gl.constexpr, NUM_WARPS: gl.constexpr):
    a_ring, b_ring, ready, empty = ring_setup(a_desc, BM, BN, BK, STAGES)
    gl.warp_specialize([
        (_sk_mma, (c_ptr, ws, cnt, M, N, K, a_ring, b_ring, ready, empty, BM, BN, BK, STAGES,
                   SPLIT, GROUP, NUM_WARPS)),
        (_sk_load, (a_desc, b_desc, M, N, K, a_ring, b_ring, ready, empty, BM, BN, BK, STAGES,
                    SPLIT, GROUP)),
    ], [1], [24])
    ring_teardown(ready, empty, STAGES)
# fmt: on


# (BM, BN, BK, STAGES, SPLIT, num_warps): L2->SM bytes at 128x4096x4096 in the comment
SK_CONFIGS = {
    "128x4096x4096": [
        (128, 128, 64, 5, 4, 4),  # 32 tiles x 4: ~66 MB
        (128, 128, 128, 3, 4, 4),
        (128, 64, 64, 6, 2, 4),  # 64 tiles x 2: ~98 MB
        (128, 256, 64, 3, 8, 8),  # 16 tiles x 8: ~50 MB
    ],
    "128x14336x4096": [
        (128, 256, 64, 3, 2, 8),  # 56 tiles x 2: 112 CTAs, A read 56x instead of 112x
        (128, 128, 64, 5, 1, 4),  # the shipped tile through the split-K code (SPLIT 1)
    ],
}
SHIPPED = {"128x4096x4096": (64, 64, 128, 5, 4), "128x14336x4096": (128, 128, 64, 5, 4)}


def make_sk_runner(shape, cfg, sms, torch):
    m, n, k = shape
    bm, bn, bk, stages, split, warps = cfg
    tiles = -(-m // bm) * -(-n // bn)
    if tiles * split > sms:
        raise ValueError(f"{tiles} tiles x SPLIT {split} > {sms} SMs: not all CTAs resident")
    ws = torch.empty(tiles * split * bm * bn, device="cuda", dtype=torch.float32)
    cnt = torch.zeros(2 * tiles, device="cuda", dtype=torch.int32)

    def launch(da, db, c):
        gemm_splitk[(tiles * split,)](
            da, db, c, ws, cnt, m, n, k, bm, bn, bk, stages, split, 8, warps, num_warps=warps
        )

    run = desc_launcher(launch, (bm, bk), (bk, bn))
    return run, {"tiles": tiles, "ctas": tiles * split}, cnt


def compile_only() -> int:
    from argus_plugins.backends.hopper.gluon import nvmma_desc_type

    for cfgs in SK_CONFIGS.values():
        for bm, bn, bk, stages, split, warps in cfgs:
            sig = {
                "a_desc": nvmma_desc_type("bf16", bm, bk),
                "b_desc": nvmma_desc_type("bf16", bk, bn),
                "c_ptr": "*bf16",
                "ws": "*fp32",
                "cnt": "*i32",
                **{s: "i32" for s in ("M", "N", "K")},
            }
            consts = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "SPLIT": split}
            consts.update(GROUP=8, NUM_WARPS=warps)
            rep = compile_report(gemm_splitk, sig, consts, warps)
            rep.pop("ptx")
            print(f"{(bm, bn, bk, stages, split, warps)}: {rep}")
    return 0


def build(name, shape, sms, torch, rows):
    """The candidates of shape `name` (label -> (run, info, counters or None))."""
    cands = shipped_candidate(SHIPPED[name], shape, sms, torch)
    for cfg in SK_CONFIGS[name]:
        label = f"splitK{cfg[4]} {cfg[0]}x{cfg[1]}x{cfg[2]} s{cfg[3]} w{cfg[5]}"
        try:
            cands[label] = make_sk_runner(shape, cfg, sms, torch)
        except ValueError as exc:  # a grid that cannot be resident: reported, not run
            print(f"{name} {label}: FAILED {exc}", flush=True)
            rows.append({"shape": name, "variant": label, "failed": str(exc)})
    return cands


def main(argv=None) -> int:
    return probe_main(__doc__, SK_CONFIGS, "splitk.json", 7, compile_only, build, argv)


if __name__ == "__main__":
    sys.exit(main())
