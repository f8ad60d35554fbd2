"""Planted MoE bug (moe_down): A weight from the wrong slot: wts is indexed by slot // 2 (the token for top-2), not by the slot."""

# ruff: noqa: F821
# kept line for line like kernel.py (counterexamples cite lines): not formatted
# fmt: off
from argus_plugins.dsl.tile import lang as al

KERNEL = "moe_down"


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
    wt = al.load(wts.rows(slots // 2), mask=slots >= 0)  # root cause
    al.store(y.rows(slots).tile(BN)[pn], (acc * wt[:, None]).to(y.dtype), mask=slots >= 0)  # <- violated: elementwise_tag


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
