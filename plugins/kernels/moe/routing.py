"""MoE routing and block alignment: PyTorch helpers, and the specification the DSL kernels meet.

A token t routed to `topk` experts owns `topk` *slots*, numbered t·topk + s for s = 0..topk-1
(s = rank of the expert among the token's choices, highest weight first). The grouped GEMM
works on blocks of `block_m` rows, each row a slot and each block one expert's, so the
slots are sorted by expert and every expert's run is padded to whole blocks:

    sorted_ids [num_blocks · block_m] int32   slot of each row, or the sentinel T·topk (padding)
    block_expert [num_blocks] int32           the expert whose weights block b multiplies

`align_blocks` produces exactly that; `check_alignment` lists the properties a candidate
alignment (e.g. the DSL alignment kernel's output) violates. These properties are the
contract the grouped GEMM assumes: every non-padding row of block b is a slot routed to
block_expert[b]; every slot appears exactly once; padding rows only follow an expert's real
rows, fewer than block_m per expert (so no block is padding only).
"""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError

# rows listed per violated property before the rest is summarized as a count
_SHOWN = 5


def route(router_logits: Any, topk: int, renorm: bool) -> tuple[Any, Any]:
    """(topk_ids [T, topk] int32, topk_weights [T, topk] fp32) of fp32 router logits [T, E].

    The weights are the softmax over all E experts (fp32) at the top-k experts, optionally
    renormalized to sum to 1 per token. Experts are ordered by descending logit (softmax is
    monotonic, so a kernel may select on logits or on probabilities), and ties go to the
    lower expert index, so the choice is deterministic.
    """
    import torch

    t, e = router_logits.shape
    if not 1 <= int(topk) <= e:
        raise ConfigError(f"invalid topk {topk}; must be in [1, E={e}]")
    logits = router_logits.float()
    probs = torch.softmax(logits, dim=-1)
    # a stable descending sort keeps equal logits in index order: ties go to the lower id
    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, : int(topk)]
    weights = probs.gather(-1, ids)
    if renorm:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return ids.to(torch.int32), weights


def padded_capacity(num_slots: int, num_experts: int, block_m: int) -> int:
    """Rows enough for `sorted_ids` under any routing of `num_slots` slots.

    Each expert that gets c > 0 slots pads to ceil(c / block_m) · block_m <= c + block_m - 1
    rows, and at most min(E, num_slots) experts get any; the total is a multiple of block_m,
    so the bound rounds down to one. A kernel allocates this many rows up front and reports
    the used prefix as num_tokens_post_padded.
    """
    bound = num_slots + min(num_experts, num_slots) * (block_m - 1)
    return bound // block_m * block_m


def align_blocks(topk_ids: Any, num_experts: int, block_m: int) -> tuple[Any, Any, int]:
    """(sorted_ids, block_expert, num_tokens_post_padded) for routing `topk_ids` [T, topk].

    Experts in ascending order, each expert's slots in ascending order, each expert padded
    with the sentinel T·topk to a multiple of block_m; an expert with no slot gets no block.
    num_tokens_post_padded == len(sorted_ids) == len(block_expert) · block_m.
    """
    import torch

    if block_m < 1:
        raise ConfigError(f"invalid block_m {block_m}; must be >= 1")
    flat = topk_ids.reshape(-1).long()
    n = flat.numel()
    if n and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        bad = int(flat.min()) if int(flat.min()) < 0 else int(flat.max())
        raise ConfigError(f"invalid expert id {bad} in topk_ids; valid: 0..{num_experts - 1}")
    counts = torch.bincount(flat, minlength=num_experts)
    blocks = (counts + block_m - 1) // block_m
    padded = blocks * block_m
    first_row = torch.cumsum(padded, 0) - padded  # each expert's first row in sorted_ids
    first_rank = torch.cumsum(counts, 0) - counts  # its first slot in expert order
    order = torch.sort(flat, stable=True).indices  # slots by expert, ascending within one
    expert = flat[order]
    rows = first_row[expert] + torch.arange(n, device=flat.device) - first_rank[expert]
    total = int(padded.sum())
    sorted_ids = torch.full((total,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[rows] = order.to(torch.int32)
    block_expert = torch.repeat_interleave(
        torch.arange(num_experts, device=flat.device), blocks
    ).to(torch.int32)
    return sorted_ids, block_expert, total


def _slot(v: int, topk: int) -> str:
    return f"slot {v} (token {v // topk}, choice {v % topk})"


def _report(found: list[str], what: str) -> list[str]:
    """The first few instances of one violated property, then a count of the rest."""
    if len(found) <= _SHOWN:
        return found
    return [*found[:_SHOWN], f"... and {len(found) - _SHOWN} more {what}"]


def check_alignment(sorted_ids: Any, block_expert: Any, topk_ids: Any, block_m: int) -> list[str]:
    """The alignment properties that (sorted_ids, block_expert) violate for `topk_ids`.

    Empty when the alignment is valid. Each message names the row, block, slot and experts
    involved; after five instances of one property the rest are counted, not listed.
    Properties: sizes agree; each row is a slot in [0, T·topk) or the sentinel T·topk; each
    non-padding row of block b is routed to block_expert[b]; each slot appears exactly once;
    within each expert's blocks (in order) padding only follows all real rows, and there
    are fewer than block_m padding rows per expert.
    """
    import torch

    ids = sorted_ids.reshape(-1).long().cpu()
    bexp = block_expert.reshape(-1).long().cpu()
    flat = topk_ids.reshape(-1).long().cpu()
    topk = int(topk_ids.shape[-1])
    n = flat.numel()
    if ids.numel() != bexp.numel() * block_m:
        return [
            f"sorted_ids has {ids.numel()} rows; {bexp.numel()} blocks of block_m {block_m} "
            f"need {bexp.numel() * block_m}"
        ]
    problems: list[str] = []
    row_block = torch.arange(ids.numel()) // block_m
    pad = ids == n
    bad_value = ~pad & ((ids < 0) | (ids > n))
    problems += _report(
        [
            f"row {r} (block {r // block_m}) holds {int(ids[r])}: neither a slot in [0, {n}) "
            f"nor the padding sentinel {n}"
            for r in bad_value.nonzero().flatten().tolist()
        ],
        "rows out of range",
    )
    real = ~pad & ~bad_value
    routed = torch.full_like(ids, -1)
    routed[real] = flat[ids[real]]
    wrong = real & (routed != bexp[row_block])
    problems += _report(
        [
            f"row {r} of block {r // block_m} (expert {int(bexp[r // block_m])}) holds "
            f"{_slot(int(ids[r]), topk)} routed to expert {int(routed[r])}"
            for r in wrong.nonzero().flatten().tolist()
        ],
        "rows in another expert's block",
    )
    seen = torch.bincount(ids[real], minlength=n) if n else torch.zeros(0, dtype=torch.long)
    problems += _report(
        [
            f"{_slot(v, topk)} appears {int(seen[v])} times, at rows "
            f"{(ids == v).nonzero().flatten().tolist()}"
            for v in (seen > 1).nonzero().flatten().tolist()
        ],
        "duplicated slots",
    )
    problems += _report(
        [f"{_slot(v, topk)} appears in no row" for v in (seen == 0).nonzero().flatten().tolist()],
        "missing slots",
    )
    for e in torch.unique(bexp).tolist():
        rows = (bexp[row_block] == e).nonzero().flatten()
        is_pad = pad[rows]
        count = int(is_pad.sum())
        if count and not bool(is_pad[-count:].all()):
            first_pad = int(rows[is_pad.nonzero()[0]])
            last_real = int(rows[(~is_pad).nonzero()[-1]])
            problems.append(
                f"padding row {first_pad} precedes real row {last_real} among expert {e}'s "
                "blocks; padding may only follow an expert's real rows"
            )
        if count >= block_m:
            problems.append(
                f"expert {e} has {count} padding rows; at most block_m - 1 = {block_m - 1} "
                "(a block of padding only is wasted work)"
            )
    return problems
