"""Attention forward at the explicit level for Hopper: an FA3-style warp-specialized kernel.

o[b, h] = softmax(q[b, h] k[b, g(h)]^T * scale) v[b, g(h)], q/k/v/o row-major
[B, H(KV), S, D] in bf16 viewed as 2-D [B * H * S, D] by their TMA descriptors; GQA maps
query head h to key/value head h // (H / HKV). Grid (cdiv(S, BM), B * H). A one-warp
producer partition loads the program's Q block once (`q_bar`) and then every K and V
block by TMA into two rings of STAGES stages (`k_ready`, `v_ready`); the default partition
(two warpgroups, 64 query rows each) waits for K, runs S = Q K^T by wgmma from shared
memory, the online softmax in registers (base 2, masking keys past SKV and, causal, past
the query row), converts P to the wgmma A-operand layout, waits for V, runs O += P V with P
from registers, and releases the stage (`kv_empty`). The epilogue divides by the row sums
and stores O through shared memory by TMA. Causal programs stop at their diagonal block
(queries and keys aligned at the start: S == SKV) and run the longest rows first (query
block `cdiv(S, BM) - 1 - pid`), so the last wave is made of short programs. S must be a multiple of BM (query rows
of one head must not spill into the next head's block); SKV is masked.

The ring protocol, the fragment tags of both MMAs (Q and K agree on d; P's key index,
which comes from the K block, agrees with the V block's rows) and the shared-memory races
are proved by `plugins/verifiers/smt/explicit_ops.py`.
"""

from __future__ import annotations

import math

from argus_core.ir.explicit import ExplicitKernel
from argus_plugins.dsl.explicit.lang import Kernel, cdiv, emin, pid, pid_y


def build(d: int = 128, causal: bool = False, stages: int = 2) -> ExplicitKernel:
    if d not in (64, 128):
        raise ValueError(f"invalid head dim {d!r}; valid choices: 64, 128")
    k = Kernel(f"attn_fwd_ws{'_causal' if causal else ''}", family="attention", num_warps=8)
    S, SKV, H, HKV = k.scalar("S"), k.scalar("SKV"), k.scalar("H"), k.scalar("HKV")
    BM, BN = k.const("BM", 128), k.const("BN", 128)
    k.const("D", d)
    STAGES = k.const("STAGES", stages)
    for name, tensor, rows in (
        ("q_desc", "q", "BM"),
        ("k_desc", "k", "BN"),
        ("v_desc", "v", "BN"),
        ("o_desc", "o", "BM"),
    ):
        k.desc(name, tensor, (rows, "D"))
    k.shared("q_smem", ("BM", "D"), 1, like="q_desc")
    k.shared("k_ring", ("BN", "D"), "STAGES", like="k_desc")
    k.shared("v_ring", ("BN", "D"), "STAGES", like="v_desc")
    k.shared("o_smem", ("BM", "D"), 1, like="o_desc")
    k.barriers("q_bar", 1)
    k.barriers("k_ready", "STAGES")
    k.barriers("v_ready", "STAGES")
    k.barriers("kv_empty", "STAGES")
    m_blk = cdiv(S, BM) - 1 - pid if causal else pid  # causal: longest rows first
    n_kv = emin(cdiv((m_blk + 1) * BM, BN), cdiv(SKV, BN)) if causal else cdiv(SKV, BN)
    scale_log2 = math.log2(math.e) / math.sqrt(d)

    with k.partition("softmax", warps=8, default=True):
        q_row = k.let("q_row", pid_y * S + m_blk * BM)
        k.softmax_state("m_i", "l_i", "s_acc", "BM")
        k.zero_acc("o_acc", "BM", "D", warps=(8, 1))
        k.wait("q_bar", 0, 0)
        with k.loop("j", 0, n_kv, counter="it") as (j, it):
            s = it % STAGES
            k.wait("k_ready", s, it // STAGES % 2)
            k.zero_acc("s_acc", "BM", "BN", warps=(8, 1))
            k.wgmma("s_acc", "q_smem", 0, "k_ring", s, b_trans=True, use_acc=False)
            k.wgmma_wait("s_acc", 0)
            k.online_softmax(
                "s_acc", "m_i", "l_i", "o_acc", "p", scale_log2, m_blk * BM, j * BN, SKV, causal
            )
            k.wait("v_ready", s, it // STAGES % 2)
            k.wgmma("o_acc", "p", None, "v_ring", s)
            k.wgmma_wait("o_acc", 0)
            k.arrive("kv_empty", s)
        k.normalize_store("o_smem", "o_acc", "l_i")
        k.fence_async_shared()
        k.tma_store("o_desc", (q_row, 0), "o_smem")
        k.store_wait(0)

    with k.partition("load", warps=1, regs=24):
        q_row = k.let("q_row", pid_y * S + m_blk * BM)
        kv_row = k.let("kv_row", (pid_y // H * HKV + pid_y % H // (H // HKV)) * SKV)
        k.expect("q_bar", 0, "q_desc")
        k.tma_load("q_desc", (q_row, 0), "q_smem", 0, "q_bar")
        with k.loop("j", 0, n_kv, counter="it") as (j, it):
            s = it % STAGES
            k.wait("kv_empty", s, (it // STAGES + 1) % 2)
            k.expect("k_ready", s, "k_desc")
            k.tma_load("k_desc", (kv_row + j * BN, 0), "k_ring", s, "k_ready")
            k.expect("v_ready", s, "v_desc")
            k.tma_load("v_desc", (kv_row + j * BN, 0), "v_ring", s, "v_ready")
    return k.build()
