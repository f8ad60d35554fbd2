"""Attention forward at the explicit level for Hopper: an FA3-style warp-specialized kernel.

o[b, h] = softmax(q[b, h] k[b, g(h)]^T * scale) v[b, g(h)] and lse[b, h] (the natural
log-sum-exp of each row), q/k/v/o row-major [B, H(KV), S, D] in bf16 viewed as 2-D
[B * H * S, D] by their TMA descriptors, lse [B, H, S] fp32 by pointer; GQA maps query head
h to key/value head h // (H / HKV). Grid (cdiv(S, BM), B * H). A one-warp producer
partition loads the program's Q block once (`q_bar`) and then every K and V block by TMA
into two rings of STAGES stages (`k_ready`, `v_ready`). The consumers (`consumers=1`: one
8-warp partition whose two warpgroups run the BM rows in lockstep; `consumers=2`: two
4-warp partitions of BM/2 rows each, running independently, so one warpgroup's softmax
overlaps the other's wgmma) wait for K, run S = Q K^T by wgmma from shared memory, the
online softmax in registers (base 2, the scale folded into the exponent; only the blocks
that reach past SKV or, causal, past their first query row are masked), convert P to the
wgmma A-operand layout, wait for V, run O += P V with P from registers, and release the
stage (`kv_empty`, one arrival per consumer partition). The epilogue divides by the row
sums, stores O through shared memory by TMA (with two consumers through each one's Q
buffer, free by then, which leaves room for a third K/V stage at D128) and the lse rows.
Causal programs stop at their diagonal block (queries and keys aligned at the start:
S == SKV) and run the longest rows first (query block `cdiv(S, BM) - 1 - pid`), so the
last wave is made of short programs. S must be a multiple of BM (query rows of one head
must not spill into the next head's block); SKV is masked.

With `pingpong` (two consumers) the warpgroups take turns issuing their wgmmas (FA3's
inter-warpgroup schedule, two one-stage mbarriers): measured faster on the non-causal cases.

`build_cdna3` is the same computation for MI300X (gfx942): MFMA 32x32x8, Q and the K/V
blocks staged through LDS by buffer loads and generic stores between workgroup barriers,
P from registers (cross-compiled only: no MI300X here).

The ring protocol (with two consumers, both releases), the fragment tags of both MMAs (Q
and K agree on d; P's key index, which comes from the K block, agrees with the V block's
rows), the output rows of O and lse, and the shared-memory races are proved by
`plugins/verifiers/smt/explicit_ops.py`. Measured on the H200: docs/performance.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from argus_core.errors import PolicyError, choices_error
from argus_core.ir.explicit import (
    Blocked,
    ExplicitIRError,
    ExplicitKernel,
    MfmaAcc,
    SwizzledShared,
)
from argus_core.ir.expr import Sym
from argus_plugins.dsl.explicit.lang import Kernel, cdiv, emin, npid, pid, pid_y


def build(
    d: int = 128,
    causal: bool = False,
    stages: int = 2,
    consumers: int = 1,
    overlap: bool = False,
    pingpong: bool = False,
) -> ExplicitKernel:
    """The kernel for head dim `d`. `consumers` 1: one 8-warp partition whose two
    warpgroups run the BM rows in lockstep; 2: two 4-warp partitions (warpgroups) of BM/2
    rows each that run independently (one waits on a barrier or does its softmax while the
    other's wgmma runs), both releasing each K/V stage (`kv_empty` counts two arrivals);
    each stores its O through its own Q buffer (free after its last S wgmma), which leaves
    room for a third K/V stage at D128. `overlap` (with two consumers): FA3's intra-warpgroup
    pipelining: the producer's iteration `it` loads K block `it + 1` and V block `it` into
    stage `it % STAGES` (K block 0 once, into `k0_smem`); a consumer issues S_{j+1} = Q K^T
    and O += P_j V_j together, waits for S only (`WgmmaWait(1)`), runs the softmax of block
    j + 1 while the PV wgmma runs, then waits for it (keeping P_j's registers alive),
    releases the stage and rescales O. The last iteration's K block lies past the keys and
    is masked whole (one extra S per program). `pingpong` (with two consumers): FA3's
    inter-warpgroup schedule: the two warpgroups take turns issuing their wgmmas (two
    one-stage barriers `turn0`, `turn1`: a warpgroup waits for its turn, issues S (and, with
    `overlap`, PV), then hands the turn to the other), so one's softmax runs while the
    other's MMAs do instead of both contending for the tensor cores at once."""
    if d not in (64, 128):
        raise ValueError(f"invalid head dim {d!r}; valid choices: 64, 128")
    if consumers not in (1, 2):
        raise ValueError(f"invalid consumers {consumers!r}; valid choices: 1, 2")
    if overlap and consumers != 2:
        raise ValueError("overlap=True needs consumers=2")
    if pingpong and consumers != 2:
        raise ValueError("pingpong=True needs consumers=2")
    form = "" if consumers == 1 else "2o" if overlap else "2"
    form += "p" if pingpong else ""
    name = f"attn_fwd_ws{form}{'_causal' if causal else ''}"
    k = Kernel(name, family="attention", num_warps=8 if consumers == 1 else 4)
    k.meta(grid="(S // BM, B * H)", outputs=("o", "lse"), causal=causal)
    S, SKV, H, HKV = k.scalar("S"), k.scalar("SKV"), k.scalar("H"), k.scalar("HKV")
    BM, BN = k.const("BM", 128), k.const("BN", 128)
    k.programs(S // BM, None)  # query blocks, then the B * H heads
    k.require((S % BM).eq(0), "a head's last query block would spill into the next head's rows")
    rows = "BM" if consumers == 1 else "HM"
    HM = k.const("HM", 64) if consumers == 2 else BM
    k.const("D", d)
    STAGES = k.const("STAGES", stages)
    for desc, tensor, r in (
        ("q_desc", "q", rows),
        ("k_desc", "k", "BN"),
        ("v_desc", "v", "BN"),
        ("o_desc", "o", rows),
    ):
        k.desc(desc, tensor, (r, "D"))
    k.ptr("lse_ptr", "lse", dtype="fp32")
    q_bufs = ["q_smem"] if consumers == 1 else [f"q{w}_smem" for w in range(consumers)]
    for q in q_bufs:
        k.shared(q, (rows, "D"), 1, like="q_desc")
    k.shared("k_ring", ("BN", "D"), "STAGES", like="k_desc")
    k.shared("v_ring", ("BN", "D"), "STAGES", like="v_desc")
    if overlap:
        k.shared("k0_smem", ("BN", "D"), 1, like="k_desc")
    o_bufs = ["o_smem"] if consumers == 1 else q_bufs  # two consumers: O through their Q
    if consumers == 1:
        k.shared("o_smem", ("BM", "D"), 1, like="o_desc")
    k.barriers("q_bar", 1)
    if overlap:
        k.barriers("k0_bar", 1)
    k.barriers("k_ready", "STAGES")
    k.barriers("v_ready", "STAGES")
    k.barriers("kv_empty", "STAGES", count=consumers)
    if pingpong:  # turn{w}: warpgroup w may issue its MMAs (the other one arrives)
        k.barriers("turn0", 1)
        k.barriers("turn1", 1)
    m_blk = cdiv(S, BM) - 1 - pid if causal else pid  # causal: longest rows first
    n_kv = emin(cdiv((m_blk + 1) * BM, BN), cdiv(SKV, BN)) if causal else cdiv(SKV, BN)
    scale_log2 = math.log2(math.e) / math.sqrt(d)

    for w in range(consumers):
        sfx = "" if consumers == 1 else str(w)
        s_acc, o_acc, m_i, l_i = (f"{n}{sfx}" for n in ("s_acc", "o_acc", "m_i", "l_i"))
        warps = 8 if consumers == 1 else 4
        # the second warpgroup's registers (the default one gets what the load warp and it
        # leave of 512 per thread, Triton's setmaxnreg split): 240 keeps the overlapped
        # loop's two P operands and the next S without spills at D128
        regs = 0 if w == 0 else 240 if overlap else 232
        with k.partition(f"softmax{sfx}", warps=warps, regs=regs, default=w == 0):
            q_row = k.let("q_row", pid_y * S + m_blk * BM + w * HM)
            k.softmax_state(m_i, l_i, s_acc, rows)
            k.zero_acc(o_acc, rows, "D", warps=(warps, 1))
            k.wait("q_bar", 0, 0)
            row0 = m_blk * BM + w * HM
            if overlap:
                _consume_overlapped(k, w, q_bufs[w], rows, row0, scale_log2, n_kv, causal, pingpong)
            else:
                _consume(k, w, consumers, q_bufs[w], rows, row0, scale_log2, n_kv, causal, pingpong)
            k.normalize_store(o_bufs[w], o_acc, l_i)
            k.fence_async_shared()
            k.tma_store("o_desc", (q_row, 0), o_bufs[w])
            k.store_wait(0)
            k.store_lse("lse_ptr", m_i, l_i, s_acc, q_row)

    with k.partition("load", warps=1, regs=24):
        q_row = k.let("q_row", pid_y * S + m_blk * BM)
        kv_row = k.let("kv_row", (pid_y // H * HKV + pid_y % H // (H // HKV)) * SKV)
        k.expect("q_bar", 0, *["q_desc"] * consumers)
        for w, q in enumerate(q_bufs):
            k.tma_load("q_desc", (q_row + w * HM if w else q_row, 0), q, 0, "q_bar")
        if overlap:  # K block 0 once; iteration j then brings K block j + 1 with V block j
            k.expect("k0_bar", 0, "k_desc")
            k.tma_load("k_desc", (kv_row, 0), "k0_smem", 0, "k0_bar")
        with k.loop("j", 0, n_kv, counter="it") as (j, it):
            s = it % STAGES
            k.wait("kv_empty", s, (it // STAGES + 1) % 2)
            k.expect("k_ready", s, "k_desc")
            k_block = j + 1 if overlap else j
            k.tma_load("k_desc", (kv_row + k_block * BN, 0), "k_ring", s, "k_ready")
            k.expect("v_ready", s, "v_desc")
            k.tma_load("v_desc", (kv_row + j * BN, 0), "v_ring", s, "v_ready")
    return k.build()


def build_persistent(d: int = 128, stages: int = 2, pingpong: bool = False) -> ExplicitKernel:
    """The non-causal kernel with two consumer warpgroups on a persistent grid: one CTA per
    SM walks the (query block, head) tiles `pid, pid + npid, ...` (the query blocks of one
    head adjacent, so concurrent CTAs share its K and V in L2), so no SM idles between
    tiles: the K/V ring's counter `it` runs on across tiles (the load warp fetches the next
    tile's first blocks while the consumers finish this one) and Q is a two-stage ring of
    its own over the tile counter `ti` (stage `ti % 2`, `q_bar` completing phase
    `(ti // 2) % 2`; each consumer releases it on `q_empty` once its tile's loop is done,
    two arrivals), so the next tile's Q arrives during this one. Each consumer stores O
    through a buffer of its own (`o0_smem`, `o1_smem`: the TMA store of one tile is waited
    for before the next tile's O is written there). Shared memory at D128, 2 K/V stages:
    Q 64 KiB + O 32 KiB + K/V 128 KiB = 224 KiB."""
    if d not in (64, 128):
        raise ValueError(f"invalid head dim {d!r}; valid choices: 64, 128")
    name = f"attn_fwd_ws2{'p' if pingpong else ''}_persistent"
    k = Kernel(name, family="attention", num_warps=4)
    k.meta(grid="(min(NUM_SMS, cdiv(S, BM) * NH),)", outputs=("o", "lse"), causal=False)
    S, SKV, H, HKV = k.scalar("S"), k.scalar("SKV"), k.scalar("H"), k.scalar("HKV")
    NH = k.scalar("NH")  # B * H: the (batch, query head) pairs
    BM, BN, HM = k.const("BM", 128), k.const("BN", 128), k.const("HM", 64)
    k.require((S % BM).eq(0), "a head's last query block would spill into the next head's rows")
    k.const("D", d)
    STAGES = k.const("STAGES", stages)
    for desc, tensor, r in (
        ("q_desc", "q", "HM"),
        ("k_desc", "k", "BN"),
        ("v_desc", "v", "BN"),
        ("o_desc", "o", "HM"),
    ):
        k.desc(desc, tensor, (r, "D"))
    k.ptr("lse_ptr", "lse", dtype="fp32")
    for w in range(2):
        k.shared(f"q{w}_smem", ("HM", "D"), 2, like="q_desc")
        k.shared(f"o{w}_smem", ("HM", "D"), 1, like="o_desc")
    k.shared("k_ring", ("BN", "D"), "STAGES", like="k_desc")
    k.shared("v_ring", ("BN", "D"), "STAGES", like="v_desc")
    k.barriers("q_bar", 2)
    k.barriers("q_empty", 2, count=2)
    k.barriers("k_ready", "STAGES")
    k.barriers("v_ready", "STAGES")
    k.barriers("kv_empty", "STAGES", count=2)
    if pingpong:
        k.barriers("turn0", 1)
        k.barriers("turn1", 1)
    num_m = cdiv(S, BM)
    n_kv = cdiv(SKV, BN)
    scale_log2 = math.log2(math.e) / math.sqrt(d)

    for w in range(2):
        with k.partition(f"softmax{w}", warps=4, regs=0 if w == 0 else 232, default=w == 0):
            with k.loop("tile", pid, num_m * NH, npid, counter="ti") as (tile, ti):
                m_blk = tile % num_m
                q_row = k.let("q_row", tile // num_m * S + m_blk * BM + w * HM)
                k.softmax_state(f"m_i{w}", f"l_i{w}", f"s_acc{w}", "HM")
                k.zero_acc(f"o_acc{w}", "HM", "D", warps=(4, 1))
                k.wait("q_bar", ti % 2, ti // 2 % 2)
                row0 = m_blk * BM + w * HM
                _consume(
                    k, w, 2, f"q{w}_smem", "HM", row0, scale_log2, n_kv, False, pingpong,
                    q_stage=ti % 2,
                )  # fmt: skip
                k.arrive("q_empty", ti % 2)  # every S of this tile has completed
                k.store_wait(0)  # the previous tile's O store has read o{w}_smem
                k.normalize_store(f"o{w}_smem", f"o_acc{w}", f"l_i{w}")
                k.fence_async_shared()
                k.tma_store("o_desc", (q_row, 0), f"o{w}_smem")
                k.store_lse("lse_ptr", f"m_i{w}", f"l_i{w}", f"s_acc{w}", q_row)
            k.store_wait(0)

    with k.partition("load", warps=1, regs=24):
        with k.loop("tile", pid, num_m * NH, npid, counter="ti") as (tile, ti):
            head = tile // num_m
            q_row = k.let("q_row", head * S + tile % num_m * BM)
            kv_row = k.let("kv_row", (head // H * HKV + head % H // (H // HKV)) * SKV)
            k.wait("q_empty", ti % 2, (ti // 2 + 1) % 2)
            k.expect("q_bar", ti % 2, "q_desc", "q_desc")
            k.tma_load("q_desc", (q_row, 0), "q0_smem", ti % 2, "q_bar")
            k.tma_load("q_desc", (q_row + HM, 0), "q1_smem", ti % 2, "q_bar")
            with k.loop("j", 0, n_kv, counter="it") as (j, it):
                s = it % STAGES
                k.wait("kv_empty", s, (it // STAGES + 1) % 2)
                k.expect("k_ready", s, "k_desc")
                k.tma_load("k_desc", (kv_row + j * BN, 0), "k_ring", s, "k_ready")
                k.expect("v_ready", s, "v_desc")
                k.tma_load("v_desc", (kv_row + j * BN, 0), "v_ring", s, "v_ready")
    return k.build()


def _consume(
    k: Kernel,
    w: int,
    consumers: int,
    q: str,
    rows: str,
    row0: Any,
    scale_log2: float,
    n_kv: Any,
    causal: bool,
    pingpong: bool = False,
    q_stage: Any = 0,
) -> None:
    """Consumer `w`'s main loop: S, its softmax, then O += P V, each waited for (with
    `pingpong`, S is issued in this warpgroup's turn); Q is stage `q_stage` of `q`."""
    SKV, BN, STAGES = Sym("SKV", "shape", 1), Sym("BN", "const", 1), Sym("STAGES", "const", 1)
    sfx = "" if consumers == 1 else str(w)
    s_acc, o_acc, m_i, l_i, p = (f"{n}{sfx}" for n in ("s_acc", "o_acc", "m_i", "l_i", "p"))
    warps = 8 if consumers == 1 else 4
    with k.loop("j", 0, n_kv, counter="it") as (j, it):
        s = it % STAGES
        k.wait("k_ready", s, it // STAGES % 2)
        k.zero_acc(s_acc, rows, "BN", warps=(warps, 1))
        if pingpong:
            _take_turn(k, w, it)
        k.wgmma(s_acc, q, q_stage, "k_ring", s, b_trans=True, use_acc=False)
        if pingpong:
            k.arrive(f"turn{1 - w}", 0)
        k.wgmma_wait(s_acc, 0)
        k.online_softmax(s_acc, m_i, l_i, o_acc, p, scale_log2, row0, j * BN, SKV, causal)
        k.wait("v_ready", s, it // STAGES % 2)
        k.wgmma(o_acc, p, None, "v_ring", s)
        k.wgmma_wait(o_acc, 0)
        k.arrive("kv_empty", s)


def _take_turn(k: Kernel, w: int, it: Any) -> None:
    """Wait for warpgroup `w`'s turn at iteration `it`: the other warpgroup's arrival after
    issuing its MMAs of iteration `it` (w = 1) or `it - 1` (w = 0; a fresh barrier passes
    parity 1, so warpgroup 0 starts)."""
    k.wait(f"turn{w}", 0, (it + 1) % 2 if w == 0 else it % 2)


def _consume_overlapped(
    k: Kernel,
    w: int,
    q: str,
    rows: str,
    row0: Any,
    scale_log2: float,
    n_kv: Any,
    causal: bool,
    pingpong: bool = False,
) -> None:
    """Consumer `w`'s main loop with the next S overlapping this softmax (see `build`)."""
    SKV, BN, STAGES = Sym("SKV", "shape", 1), Sym("BN", "const", 1), Sym("STAGES", "const", 1)
    s_acc, o_acc, m_i, l_i, p = (f"{n}{w}" for n in ("s_acc", "o_acc", "m_i", "l_i", "p"))
    k.wait("k0_bar", 0, 0)
    k.zero_acc(s_acc, rows, "BN", warps=(4, 1))
    k.wgmma(s_acc, q, 0, "k0_smem", 0, b_trans=True, use_acc=False)
    k.wgmma_wait(s_acc, 0)
    k.online_softmax(s_acc, m_i, l_i, o_acc, p, scale_log2, row0, 0, SKV, causal)
    with k.loop("j", 0, n_kv, counter="it") as (j, it):
        s = it % STAGES
        k.wait("k_ready", s, it // STAGES % 2)
        k.zero_acc(s_acc, rows, "BN", warps=(4, 1))
        if pingpong:
            k.wait("v_ready", s, it // STAGES % 2)
            _take_turn(k, w, it)
        k.wgmma(s_acc, q, 0, "k_ring", s, b_trans=True, use_acc=False)  # S of block j + 1
        if not pingpong:
            k.wait("v_ready", s, it // STAGES % 2)
        k.wgmma(o_acc, p, None, "v_ring", s)  # O += P_j V_j
        if pingpong:
            k.arrive(f"turn{1 - w}", 0)
        k.wgmma_wait(s_acc, 1)  # S done; the PV wgmma may still run
        k.online_softmax(
            s_acc, m_i, l_i, o_acc, f"pn{w}", scale_log2, row0, (j + 1) * BN, SKV, causal,
            alpha=f"alpha{w}",
        )  # fmt: skip
        k.wgmma_wait(o_acc, 0, keep=(p,))
        k.arrive("kv_empty", s)
        k.rescale_acc(o_acc, f"alpha{w}")
        k.move(p, f"pn{w}")


def build_cdna3(d: int = 128, causal: bool = False) -> ExplicitKernel:
    """The attention forward for MI300X (gfx942) at the explicit level: one 4-warp program
    per (query block, head), grid (S / BM, B * H), MFMA 32x32x8 with the warps stacked on
    the rows (each warp 32 query rows). The Q block is buffer-loaded once and stored to
    LDS; each K/V step buffer-loads the K and V blocks into blocked registers (issued before
    the barrier so their latency overlaps the previous step's MFMAs), passes a workgroup
    barrier (the previous step's MFMAs have read the single K/V stage), stores them to LDS
    (swizzled), passes a second barrier, runs S = Q K^T by MFMA (K read transposed from
    LDS), the online softmax in registers (P converted to the A dot-operand layout), and
    O += P V by MFMA with P from registers. The epilogue divides O by the row sums in
    place and buffer-stores it and the lse rows. q/k/v/o are [B, H(KV), S, D] bf16 by
    pointer (row stride D), lse [B, H, S] fp32; GQA as on Hopper; causal: S == SKV, the
    longest rows first. Unmasked buffer loads: S and SKV multiples of BM and BN.
    LDS: Q (BM x D) + K and V (BN x D each), 48 KiB at D=128, BM=128, BN=32 (of 64 KiB)."""
    if d not in (64, 128):
        raise ValueError(f"invalid head dim {d!r}; valid choices: 64, 128")
    k = Kernel(f"attn_fwd_cdna3{'_causal' if causal else ''}", family="attention", num_warps=4)
    k.meta(grid="(S // BM, B * H)", outputs=("o", "lse"), causal=causal)
    S, SKV, H, HKV = k.scalar("S"), k.scalar("SKV"), k.scalar("H"), k.scalar("HKV")
    BM, BN = k.const("BM", 128), k.const("BN", 32 if d == 128 else 64)
    k.programs(S // BM, None)  # query blocks, then the B * H heads
    k.require((S % BM).eq(0), "a head's last query block would spill into the next head's rows")
    D = k.const("D", d)
    for name, tensor in (("q_ptr", "q"), ("k_ptr", "k"), ("v_ptr", "v"), ("o_ptr", "o")):
        k.ptr(name, tensor)
    k.ptr("lse_ptr", "lse", dtype="fp32")
    lds = SwizzledShared(8, 1, 8, (1, 0))
    k.shared("q_lds", ("BM", "D"), 1, like="q_ptr", layout=lds)
    k.shared("k_lds", ("BN", "D"), 1, like="k_ptr", layout=lds)
    k.shared("v_lds", ("BN", "D"), 1, like="v_ptr", layout=lds)
    cols = min(d // 8, 64)
    blk = Blocked((1, 8), (64 // cols, cols), (4, 1), (1, 0))
    mfma = MfmaAcc((32, 32, 8), (4, 1), 4, 4)  # k_width 4: bf16 v_mfma_f32_32x32x8
    m_blk = cdiv(S, BM) - 1 - pid if causal else pid
    n_kv = emin(cdiv((m_blk + 1) * BM, BN), cdiv(SKV, BN)) if causal else cdiv(SKV, BN)
    scale_log2 = math.log2(math.e) / math.sqrt(d)
    with k.partition("main", default=True):
        q_row = k.let("q_row", pid_y * S + m_blk * BM)
        kv_row = k.let("kv_row", (pid_y // H * HKV + pid_y % H // (H // HKV)) * SKV)
        k.load_tile("q_regs", "q_ptr", (q_row, 0), D, ("BM", "D"), blk)
        k.store_regs("q_lds", "q_regs")
        k.softmax_state("m_i", "l_i", "s_acc", "BM")
        k.zero_acc("o_acc", "BM", "D", layout=mfma)
        with k.loop("j", 0, n_kv, counter="it") as (j, it):
            k.load_tile("k_regs", "k_ptr", (kv_row + j * BN, 0), D, ("BN", "D"), blk)
            k.load_tile("v_regs", "v_ptr", (kv_row + j * BN, 0), D, ("BN", "D"), blk)
            k.barrier()  # the previous step's MFMAs have read k_lds and v_lds (and Q stored)
            k.store_regs("k_lds", "k_regs")
            k.store_regs("v_lds", "v_regs")
            k.barrier()  # the K and V stores are visible to every warp
            k.zero_acc("s_acc", "BM", "BN", layout=mfma)
            k.mfma("s_acc", "q_lds", 0, "k_lds", 0, b_trans=True)
            k.online_softmax(
                "s_acc", "m_i", "l_i", "o_acc", "p", scale_log2, m_blk * BM, j * BN, SKV, causal
            )
            k.mfma("o_acc", "p", None, "v_lds", 0)
        k.normalize_store("o_acc", "o_acc", "l_i")
        k.store_tile("o_ptr", "o_acc", (q_row, 0), D)
        k.store_lse("lse_ptr", "m_i", "l_i", "s_acc", q_row)
    return k.build()


# the build knobs a `level: explicit` policy may set and their values (Hopper): consumer
# partitions, 1 (two lockstep warpgroups) or 2 (two independent warpgroups, the default)
# `overlap` 1 (with consumers=2): the next S overlaps this softmax (FA3's intra-warpgroup
# pipelining; verified and cross-compiled, not yet timed on a GPU)
# `pingpong` 1 (with consumers=2): the two warpgroups take turns issuing their wgmmas
# `persistent` 1 (with consumers=2, non-causal): `build_persistent`, one CTA per SM over the
# (query block, head) tiles, Q a two-stage ring
KNOBS: dict[str, tuple[int, ...]] = {
    "consumers": (1, 2),
    "overlap": (0, 1),
    "pingpong": (0, 1),
    "persistent": (0, 1),
}


def for_policy(
    knobs: dict[str, Any], tiles: dict[str, int], target: str, shape: dict[str, int]
) -> ExplicitKernel:
    """The explicit attention for `target` at `shape` (its D and CAUSAL pick the kernel),
    constexprs bound from the policy's tiles (BM, BN, STAGES). PolicyError naming a target,
    knob, shape or tile the kernel does not take."""
    targets = ("hopper-gluon", "cdna3-gluon")
    if target not in targets:
        raise PolicyError(choices_error("explicit attention target", target, targets))
    if target == "cdna3-gluon":
        return _for_cdna3(knobs, tiles, shape)
    for name, value in knobs.items():
        if name not in KNOBS:
            raise PolicyError(
                f"{target}: " + choices_error("explicit attention option", name, tuple(KNOBS))
            )
        if value not in KNOBS[name]:
            raise PolicyError(f"{target}: " + choices_error(name, value, KNOBS[name]))
    if shape.get("VARLEN"):
        raise PolicyError(f"{target}: the explicit attention has no varlen form (VARLEN=1)")
    d = int(shape.get("D", 128))
    if d not in (64, 128):
        raise PolicyError(
            f"{target}: " + choices_error("explicit attention head dim D", d, (64, 128))
        )
    consumers, overlap = int(knobs.get("consumers", 2)), bool(knobs.get("overlap", 0))
    if overlap and consumers != 2:
        raise PolicyError(f"{target}: overlap=1 needs consumers=2, got consumers={consumers}")
    pingpong = bool(knobs.get("pingpong", 0))
    if pingpong and consumers != 2:
        raise PolicyError(f"{target}: pingpong=1 needs consumers=2, got consumers={consumers}")
    persistent = bool(knobs.get("persistent", 0))
    if persistent and (consumers != 2 or overlap or shape.get("CAUSAL", 0)):
        raise PolicyError(
            f"{target}: persistent=1 is the non-causal kernel with two consumers and no "
            f"overlap; got consumers={consumers} overlap={int(overlap)} "
            f"CAUSAL={int(shape.get('CAUSAL', 0))} (valid: persistent=0 for these)"
        )
    if persistent:
        kernel = build_persistent(d, int(tiles.get("STAGES", 2)), pingpong)
    else:
        kernel = build(
            d, bool(shape.get("CAUSAL", 0)), int(tiles.get("STAGES", 2)), consumers, overlap,
            pingpong,
        )  # fmt: skip
    try:
        return kernel.with_consts(**tiles)
    except ExplicitIRError as exc:
        raise PolicyError(f"{target}: explicit attention tiles: {exc}") from None


def _for_cdna3(
    knobs: dict[str, Any], tiles: dict[str, int], shape: dict[str, int]
) -> ExplicitKernel:
    target = "cdna3-gluon"
    if knobs:
        raise PolicyError(
            f"{target}: the CDNA3 explicit attention has no build options, got "
            f"{sorted(knobs)}; valid choices: none (tiles BM, BN only)"
        )
    if shape.get("VARLEN"):
        raise PolicyError(f"{target}: the explicit attention has no varlen form (VARLEN=1)")
    d = int(shape.get("D", 128))
    if d not in (64, 128):
        raise PolicyError(
            f"{target}: " + choices_error("explicit attention head dim D", d, (64, 128))
        )
    kernel = build_cdna3(d, bool(shape.get("CAUSAL", 0)))
    try:
        return kernel.with_consts(**tiles)
    except ExplicitIRError as exc:
        raise PolicyError(f"{target}: explicit attention tiles: {exc}") from None


def launcher(kernel: ExplicitKernel, source: str) -> Callable[[dict[str, Any]], None]:
    """A callable running the lowered `kernel` on the attention family's GPU inputs (q, k,
    v, o [B, H, S, D] viewed 2-D by TMA descriptors on Hopper, by pointers on CDNA3; lse
    [B, H, S] by pointer), grid (S / BM, B * H), or one program per SM (at most one per
    tile) for the persistent kernel. UnsupportedShape for inputs it cannot take."""
    from argus_core.evaluate.explicit_check import UnsupportedShape
    from argus_core.lowering.gluon import load_entry

    entry = load_entry(kernel, source)
    consts = dict(kernel.consts)
    descs: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def run(inputs: dict[str, Any]) -> None:
        import torch
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        q, k, v, o = inputs["q"], inputs["k"], inputs["v"], inputs["o"]
        b, h, s, d = q.shape
        if q.dtype != torch.bfloat16:
            raise UnsupportedShape(f"the explicit attention is bf16 only, not {q.dtype}")
        if d != consts["D"] or s % consts["BM"] or bool(inputs["causal"]) != kernel.meta["causal"]:
            raise UnsupportedShape(
                f"built for D={consts['D']}, S a multiple of BM={consts['BM']}, causal="
                f"{kernel.meta['causal']}; got D={d} S={s} causal={inputs['causal']}"
            )
        if kernel.meta["causal"] and k.shape[2] != s:
            raise UnsupportedShape(
                f"the causal kernel aligns queries and keys at the start: S == SKV, got "
                f"S={s} SKV={k.shape[2]}"
            )
        if not kernel.descs and k.shape[2] % consts["BN"]:  # CDNA3: unmasked buffer loads
            raise UnsupportedShape(
                f"the CDNA3 kernel needs SKV a multiple of BN={consts['BN']}, got {k.shape[2]}"
            )
        key = tuple(t.data_ptr() for t in (q, k, v, o))
        if kernel.descs and key not in descs:
            made = []
            for t, name in ((q, "q_desc"), (k, "k_desc"), (v, "v_desc"), (o, "o_desc")):
                desc = kernel.desc(name)
                lay = gl.NVMMASharedLayout(
                    swizzle_byte_width=desc.layout.swizzle_bytes, element_bitwidth=16, rank=2
                )
                block = [consts[desc.block[0]], d]
                made.append(TensorDescriptor.from_tensor(t.view(-1, d), block, lay))
            descs[key] = tuple(made)
        grid = (s // consts["BM"], b * h)
        extra: tuple[int, ...] = ()
        if "NH" in kernel.scalars:  # persistent: one program per SM over the tiles
            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            grid, extra = (min(sms, s // consts["BM"] * b * h),), (b * h,)
        ptrs = [inputs[p.tensor] for p in kernel.ptrs]
        entry[grid](
            *descs.get(key, ()), *ptrs, s, k.shape[2], h, k.shape[1], *extra, **consts,
            num_warps=kernel.num_warps,
        )  # fmt: skip

    return run
