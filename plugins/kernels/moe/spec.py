"""The MoE reference's data flow, stage by stage, as specifications (issue #19).

The reference (`family.MoEFamily.reference`) routes data-dependently; its five-kernel
decomposition (`kernel.py`) passes intermediates (the flat routing ids, h1, y) from kernel
to kernel. Each kernel's stage of the reference is written here as a small PyTorch module
over that kernel's own tensors, captured on meta tensors and derived
(`argus_core.spec.derive`). Rows gathered through the routing ids become reads *through an
index tensor*: h1[o0, o1] reads `w1[@ids[o0], 0, o1, k]` — the expert of slot o0 is
`ids[o0]`, the ghost read the kernels' routing contract speaks of — and `x[o0 // topk, k]`
(slot o0 is token o0 // topk's; topk = SLOTS // T). Shape symbols are the kernels' own
(`T`, `H`, `SLOTS`, ...).

`moe_align` computes positions, not data (`routing.align_blocks`: `sorted_ids` is the
sentinel SLOTS everywhere, then each slot at its row): its stage reads no input element into
`sorted_ids`, and the spec pins the *values* it may hold — the sentinel or a slot in
[0, SLOTS) (`v == SLOTS | (0 <= v < SLOTS)`), which synthesis asserts at every store of
`sorted_ids` (padding written as -1 is caught). Which row each slot lands in, and the
blocks' experts, stay the kernel's own postconditions (`lands_in_own_blocks`).
"""

from __future__ import annotations

import functools
from typing import Any

from argus_core.ir import Sym


def _sym(*names: str) -> tuple[Sym, ...]:
    return tuple(Sym(n, "shape") for n in names)


@functools.cache
def _specs() -> dict[str, list[tuple[dict[str, int], Any]]]:
    import torch
    import torch.nn.functional as F

    from argus_core.spec import spec_of_module

    class Route(torch.nn.Module):
        """Softmax over experts, the top-k; weights optionally renormalized."""

        def __init__(self, renorm: bool):
            super().__init__()
            self.renorm = renorm

        def forward(self, logits):
            probs = torch.softmax(logits, dim=-1)
            wts, ids = torch.topk(probs, 2, dim=-1)
            if self.renorm:
                wts = wts / wts.sum(dim=-1, keepdim=True)
            return ids, wts

    class Up(torch.nn.Module):
        """h1[slot] = silu(w1[ids[slot], 0] x[slot // topk]) * (w1[ids[slot], 1] x[...])."""

        def forward(self, x, w1, ids):
            xs = x.repeat_interleave(ids.size(0) // x.size(0), dim=0).unsqueeze(-1)
            w = w1[ids]  # each slot's expert's weights: gathered through ids
            gate = torch.matmul(w[:, 0], xs).squeeze(-1)
            up = torch.matmul(w[:, 1], xs).squeeze(-1)
            return F.silu(gate) * up

    class Down(torch.nn.Module):
        """y[slot] = (w2[ids[slot]] h1[slot]) * wts[slot]."""

        def forward(self, h1, w2, ids, wts):
            y = torch.matmul(w2[ids], h1.unsqueeze(-1)).squeeze(-1)
            return y * wts.unsqueeze(-1)

    class Align(torch.nn.Module):
        """sorted_ids as `routing.align_blocks` makes it: the sentinel SLOTS (padding)
        everywhere, slot s at its row row_of[s] (the contract's `row_of`)."""

        def forward(self, ids, row_of, sorted_ids):
            slots = torch.arange(ids.size(0), device=ids.device)
            return torch.full_like(sorted_ids, ids.size(0)).scatter(0, row_of, slots)

    class Combine(torch.nn.Module):
        """out[t] = sum over the token's K slots of y (y seen as [K, T, H])."""

        def forward(self, y):
            return y.sum(dim=0)

    t, e, h, i, k = 4, 3, 8, 6, 2
    f32, i64 = torch.float32, torch.int64
    route = {
        r: spec_of_module(
            lambda r=r: Route(bool(r)),
            lambda: [torch.empty(t, e, dtype=f32)],
            ["logits"],
            ["ids", "wts"],
            {"logits": _sym("T", "E")},
            "moe_route",
        )
        for r in (0, 1)
    }
    up = spec_of_module(
        Up,
        lambda: [
            torch.empty(t, h, dtype=f32),
            torch.empty(e, 2, i, h, dtype=f32),
            torch.empty(t * k, dtype=i64),
        ],
        ["x", "w1", "ids"],
        ["h1"],
        {"x": _sym("T", "H"), "w1": _sym("E", "TWO", "I", "H"), "ids": _sym("SLOTS")},
        "moe_up",
    )
    down = spec_of_module(
        Down,
        lambda: [
            torch.empty(t * k, i, dtype=f32),
            torch.empty(e, h, i, dtype=f32),
            torch.empty(t * k, dtype=i64),
            torch.empty(t * k, dtype=f32),
        ],
        ["h1", "w2", "ids", "wts"],
        ["y"],
        {
            "h1": _sym("SLOTS", "I"),
            "w2": _sym("E", "H", "I"),
            "ids": _sym("SLOTS"),
            "wts": _sym("SLOTS"),
        },
        "moe_down",
    )
    align = spec_of_module(
        Align,
        lambda: [
            torch.empty(t * k, dtype=i64),
            torch.empty(t * k, dtype=i64),
            torch.empty(t * k + e * 3, dtype=i64),
        ],
        ["ids", "row_of", "sorted_ids"],
        ["sorted_ids"],
        {"ids": _sym("SLOTS"), "row_of": _sym("SLOTS"), "sorted_ids": _sym("CAP")},
        "moe_align",
    )
    combine = spec_of_module(
        Combine,
        lambda: [torch.empty(k, t, h, dtype=f32)],
        ["y"],
        ["out"],
        {"y": _sym("K", "T", "H")},
        "moe_combine",
    )
    return {
        "moe_route": [({"renorm": 0}, route[0]), ({"renorm": 1}, route[1])],
        "moe_up": [({}, up)],
        "moe_down": [({}, down)],
        "moe_combine": [({}, combine)],
        "moe_align": [({}, align)],
    }


def reference_specs(entry: str) -> list[tuple[dict[str, int], Any]]:
    """The spec of kernel `entry` per mode ([] for unknown names)."""
    return list(_specs().get(entry, []))


@functools.cache
def grouped_spec(rows_per_block: int, fused: bool) -> Any:
    """The explicit-level grouped GEMM's stage of the reference (`kernel_explicit.py`):
    rows `a` already in expert order, block b of `rows_per_block` rows belonging to expert
    `block_expert[b]`; C = A W[e]^T per row (w [E, N, K]), or, `fused`, silu(A W[e, 0]^T) *
    (A W[e, 1]^T) (w [E, 2, N, K]: gate rows, then up rows). Derived: c[o0, o1] reads
    `w[@block_expert[o0 // rows_per_block], ..., o1, k]`."""
    import torch
    import torch.nn.functional as F

    from argus_core.spec import spec_of_module

    bm = rows_per_block

    class Grouped(torch.nn.Module):
        def forward(self, a, w, block_expert):
            e = block_expert.repeat_interleave(bm, dim=0)  # each row's expert
            xs = a.unsqueeze(-1)
            if not fused:
                return torch.matmul(w[e], xs).squeeze(-1)
            we = w[e]
            gate = torch.matmul(we[:, 0], xs).squeeze(-1)
            up = torch.matmul(we[:, 1], xs).squeeze(-1)
            return F.silu(gate) * up

    nb, e, n, k = 2, 3, 4, 8
    f32, i64 = torch.float32, torch.int64
    w_shape = (e, 2, n, k) if fused else (e, n, k)
    w_dims = _sym("E", "TWO", "N", "K") if fused else _sym("E", "N", "K")
    return spec_of_module(
        Grouped,
        lambda: [
            torch.empty(nb * bm, k, dtype=f32),
            torch.empty(*w_shape, dtype=f32),
            torch.empty(nb, dtype=i64),
        ],
        ["a", "w", "block_expert"],
        ["c"],
        {"a": _sym("M", "K"), "w": w_dims, "block_expert": _sym("NB")},
        "moe_grouped",
    )
