"""Planted MoE bug (moe_align): the last block's padding rows written with -1 instead of the
sentinel SLOTS; the readers (`routing_contract`) take a row < 0 for neither padding nor a slot."""

# ruff: noqa: F821
# kept line for line like kernel.py (counterexamples cite lines): not formatted
# fmt: off
from argus_plugins.dsl.tile import lang as al

KERNEL = "moe_align"


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
    sentinel = padding(al.zeros((BM,), al.i32) - 1, ids)  # root cause
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


# --- ghost code (as in kernel.py) ---


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
    return al.expect(value, lambda _r: al.at(value).eq(ids.shape[0]), name="padding", arity=1)  # <- violated: assert_tag
