"""The GEMM at the explicit level: a warp-specialized persistent kernel for Hopper.

C[M, N] = A[M, K] @ B[K, N] (row-major, bf16/fp16, fp32 accumulation). One CTA per SM
walks the output tiles `pid, pid + npid, ...` (row-major tile order). A one-warp producer
partition loads the A and B blocks of every K step by TMA into a ring of `STAGES` shared
stages; the default partition (one warpgroup) waits for each stage, issues the warpgroup
MMA from shared memory, releases the stage, and writes each finished tile through a
shared buffer with a TMA store. Ring protocol (the verifier proves it, see
`plugins/verifiers/smt/explicit_ops.py`): the inner-loop iteration counter `it` counts
K steps across tiles; iteration `it` uses stage `it % STAGES`; its write completes phase
`(it // STAGES) % 2` of `ready[stage]`, and the producer waits for the release of
iteration `it - STAGES`, phase `(it // STAGES + 1) % 2` of `empty[stage]` (which a fresh
barrier passes in the first round).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from argus_core.errors import PolicyError, choices_error
from argus_core.ir import explicit as x
from argus_core.ir.explicit import ExplicitKernel
from argus_plugins.dsl.explicit.lang import Kernel, cdiv, emin, npid, pid


def build(num_warps: int = 4, mma_in_flight: int = 1, column_stride: int = 0) -> ExplicitKernel:
    """The kernel; `num_warps` 4 gives one consumer warpgroup, 8 two (each 64 rows of the
    BM tile; needed for BN=256, whose fp32 accumulator one warpgroup cannot hold).
    `mma_in_flight` 1 keeps one wgmma running while the next is issued: iteration `it`
    releases the stage of iteration `it - 1` (not at a tile's first K step) and the last
    stage of each tile is released after the loop; 0 waits for each wgmma and releases its
    own stage.

    `column_stride` 1: overlapping column tiles. Column tile j starts at column `j * NS`
    (constexpr `NS` <= BN, a multiple of 8): it loads and multiplies BN columns of B and
    stores only its first NS, by masked 16-byte stores (no c_smem buffer and no TMA box,
    whose widths are powers of two). A grid of fewer tiles than SMs fills them:
    128x14336x4096 is 112 tiles of 128x128 on 132 SMs, 128 tiles at NS = 112 (the extra
    16 columns a tile loads are L2 hits, its neighbour loads them in the same wave).
    `column_tiles` picks NS for a shape. Measured on an H100: no faster there (each CTA
    still reads its 1 MiB of A and of B; docs/performance.md, 2026-12-06)."""
    if num_warps not in (4, 8):
        raise ValueError(f"invalid num_warps {num_warps!r}; valid choices: 4, 8")
    if mma_in_flight not in (0, 1):
        raise ValueError(f"invalid mma_in_flight {mma_in_flight!r}; valid choices: 0, 1")
    if column_stride not in (0, 1):
        raise ValueError(f"invalid column_stride {column_stride!r}; valid choices: 0, 1")
    k = Kernel("gemm_ws_persistent", family="gemm", num_warps=num_warps)
    step = "NS" if column_stride else "BN"
    k.meta(grid=f"(min(NUM_SMS, cdiv(M, BM) * cdiv(N, {step})),)", outputs=("c",))
    M, N, K = k.scalar("M"), k.scalar("N"), k.scalar("K")
    BM, BN, BK = k.const("BM", 128), k.const("BN", 128), k.const("BK", 64)
    STAGES, GROUP = k.const("STAGES", 4), k.const("GROUP", 8)
    NS = k.const("NS", 128) if column_stride else BN
    k.desc("a_desc", "a", ("BM", "BK"))
    k.desc("b_desc", "b", ("BK", "BN"))
    if column_stride:
        k.ptr("c_ptr", "c")
    else:
        k.desc("c_desc", "c", ("BM", "BN"))
    k.shared("a_ring", ("BM", "BK"), "STAGES", like="a_desc")
    k.shared("b_ring", ("BK", "BN"), "STAGES", like="b_desc")
    if not column_stride:
        k.shared("c_smem", ("BM", "BN"), 1, like="c_desc")
    k.barriers("ready", "STAGES")
    k.barriers("empty", "STAGES")
    num_m, num_n = cdiv(M, BM), cdiv(N, NS)
    num_tiles = num_m * num_n
    k_steps = cdiv(K, BK)

    def tile_offsets(tile):
        # grouped order: GROUP row-blocks sweep the columns together (L2 reuse of B)
        first = k.let("first_m", tile // (GROUP * num_n) * GROUP)
        rows = k.let("group_rows", emin(num_m - first, GROUP))
        local = k.let("local", tile % (GROUP * num_n))
        return k.let("off_m", (first + local % rows) * BM), k.let("off_n", local // rows * NS)

    with k.partition("mma", warps=num_warps, default=True):
        with k.loop("tile", pid, num_tiles, npid) as tile:
            off_m, off_n = tile_offsets(tile)
            k.zero_acc("acc", "BM", "BN", warps=(num_warps, 1))
            with k.loop("kk", 0, k_steps, counter="it") as (kk, it):
                s = it % STAGES
                k.wait("ready", s, it // STAGES % 2)
                k.wgmma("acc", "a_ring", s, "b_ring", s)
                k.wgmma_wait("acc", mma_in_flight)
                if mma_in_flight:  # the previous iteration's wgmma is done: free its stage
                    k.arrive("empty", (it + STAGES - 1) % STAGES, pred=kk > 0)
                else:
                    k.arrive("empty", s)
            if mma_in_flight:
                k.wgmma_wait("acc", 0)
                k.arrive("empty", (it + STAGES - 1) % STAGES)  # the tile's last stage
            if column_stride:  # the tile's first NS columns, inside the tensor
                k.store_tile("c_ptr", "acc", (off_m, off_n), N, cols=NS, limits=(M, N))
            else:
                k.store_wait(0)  # the previous tile's TMA store has finished reading c_smem
                k.store_shared("c_smem", "acc")
                k.fence_async_shared()
                k.tma_store("c_desc", (off_m, off_n), "c_smem")
        if not column_stride:
            k.store_wait(0)

    with k.partition("load", warps=1, regs=24):
        with k.loop("tile", pid, num_tiles, npid) as tile:
            off_m, off_n = tile_offsets(tile)
            with k.loop("kk", 0, k_steps, counter="it") as (kk, it):
                s = it % STAGES
                k.wait("empty", s, (it // STAGES + 1) % 2)
                k.expect("ready", s, "a_desc", "b_desc")
                k.tma_load("a_desc", (off_m, kk * BK), "a_ring", s, "ready")
                k.tma_load("b_desc", (kk * BK, off_n), "b_ring", s, "ready")
    return k.build()


def build_cdna3(lds_stages: int = 2) -> ExplicitKernel:
    """The GEMM for MI300X (gfx942) at the explicit level: one tile per loop step of a
    persistent grid, 4 warps (2x2 over the tile) of MFMA 16x16x16. Each K step buffer-loads
    the A and B blocks into blocked register layouts, stores them to LDS stage
    `it % lds_stages` (swizzled), passes a workgroup barrier, and runs the MFMAs from that
    stage. With two stages one barrier per step suffices: the stage a step writes was last
    read two steps earlier, before the previous step's barrier. Unmasked buffer loads and
    stores: M, N, K must be multiples of BM, BN, BK."""
    if lds_stages not in (1, 2):
        raise ValueError(f"invalid lds_stages {lds_stages!r}; valid choices: 1, 2")
    k = Kernel("gemm_cdna3", family="gemm")
    k.meta(grid="(min(NUM_CUS, cdiv(M, BM) * cdiv(N, BN)),)", outputs=("c",))
    M, N, K = k.scalar("M"), k.scalar("N"), k.scalar("K")
    BM, BN, BK = k.const("BM", 128), k.const("BN", 128), k.const("BK", 64)
    GROUP = k.const("GROUP", 8)
    k.ptr("a_ptr", "a")
    k.ptr("b_ptr", "b")
    k.ptr("c_ptr", "c")
    k.shared(
        "a_lds", ("BM", "BK"), lds_stages, like="a_ptr", layout=x.SwizzledShared(8, 1, 8, (1, 0))
    )
    k.shared(
        "b_lds", ("BK", "BN"), lds_stages, like="b_ptr", layout=x.SwizzledShared(8, 1, 8, (0, 1))
    )
    blk_a = x.Blocked((1, 8), (8, 8), (4, 1), (1, 0))
    blk_b = x.Blocked((8, 1), (8, 8), (1, 4), (0, 1))
    acc_layout = x.MfmaAcc((16, 16, 16), (2, 2), 4, 4)
    num_m, num_n = cdiv(M, BM), cdiv(N, BN)
    with k.partition("main", default=True):
        with k.loop("tile", pid, num_m * num_n, npid) as tile:
            first = k.let("first_m", tile // (GROUP * num_n) * GROUP)
            rows = k.let("group_rows", emin(num_m - first, GROUP))
            local = k.let("local", tile % (GROUP * num_n))
            off_m = k.let("off_m", (first + local % rows) * BM)
            off_n = k.let("off_n", local // rows * BN)
            k.zero_acc("acc", "BM", "BN", layout=acc_layout)
            with k.loop("kk", 0, cdiv(K, BK), counter="it") as (kk, it):
                s = it % lds_stages
                k.load_tile("a_regs", "a_ptr", (off_m, kk * BK), K, ("BM", "BK"), blk_a)
                k.load_tile("b_regs", "b_ptr", (kk * BK, off_n), N, ("BK", "BN"), blk_b)
                if lds_stages == 1:
                    k.barrier()  # the previous step's MFMAs have read the only stage
                k.store_regs("a_lds", "a_regs", s)
                k.store_regs("b_lds", "b_regs", s)
                k.barrier()  # the stores are visible to every warp
                k.mfma("acc", "a_lds", s, "b_lds", s)
            k.store_tile("c_ptr", "acc", (off_m, off_n), N)
    return k.build()


# the build knobs a policy with `level: explicit` may set, per Gluon target, and their values
KNOBS: dict[str, dict[str, tuple[int, ...]]] = {
    "hopper-gluon": {"num_warps": (4, 8), "mma_in_flight": (0, 1), "column_stride": (0, 1)},
    "cdna3-gluon": {"lds_stages": (1, 2)},
}


# fp32 accumulator registers per thread a consumer warpgroup keeps without spilling
MAX_ACC_REGS = 128


def for_policy(knobs: dict[str, Any], tiles: dict[str, int], target: str) -> ExplicitKernel:
    """The explicit GEMM for `target` built from a policy's knobs, constexprs bound from
    its tiles. PolicyError naming a bad target, knob, value or tile and the valid ones."""
    if target not in KNOBS:
        raise PolicyError(choices_error("explicit GEMM target", target, tuple(KNOBS)))
    valid = KNOBS[target]
    for name, value in knobs.items():
        if name not in valid:
            raise PolicyError(
                f"{target}: " + choices_error("explicit GEMM option", name, tuple(valid))
            )
        if value not in valid[name]:
            raise PolicyError(f"{target}: " + choices_error(name, value, valid[name]))
    if target == "hopper-gluon":
        kernel = build(
            int(knobs.get("num_warps", 4)),
            int(knobs.get("mma_in_flight", 1)),
            int(knobs.get("column_stride", 0)),
        )
    else:
        kernel = build_cdna3(int(knobs.get("lds_stages", 2)))
    if target == "hopper-gluon" and knobs.get("column_stride") and "NS" not in tiles:
        tiles = {**tiles, "NS": tiles.get("BN", kernel.consts["BN"])}  # no overlap by default
    try:
        kernel = kernel.with_consts(**tiles)
        check_column_stride(kernel.consts)
    except (x.ExplicitIRError, ValueError) as exc:
        raise PolicyError(f"{target}: explicit GEMM tiles: {exc}") from None
    c = kernel.consts
    per_thread = c["BM"] * c["BN"] // (32 * kernel.num_warps)
    if target == "hopper-gluon" and per_thread > MAX_ACC_REGS:
        raise PolicyError(
            f"{target}: a {c['BM']}x{c['BN']} fp32 accumulator over {kernel.num_warps} warps is "
            f"{per_thread} registers per thread, over {MAX_ACC_REGS}; use num_warps=8 or a "
            "smaller BN"
        )
    return kernel


def column_tiles(m: int, n: int, bm: int, bn: int, units: int) -> int:
    """The column stride NS (`build(column_stride=1)`) for an M x N output in BM x BN
    tiles on `units` SMs: BN where the tiles fill the SMs at least once (overlap would
    only add work), else the smallest multiple of 8 whose column tiles, times the row
    blocks, fit the SMs, unless that wastes over a quarter of the BN columns each tile
    loads: 112 for 128x14336 in 128x128 tiles on 132 SMs (128 tiles, not 112), 224 for it
    in 64x256 tiles (cuBLAS's 64x224 grid)."""
    rows = math.ceil(m / bm)
    if rows * math.ceil(n / bn) >= units or rows > units:
        return bn
    per_row = units // rows
    ns = min(bn, 8 * math.ceil(math.ceil(n / per_row) / 8))
    # a tile loads BN columns for NS it stores: past a quarter of them wasted, the extra
    # L2 traffic outweighs the SMs gained (128x4096 at NS 32 of BN 128 ran 1.8x slower)
    return ns if 4 * ns >= 3 * bn else bn


def check_column_stride(consts: dict[str, int]) -> None:
    """ValueError unless NS (where bound) is a multiple of 8 in (0, BN]: a larger stride
    would leave columns unwritten between tiles."""
    ns, bn = consts.get("NS"), consts["BN"]
    if ns is not None and (ns <= 0 or ns > bn or ns % 8):
        raise ValueError(f"invalid NS {ns!r}; valid choices: a multiple of 8 in 8..{bn} (BN)")


def launcher(kernel: ExplicitKernel, source: str) -> Callable[[dict[str, Any]], None]:
    """A callable running the lowered `kernel` (Hopper: TMA descriptors over a [M, K],
    b [K, N], c [M, N]; CDNA3: pointers) on the GEMM family's GPU inputs, one program per
    SM/CU (at most one per tile). UnsupportedShape for operands it cannot take."""
    from argus_core.evaluate.explicit_check import UnsupportedShape
    from argus_core.lowering.gluon import load_entry

    entry = load_entry(kernel, source)
    consts = dict(kernel.consts)
    check_column_stride(consts)
    descs: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def run(inputs: dict[str, Any]) -> None:
        import torch

        a, b, c = inputs["a"], inputs["b"], inputs["c"]
        m, kk = a.shape
        n = b.shape[1]
        if a.dtype != torch.bfloat16:
            raise UnsupportedShape(f"the explicit GEMM is bf16 only, not {a.dtype}")
        tiles = math.ceil(m / consts["BM"]) * math.ceil(n / consts.get("NS", consts["BN"]))
        units = torch.cuda.get_device_properties(0).multi_processor_count
        grid = (min(units, tiles),)
        if kernel.descs:
            if kk % 8 or n % 8:  # TMA: 16-byte aligned row strides of bf16 operands
                raise UnsupportedShape(f"TMA needs K and N multiples of 8, got K={kk} N={n}")
            key = (a.data_ptr(), b.data_ptr(), c.data_ptr())
            if key not in descs:
                descs[key] = tuple(
                    _tma_desc(kernel, inputs[d.tensor], d.name, consts) for d in kernel.descs
                )
            ptrs = [inputs[q.tensor] for q in kernel.ptrs]
            entry[grid](*descs[key], *ptrs, m, n, kk, **consts, num_warps=kernel.num_warps)
        else:
            if m % consts["BM"] or n % consts["BN"] or kk % consts["BK"]:
                raise UnsupportedShape(
                    f"the CDNA3 explicit GEMM needs M, N, K multiples of BM, BN, BK "
                    f"({consts['BM']}, {consts['BN']}, {consts['BK']}), got {m}, {n}, {kk}"
                )
            entry[grid](a, b, c, m, n, kk, **consts, num_warps=kernel.num_warps)

    return run


def _tma_desc(kernel: ExplicitKernel, t: Any, name: str, consts: dict[str, int]) -> Any:
    """A host TMA descriptor over `t` with the block and shared layout `name` declares."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    d = kernel.desc(name)
    layout = gl.NVMMASharedLayout(
        swizzle_byte_width=d.layout.swizzle_bytes,
        element_bitwidth=d.layout.element_bits,
        rank=2,
        transposed=d.layout.transposed,
    )
    return TensorDescriptor.from_tensor(t, [consts[b] for b in d.block], layout)
