"""Probe: does a persistent grid close the explicit attention's gap to cuDNN (#15)?

    python3 benchmarks/attn_persistent_probe.py [--rounds 5] [--stages 2]   # on the H200
    python benchmarks/attn_persistent_probe.py --compile-only               # CPU: sm_90 cross-compile

Under Nsight Compute (docs/performance.md, 2026-12-04 17:55) the explicit-level attention
forward (B4 H32 S4k D128, non-causal) needs 4.1% more cycles than cuDNN's kernel; cuDNN's is
persistent (132 CTAs), ours launches a CTA per (query block, head): 31 waves of one CTA per
SM, each CTA's prologue (the Q block and the first K/V stages: a DRAM round trip) and
epilogue (the O store) idling that SM's tensor cores.

This is the lowered `c2` kernel (`plugins/kernels/attention/kernel_explicit.py`: a TMA
load warp, two consumer warpgroups of 64 query rows, a K/V ring, wgmma from shared memory,
the online softmax in registers, P from registers) by hand, made persistent: one CTA per SM
walks the (query block, head) tiles `pid, pid + P, ...` (query blocks of one head
adjacent, as the 2-D grid ran them); the K/V ring's counter runs on across tiles, so the
load warp prefetches the next tile's blocks while the consumers finish a tile; each
consumer releases its Q buffer (`q_empty`, two arrivals) once its last S wgmma of the tile
is done, so the next tile's Q arrives during the last P V and the epilogue; O goes out
through buffers of its own (with a TMA store the next tile's epilogue waits for; 2 K/V
stages fit) or, `DIRECT_O`, from registers (no O buffer: 3 stages fit). `PINGPONG`: the
shipped `c2p` schedule, the two warpgroups taking turns issuing their S wgmmas (barriers
`turn0`/`turn1`, the turn parity following the K/V counter across tiles). Non-causal only (the
probe's question). Measured: docs/performance.md (2026-12-04, persistent attention). Checked against torch (o and lse, fresh inputs) before timing;
then the persistent kernel, the shipped 2-D kernel at the same stages and SDPA's cuDNN
backend are timed in turn `--rounds` times (do_bench medians). A table is printed last;
`--out` writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))


@gluon.jit
def _consumer(
    q_desc, k_desc, v_desc, o_desc, lse_ptr, S, SKV, NH, q_smem, o_smem, k_ring, v_ring,
    q_bar, q_empty, k_ready, v_ready, kv_empty, o_ptr, turn_me, turn_other, W: gl.constexpr,
    BM: gl.constexpr, BN: gl.constexpr, HM: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr,
    SCALE_LOG2: gl.constexpr, DIRECT_O: gl.constexpr, PINGPONG: gl.constexpr,
):  # fmt: skip
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16]
    )
    mb = S // BM
    n_kv = gl.cdiv(SKV, BN)
    it = 0
    ti = 0
    for tile in range(gl.program_id(0), mb * NH, gl.num_programs(0)):
        q_row = tile // mb * S + tile % mb * BM + W * HM
        m_i = gl.full([HM], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        l_i = gl.full([HM], 0.0, gl.float32, gl.SliceLayout(1, s_layout))
        o_acc = gl.zeros((HM, D), gl.float32, o_layout)
        mbarrier.wait(q_bar.index(0), ti % 2)
        for j in range(0, n_kv):
            mbarrier.wait(k_ready.index(it % STAGES), it // STAGES % 2)
            s_acc = gl.zeros((HM, BN), gl.float32, s_layout)
            if PINGPONG:  # this warpgroup's turn to issue (warpgroup 0 first: parity 1 passes)
                mbarrier.wait(turn_me.index(0), (it + 1 - W) % 2)
            s_acc = warpgroup_mma(
                q_smem, k_ring.index(it % STAGES).permute((1, 0)), s_acc, use_acc=False,
                is_async=True,
            )  # fmt: skip
            if PINGPONG:
                mbarrier.arrive(turn_other.index(0), count=1)
            s_acc = warpgroup_mma_wait(0, deps=(s_acc,))
            # the tile's last S is done: Q may be overwritten by the next tile's
            mbarrier.arrive(q_empty.index(0), count=1, pred=j == n_kv - 1)
            qk = s_acc
            if j * BN + BN > SKV:
                cols = j * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, s_layout))
                qk = gl.where(cols[None, :] < SKV, qk, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(qk, 1) * SCALE_LOG2)
            alpha = gl.exp2(m_i - m_new)
            p = gl.exp2(qk * SCALE_LOG2 - m_new[:, None])
            l_i = l_i * alpha + gl.sum(p, 1)
            m_i = m_new
            o_acc = o_acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
            p_op = gl.convert_layout(
                p.to(gl.bfloat16), gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
            )
            mbarrier.wait(v_ready.index(it % STAGES), it // STAGES % 2)
            o_acc = warpgroup_mma(p_op, v_ring.index(it % STAGES), o_acc, is_async=True)
            o_acc = warpgroup_mma_wait(0, deps=(o_acc,))
            mbarrier.arrive(kv_empty.index(it % STAGES), count=1)
            it += 1
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        if DIRECT_O:  # from registers: no shared buffer, so a third K/V stage fits
            o_rows = q_row + gl.arange(0, HM, layout=gl.SliceLayout(1, o_layout))
            o_cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
            gl.store(
                o_ptr + o_rows[:, None] * D + o_cols[None, :],
                (o_acc / l_o[:, None]).to(gl.bfloat16),
            )
        else:
            tma.store_wait(0)  # the previous tile's O store has read o_smem
            o_smem.store((o_acc / l_o[:, None]).to(o_smem.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(o_desc, [q_row, 0], o_smem)
        rows = q_row + gl.arange(0, HM, layout=gl.SliceLayout(1, s_layout))
        gl.store(lse_ptr + rows, (m_i + gl.log2(l_i)) * 0.6931471805599453)
        ti += 1
    tma.store_wait(0)


@gluon.jit
def _part_load(
    q_desc, k_desc, v_desc, S, SKV, H, HKV, NH, q0, q1, k_ring, v_ring, q_bar, q_empty,
    k_ready, v_ready, kv_empty, BM: gl.constexpr, BN: gl.constexpr, HM: gl.constexpr,
    STAGES: gl.constexpr,
):  # fmt: skip
    mb = S // BM
    it = 0
    ti = 0
    for tile in range(gl.program_id(0), mb * NH, gl.num_programs(0)):
        hy = tile // mb
        q_row = hy * S + tile % mb * BM
        kv_row = (hy // H * HKV + hy % H // (H // HKV)) * SKV
        mbarrier.wait(q_empty.index(0), (ti + 1) % 2)  # both consumers' last S of tile ti - 1
        mbarrier.expect(q_bar.index(0), 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar.index(0), q0)
        tma.async_copy_global_to_shared(q_desc, [q_row + HM, 0], q_bar.index(0), q1)
        for j in range(0, gl.cdiv(SKV, BN)):
            s = it % STAGES
            mbarrier.wait(kv_empty.index(s), (it // STAGES + 1) % 2)
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                k_desc, [kv_row + j * BN, 0], k_ready.index(s), k_ring.index(s)
            )
            mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                v_desc, [kv_row + j * BN, 0], v_ready.index(s), v_ring.index(s)
            )
            it += 1
        ti += 1


@gluon.jit
def attn_fwd_persistent(
    q_desc, k_desc, v_desc, o_desc, lse_ptr, o_ptr, S, SKV, H, HKV, NH, BM: gl.constexpr,
    BN: gl.constexpr, HM: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr,
    SCALE_LOG2: gl.constexpr, DIRECT_O: gl.constexpr, PINGPONG: gl.constexpr,
):  # fmt: skip
    lay: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q0 = gl.allocate_shared_memory(q_desc.dtype, [HM, D], lay)
    q1 = gl.allocate_shared_memory(q_desc.dtype, [HM, D], lay)
    if DIRECT_O:  # no O buffers (the consumers store O from registers)
        o0 = q0
        o1 = q1
    else:
        o0 = gl.allocate_shared_memory(q_desc.dtype, [HM, D], lay)
        o1 = gl.allocate_shared_memory(q_desc.dtype, [HM, D], lay)
    k_ring = gl.allocate_shared_memory(q_desc.dtype, [STAGES, BN, D], lay)
    v_ring = gl.allocate_shared_memory(q_desc.dtype, [STAGES, BN, D], lay)
    q_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn0 = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    turn1 = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(turn0.index(0), count=1)
    mbarrier.init(turn1.index(0), count=1)
    mbarrier.init(q_bar.index(0), count=1)
    mbarrier.init(q_empty.index(0), count=2)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)
    fence_async_shared()
    gl.warp_specialize([
        (_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, S, SKV, NH, q0, o0, k_ring, v_ring,
                     q_bar, q_empty, k_ready, v_ready, kv_empty, o_ptr, turn0, turn1, 0, BM, BN,
                     HM, D, STAGES, SCALE_LOG2, DIRECT_O, PINGPONG)),
        (_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, S, SKV, NH, q1, o1, k_ring, v_ring,
                     q_bar, q_empty, k_ready, v_ready, kv_empty, o_ptr, turn1, turn0, 1, BM, BN,
                     HM, D, STAGES, SCALE_LOG2, DIRECT_O, PINGPONG)),
        (_part_load, (q_desc, k_desc, v_desc, S, SKV, H, HKV, NH, q0, q1, k_ring, v_ring, q_bar,
                      q_empty, k_ready, v_ready, kv_empty, BM, BN, HM, STAGES)),
    ], [4, 1], [232, 24])  # fmt: skip
    mbarrier.invalidate(turn0.index(0))
    mbarrier.invalidate(turn1.index(0))
    mbarrier.invalidate(q_bar.index(0))
    mbarrier.invalidate(q_empty.index(0))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(kv_empty.index(i))


BM, BN, HM = 128, 128, 64


def _consts(d: int, stages: int, direct_o: bool = False, pingpong: bool = False) -> dict:
    return {"BM": BM, "BN": BN, "HM": HM, "D": d, "STAGES": stages,
            "SCALE_LOG2": math.log2(math.e) / math.sqrt(d), "DIRECT_O": direct_o,
            "PINGPONG": pingpong}  # fmt: skip


def compile_config(
    d: int = 128, stages: int = 2, direct_o: bool = False, pingpong: bool = False
) -> dict:
    """Cross-compile for sm_90 (no GPU): registers, spills, shared bytes."""
    from argus_plugins.backends.hopper.cubin import report_fields
    from argus_plugins.backends.hopper.gluon import cross_compile, nvmma_desc_type

    sig = {n: nvmma_desc_type("bf16", HM, d) for n in ("q_desc", "o_desc")}
    sig.update({n: nvmma_desc_type("bf16", BN, d) for n in ("k_desc", "v_desc")})
    sig.update({"lse_ptr": "*fp32", "o_ptr": "*bf16"})
    sig.update({s: "i32" for s in ("S", "SKV", "H", "HKV", "NH")})
    out = cross_compile(attn_fwd_persistent, sig, _consts(d, stages, direct_o, pingpong), 4)
    rep = report_fields(out.asm["cubin"], out.metadata)
    return {k: rep[k] for k in ("registers", "spills", "shared_bytes")}


def make_runner(
    shape: dict, stages: int, sms: int, torch, direct_o: bool = False, pingpong: bool = False
):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    b, h, hkv, s, skv, d = (shape[k] for k in ("B", "HQ", "HKV", "S", "SKV", "D"))
    lay = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    consts = _consts(d, stages, direct_o, pingpong)
    grid = (min(sms, s // BM * b * h),)

    def run(inputs):
        q, k, v, o, lse = (inputs[n] for n in ("q", "k", "v", "o", "lse"))
        qd = TensorDescriptor.from_tensor(q.view(-1, d), [HM, d], lay)
        kd = TensorDescriptor.from_tensor(k.view(-1, d), [BN, d], lay)
        vd = TensorDescriptor.from_tensor(v.view(-1, d), [BN, d], lay)
        od = TensorDescriptor.from_tensor(o.view(-1, d), [HM, d], lay)
        attn_fwd_persistent[grid](qd, kd, vd, od, lse, o, s, skv, h, hkv, b * h, **consts,
                                  num_warps=4)  # fmt: skip

    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--cases", default="B4 H32 S4k D128", help="comma-separated ATTN_CASES names")
    ap.add_argument(
        "--out", default=os.path.join(os.environ.get("OUT", "."), "attn_persistent.json")
    )
    args = ap.parse_args(argv)
    if args.compile_only:
        print(
            compile_config(128, args.stages),
            compile_config(128, args.stages, pingpong=True),
            compile_config(128, 3, True, True),
        )
        return 0
    import gluon_bench as gb
    import torch
    import triton

    from argus_core.evaluate.outputs import compare
    from argus_plugins.kernels.attention.family import AttentionFamily

    fam = AttentionFamily()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, table = [], []
    for name in args.cases.split(","):
        shape = dict(gb.ATTN_CASES)[name]
        if shape["CAUSAL"]:
            print(f"{name}: the probe is non-causal only")
            continue
        sets = [fam.make_inputs(shape, "bf16", seed, "cuda") for seed in range(2)]
        atol, rtol = fam.tolerance("bf16")
        variants = {
            f"persistent c2 s{args.stages}": make_runner(shape, args.stages, sms, torch),
            f"persistent c2p s{args.stages}": make_runner(
                shape, args.stages, sms, torch, pingpong=True
            ),
            "persistent c2p s3 O-regs": make_runner(shape, 3, sms, torch, True, True),
            f"2-D c2p s{args.stages} (shipped)": gb.GluonAttention(
                shape["D"], False, "2p", args.stages, BM, BN
            ),
            "2-D c2 s3 (shipped)": gb.GluonAttention(shape["D"], False, "2", 3, BM, BN),
        }
        checked = {}
        for label, run in variants.items():
            fresh = fam.make_inputs(shape, "bf16", 7, "cuda")
            for out in ("o", "lse"):
                fresh[out].fill_(float("nan"))
            run(fresh)
            ref = fam.reference(fresh)
            oks = [compare(fresh[n], ref[n], atol, rtol) for n in ("o", "lse")]
            if all(ok for ok, *_ in oks):
                checked[label] = run
            else:
                print(f"{name} {label}: WRONG {[why for *_, why in oks]}")
                rows.append({"case": name, "variant": label, "wrong": [w for *_, w in oks]})
        q, k, v = sets[0]["q"], sets[0]["k"], sets[0]["v"]

        def cudnn(q=q, k=k, v=v):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, enable_gqa=q.shape[1] != k.shape[1]
                )

        timed = {lab: (lambda run=run, x=sets[0]: run(x)) for lab, run in checked.items()}
        timed["SDPA cuDNN"] = cudnn
        times = {lab: [] for lab in timed}
        for _round in range(args.rounds):
            for lab, fn in timed.items():
                times[lab].append(
                    triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
                )
        lib = statistics.median(times["SDPA cuDNN"])
        for lab in timed:
            med = statistics.median(times[lab])
            ratios = [b / a for a, b in zip(times[lab], times["SDPA cuDNN"])]
            rows.append({"case": name, "variant": lab, "ms": times[lab], "median_ms": med,
                         "vs_cudnn_median_of_rounds": statistics.median(ratios)})  # fmt: skip
            table.append((name, lab, med, lib / med, statistics.median(ratios)))
        with open(args.out, "w") as f:
            meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                    "device": torch.cuda.get_device_name(0), "stages": args.stages,
                    "commit": os.environ.get("ARGUS_COMMIT", ""), "rounds": args.rounds}  # fmt: skip
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"\n{'case':18} {'variant':24} {'median ms':>10} {'cuDNN/ours':>11} {'per-round':>10}")
    for name, lab, med, r, rr in table:
        print(f"{name:18} {lab:24} {med:10.4f} {r:11.3f} {rr:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
