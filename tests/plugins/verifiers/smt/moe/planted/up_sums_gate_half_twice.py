"""Planted MoE bug (moe_up): the up product sums the gate half's tile (wg) instead of wu:
SiLU(gate) * gate. Every tile is the block's expert's; the up product's right-operand
provenance (tag `coord.rhs` = (e, 0)) shows the wrong half."""

# ruff: noqa: F821, F841
# kept line for line like kernel.py (counterexamples cite lines): not formatted
# fmt: off
from argus_plugins.dsl.tile import lang as al

KERNEL = "moe_up"


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
        gate = al.dot(xt, wg, gate)
        up = al.dot(xt, wg, up)  # root cause: wu
    al.assert_tag(lambda e, half: half.eq(0), gate, name="coord.rhs", arity=2)  # gate: w1[e, 0]
    al.assert_tag(lambda e, half: half.eq(1), up, name="coord.rhs", arity=2)  # <- violated: assert_tag
    act = al.rows_for(gate * al.sigmoid(gate) * up, slots, lambda s: s // topk)  # SiLU(gate) * up; row r is slot slots[r]'s
    al.store(h1.rows(slots).tile(BN)[pn], act.to(h1.dtype), mask=slots >= 0)


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


def own_expert(slots, block_expert, pb):
    """Ghost assertion: the slot of every real row r of this block is routed to the block's
    expert (so the token gathered into row r belongs to that expert)."""
    return lambda *_: al.read("ids", al.at(slots)).eq(al.read(block_expert, pb))


def expert_is(block_expert, pb):
    """Ghost assertion: a weight tile's expert coordinate is block pb's expert."""
    return lambda e, *_: e.eq(al.read(block_expert, pb))
