"""Planted bugs at the explicit level: each a one-op mutation of a shipped explicit kernel
(the warp-specialized GEMM of `plugins/kernels/gemm/kernel_explicit.py`, the CDNA3 GEMM, the
attention kernels, the MoE grouped GEMMs), the invariant it breaks, and the program point
the verifier must name. `mutate(kernel, bug)` applies one."""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_core.ir import explicit as x
from argus_core.ir.expr import Sym, cdiv

it = Sym("it", "loop", 0)
kk = Sym("kk", "loop", 0)
S = Sym("STAGES", "const", 1)
BK = Sym("BK", "const", 1)
off_m, off_n = Sym("off_m", "scalar"), Sym("off_n", "scalar")
local, rows, BN = Sym("local", "scalar"), Sym("group_rows", "scalar"), Sym("BN", "const", 1)
s = it % S


@dataclass(frozen=True)
class Bug:
    name: str
    point: str  # the op mutated (deleted when `new` is None; later points then shift)
    new: x.XOp | None
    kind: str  # the counterexample kind expected
    at: str  # the program point it must name, in the mutated kernel
    swizzle: int | None = None  # instead of an op: the ring's swizzle
    base: str = "hopper"  # the kernel mutated: `kernel_for(bug)`
    more: tuple[tuple[str, x.XOp | None], ...] = ()  # further (point, op) replacements
    barrier_count: tuple[str, int] | None = None  # instead of an op: a barrier's init count


BUGS = [
    # ring stage / phase protocol, consumer side
    Bug(
        "consumer-phase-flip",
        "mma/tile/kk/0:Wait",
        x.Wait("ready", s, (it // S + 1) % 2),
        "wrong-phase",
        "mma/tile/kk/0:Wait",
    ),
    Bug(
        "consumer-phase-constant",
        "mma/tile/kk/0:Wait",
        x.Wait("ready", s, 0),
        "wrong-phase",
        "mma/tile/kk/0:Wait",
    ),
    Bug(
        "consumer-wait-wrong-stage",
        "mma/tile/kk/0:Wait",
        x.Wait("ready", (it + 1) % S, it // S % 2),
        "wrong-stage",
        "mma/tile/kk/0:Wait",
    ),
    Bug("consumer-missing-wait", "mma/tile/kk/0:Wait", None, "missing-wait", "mma/tile/kk/0:Wgmma"),
    Bug(
        "wgmma-reads-previous-stage",
        "mma/tile/kk/1:Wgmma",
        x.Wgmma("acc", "a_ring", s, "b_ring", (it + S - 1) % S),
        "wrong-stage",
        "mma/tile/kk/1:Wgmma",
    ),
    # releases
    Bug(
        "two-wgmmas-in-flight-at-release",
        "mma/tile/kk/2:WgmmaWait",
        x.WgmmaWait("acc", 2),
        "release-before-complete",
        "mma/tile/kk/3:Arrive",
    ),
    Bug(
        "release-own-stage-in-flight",
        "mma/tile/kk/3:Arrive",
        x.Arrive("empty", s),
        "release-before-complete",
        "mma/tile/kk/3:Arrive",
    ),
    Bug(
        "release-wrong-stage",
        "mma/tile/kk/3:Arrive",
        x.Arrive("empty", (it + 1) % S, kk > 0),
        "wrong-stage",
        "mma/tile/kk/3:Arrive",
    ),
    Bug(
        "release-without-first-step-guard",
        "mma/tile/kk/3:Arrive",
        x.Arrive("empty", (it + S - 1) % S),
        "double-release",
        "mma/tile/kk/3:Arrive",
    ),
    Bug("missing-release", "mma/tile/kk/3:Arrive", None, "missing-release", "mma/tile/kk/1:Wgmma"),
    Bug(
        "missing-tail-release", "mma/tile/8:Arrive", None, "missing-release", "mma/tile/6:Loop(kk)"
    ),
    Bug(
        "tail-release-before-wait",
        "mma/tile/7:WgmmaWait",
        None,
        "release-before-complete",
        "mma/tile/7:Arrive",
    ),
    Bug(
        "tail-release-wrong-stage",
        "mma/tile/8:Arrive",
        x.Arrive("empty", s),
        "wrong-stage",
        "mma/tile/8:Arrive",
    ),
    # producer side
    Bug(
        "producer-missing-wait",
        "load/tile/kk/0:Wait",
        None,
        "producer-overrun",
        "load/tile/kk/1:TmaLoad",
    ),
    Bug(
        "producer-phase-not-flipped",
        "load/tile/kk/0:Wait",
        x.Wait("empty", s, it // S % 2),
        "wrong-phase",
        "load/tile/kk/0:Wait",
    ),
    Bug(
        "tma-wrong-stage",
        "load/tile/kk/2:TmaLoad",
        x.TmaLoad("a_desc", (off_m, kk * BK), "a_ring", (it + 1) % S, "ready"),
        "wrong-stage",
        "load/tile/kk/2:TmaLoad",
    ),
    Bug(
        "expect-misses-b-bytes",
        "load/tile/kk/1:Expect",
        x.Expect("ready", s, ("a_desc",)),
        "wrong-expect-bytes",
        "load/tile/kk/1:Expect",
    ),
    Bug(
        "expect-wrong-stage",
        "load/tile/kk/1:Expect",
        x.Expect("ready", (it + 1) % S, ("a_desc", "b_desc")),
        "wrong-stage",
        "load/tile/kk/1:Expect",
    ),
    # fragment and output tags
    Bug(
        "b-k-coordinate-lags",
        "load/tile/kk/3:TmaLoad",
        x.TmaLoad("b_desc", ((kk + 1) * BK, off_n), "b_ring", s, "ready"),
        "fragment-tag",
        "mma/tile/kk/1:Wgmma",
    ),
    Bug(
        "a-k-coordinate-unscaled",
        "load/tile/kk/2:TmaLoad",
        x.TmaLoad("a_desc", (off_m, kk), "a_ring", s, "ready"),
        "fragment-tag",
        "mma/tile/kk/1:Wgmma",
    ),
    Bug(
        "producer-loads-other-rows",
        "load/tile/kk/2:TmaLoad",
        x.TmaLoad("a_desc", (off_n, kk * BK), "a_ring", s, "ready"),
        "output-tag",
        "mma/tile/12:TmaStore",
    ),
    Bug(
        "producer-tile-order-differs",
        "load/tile/4:Let",
        x.Let("off_n", local % rows * BN),
        "output-tag",
        "mma/tile/12:TmaStore",
    ),
    # shared memory races, layouts
    Bug(
        "epilogue-missing-store-wait",
        "mma/tile/9:StoreWait",
        None,
        "shared-race",
        "mma/tile/9:StoreShared",
    ),
    Bug(
        "epilogue-missing-fence",
        "mma/tile/11:FenceAsyncShared",
        None,
        "shared-race",
        "mma/tile/11:TmaStore",
    ),
    Bug(
        "exit-with-store-in-flight",
        "mma/1:StoreWait",
        None,
        "store-in-flight-at-exit",
        "mma/0:Loop(tile)",
    ),
    Bug(
        "acc-read-before-wait",
        "mma/tile/7:WgmmaWait",
        None,
        "acc-read-in-flight",
        "mma/tile/9:StoreShared",
    ),
    Bug(
        "acc-layout-8-warps",
        "mma/tile/5:ZeroAcc",
        x.ZeroAcc("acc", "BM", "BN", x.WgmmaAcc((8, 1))),
        "layout-warps",
        "mma/tile/5:ZeroAcc",
    ),
    Bug("ring-swizzle-64", "", None, "wrong-swizzle", "load/tile/kk/2:TmaLoad", swizzle=64),
]


N_ = Sym("N", "shape", 1)
K_ = Sym("K", "shape", 1)
BLK_A = x.Blocked((1, 8), (8, 8), (4, 1), (1, 0))
BLK_B = x.Blocked((8, 1), (8, 8), (1, 4), (0, 1))
s2 = it % 2

BUGS += [
    Bug(
        "lds-missing-barrier",
        "main/tile/kk/4:Barrier",
        None,
        "shared-race",
        "main/tile/kk/4:Mfma",
        base="cdna3",
    ),
    Bug(
        "lds-single-stage-missing-war-barrier",
        "main/tile/kk/2:Barrier",
        None,
        "shared-race",
        "main/tile/kk/2:StoreRegs",
        base="cdna3-1",
    ),
    Bug(
        "lds-store-to-next-stage",
        "main/tile/kk/2:StoreRegs",
        x.StoreRegs("a_lds", "a_regs", (it + 1) % 2),
        "shared-race",
        "main/tile/kk/2:StoreRegs",
        base="cdna3",
    ),
    Bug(
        "lds-b-k-coordinate-lags",
        "main/tile/kk/1:LoadTile",
        x.LoadTile("b_regs", "b_ptr", ((kk + 1) * BK, off_n), N_, ("BK", "BN"), BLK_B),
        "fragment-tag",
        "main/tile/kk/5:Mfma",
        base="cdna3",
    ),
    Bug(
        "mfma-k-width-mismatch",
        "main/tile/5:ZeroAcc",
        x.ZeroAcc("acc", "BM", "BN", x.MfmaAcc((16, 16, 16), (2, 2), 4, 8)),
        "fragment-tag",
        "main/tile/kk/5:Mfma",
        base="cdna3",
    ),
    Bug(
        "blocked-layout-broadcasts",
        "main/tile/kk/0:LoadTile",
        x.LoadTile(
            "a_regs",
            "a_ptr",
            (off_m, kk * BK),
            K_,
            ("BM", "BK"),
            x.Blocked((1, 8), (8, 8), (2, 2), (1, 0)),
        ),
        "duplicate-owner",
        "main/tile/kk/0:LoadTile",
        base="cdna3",
    ),
    Bug(
        "store-tile-swapped",
        "main/tile/7:StoreTile",
        x.StoreTile("c_ptr", "acc", (off_n, off_m), N_),
        "output-tag",
        "main/tile/7:StoreTile",
        base="cdna3",
    ),
]


j = Sym("j", "loop", 0)
kv_row, q_row = Sym("kv_row", "scalar"), Sym("q_row", "scalar")
BN_, BM_ = Sym("BN", "const", 1), Sym("BM", "const", 1)

BUGS += [
    Bug(
        "attn-v-block-lags",
        "load/j/4:TmaLoad",
        x.TmaLoad("v_desc", (kv_row + (j + 1) * BN_, 0), "v_ring", s, "v_ready"),
        "fragment-tag",
        "softmax/j/6:Wgmma",
        base="attention",
    ),
    Bug(
        "attn-k-wrong-d-offset",
        "load/j/2:TmaLoad",
        x.TmaLoad("k_desc", (kv_row + j * BN_, 64), "k_ring", s, "k_ready"),
        "fragment-tag",
        "softmax/j/2:Wgmma",
        base="attention",
    ),
    Bug(
        "attn-missing-v-wait",
        "softmax/j/5:Wait",
        None,
        "missing-wait",
        "softmax/j/5:Wgmma",
        base="attention",
    ),
    Bug(
        "attn-missing-q-wait",
        "softmax/3:Wait",
        None,
        "missing-wait",
        "softmax/j/2:Wgmma",
        base="attention",
    ),
    Bug(
        "attn-release-before-pv-done",
        "softmax/j/7:WgmmaWait",
        None,
        "release-before-complete",
        "softmax/j/7:Arrive",
        base="attention",
    ),
    Bug(
        "attn-k-phase-flip",
        "softmax/j/0:Wait",
        x.Wait("k_ready", s, (it // S + 1) % 2),
        "wrong-phase",
        "softmax/j/0:Wait",
        base="attention",
    ),
    Bug(
        "attn-missing-fence",
        "softmax/6:FenceAsyncShared",
        None,
        "shared-race",
        "softmax/6:TmaStore",
        base="attention",
    ),
    Bug(
        "attn-output-rows-shifted",
        "softmax/7:TmaStore",
        x.TmaStore("o_desc", (q_row + BM_, 0), "o_smem"),
        "output-tag",
        "softmax/7:TmaStore",
        base="attention",
    ),
    Bug(
        "attn-expect-wrong-desc",
        "load/j/3:Expect",
        x.Expect("v_ready", s, ("k_desc", "v_desc")),
        "wrong-expect-bytes",
        "load/j/3:Expect",
        base="attention",
    ),
]


BUGS += [
    Bug(
        "release-on-ready-barrier",
        "mma/tile/kk/3:Arrive",
        x.Arrive("ready", (it + S - 1) % S, kk > 0),
        "wrong-barrier",
        "mma/tile/kk/3:Arrive",
    ),
    Bug(
        "release-before-read",
        "mma/tile/kk/1:Wgmma",
        x.Arrive("empty", s),
        "release-before-complete",
        "mma/tile/kk/1:Arrive",
        base="hopper-unpipelined",
        more=(("mma/tile/kk/3:Arrive", x.Wgmma("acc", "a_ring", s, "b_ring", s)),),
    ),
    Bug(
        "empty-barrier-count-2",
        "",
        None,
        "barrier-count",
        "mma/tile/kk/3:Arrive",
        barrier_count=("empty", 2),
    ),
    Bug(
        "ready-barrier-count-2",
        "",
        None,
        "barrier-count",
        "load/tile/kk/1:Expect",
        barrier_count=("ready", 2),
    ),
    Bug(
        "single-stage-ring-phase-flip",
        "mma/tile/kk/0:Wait",
        x.Wait("ready", s, (it // S + 1) % 2),
        "wrong-phase",
        "mma/tile/kk/0:Wait",
        base="hopper-1-stage",
    ),
    Bug(
        "pipelined-release-with-one-stage",
        "",
        None,
        "release-before-complete",
        "mma/tile/kk/3:Arrive",
        base="hopper-pipelined-1-stage",
        barrier_count=("empty", 1),
    ),
]


BUGS += [
    Bug(
        "acc-laid-out-for-bk-columns",
        "mma/tile/5:ZeroAcc",
        x.ZeroAcc("acc", "BM", "BK"),
        "fragment-layout",
        "mma/tile/kk/1:Wgmma",
    ),
    Bug(
        "attn-p-converted-against-scores",
        "softmax/j/4:OnlineSoftmax",
        x.OnlineSoftmax(
            "s_acc",
            "m_i",
            "l_i",
            "s_acc",
            "p",
            0.1275,
            Sym("m0", "scalar"),
            j * BN_,
            Sym("SKV", "shape", 1),
            True,
        ),
        "fragment-layout",
        "softmax/j/6:Wgmma",
        base="attention",
    ),
]


# the attention with two independent consumer warpgroups (`consumers=2`, causal)
HM_ = Sym("HM", "const", 1)
BUGS += [
    Bug(
        "attn2-kv-empty-counts-one-consumer",
        "",
        None,
        "barrier-count",
        "softmax0/j/8:Arrive",
        base="attention-2",
        barrier_count=("kv_empty", 1),
    ),
    Bug(
        "attn2-second-consumer-never-releases",
        "softmax1/j/8:Arrive",
        None,
        "barrier-count",
        "softmax0/j/8:Arrive",
        base="attention-2",
    ),
    Bug(
        "attn2-lse-rows-of-the-other-warpgroup",
        "softmax1/9:StoreLse",
        x.StoreLse("lse_ptr", "m_i1", "l_i1", "s_acc1", q_row - HM_),
        "output-tag",
        "softmax1/9:StoreLse",
        base="attention-2",
    ),
    Bug(
        "attn2-scores-from-the-other-q",
        "softmax1/j/2:Wgmma",
        x.Wgmma("s_acc1", "q0_smem", 0, "k_ring", s, True, False),
        "output-tag",
        "softmax1/7:TmaStore",
        base="attention-2",
    ),
    Bug(
        "attn2-lse-before-rows-shift",
        "softmax0/9:StoreLse",
        x.StoreLse("lse_ptr", "m_i0", "l_i0", "s_acc0", q_row + BM_),
        "output-tag",
        "softmax0/9:StoreLse",
        base="attention-2",
    ),
]


# the overlapped consumers (`overlap=True`: S of block j + 1 issued with O += P_j V_j, the
# softmax of block j + 1 while the PV wgmma runs, P carried to the next iteration)
SKV_ = Sym("SKV", "shape", 1)
m0 = Sym("m0", "scalar")
BUGS += [
    Bug(
        "attn2o-pv-wait-does-not-keep-p",
        "softmax0/j/7:WgmmaWait",
        x.WgmmaWait("o_acc0", 0),
        "register-not-kept",
        "softmax0/j/7:WgmmaWait",
        base="attention-2o",
    ),
    Bug(
        "attn2o-softmax-rescales-o-under-the-pv-wgmma",
        "softmax0/j/6:OnlineSoftmax",
        x.OnlineSoftmax(
            "s_acc0", "m_i0", "l_i0", "o_acc0", "pn0", 0.1275, m0, (j + 1) * BN_, SKV_, True
        ),
        "acc-read-in-flight",
        "softmax0/j/6:OnlineSoftmax",
        base="attention-2o",
    ),
    Bug(
        "attn2o-softmax-before-s-retired",
        "softmax0/j/5:WgmmaWait",
        x.WgmmaWait("s_acc0", 2),
        "acc-read-in-flight",
        "softmax0/j/6:OnlineSoftmax",
        base="attention-2o",
    ),
    Bug(
        "attn2o-softmax-overwrites-p-in-flight",
        "softmax0/j/6:OnlineSoftmax",
        x.OnlineSoftmax(
            "s_acc0",
            "m_i0",
            "l_i0",
            "o_acc0",
            "p0",
            0.1275,
            m0,
            (j + 1) * BN_,
            SKV_,
            True,
            "alpha0",
        ),
        "register-race",
        "softmax0/j/6:OnlineSoftmax",
        base="attention-2o",
    ),  # fmt: skip
    Bug(
        "attn2o-rescale-before-pv-retired",
        "softmax0/j/7:WgmmaWait",
        x.RescaleAcc("o_acc0", "alpha0"),
        "acc-read-in-flight",
        "softmax0/j/7:RescaleAcc",
        base="attention-2o",
        more=(("softmax0/j/9:RescaleAcc", x.WgmmaWait("o_acc0", 0, ("p0",))),),
    ),
    Bug(
        "attn2o-k-block-not-one-ahead",
        "load/j/2:TmaLoad",
        x.TmaLoad("k_desc", (kv_row + j * BN_, 0), "k_ring", s, "k_ready"),
        "fragment-tag",
        "softmax0/j/4:Wgmma",
        base="attention-2o",
    ),
    Bug(
        "attn2o-first-k-block-wrong",
        "load/6:TmaLoad",
        x.TmaLoad("k_desc", (kv_row + BN_, 0), "k0_smem", 0, "k0_bar"),
        "fragment-tag",
        "softmax0/j/4:Wgmma",
        base="attention-2o",
    ),
]

expert = Sym("expert", "scalar")
D_ = Sym("D", "const", 1)
_blk = x.Blocked((1, 8), (4, 16), (4, 1), (1, 0))  # the CDNA3 attention's K/V loads at D=128

BUGS += [
    # ---- the MoE grouped GEMM (Hopper): the expert table and the stacked weights
    Bug(
        "moe-expert-of-column-block",
        "load/tile/5:LoadScalar",
        x.LoadScalar("expert", "expert_ptr", off_n // BN),
        "group-tag",
        "load/tile/5:LoadScalar",
        base="moe",
    ),
    Bug(
        "moe-expert-of-next-block",
        "load/tile/5:LoadScalar",
        x.LoadScalar("expert", "expert_ptr", off_m // BM_ + 1),
        "group-tag",
        "load/tile/5:LoadScalar",
        base="moe",
    ),
    Bug(
        "moe-weights-rows-not-the-tile-columns",
        "load/tile/kk/3:TmaLoad",
        x.TmaLoad("b_desc", (expert * N_ + off_m, kk * BK), "b_ring", s, "ready"),
        "output-tag",
        "mma/tile/12:TmaStore",
        base="moe",
    ),
    Bug(
        "moe-weights-k-block-behind",
        "load/tile/kk/3:TmaLoad",
        x.TmaLoad("b_desc", (expert * N_ + off_n, (kk + 1) * BK), "b_ring", s, "ready"),
        "fragment-tag",
        "mma/tile/kk/1:Wgmma",
        base="moe",
    ),
    Bug(
        "moe-producer-phase-flip",
        "load/tile/kk/0:Wait",
        x.Wait("empty", s, (it // S) % 2),
        "wrong-phase",
        "load/tile/kk/0:Wait",
        base="moe",
    ),
    Bug(
        "moe-producer-overruns-consumer",
        "load/tile/kk/0:Wait",
        None,
        "producer-overrun",
        "load/tile/kk/1:TmaLoad",
        base="moe",
    ),
    Bug(
        "moe-release-before-mma-retired",
        "mma/tile/kk/3:Arrive",
        x.Arrive("empty", s),
        "release-before-complete",
        "mma/tile/kk/3:Arrive",
        base="moe",
    ),
    Bug(
        "moe-cdna3-expert-of-column-block",
        "main/tile/5:LoadScalar",
        x.LoadScalar("expert", "expert_ptr", off_n // BN),
        "group-tag",
        "main/tile/5:LoadScalar",
        base="moe-cdna3",
    ),
    Bug(
        "moe-cdna3-missing-barrier",
        "main/tile/kk/4:Barrier",
        None,
        "shared-race",
        "main/tile/kk/4:Mfma",
        base="moe-cdna3",
    ),
    # ---- CDNA3 attention: LDS races, MFMA fragment tags through P, output rows
    Bug(
        "attn-cdna3-no-barrier-before-kv-stores",
        "main/j/2:Barrier",
        None,
        "shared-race",
        "main/j/2:StoreRegs",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-no-barrier-after-kv-stores",
        "main/j/5:Barrier",
        None,
        "shared-race",
        "main/j/6:Mfma",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-v-read-transposed",
        "main/j/9:Mfma",
        x.Mfma("o_acc", "p", None, "v_lds", 0, True),
        "fragment-tag",
        "main/j/9:Mfma",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-k-not-transposed",
        "main/j/7:Mfma",
        x.Mfma("s_acc", "q_lds", 0, "k_lds", 0, False),
        "fragment-tag",
        "main/j/7:Mfma",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-v-block-ahead",
        "main/j/1:LoadTile",
        x.LoadTile("v_regs", "v_ptr", (kv_row + (j + 1) * BN_, 0), D_, ("BN", "D"), _blk),
        "fragment-tag",
        "main/j/9:Mfma",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-o-stored-at-kv-rows",
        "main/8:StoreTile",
        x.StoreTile("o_ptr", "o_acc", (kv_row, 0), D_),
        "output-tag",
        "main/8:StoreTile",
        base="attn-cdna3",
    ),
    Bug(
        "attn-cdna3-lse-rows-off-by-a-block",
        "main/9:StoreLse",
        x.StoreLse("lse_ptr", "m_i", "l_i", "s_acc", q_row + BM_),
        "output-tag",
        "main/9:StoreLse",
        base="attn-cdna3",
    ),
    # ---- the fused gate/up + SiLU epilogue of the MoE up-projection
    Bug(
        "moe-fused-up-block-is-the-gate-block",
        "load/tile/kk/4:TmaLoad",
        x.TmaLoad("b_desc", (expert * (2 * N_) + off_n, kk * BK), "u_ring", s, "ready"),
        "output-tag",
        "mma/tile/10:SiluMul",
        base="moe-fused",
    ),
    Bug(
        "moe-fused-expert-stride-n-not-2n",
        "load/tile/kk/3:TmaLoad",
        x.TmaLoad("b_desc", (expert * N_ + off_n, kk * BK), "g_ring", s, "ready"),
        "output-tag",
        "mma/tile/10:SiluMul",
        base="moe-fused",
    ),
    Bug(
        "moe-fused-expect-one-weight-block",
        "load/tile/kk/1:Expect",
        x.Expect("ready", s, ("a_desc", "b_desc")),
        "wrong-expect-bytes",
        "load/tile/kk/1:Expect",
        base="moe-fused",
    ),
    Bug(
        "moe-fused-release-with-up-mma-running",
        "mma/tile/kk/3:WgmmaWait",
        x.WgmmaWait("acc_g", 3, ("acc_u",)),
        "release-before-complete",
        "mma/tile/kk/4:Arrive",
        base="moe-fused",
    ),
    Bug(
        "moe-fused-epilogue-before-the-last-mma-retired",
        "mma/tile/8:WgmmaWait",
        x.WgmmaWait("acc_g", 1, ("acc_u",)),
        "acc-read-in-flight",
        "mma/tile/10:SiluMul",
        base="moe-fused",
    ),
    # ---- the ping-pong of two consumer warpgroups (turn0 / turn1 handshakes)
    Bug(
        "pingpong-both-wait-same-iteration",
        "softmax0/j/2:Wait",
        x.Wait("turn0", 0, it % 2),
        "handshake-deadlock",
        "softmax0/j/2:Wait",
        base="attention-2p",
    ),
    Bug(
        "pingpong-both-wait-previous-iteration",
        "softmax1/j/2:Wait",
        x.Wait("turn1", 0, (it + 1) % 2),
        "wrong-phase",
        "softmax0/j/2:Wait",
        base="attention-2p",
    ),
    Bug(
        "pingpong-turn-phase-constant",
        "softmax1/j/2:Wait",
        x.Wait("turn1", 0, 0),
        "wrong-phase",
        "softmax1/j/2:Wait",
        base="attention-2p",
    ),
    Bug(
        "pingpong-hands-turn-before-taking-it",
        "softmax0/j/2:Wait",
        x.Arrive("turn1", 0),
        "handshake-order",
        "softmax0/j/2:Arrive",
        base="attention-2p",
        more=(("softmax0/j/4:Arrive", x.Wait("turn0", 0, (it + 1) % 2)),),
    ),
]

# ---- the persistent attention: Q as a two-stage ring over the tile counter `ti`, read by
# every K step's wgmma (a read nested one loop deeper than its write), O through buffers
ti = Sym("ti", "loop", 0)
HM_ = Sym("HM", "const", 1)
q_row_ = Sym("q_row", "scalar")
BUGS += [
    Bug(
        "persistent-q-read-from-stage-0",
        "softmax0/tile/j/2:Wgmma",
        x.Wgmma("s_acc0", "q0_smem", 0, "k_ring", s, True, False),
        "wrong-stage",
        "softmax0/tile/j/2:Wgmma",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-phase-of-the-tile-parity",
        "softmax0/tile/3:Wait",
        x.Wait("q_bar", ti % 2, ti % 2),
        "wrong-phase",
        "softmax0/tile/3:Wait",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-released-for-the-next-tile",
        "softmax1/tile/5:Arrive",
        x.Arrive("q_empty", (ti + 1) % 2),
        "double-release",  # at two stages, the next tile's stage is the previous one's
        "softmax1/tile/5:Arrive",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-never-released",
        "softmax0/tile/5:Arrive",
        None,
        "missing-release",
        "softmax0/tile/j/2:Wgmma",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-loaded-without-the-release",
        "load/tile/2:Wait",
        None,
        "producer-overrun",
        "load/tile/3:TmaLoad",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-empty-one-arrival",
        "",
        None,
        "barrier-count",
        "softmax0/tile/5:Arrive",
        base="attention-persistent",
        barrier_count=("q_empty", 1),
    ),
    Bug(
        "persistent-o-rewritten-under-its-store",
        "softmax0/tile/6:StoreWait",
        None,
        "shared-race",
        "softmax0/tile/6:NormalizeStore",
        base="attention-persistent",
    ),
    Bug(
        "persistent-lse-at-the-other-warpgroups-rows",
        "softmax1/tile/10:StoreLse",
        x.StoreLse("lse_ptr", "m_i1", "l_i1", "s_acc1", q_row_ - HM_),
        "output-tag",
        "softmax1/tile/10:StoreLse",
        base="attention-persistent",
    ),
    Bug(
        "persistent-q-expect-one-block",
        "load/tile/3:Expect",
        x.Expect("q_bar", ti % 2, ("q_desc",)),
        "wrong-expect-bytes",
        "load/tile/3:Expect",
        base="attention-persistent",
    ),
]


NS = Sym("NS", "const", 1)
GROUP_ = Sym("GROUP", "const", 1)
M_ = Sym("M", "shape", 1)
tile_ = Sym("tile", "loop", 0)

BUGS += [
    # overlapping column tiles (`build(column_stride=1)`): the consumer steps its tiles by BN
    # while the producer steps by NS, so a tile is stored BN - NS columns right of where its
    # B columns were loaded (caught where it is stored)
    Bug(
        "column-stride-consumer-steps-bn",
        "mma/tile/4:Let",
        x.Let("off_n", local // rows * BN),
        "output-tag",
        "mma/tile/9:StoreTile",
        base="hopper-column-stride",
    ),
    # the producer counts column tiles of BN (fewer tiles than the consumer walks): its
    # tile numbering disagrees with the consumer's
    Bug(
        "column-stride-producer-counts-bn-tiles",
        "load/tile/2:Let",
        x.Let("local", tile_ % (GROUP_ * cdiv(N_, BN))),
        "output-tag",
        "mma/tile/9:StoreTile",
        base="hopper-column-stride",
    ),
]


BUGS += [
    # overlapping column tiles storing the whole BN columns: two CTAs write the NS..BN
    # columns of one tile's neighbour (a write-write race between CTAs)
    Bug(
        "column-stride-store-whole-tile",
        "mma/tile/9:StoreTile",
        x.StoreTile("c_ptr", "acc", (off_m, off_n), N_, None, (M_, N_)),
        "output-overlap",
        "mma/tile/9:StoreTile",
        base="hopper-column-stride",
    ),
    # both partitions step column tiles by BN/2 (producer and consumer agree, the spec's
    # reads hold): every TMA store of a BN-wide tile overlaps the next tile's
    Bug(
        "tiles-stepped-half-a-tile",
        "mma/tile/4:Let",
        x.Let("off_n", local // rows * (BN // 2)),
        "output-overlap",
        "mma/tile/12:TmaStore",
        more=(("load/tile/4:Let", x.Let("off_n", local // rows * (BN // 2))),),
    ),
]


pid_, pid_y_ = Sym("pid", "pid", 0), Sym("pid_y", "pid", 0)
S_ = Sym("S", "shape", 1)
causal_blk = cdiv(S_, BM_) - 1 - pid_
BUGS += [
    # output ownership across the launch grid (`Kernel.programs`), not a persistent loop:
    # the second consumer warpgroup stores its O rows at the first one's (its q_row lost
    # the + HM): both warpgroups of every CTA write rows 0..HM-1 of the block
    Bug(
        "attn2-both-warpgroups-store-the-first-half",
        "softmax1/0:Let",
        x.Let("q_row", pid_y_ * S_ + causal_blk * BM_),
        "output-overlap",
        "softmax1/7:TmaStore",
        base="attention-2",
    ),
    # query blocks stepped by half a block in the CDNA3 kernel (its loads and stores agree):
    # CTA pid and pid + 1 both write half a block of O
    Bug(
        "attn-cdna3-blocks-stepped-half",
        "main/0:Let",
        x.Let("q_row", pid_y_ * S_ + causal_blk * (BM_ // 2)),
        "output-overlap",
        "main/8:StoreTile",
        base="attn-cdna3",
    ),
]


def kernel_for(bug: Bug) -> x.ExplicitKernel:
    from argus_plugins.kernels.attention.kernel_explicit import build as build_attention
    from argus_plugins.kernels.attention.kernel_explicit import build_cdna3 as attn_cdna3
    from argus_plugins.kernels.attention.kernel_explicit import build_persistent
    from argus_plugins.kernels.gemm.kernel_explicit import build, build_cdna3
    from argus_plugins.kernels.moe.kernel_explicit import build as moe_build
    from argus_plugins.kernels.moe.kernel_explicit import build_cdna3 as moe_cdna3

    return {
        "hopper": build,
        "cdna3": build_cdna3,
        "cdna3-1": lambda: build_cdna3(1),
        "attention": lambda: build_attention(causal=True),
        "attention-2": lambda: build_attention(causal=True, consumers=2),
        "attention-2o": lambda: build_attention(causal=True, consumers=2, overlap=True),
        "hopper-unpipelined": lambda: build(4, 0),
        "hopper-1-stage": lambda: build(4, 0).with_consts(STAGES=1),
        "hopper-pipelined-1-stage": lambda: build().with_consts(STAGES=1),
        "hopper-column-stride": lambda: build(4, 1, 1).with_consts(NS=112),
        "moe": moe_build,
        "moe-fused": lambda: moe_build(8, 1, True),
        "moe-cdna3": moe_cdna3,
        "attn-cdna3": lambda: attn_cdna3(128, True),
        "attention-2p": lambda: build_attention(causal=True, consumers=2, pingpong=True),
        "attention-persistent": build_persistent,
    }[bug.base]()


def mutate(kernel: x.ExplicitKernel, bug: Bug) -> x.ExplicitKernel:
    if not bug.point and bug.swizzle is None and bug.barrier_count is None:
        return kernel  # the base kernel itself is the bug (a configuration)
    if bug.barrier_count is not None:
        name, count = bug.barrier_count
        bars = tuple(replace(b, count=count) if b.name == name else b for b in kernel.barriers)
        return replace(kernel, barriers=bars)
    if bug.more:
        for point, op in ((bug.point, bug.new), *bug.more):
            kernel = x.replace_op(kernel, point, op)
        return kernel
    if bug.swizzle is not None:
        shared = tuple(
            replace(b, layout=replace(b.layout, swizzle_bytes=bug.swizzle))
            if b.name == "a_ring"
            else b
            for b in kernel.shared
        )
        return replace(kernel, shared=shared)
    return x.replace_op(kernel, bug.point, bug.new)
