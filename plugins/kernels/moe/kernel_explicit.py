"""The MoE grouped GEMM at the explicit level: routed rows times each expert's weights.

C[r, :] = A[r, :] @ W[e(r)]^T for the rows r of A, which the launcher sorts by expert and
pads per expert to whole BM blocks (`align_on_device`): block b of BM rows belongs to
expert `block_expert[b]` (an int32 table the kernel reads, `LoadScalar`), and only the first
`num_blocks[0]` blocks are in use (read on the device too). W is the stacked
expert weights [E, N, K] (row-major, K contiguous) viewed as [E * N, K], so expert e's
columns n are rows `e * N + n`, read transposed by the MMA.

Hopper (`build`): the warp-specialized persistent GEMM of the GEMM family with that
indexing: a one-warp producer loads, per K step, the A block (rows of one expert) and the
expert's B block by TMA into a ring of STAGES stages; one or two consumer warpgroups issue
wgmma (B permuted), release the stage one MMA behind, and store each tile through shared
memory by TMA; `fuse_silu` makes it the up-projection with the gated-MLP epilogue (gate and
up blocks of w1 in two rings, two accumulators, silu(gate) * up stored). CDNA3
(`build_cdna3`): buffer loads into LDS (two stages, one barrier per step), MFMA 16x16x16
with B read transposed from LDS, buffer stores.

The MoE family's explicit launcher (`launcher`) runs the whole layer around two launches of
this kernel: routing (`routing.route`) and the alignment (`align_on_device`: the result of
`routing.align_blocks` with no host sync, in buffers of the padded capacity; the kernel reads
how many row blocks are in use from `num_blocks`), the gather of
x into expert order, up-projection (N = 2I, K = H), SiLU(gate) * up (or both in the fused
kernel), down-projection (N = H, K = I), the routing weights and the scatter-add to the
tokens in PyTorch, as the `torch._grouped_mm` baseline does (the weighted combine sums in
fp32).

Proved by `plugins/verifiers/smt/explicit_ops.py`: the ring protocol, the fragment tags
(A's and B's K coordinates agree), the output tags (the stored tile's rows are A's, its
columns B's within the expert: the table-selected expert offset is a group, not a
column), that the expert table is indexed by A's row block (`group-tag`), that the fused
epilogue pairs each gate column with its up column of the same expert, and the shared
races. Measured on the H200: docs/performance.md ("session 3").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from argus_core.errors import PolicyError, choices_error
from argus_core.ir import explicit as x
from argus_core.ir.explicit import ExplicitKernel
from argus_core.ir.expr import Sym
from argus_plugins.dsl.explicit.lang import Kernel, cdiv, emin, npid, pid


def _tile_offsets(k: Kernel, tile: Any, num_m: Any, num_n: Any) -> tuple[Any, Any]:
    GROUP, BM, BN = (Sym(n, "const", 1) for n in ("GROUP", "BM", "BN"))
    first = k.let("first_m", tile // (GROUP * num_n) * GROUP)
    rows = k.let("group_rows", emin(num_m - first, GROUP))
    local = k.let("local", tile % (GROUP * num_n))
    return k.let("off_m", (first + local % rows) * BM), k.let("off_n", local // rows * BN)


def build(num_warps: int = 8, mma_in_flight: int = 1, fuse_silu: bool = False) -> ExplicitKernel:
    """The Hopper kernel: `num_warps` 4 (one consumer warpgroup) or 8 (two, for BN=256);
    `mma_in_flight` 1 releases each stage one K step behind, 0 after its own wait.
    `fuse_silu`: the up-projection with the gated-MLP epilogue: the weights are the stacked
    [gate; up] rows [E, 2N, K] of w1, each K step loads the gate block (rows
    `e * 2N + off_n`) and the up block (`e * 2N + N + off_n`) into two rings, two wgmmas
    accumulate gate and up, and the tile stored is silu(gate) * up ([M, N] = [rows, I]):
    the [rows, 2I] intermediate is never written."""
    if num_warps not in (4, 8):
        raise ValueError(f"invalid num_warps {num_warps!r}; valid choices: 4, 8")
    if mma_in_flight not in (0, 1):
        raise ValueError(f"invalid mma_in_flight {mma_in_flight!r}; valid choices: 0, 1")
    name = "moe_gate_up_silu_ws" if fuse_silu else "moe_grouped_gemm_ws"
    k = Kernel(name, family="moe", num_warps=num_warps)
    k.meta(
        grid="(min(NUM_SMS, cdiv(M, BM) * cdiv(N, BN)),)",
        outputs=("c",),
        fused=bool(fuse_silu),
        mma_in_flight=mma_in_flight,
    )
    k.scalar("M")  # rows of a and c (the padded capacity); the blocks in use: num_blocks
    N, K = k.scalar("N"), k.scalar("K")
    BM, BN, BK = k.const("BM", 128), k.const("BN", 128 if fuse_silu else 256), k.const("BK", 64)
    STAGES = k.const("STAGES", 3)
    k.const("GROUP", 8)
    k.desc("a_desc", "a", ("BM", "BK"))
    k.desc("b_desc", "w", ("BN", "BK"))
    k.desc("c_desc", "c", ("BM", "BN"))
    k.ptr("expert_ptr", "block_expert", dtype="i32")
    k.ptr("nblk_ptr", "num_blocks", dtype="i32")
    rings = ("g_ring", "u_ring") if fuse_silu else ("b_ring",)
    accs = ("acc_g", "acc_u") if fuse_silu else ("acc",)
    k.shared("a_ring", ("BM", "BK"), "STAGES", like="a_desc")
    for ring in rings:
        k.shared(ring, ("BN", "BK"), "STAGES", like="b_desc")
    k.shared("c_smem", ("BM", "BN"), 1, like="c_desc")
    k.barriers("ready", "STAGES")
    k.barriers("empty", "STAGES")
    num_n = cdiv(N, BN)
    k_steps = cdiv(K, BK)
    pending = mma_in_flight * len(accs)  # this step's wgmmas stay in flight

    with k.partition("mma", warps=num_warps, default=True):
        num_m = k.load_scalar("num_m", "nblk_ptr", 0)  # row blocks in use (<= M / BM)
        with k.loop("tile", pid, num_m * num_n, npid) as tile:
            off_m, off_n = _tile_offsets(k, tile, num_m, num_n)
            for acc in accs:
                k.zero_acc(acc, "BM", "BN", warps=(num_warps, 1))
            with k.loop("kk", 0, k_steps, counter="it") as (kk, it):
                s = it % STAGES
                k.wait("ready", s, it // STAGES % 2)
                for acc, ring in zip(accs, rings):
                    k.wgmma(acc, "a_ring", s, ring, s, b_trans=True)
                k.wgmma_wait(accs[0], pending, keep=accs[1:])
                if mma_in_flight:
                    k.arrive("empty", (it + STAGES - 1) % STAGES, pred=kk > 0)
                else:
                    k.arrive("empty", s)
            if mma_in_flight:
                k.wgmma_wait(accs[0], 0, keep=accs[1:])
                k.arrive("empty", (it + STAGES - 1) % STAGES)
            if fuse_silu:
                k.silu_mul("acc_g", "acc_u", N)
            k.store_wait(0)
            k.store_shared("c_smem", accs[0])
            k.fence_async_shared()
            k.tma_store("c_desc", (off_m, off_n), "c_smem")
        k.store_wait(0)

    with k.partition("load", warps=1, regs=24):
        num_m = k.load_scalar("num_m", "nblk_ptr", 0)
        with k.loop("tile", pid, num_m * num_n, npid) as tile:
            off_m, off_n = _tile_offsets(k, tile, num_m, num_n)
            e = k.load_scalar("expert", "expert_ptr", off_m // BM)
            with k.loop("kk", 0, k_steps, counter="it") as (kk, it):
                s = it % STAGES
                k.wait("empty", s, (it // STAGES + 1) % 2)
                k.expect("ready", s, "a_desc", *["b_desc"] * len(rings))
                k.tma_load("a_desc", (off_m, kk * BK), "a_ring", s, "ready")
                if fuse_silu:  # expert e's gate rows, then its up rows, of w1 [E * 2N, K]
                    k.tma_load("b_desc", (e * (2 * N) + off_n, kk * BK), "g_ring", s, "ready")
                    k.tma_load("b_desc", (e * (2 * N) + N + off_n, kk * BK), "u_ring", s, "ready")
                else:
                    k.tma_load("b_desc", (e * N + off_n, kk * BK), "b_ring", s, "ready")
    return k.build()


def build_cdna3() -> ExplicitKernel:
    """The MI300X (gfx942) kernel: a persistent grid, 4 warps (2x2) of MFMA 16x16x16; each
    K step buffer-loads the A block and the expert's B block ([BN, BK] of the stacked
    [E * N, K] weights) into blocked registers, stores them to LDS stage `it % 2`, passes
    one workgroup barrier and runs the MFMAs (B read transposed). Unmasked: M (padded
    rows), N and K multiples of BM, BN, BK."""
    k = Kernel("moe_grouped_gemm_cdna3", family="moe")
    k.meta(grid="(min(NUM_CUS, cdiv(M, BM) * cdiv(N, BN)),)", outputs=("c",))
    k.scalar("M")  # rows of a and c (the padded capacity); the blocks in use: num_blocks
    N, K = k.scalar("N"), k.scalar("K")
    BM, BN, BK = k.const("BM", 128), k.const("BN", 128), k.const("BK", 64)
    k.const("GROUP", 8)
    k.ptr("a_ptr", "a")
    k.ptr("b_ptr", "w")
    k.ptr("c_ptr", "c")
    k.ptr("expert_ptr", "block_expert", dtype="i32")
    k.ptr("nblk_ptr", "num_blocks", dtype="i32")
    lds = x.SwizzledShared(8, 1, 8, (1, 0))
    k.shared("a_lds", ("BM", "BK"), 2, like="a_ptr", layout=lds)
    k.shared("b_lds", ("BN", "BK"), 2, like="b_ptr", layout=lds)
    blk = x.Blocked((1, 8), (8, 8), (4, 1), (1, 0))
    acc_layout = x.MfmaAcc((16, 16, 16), (2, 2), 4, 4)
    num_n = cdiv(N, BN)
    with k.partition("main", default=True):
        num_m = k.load_scalar("num_m", "nblk_ptr", 0)
        with k.loop("tile", pid, num_m * num_n, npid) as tile:
            off_m, off_n = _tile_offsets(k, tile, num_m, num_n)
            e = k.load_scalar("expert", "expert_ptr", off_m // BM)
            k.zero_acc("acc", "BM", "BN", layout=acc_layout)
            with k.loop("kk", 0, cdiv(K, BK), counter="it") as (kk, it):
                s = it % 2
                k.load_tile("a_regs", "a_ptr", (off_m, kk * BK), K, ("BM", "BK"), blk)
                k.load_tile("b_regs", "b_ptr", (e * N + off_n, kk * BK), K, ("BN", "BK"), blk)
                k.store_regs("a_lds", "a_regs", s)
                k.store_regs("b_lds", "b_regs", s)
                k.barrier()  # the stores are visible; stage s was last read two steps back
                k.mfma("acc", "a_lds", s, "b_lds", s, b_trans=True)
            k.store_tile("c_ptr", "acc", (off_m, off_n), N)
    return k.build()


# the build knobs a `level: explicit` policy may set, per Gluon target, and their values
KNOBS: dict[str, dict[str, tuple[int, ...]]] = {
    "hopper-gluon": {"num_warps": (4, 8), "mma_in_flight": (0, 1), "fuse_silu": (0, 1)},
    "cdna3-gluon": {},
}
MAX_ACC_REGS = 128  # fp32 accumulator registers per thread of one consumer warpgroup


def for_policy(knobs: dict[str, Any], tiles: dict[str, int], target: str) -> ExplicitKernel:
    """The explicit grouped GEMM for `target` from a policy's knobs and tiles (BM, BN, BK,
    STAGES, GROUP; the DSL-only tiles BT, BE, BS, BH are ignored). PolicyError naming a bad
    target, knob, value or tile and the valid ones."""
    if target not in KNOBS:
        raise PolicyError(choices_error("explicit MoE target", target, tuple(KNOBS)))
    valid = KNOBS[target]
    for name, value in knobs.items():
        if name not in valid:
            raise PolicyError(
                f"{target}: "
                + choices_error("explicit MoE option", name, tuple(valid) or ("none",))
            )
        if value not in valid[name]:
            raise PolicyError(f"{target}: " + choices_error(name, value, valid[name]))
    if target == "hopper-gluon":
        kernel = build(
            int(knobs.get("num_warps", 8)),
            int(knobs.get("mma_in_flight", 1)),
            bool(knobs.get("fuse_silu", 0)),
        )
    else:
        kernel = build_cdna3()
    mine = {n: v for n, v in tiles.items() if n in kernel.consts}
    try:
        kernel = kernel.with_consts(**mine)
    except x.ExplicitIRError as exc:
        raise PolicyError(f"{target}: explicit MoE tiles: {exc}") from None
    c = kernel.consts
    accs = 2 if kernel.meta.get("fused") else 1  # gate and up accumulate side by side
    per_thread = accs * c["BM"] * c["BN"] // (32 * kernel.num_warps)
    if target == "hopper-gluon" and per_thread > MAX_ACC_REGS:
        raise PolicyError(
            f"{target}: {accs} {c['BM']}x{c['BN']} fp32 accumulator(s) over {kernel.num_warps} warps are "
            f"{per_thread} registers per thread, over {MAX_ACC_REGS}; use num_warps=8 or a "
            "smaller BN"
        )
    return kernel


def gemm_launcher(kernel: ExplicitKernel, source: str) -> Callable[..., None]:
    """`run(a [M, K], w [E, N, K], c [M, N], block_expert [M / BM], num_blocks [1])` (the
    fused gate/up kernel: w [E, 2N, K]): one launch of the lowered grouped GEMM (Hopper: TMA descriptors; CDNA3: pointers), one
    program per SM (at most one per tile of the M rows); the programs stop after the first
    `num_blocks[0]` row blocks (read on the device: no host sync). M must be a multiple of
    BM (the alignment pads to it)."""
    from argus_core.evaluate.explicit_check import UnsupportedShape
    from argus_core.lowering.gluon import load_entry

    entry = load_entry(kernel, source)
    consts = dict(kernel.consts)

    def run(a: Any, w: Any, c: Any, block_expert: Any, num_blocks: Any) -> None:
        import torch

        m, kk = a.shape
        e, rows, kw = w.shape
        n = c.shape[1]  # output columns: w's rows per expert, or half of them (fused)
        if a.dtype != torch.bfloat16:
            raise UnsupportedShape(f"the explicit MoE GEMM is bf16 only, not {a.dtype}")
        if m % consts["BM"] or kw != kk:
            raise UnsupportedShape(f"rows {m} not a multiple of BM={consts['BM']} or K {kk}!={kw}")
        tiles = (m // consts["BM"]) * -(-n // consts["BN"])
        grid = (min(torch.cuda.get_device_properties(0).multi_processor_count, tiles),)
        flat = w.view(e * rows, kw)
        tables = (block_expert, num_blocks)
        if kernel.descs:
            if kk % 8 or n % 8:
                raise UnsupportedShape(f"TMA needs K and N multiples of 8, got K={kk} N={n}")
            descs = [
                _tma_desc(kernel, t, name, consts)
                for t, name in ((a, "a_desc"), (flat, "b_desc"), (c, "c_desc"))
            ]
            entry[grid](*descs, *tables, m, n, kk, **consts, num_warps=kernel.num_warps)
        else:
            if n % consts["BN"] or kk % consts["BK"]:
                raise UnsupportedShape(
                    f"the CDNA3 MoE GEMM needs N, K multiples of BN={consts['BN']}, "
                    f"BK={consts['BK']}, got {n}, {kk}"
                )
            entry[grid](a, flat, c, *tables, m, n, kk, **consts, num_warps=kernel.num_warps)

    return run


def align_on_device(topk_ids: Any, num_experts: int, block_m: int) -> tuple[Any, Any, Any]:
    """(sorted_ids [cap], block_expert [cap / block_m], num_blocks [1] int32): the
    alignment of `routing.align_blocks` computed without a host sync, into buffers of the
    padded capacity `routing.padded_capacity` (rows past the used ones hold the sentinel
    T * topk; blocks past them the last expert, never multiplied: the kernel stops at
    num_blocks)."""
    import torch

    from argus_plugins.kernels.moe.routing import padded_capacity

    flat = topk_ids.reshape(-1).long()
    n, dev = flat.numel(), flat.device
    cap = padded_capacity(n, num_experts, block_m)
    counts = torch.zeros(num_experts, dtype=torch.long, device=dev)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    blocks = (counts + block_m - 1) // block_m
    padded = blocks * block_m
    first_row = torch.cumsum(padded, 0) - padded  # each expert's first row
    first_rank = torch.cumsum(counts, 0) - counts  # its first slot in expert order
    order = torch.sort(flat, stable=True).indices
    expert = flat[order]
    rows = first_row[expert] + torch.arange(n, device=dev) - first_rank[expert]
    sorted_ids = torch.full((cap,), n, dtype=torch.int32, device=dev)
    sorted_ids[rows] = order.to(torch.int32)
    ends = torch.cumsum(blocks, 0)  # block b is expert i's when ends[i - 1] <= b < ends[i]
    which = torch.arange(cap // block_m, device=dev)
    block_expert = torch.searchsorted(ends, which, right=True).clamp_(max=num_experts - 1)
    return sorted_ids, block_expert.to(torch.int32), ends[-1:].to(torch.int32)


def launcher(kernel: ExplicitKernel, source: str) -> Callable[[dict[str, Any]], None]:
    """The whole MoE layer on the family's inputs (x, router_logits, w1, w2, out, topk,
    renorm) around two launches of the explicit grouped GEMM (see the module docstring).
    UnsupportedShape for inputs it cannot take."""
    up, down = _gemms(kernel, source)
    bm = int(kernel.consts["BM"])
    return lambda inputs: _layer(up, down, bool(kernel.meta.get("fused")), bm, inputs, _no_mark)


def _no_mark(stage: str) -> None:
    return None


def _gemms(kernel: ExplicitKernel, source: str) -> tuple[Callable[..., None], Callable[..., None]]:
    """(up-projection, down-projection) launchers: the same kernel twice, or, when `kernel`
    is the fused gate/up + SiLU one (Hopper), it for the up-projection and the plain grouped
    GEMM with its tiles for the down-projection."""
    gemm = gemm_launcher(kernel, source)
    if not kernel.meta.get("fused"):
        return gemm, gemm
    # the fused kernel is Hopper's; its plain twin is lowered by the same backend, found
    # through the plugin registry (a kernel plugin never imports a backend's modules)
    from argus_core.plugin_manager import Registry, default_plugin_manager

    plain = build(kernel.num_warps, int(kernel.meta.get("mma_in_flight", 1)))
    plain = plain.with_consts(**kernel.consts)
    hopper = Registry(default_plugin_manager()).get("backend", "h100")
    return gemm, gemm_launcher(plain, hopper.lower_explicit(plain).source)


def stage_times(
    kernel: ExplicitKernel, source: str, inputs: dict[str, Any], reps: int = 5
) -> dict[str, float]:
    """Milliseconds of each stage of the layer (median of `reps` runs, CUDA events): where
    the time goes, for the benchmark's report."""
    import statistics

    import torch

    up, down = _gemms(kernel, source)
    bm = int(kernel.consts["BM"])
    fused = bool(kernel.meta.get("fused"))
    runs: list[dict[str, float]] = []
    for _ in range(reps + 1):  # the first run warms up (compiles)
        events: list[tuple[str, Any]] = []

        def mark(stage: str, events=events) -> None:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            events.append((stage, ev))

        mark("start")
        _layer(up, down, fused, bm, inputs, mark)
        torch.cuda.synchronize()
        runs.append(
            {name: start.elapsed_time(end) for (_, start), (name, end) in zip(events, events[1:])}
        )
    return {name: statistics.median(r[name] for r in runs[1:]) for name in runs[-1]}


def _layer(
    up: Callable[..., None],
    down: Callable[..., None],
    fused: bool,
    bm: int,
    inputs: dict[str, Any],
    mark: Callable,
) -> None:
    """Routing, alignment, gather, up-projection, SiLU * up (in the up-projection's epilogue
    when `fused`), down-projection, weighted combine; `mark(stage)` after each. The combine sums each token's slots in fp32 (each
    slot's result is rounded to the input dtype once, by the GEMM), then rounds once."""
    import torch
    import torch.nn.functional as F

    from argus_plugins.kernels.moe.routing import route

    x_in, w1, w2, out = inputs["x"], inputs["w1"], inputs["w2"], inputs["out"]
    t, h = x_in.shape
    e, inter = w1.shape[0], w2.shape[-1]
    topk = int(inputs["topk"])
    ids, wts = route(inputs["router_logits"], topk, bool(inputs["renorm"]))
    sorted_ids, block_expert, num_blocks = align_on_device(ids, e, bm)
    used = sorted_ids.numel()  # the capacity: rows past num_blocks * BM are never computed
    slots = t * topk
    real = sorted_ids < slots
    tok = torch.where(real, sorted_ids // topk, 0).long()
    mark("route+align")
    xs = x_in[tok]  # padding rows compute row 0 again; their weight is 0 in the combine
    mark("gather")
    if fused:
        act = torch.empty(used, inter, dtype=x_in.dtype, device=x_in.device)
        up(xs, w1, act, block_expert, num_blocks)
        mark("up-projection+silu")
    else:
        h1 = torch.empty(used, 2 * inter, dtype=x_in.dtype, device=x_in.device)
        up(xs, w1, h1, block_expert, num_blocks)
        mark("up-projection")
        act = F.silu(h1[:, :inter]) * h1[:, inter:]
        mark("silu*up")
    y = torch.empty(used, h, dtype=x_in.dtype, device=x_in.device)
    down(act, w2, y, block_expert, num_blocks)
    mark("down-projection")
    # the combine gathers each token's topk rows (no atomics, and the rows past the blocks
    # in use, never written, are never read): row_of[s] = the row of y that holds slot s
    row_of = torch.empty(slots + 1, dtype=torch.long, device=x_in.device)
    row_of.scatter_(0, sorted_ids.long(), torch.arange(used, device=x_in.device))
    ys = y[row_of[:slots]].view(t, topk, h)  # every slot is in sorted_ids exactly once
    out.copy_((ys.float() * wts.view(t, topk, 1)).sum(1))
    mark("combine")


def _tma_desc(kernel: ExplicitKernel, t: Any, name: str, consts: dict[str, int]) -> Any:
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
