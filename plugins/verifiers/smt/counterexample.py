"""Counterexamples: JSON dicts from z3 models, the thread that owns an element, and the
one-line rendering the planner reads.

The thread is named for the target the kernel is verified for: its warp size
(`TargetSpec.wave_size`, 64 lanes on MI300X, 32 on Hopper) and the policy's `num_warps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from argus_core.ir import IntLike, ProgramPoint
from argus_core.layout.linear import blocked
from argus_plugins.verifiers.smt.cause import causes
from argus_plugins.verifiers.smt.exprs import PROGRAM_ID
from argus_plugins.verifiers.smt.solver import Outcome


class Threads(NamedTuple):
    """The threads of one program: `num_warps` warps of `warp_size` lanes."""

    num_warps: int
    warp_size: int


def default_blocked_params(
    shape: Sequence[int], num_warps: int, warp_size: int
) -> dict[str, list[int]]:
    """Triton's default blocked encoding for a tile (getDefaultBlockedEncoding): one element
    per thread per step, lanes along the fastest (last) dim first, then warps."""
    rank = len(shape)
    order = list(range(rank - 1, -1, -1))
    tpw, wpc = [1] * rank, [1] * rank
    lanes, warps = warp_size, num_warps
    for d in order:
        tpw[d] = max(1, min(lanes, shape[d]))
        lanes //= tpw[d]
    tpw[order[-1]] *= lanes
    for d in reversed(order):  # warps tile the slowest dim first
        wpc[d] = max(1, min(warps, shape[d] // tpw[d] if shape[d] >= tpw[d] else 1))
        warps //= wpc[d]
    wpc[order[0]] *= warps
    return {
        "size_per_thread": [1] * rank,
        "threads_per_warp": tpw,
        "warps_per_cta": wpc,
        "order": order,
    }


def thread_of(
    element: Sequence[int], shape: Sequence[int], num_warps: int, warp_size: int
) -> dict[str, Any]:
    """{"warp", "lane", "register"} holding `element` in the default blocked layout of a tile
    of `shape`, computed with argus_core.layout.linear; {"reason"} when it cannot say."""
    p = default_blocked_params(shape, num_warps, warp_size)
    try:
        lay = blocked(
            shape, p["size_per_thread"], p["threads_per_warp"], p["warps_per_cta"], p["order"]
        )
        ins = lay.invert().apply(**{f"dim{d}": int(x) for d, x in enumerate(element)})
        named = dict(zip(lay.in_dims, ins))
    except Exception as exc:  # broadcast layouts (tile smaller than the CTA) have no inverse
        return {
            "warp": None,
            "lane": None,
            "reason": f"no unique owner in the blocked layout: {exc}",
        }
    return {
        "warp": named.get("warp", 0),
        "lane": named.get("lane", 0),
        "register": named.get("register", 0),
        "layout": f"blocked spt={p['size_per_thread']} tpw={p['threads_per_warp']} "
        f"wpc={p['warps_per_cta']} order={p['order']} (num_warps={num_warps}, warp={warp_size})",
    }


def counterexample(
    out: Outcome,
    assertion: str,
    point: ProgramPoint,
    shape: Sequence[int],
    lhs: Sequence[IntLike],
    rhs: Sequence[IntLike],
    message: str,
    threads: Threads,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON counterexample of a violated query: concrete program, element, iteration,
    shapes and both sides' values, read from the model."""
    q, m = out.query, out.model
    assert q is not None and m is not None
    ctx = q.ctx
    shapes = {n: q.value(m, q.env[n]) for n in ctx.shapes if n in q.vars}
    for name, e in ctx.derived.items():  # HQ = G * HKV: report the kernel's own shape
        if any(s.name in q.vars for s in e.symbols()):
            shapes[name] = e.evaluate({n: 1 for n in ctx.shapes} | shapes)
    comps = {n: q.value(m, q.env[n]) for n in ctx.components if n in q.vars}
    if ctx.components:
        program_id = ctx.program_id_value({**shapes, **comps}) if comps else None
    else:
        program_id = q.value(m, q.env[PROGRAM_ID]) if PROGRAM_ID in q.vars else None
    element = (
        [q.value(m, q.env[f"_i{d}"]) for d in range(len(shape))]
        if any(f"_i{d}" in q.vars for d in range(len(shape)))
        else None
    )
    iteration = {n: q.value(m, q.env[n]) for n in ctx.loops if n in q.vars}
    cex: dict[str, Any] = {
        "assertion": assertion,
        "message": message,
        "program_point": point.to_dict(),
        "program_id": program_id,
        "thread": thread_of(element, shape, *threads) if element is not None and shape else None,
        "element": element,
        "iteration": iteration or None,
        "lhs": q.values(m, lhs),
        "rhs": q.values(m, rhs),
        "shapes": shapes,
        "policy": dict(ctx.policy.tiles),
    }
    scalars = {n: q.value(m, q.env[n]) for n in ctx.scalar_args if n in q.vars}
    if scalars:  # kernel scalar arguments (causal) the counterexample depends on
        cex["scalars"] = scalars
    for k, v in (extra or {}).items():
        cex[k] = v(q, m) if callable(v) else v
    if ctx.data is not None:  # the data reads (routing) the counterexample rests on
        cex["data"] = ctx.data.model_values(q, m)
    cex["minimized"] = bool(out.minimized)
    # the backward slice, most likely cause first (cause.py)
    # (ops the failing value was made by, where the assertion knows them: a masked
    # load's line for `reduce_masked`, rank first when they are in the slice)
    cex["causes"] = causes(ctx.ir, assertion, point, origins=cex.pop("origins", None) or ())
    cex["cause"] = cex["causes"][0] if cex["causes"] else None
    cex["text"] = render(cex)
    return cex


def _fmt(xs: Any) -> str:
    if isinstance(xs, list | tuple):
        return "(" + ", ".join(map(str, xs)) + ")" if len(xs) != 1 else str(xs[0])
    return str(xs)


def render(cex: dict[str, Any]) -> str:
    """One line: 'store at gemm.py:19: element (3, 0) of program 5 (warp 0 lane 3) ...'."""
    pp = cex["program_point"]
    where = f"{pp['op']} at {pp['file'].rsplit('/', 1)[-1]}:{pp['line']}"
    who = []
    if cex.get("element") is not None:
        who.append(f"element {_fmt(cex['element'])}")
    if cex.get("program_id") is not None:
        who.append(f"of program {cex['program_id']}")
    th = cex.get("thread") or {}
    if th.get("warp") is not None:
        who.append(f"(warp {th['warp']} lane {th['lane']})")
    if cex.get("k_element") is not None:
        who.append(f"k-element {cex['k_element']}")
    if cex.get("iteration"):
        who.append("at iteration " + ", ".join(f"{k}={v}" for k, v in cex["iteration"].items()))
    shapes = " ".join(
        f"{k}={v}" for k, v in {**cex.get("shapes", {}), **cex.get("scalars", {})}.items()
    )
    text = cex["message"].format(lhs=_fmt(cex["lhs"]), rhs=_fmt(cex["rhs"]))
    cause = cex.get("cause")
    why = f"; likely cause: line {cause['line']} ({cause['what']})" if cause else ""
    return f"{where}: {' '.join(who)}{': ' if who else ''}{text} [{shapes}]{why}"
