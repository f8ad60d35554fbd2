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
    (ex,) = alignment_input(al.program_ids((num_experts,)), ids, sorted_ids, block_expert, num_experts, BM, BE)
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
        al.store(sorted_ids.rows(pos), slot, mask=lands_in_own_blocks(mine, pos, base, mine_n, mine_p, BM, slot, ids, ex).ne(0))
        run = run + al.sum(mine, 0)[None]
    (p,) = al.indices((BM,))
    pad = al.zeros((BM,), al.i32) + p
    sentinel = padding(al.zeros((BM,), al.i32) + ids.shape[0], ids)
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
        al.store(sorted_ids.rows(at), padding(al.zeros((BS,), al.i32) + ids.shape[0], ids),
                 mask=(at >= used) & last.ne(0))
    for q3 in al.range(al.cdiv(blocks, BS)):
        b3 = al.zeros((BS,), al.i32) + (q3 * BS + i)
        al.store(block_expert.rows(b3), al.zeros((BS,), al.i32) - 1,
                 mask=padding_blocks((b3 >= used // BM) & last.ne(0), b3, used, BM))


@al.kernel
def moe_up(x: al.Tensor["T", "H"], w1: al.Tensor["E", "TWO", "I", "H"], sorted_ids: al.Tensor["CAP"],
           block_expert: al.Tensor["NB"], h1: al.Tensor["SLOTS", "I"], topk: al.i32,
           BM: al.constexpr, BN: al.constexpr, BK: al.constexpr):
    pb, pn = al.program_ids((al.cdiv(sorted_ids.shape[0], BM), al.cdiv(h1.shape[1], BN)))
    ex = al.load_scalar(block_expert, pb)
    slots = routing_contract(al.load(sorted_ids.tile(BM)[pb], other=-1), sorted_ids, block_expert, h1.shape[0], w1.shape[0], BM, topk >= 1, h1.shape[0].eq(x.shape[0] * topk), w1.shape[1].eq(2))
    tok = slots // topk
    gate = al.zeros((BM, BN), al.f32)
    up = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(x.shape[1], BK)):
        xt = al.expect(al.load(x.rows(tok).tile(BK)[k], mask=slots >= 0), own_expert(slots, block_expert, pb))
        wg = al.expect(al.load(al.permute(w1[ex, 0].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0), expert_is(block_expert, pb), arity=4)
        wu = al.expect(al.load(al.permute(w1[ex, 1].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0), expert_is(block_expert, pb), arity=4)
        gate = al.expect(al.dot(xt, wg, gate), lambda e, half: half.eq(0), "coord.rhs", 2)  # gate sums w1[e, 0] (tag coord.rhs: the dot's right operand's (expert, half))
        up = al.expect(al.dot(xt, wu, up), lambda e, half: half.eq(1), "coord.rhs", 2)  # up sums w1[e, 1]
    act = al.rows_for(gate * al.sigmoid(gate) * up, slots, lambda s: s // topk)  # SiLU(gate) * up; row r is slot slots[r]'s
    al.store(h1.rows(slots).tile(BN)[pn], act.to(h1.dtype), mask=slots >= 0)


@al.kernel
def moe_down(h1: al.Tensor["SLOTS", "I"], w2: al.Tensor["E", "H", "I"], sorted_ids: al.Tensor["CAP"],
             block_expert: al.Tensor["NB"], wts: al.Tensor["SLOTS"], y: al.Tensor["SLOTS", "H"],
             BM: al.constexpr, BN: al.constexpr, BK: al.constexpr):
    pb, pn = al.program_ids((al.cdiv(sorted_ids.shape[0], BM), al.cdiv(y.shape[1], BN)))
    ex = al.load_scalar(block_expert, pb)
    slots = routing_contract(al.load(sorted_ids.tile(BM)[pb], other=-1), sorted_ids, block_expert, h1.shape[0], w2.shape[0], BM)
    acc = al.zeros((BM, BN), al.f32)
    for k in al.range(al.cdiv(h1.shape[1], BK)):
        a = al.expect(al.load(h1.rows(slots).tile(BK)[k], mask=slots >= 0), own_expert(slots, block_expert, pb))
        w = al.expect(al.load(al.permute(w2[ex].tile(BN, BK)[pn, k], (1, 0)), mask=ex >= 0), expert_is(block_expert, pb), arity=3)
        acc = al.dot(a, w, acc)
    wt = al.load(wts.rows(slots), mask=slots >= 0)  # each slot's own routing weight
    al.store(y.rows(slots).tile(BN)[pn], (acc * wt[:, None]).to(y.dtype), mask=slots >= 0)


@al.kernel
def moe_combine(y: al.Tensor["K", "T", "H"], out: al.Tensor["T", "H"],
                BT: al.constexpr, BH: al.constexpr):
    pt, ph = al.program_ids((al.cdiv(out.shape[0], BT), al.cdiv(out.shape[1], BH)))
    acc = al.zeros((BT, BH), al.f32)
    for s in al.range(y.shape[0]):
        acc = acc + al.summand(al.load(y[s].tile(BT, BH)[pt, ph]), 0).to(al.f32)  # a sum over slots s
    al.store(out.tile(BT, BH)[pt, ph], acc.to(out.dtype))


# --- ghost code: contracts and assertions for the verifier, erased by the lowering ------


def routing_contract(slots, sorted_ids, block_expert, n_slots, experts, BM, *requires):
    """Ghost: assume what moe_align establishes (`routing.check_alignment`) and the shape
    preconditions `requires`; return `slots` (the loaded block of `sorted_ids`), so the
    contract is stated inline and the lowering, line for line, does not change.

    Row r of `sorted_ids` is the sentinel `n_slots` (padding) or a slot s < n_slots routed
    (`ids[s]`, moe_route's output) to its block's expert, at the one row `row_of[s]` that
    holds s; every routed expert is in [0, experts); a block's expert is -1 (unused, so
    every row of it is padding) or in [0, experts); one block_expert entry per block."""
    al.requires(block_expert.shape[0].eq(al.cdiv(sorted_ids.shape[0], BM)))
    for pred in requires:
        al.requires(pred)

    def row(r):
        s = al.read(sorted_ids, r)
        routed = al.read("ids", s).eq(al.read(block_expert, r // BM))
        return s.eq(n_slots) | ((s >= 0) & (s < n_slots) & routed & al.read("row_of", s).eq(r))

    al.contract(row, sorted_ids.shape[0], name="rows")
    al.contract(lambda s: (al.read("ids", s) >= 0) & (al.read("ids", s) < experts), n_slots, name="experts")
    al.contract(lambda b: (al.read(block_expert, b) >= -1) & (al.read(block_expert, b) < experts),
                block_expert.shape[0], name="blocks")
    return slots


def alignment_input(pids, ids, sorted_ids, block_expert, num_experts, BM, BE):
    """Ghost: moe_align's preconditions; returns `pids`, so the line lowers as without it.

    One program per expert, every expert a column of the count tile; one block_expert entry
    per block of sorted_ids; and the input contract: every routed expert `ids[s]` is in
    [0, num_experts) (moe_route's output: experts >= E are loaded as -inf, so never picked;
    assumed here, not proved across the two kernels)."""
    al.requires(num_experts >= 1)
    al.requires(num_experts <= BE)
    al.requires(block_expert.shape[0].eq(al.cdiv(sorted_ids.shape[0], BM)))
    al.contract(lambda s: (al.read(ids, s) >= 0) & (al.read(ids, s) < num_experts),
                ids.shape[0], name="experts")
    return pids


def lands_in_own_blocks(mine, pos, base, mine_n, mine_p, BM, slot, ids, ex):
    """Ghost postcondition of moe_align's scatter; returns `mine`. Every slot routed to this
    expert (mine[r] != 0) lands in a row of [base, base + mine_n) (its real rows: the
    padding starts at base + mine_n), inside a block this program marks with its expert
    ([base // BM, (base + mine_p) // BM), the block_expert rows it stores); the value it
    writes there is a slot, in [0, SLOTS) (the readers' `rows` contract: a row is the
    sentinel or a slot < n_slots; the padding value is `padding`'s), routed to this
    program's expert `ex`: ids[slot] = ex = block_expert[row // BM] (the readers' `routed`
    clause, with `marked` and the block store writing ex there, disjoint from the others)."""
    row, lo = al.at(pos), al.at(base)

    def pred(_slot):
        inside = (row >= lo) & (row < lo + al.at(mine_n))
        marked = (row // BM >= lo // BM) & (row // BM < (lo + al.at(mine_p)) // BM)
        a_slot = (al.at(slot) >= 0) & (al.at(slot) < ids.shape[0])
        routed = al.read(ids, al.at(slot)).eq(ex)
        return al.at(mine).eq(0) | (inside & marked & a_slot & routed)

    return al.expect(mine, pred, arity=1)


def padding_blocks(marks, b3, used, BM):
    """Ghost: every block the last program marks -1 (`marks`, the store's mask) lies wholly
    in the padded tail (b3 * BM >= used), whose rows the tail store fills with the
    sentinel: the readers' "a block's expert is -1 only if every row of it is padding";
    returns `marks`."""
    al.tag(marks, lambda r: (r,), "block")  # element r (the assertion needs a tag to speak of)
    return al.expect(marks, lambda _b: al.at(marks).eq(0) | (al.at(b3) * BM >= al.at(used)), name="block", arity=1)


def padding(value, ids):
    """Ghost: `value` (a tile moe_align stores into padding rows of sorted_ids) is the
    routing contract's sentinel, n_slots = SLOTS = ids.shape[0] (`routing_contract`: a row
    is the sentinel or a slot < n_slots routed to its block's expert); returns `value`. With
    `lands_in_own_blocks` (real rows hold slots in [0, SLOTS)), every value moe_align writes
    to sorted_ids satisfies the contract's value clause; rows it never writes are covered by
    the `store_cover` proof."""
    al.tag(value, lambda r: (r,), "padding")  # element r (the assertion needs a tag to speak of)
    return al.expect(value, lambda _r: al.at(value).eq(ids.shape[0]), name="padding", arity=1)


def own_expert(slots, block_expert, pb):
    """Ghost assertion: the slot of every real row r of this block is routed to the block's
    expert (so the token gathered into row r belongs to that expert)."""
    return lambda *_: al.read("ids", al.at(slots)).eq(al.read(block_expert, pb))


def expert_is(block_expert, pb):
    """Ghost assertion: a weight tile's expert coordinate is block pb's expert."""
    return lambda e, *_: e.eq(al.read(block_expert, pb))
