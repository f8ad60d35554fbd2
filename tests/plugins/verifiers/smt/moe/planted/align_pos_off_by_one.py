"""Planted MoE bug (moe_align): a slot written one row too far: `base + run + cumsum(mine)` (no - 1), so an expert's last slot lands on its first padding row, or, with no padding, on the next expert's first row."""

# ruff: noqa: F821
# kept line for line like kernel.py (counterexamples cite lines): not formatted
# fmt: off
from argus_plugins.dsl.tile import lang as al

KERNEL = "moe_align"


@al.kernel
def moe_align(ids: al.Tensor["SLOTS"], sorted_ids: al.Tensor["CAP"], block_expert: al.Tensor["NB"],
              num_experts: al.i32, BM: al.constexpr, BS: al.constexpr, BE: al.constexpr):
    (ex,) = alignment_input(al.program_ids((num_experts,)), num_experts, BE)
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
        pos = base + run + al.cumsum(mine, 0)  # root cause: needs - 1
        slot = al.zeros((BS,), al.i32) + (c2 * BS + i)
        al.store(sorted_ids.rows(pos), slot, mask=lands_in_own_blocks(mine, pos, base, mine_n, mine_p, BM).ne(0))
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



# --- ghost code, as in kernel.py ---


def alignment_input(pids, num_experts, BE):
    """Ghost: moe_align's preconditions (one program per expert, every expert a column of
    the count tile); returns `pids`, so the line lowers as without it."""
    al.requires(num_experts >= 1)
    al.requires(num_experts <= BE)
    return pids


def lands_in_own_blocks(mine, pos, base, mine_n, mine_p, BM):
    """Ghost postcondition of moe_align's scatter; returns `mine`. Every slot routed to this
    expert (mine[r] != 0) lands in a row of [base, base + mine_n) (its real rows: the
    padding starts at base + mine_n), inside a block this program marks with its expert
    ([base // BM, (base + mine_p) // BM), the block_expert rows it stores)."""
    row, lo = al.at(pos), al.at(base)

    def pred(_slot):
        inside = (row >= lo) & (row < lo + al.at(mine_n))
        marked = (row // BM >= lo // BM) & (row // BM < (lo + al.at(mine_p)) // BM)
        return al.at(mine).eq(0) | (inside & marked)

    return al.expect(mine, pred, arity=1)  # <- violated: assert_tag
