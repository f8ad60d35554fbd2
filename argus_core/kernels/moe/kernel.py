"""Fused Mixture-of-Experts in the Argus tile DSL: five kernels, run in this order.

1. `moe_route`: softmax over experts, top-k (ties to the lower expert), optional
   renormalization of the k weights. Slot s of token t is the flat slot t*K + s.
2. `moe_align`: one program per expert lays its slots out in whole blocks of BM rows
   (`sorted_ids`), pads the last block with the sentinel SLOTS, and records each block's
   expert (`block_expert`; -1 for blocks past the last expert's).
3. `moe_up`: grouped GEMM over the blocks, rows gathered by token, with the gate and up
   projections fused and SiLU(gate)*up applied: h1[slot] = silu(x[t] w_gate) * (x[t] w_up).
4. `moe_down`: grouped GEMM h1[slot] w_down, times the slot's routing weight: y[slot].
5. `moe_combine`: out[t] = sum over the token's K slots of y[t*K + s].

Padding rows (the sentinel) and padding blocks (expert -1) are masked in every load and
store: they read nothing and write nothing.
"""

from argus_plugins.dsl.tile import lang as al


@al.kernel
def moe_route(logits: al.Tensor["T", "E"], ids: al.Tensor["T", "K"], wts: al.Tensor["T", "K"],
              renorm: al.i32, BT: al.constexpr, BE: al.constexpr):
    (pt,) = al.program_ids((al.cdiv(logits.shape[0], BT),))
    lg = al.load(logits.tile(BT, BE)[pt, 0], other=float("-inf"))  # experts >= E never win
    m = al.max(lg, 1)
    total = al.sum(al.exp(lg - m[:, None]), 1)  # the softmax denominator over all experts
    _, e = al.indices((BT, BE))
    rest = lg
    chosen = al.zeros((BT,), al.f32)  # the chosen experts' share, for renormalization
    for _ in al.range(ids.shape[1]):
        best = al.max(rest, 1)
        pick = al.min(al.where(rest.eq(best[:, None]), e, BE), 1)
        chosen = chosen + al.exp(best - m)
        rest = al.where(pick[:, None].eq(e), float("-inf"), rest)
    denom = al.where(renorm.ne(0), chosen, total)
    again = lg
    for s2 in al.range(ids.shape[1]):
        best2 = al.max(again, 1)
        pick2 = al.min(al.where(again.eq(best2[:, None]), e, BE), 1)
        al.store(ids.tile(BT, 1)[pt, s2], pick2[:, None].to(ids.dtype))
        al.store(wts.tile(BT, 1)[pt, s2], (al.exp(best2 - m) / denom)[:, None])
        again = al.where(pick2[:, None].eq(e), float("-inf"), again)


@al.kernel
def moe_align(ids: al.Tensor["SLOTS"], sorted_ids: al.Tensor["CAP"], block_expert: al.Tensor["NB"],
              num_experts: al.i32, BM: al.constexpr, BS: al.constexpr, BE: al.constexpr):
    (ex,) = al.program_ids((num_experts,))
    (i,) = al.indices((BS,))
    (j,) = al.indices((BE,))
    counts = al.zeros((BE,), al.i32)  # slots routed to each expert
    for c in al.range(al.cdiv(ids.shape[0], BS)):
        chunk = al.load(ids.tile(BS)[c], other=-1)
        counts = counts + al.sum(chunk[:, None].eq(al.indices((BS, BE))[1]).to(al.i32), 0)
    padded = (counts + (BM - 1)) // BM * BM  # each expert's rows, rounded up to whole blocks
    base = al.sum(al.where(j < ex, padded, 0), 0)  # where this expert's first block starts
    mine_n = al.sum(al.where(j.eq(ex), counts, 0), 0)
    mine_p = al.sum(al.where(j.eq(ex), padded, 0), 0)
    run = al.zeros((1,), al.i32)
    for c2 in al.range(al.cdiv(ids.shape[0], BS)):
        chunk2 = al.load(ids.tile(BS)[c2], other=-1)
        mine = chunk2.eq(ex).to(al.i32)
        pos = base + run + al.cumsum(mine, 0) - 1
        slot = al.zeros((BS,), al.i32) + (c2 * BS + i)
        al.store(sorted_ids.rows(pos), slot, mask=mine.ne(0))
        run = run + al.sum(mine, 0)[None]
    (p,) = al.indices((BM,))
    pad = al.zeros((BM,), al.i32) + p
    sentinel = al.zeros((BM,), al.i32) + ids.shape[0]
    al.store(sorted_ids.rows(base + mine_n + pad), sentinel, mask=pad < mine_p - mine_n)
    blocks = al.cdiv(sorted_ids.shape[0], BM)
    for q in al.range(al.cdiv(blocks, BS)):
        blk = al.zeros((BS,), al.i32) + (q * BS + i)
        al.store(block_expert.rows(base // BM + blk), al.zeros((BS,), al.i32) + ex,
                 mask=blk < mine_p // BM)
    # the last expert's program marks everything after the last expert's blocks as padding
    used = al.sum(padded, 0)
    last = al.zeros((BS,), al.i32) + ex.eq(num_experts - 1)
    for q2 in al.range(al.cdiv(sorted_ids.shape[0], BS)):
        at = al.zeros((BS,), al.i32) + (q2 * BS + i)
        al.store(sorted_ids.rows(at), al.zeros((BS,), al.i32) + ids.shape[0],
                 mask=(at >= used) & last.ne(0))
    for q3 in al.range(al.cdiv(blocks, BS)):
        b3 = al.zeros((BS,), al.i32) + (q3 * BS + i)
        al.store(block_expert.rows(b3), al.zeros((BS,), al.i32) - 1,
                 mask=(b3 >= used // BM) & last.ne(0))


@al.kernel
def moe_up(x: al.Tensor["T", "H"], w1: al.Tensor["E", "TWO", "I", "H"], sorted_ids: al.Tensor["CAP"],
           block_expert: al.Tensor["NB"], h1: al.Tensor["SLOTS", "I"], topk: al.i32,
           BM: al.constexpr, BN: al.constexpr, BK: al.constexpr):
    pb, pn = al.program_ids((al.cdiv(sorted_ids.shape[0], BM), al.cdiv(h1.shape[1], BN)))
    ex = al.load_scalar(block_expert, pb)
    slots = al.load(sorted_ids.tile(BM)[pb], other=-1)
    tok = slots // topk
    gate = al.zeros((BM, BN), al.f32)
    up = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(x.shape[1], BK)):
        xt = al.load(x.rows(tok).tile(BK)[k], mask=slots >= 0)
        wg = al.load(al.permute(w1[ex, 0].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0)
        wu = al.load(al.permute(w1[ex, 1].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0)
        gate = al.dot(xt, wg, gate)
        up = al.dot(xt, wu, up)
    act = gate * al.sigmoid(gate) * up  # SiLU(gate) * up
    al.store(h1.rows(slots).tile(BN)[pn], act.to(h1.dtype), mask=slots >= 0)


@al.kernel
def moe_down(h1: al.Tensor["SLOTS", "I"], w2: al.Tensor["E", "H", "I"], sorted_ids: al.Tensor["CAP"],
             block_expert: al.Tensor["NB"], wts: al.Tensor["SLOTS"], y: al.Tensor["SLOTS", "H"],
             BM: al.constexpr, BN: al.constexpr, BK: al.constexpr):
    pb, pn = al.program_ids((al.cdiv(sorted_ids.shape[0], BM), al.cdiv(y.shape[1], BN)))
    ex = al.load_scalar(block_expert, pb)
    slots = al.load(sorted_ids.tile(BM)[pb], other=-1)
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(h1.shape[1], BK)):
        a = al.load(h1.rows(slots).tile(BK)[k], mask=slots >= 0)
        w = al.load(al.permute(w2[ex].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0)
        acc = al.dot(a, w, acc)
    wt = al.load(wts.rows(slots), mask=slots >= 0)  # each slot's own routing weight
    al.store(y.rows(slots).tile(BN)[pn], (acc * wt[:, None]).to(y.dtype), mask=slots >= 0)


@al.kernel
def moe_combine(y: al.Tensor["K", "T", "H"], out: al.Tensor["T", "H"],
                BT: al.constexpr, BH: al.constexpr):
    pt, ph = al.program_ids((al.cdiv(out.shape[0], BT), al.cdiv(out.shape[1], BH)))
    acc = al.zeros((BT, BH), al.f32)
    for s in al.range(y.shape[0]):
        acc = acc + al.load(y[s].tile(BT, BH)[pt, ph]).to(al.f32)
    al.store(out.tile(BT, BH)[pt, ph], acc.to(out.dtype))
