"""A kernel's outputs against the reference: poisoned before a run, compared after it.

The layer below both the correctness worker (`worker.py`) and timing (`timing.py`): both
compare, neither imports the other for it. torch is imported when called, so importing
this module never loads it.
"""

from __future__ import annotations

import math
from typing import Any


def poison(t: Any) -> None:
    """Fill an output with a value no correct kernel leaves behind: NaN, or INT_MIN."""
    import torch

    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    else:
        t.fill_(torch.iinfo(t.dtype).min)


def compare(out: Any, ref: Any, atol: float, rtol: float) -> tuple[bool, float, float, str]:
    """(ok, max abs err, max rel err, why) of `out` against `ref`.

    An element passes when |out - ref| <= atol + rtol * |ref|; NaN never passes (an
    element the kernel did not write stays NaN). The relative error counts only elements
    whose reference exceeds atol in magnitude, so near-zeros do not dominate it.
    """
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return (
            False,
            math.inf,
            math.inf,
            f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
        )
    o, r = out.double(), ref.double()
    err = (o - r).abs()
    bad = torch.isnan(err) | (err > atol + rtol * r.abs())
    finite = err[~torch.isnan(err)]
    max_abs = float(finite.max()) if finite.numel() else math.inf
    big = (r.abs() > atol) & ~torch.isnan(err)
    max_rel = float((err[big] / r.abs()[big]).max()) if big.any() else 0.0
    nan_count = int(torch.isnan(o).sum())
    if nan_count:
        max_abs = max_rel = math.inf
    if not bad.any():
        return True, max_abs, max_rel, ""
    first = tuple(int(i) for i in bad.nonzero()[0])
    unwritten = f" ({nan_count} NaN: never written)" if nan_count else ""
    why = (
        f"{int(bad.sum())} of {bad.numel()} elements wrong{unwritten}; "
        f"first at {list(first)}: got {float(o[first])}, expected {float(r[first])} "
        f"(atol {atol}, rtol {rtol})"
    )
    return False, max_abs, max_rel, why
