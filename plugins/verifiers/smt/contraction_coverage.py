"""Contraction coverage: every stored sum covers its contraction exactly once.

For a dot accumulator stored after its loop (or split-K partial sums, or a sum asserted
by `assert_contraction`), the set C of contracted coordinates summed into one output
element satisfies C ⊆ [0, K), no coordinate twice, 0 ∈ C, and c ∈ C, c + 1 < K ⇒
c + 1 ∈ C. The last two are proved with explicit witnesses (the next k-element, the next
iteration, the next program along a grid axis) so every query stays quantifier-free; when
a witness fails, a second query with the model's concrete values asks whether *any*
contribution covers the coordinate, which turns the failure into a real gap (violated) or
leaves it unknown.
"""

from __future__ import annotations

from typing import Any

from argus_core.ir import Expr, IntLike, Sym, as_expr, elem_sym, land, lnot
from argus_core.ir.expr import BinOp
from argus_plugins.verifiers.smt.checker import Finding
from argus_plugins.verifiers.smt.domain import AVal, Contribution, Factor
from argus_plugins.verifiers.smt.exprs import PROGRAM_ID, any_ne, lor, rename
from argus_plugins.verifiers.smt.interpreter import Interpreter
from argus_plugins.verifiers.smt.solver import Query

PID = Sym(PROGRAM_ID, "pid")


def program_axes(ctx) -> list[tuple[Sym, IntLike]]:
    """Row-major grid axes from the Let chain: (component symbol, stride in program ids)."""
    roots = {n for n, e in ctx.lets.items() if isinstance(e, Sym) and e.name == PROGRAM_ID}
    axes = []
    for name, e in ctx.lets.items():
        x = e.a if isinstance(e, BinOp) and e.op == "%" else e
        if isinstance(x, Sym) and x.name in roots:
            axes.append((Sym(name, "pid"), 1))
        elif isinstance(x, BinOp) and x.op == "//" and isinstance(x.a, Sym) and x.a.name in roots:
            axes.append((Sym(name, "pid"), x.b))
    return axes


def _same_output(coords, mask, w: str, atomic: bool) -> list[IntLike]:
    if not atomic:
        return []
    return [rename(mask, w), *[as_expr(rename(c, w)).eq(c) for c in coords]]


class _Witness:
    """Another contribution point (program, iterations, k-element), as symbol overrides."""

    def __init__(self, it: Interpreter, shape, coords, mask, atomic):
        self.it, self.ctx = it, it.ctx
        self.shape, self.coords, self.mask, self.atomic = shape, coords, mask, atomic
        self.n = 0
        self.overrides: dict[str, IntLike] = {}

    def __call__(
        self,
        c: Contribution,
        target: IntLike,
        pid: IntLike,
        loopvals: dict[str, IntLike],
        kk: IntLike,
    ) -> Expr:
        self.n += 1
        w = f"#w{self.n}"
        ov = self.overrides
        ov[PROGRAM_ID + w] = pid
        for d in range(len(self.shape)):
            ov[f"_i{d}{w}"] = elem_sym(d)
        dom: list[IntLike] = [
            as_expr(pid) >= 0,
            as_expr(pid) < self.ctx.grid_total,
            as_expr(kk) >= 0,
            as_expr(kk) < c.kk_extent,
        ]
        ov[c.kk.name + w] = kk
        for var, start, stop, _step in c.loops:
            v = loopvals[var.name]
            ov[var.name + w] = v
            dom += [as_expr(v) >= rename(start, w), as_expr(v) < rename(stop, w)]
        return land(
            *dom,
            rename(c.valid, w),
            as_expr(rename(c.cc, w)).eq(target),
            *_same_output(self.coords, self.mask, w, self.atomic),
        )


def check_window(it: Interpreter, op, shape, mask, contribs: list[Contribution], inside) -> None:
    """An `assert_contraction`: every contribution lies in the window (`contraction_window`),
    none twice, and the window's prefix [0, hi) is covered (start and gap witnesses)."""
    for c in contribs:
        it.chk.require(
            "contraction_window",
            op.point,
            shape,
            land(mask, c.valid, lnot(inside(c.cc))),
            [c.cc],
            [c.ext],
            "sums contracted coordinate {lhs} (of [0, {rhs})), outside the asserted window",
            extra={"k_element": lambda q, m, kk=c.kk: q.value(m, kk)},
        )
    contraction(it, op, shape, [], mask, contribs, False, inside)


def contraction(
    it: Interpreter,
    op,
    shape,
    coords,
    mask,
    contribs: list[Contribution],
    atomic: bool,
    window=None,
) -> None:
    """`window(c)`: the coordinates that must be summed (default: c < the extent)."""
    chk, ctx = it.chk, it.ctx
    # no contracted coordinate summed twice into one output element
    for a, ca in enumerate(contribs):
        for cb in contribs[a:]:
            p = "'"
            ov: dict[str, IntLike] = {}
            if not atomic:
                ov[PROGRAM_ID + p] = PID
                ov.update({f"_i{d}{p}": elem_sym(d) for d in range(len(shape))})
            mine = [PID, ca.kk, *[lp[0] for lp in ca.loops]]
            theirs = [rename(PID, p), rename(cb.kk, p), *[rename(lp[0], p) for lp in cb.loops]]
            differ = any_ne(mine, theirs) if ca is cb else 1
            viol = land(
                mask,
                ca.valid,
                rename(cb.valid, p),
                *_same_output(coords, mask, p, atomic),
                as_expr(ca.cc).eq(rename(cb.cc, p)),
                differ,
            )
            q = Query(ctx, shape, overrides=ov)
            chk.require(
                "contraction_once",
                op.point,
                shape,
                viol,
                [ca.cc],
                [rename(cb.cc, p)],
                "sums contracted coordinate {lhs} twice (again as {rhs} from another iteration "
                "or program)",
                query=q,
                extra={
                    "other": lambda q, m, th=theirs: q.values(m, th),
                    "this": lambda q, m, mi=mine: q.values(m, mi),
                    # which dots (in order of summation) the two products come from: two
                    # loops can sum one coordinate at equal iteration values
                    "contributions": [a, a + contribs[a:].index(cb)],
                },
            )
    axes = program_axes(ctx) if atomic else []
    where = {"where": lambda q, m: q.values(m, coords)}
    # 0 is summed
    wit = _Witness(it, shape, coords, mask, atomic)
    starts: list[Expr] = []
    for c in contribs:
        pids: list[IntLike] = [PID] + [PID - comp * stride for comp, stride in axes]
        # or the last program along an axis (split-K with the remainder in its last split)
        pids += [PID + (_extent(ctx, comp, stride) - 1 - comp) * stride for comp, stride in axes]
        for pid in pids:
            n = wit.n + 1
            starts.append(
                wit(c, 0, pid, {v.name: rename(s, f"#w{n}") for v, s, _e, _t in c.loops}, 0)
            )
            if c.loops:  # a loop run backwards sums coordinate 0 in its last iteration
                n = wit.n + 1
                starts.append(wit(c, 0, pid, _last(c, f"#w{n}"), 0))
    q = Query(ctx, shape, overrides=wit.overrides)
    f = chk.require(
        "contraction_start",
        op.point,
        shape,
        land(mask, window(0) if window else 1, lnot(lor(*starts))),
        [0],
        [contribs[0].ext],
        "its sum never includes contracted coordinate {lhs} (of [0, {rhs}))",
        query=q,
        extra=where,
    )
    _confirm_gap(it, f, op, shape, coords, mask, contribs, atomic)
    # c summed and c + 1 < K => c + 1 summed
    for c in contribs:
        wit = _Witness(it, shape, coords, mask, atomic)
        nxt = as_expr(c.cc) + 1
        here = {v.name: v for v, *_ in c.loops}
        succ = [wit(c, nxt, PID, here, c.kk + 1)]
        for t, (var, _s, _e, step) in enumerate(c.loops):
            n = wit.n + 1
            vals = dict(here)
            vals[var.name] = var + step
            for inner, s_in, _e2, _t2 in c.loops[t + 1 :]:
                vals[inner.name] = rename(s_in, f"#w{n}")
            succ.append(wit(c, nxt, PID, vals, 0))
        for t, (var, _s, _e, step) in enumerate(c.loops):
            # reordered: the previous iteration (a loop run backwards)
            n = wit.n + 1
            vals = dict(here)
            vals[var.name] = var - step
            for inner, s_in, _e2, _t2 in c.loops[t + 1 :]:
                vals[inner.name] = rename(s_in, f"#w{n}")
            succ.append(wit(c, nxt, PID, vals, 0))
        for c2 in contribs:
            if c2 is c:
                continue
            # unrolled: another product of the same iteration, or of the next or previous
            # one (a shared loop variable keeps its value; the others start)
            shared = [v for v, *_ in c2.loops if v.name in here]
            for delta in (0, 1, -1) if shared else ():
                n = wit.n + 1
                vals = {v.name: rename(s2, f"#w{n}") for v, s2, _e2, _t2 in c2.loops}
                for v, _s2, _e2, st in c2.loops:
                    if v.name in here:
                        vals[v.name] = v + delta * st if delta else v
                succ.append(wit(c2, nxt, PID, vals, 0))
            if shared or not c.loops or not c2.loops:
                continue
            # interleaved loops (even tiles in one, odd in the other): c2's innermost
            # iteration next to c's, one tile or one step of c's loop away
            var, _s, _e, step = c.loops[-1]
            v2 = c2.loops[-1][0]
            for near in (var, var + 1, var - 1, var + step, var - step):
                n = wit.n + 1
                vals = {v.name: rename(s2, f"#w{n}") for v, s2, _e2, _t2 in c2.loops}
                vals[v2.name] = near
                succ.append(wit(c2, nxt, PID, vals, 0))
        for c2 in contribs:
            pids: list[IntLike] = ([PID] if c2 is not c else []) + [
                PID + stride for _comp, stride in axes
            ]
            for pid in pids:
                n = wit.n + 1
                succ.append(
                    wit(c2, nxt, pid, {v.name: rename(s, f"#w{n}") for v, s, _e, _t in c2.loops}, 0)
                )
        q = Query(ctx, shape, overrides=wit.overrides)
        f = chk.require(
            "contraction_gap",
            op.point,
            shape,
            land(mask, c.valid, window(nxt) if window else nxt < as_expr(c.ext), lnot(lor(*succ))),
            [nxt],
            [c.ext],
            "its sum never includes contracted coordinate {lhs} (of [0, {rhs}))",
            query=q,
            extra=where,
        )
        _confirm_gap(it, f, op, shape, coords, mask, contribs, atomic)


def _extent(ctx, comp: Sym, stride: IntLike) -> IntLike:
    """The number of programs along grid axis `comp` (`pid // stride % extent`; the
    slowest axis: the grid over its stride)."""
    e = ctx.lets[comp.name]
    if isinstance(e, BinOp) and e.op == "%":
        return e.b
    return as_expr(ctx.grid_total) // stride


def _last(c: Contribution, w: str) -> dict[str, IntLike]:
    """Every loop of `c` at its last iteration (start + (stop - 1 - start) // step * step),
    its bounds read in witness copy `w`."""
    out: dict[str, IntLike] = {}
    for var, start, stop, step in c.loops:
        s0, s1 = rename(start, w), rename(stop, w)
        out[var.name] = as_expr(s0) + (as_expr(s1) - 1 - s0) // step * step
    return out


def _confirm_gap(
    it: Interpreter, f: Finding | None, op, shape, coords, mask, contribs, atomic
) -> None:
    """A failed witness is a real gap only if no contribution at all covers the coordinate."""
    if f is None or f.status != "violated":
        return
    cex: dict[str, Any] = f.cex
    s = "%"
    ov: dict[str, IntLike] = {}
    if cex["element"] is not None:
        ov.update({f"_i{d}{s}": v for d, v in enumerate(cex["element"])})
    out: list[IntLike] = []
    if not atomic and cex["program_id"] is not None:
        ov[PROGRAM_ID + s] = cex["program_id"]
    elif atomic:
        # another program adding into the same output coordinate ('where', from the model)
        out = [as_expr(rename(c, s)).eq(v) for c, v in zip(coords, cex.get("where", []))]
        out.append(rename(mask, s))
    target = cex["lhs"][0]
    covered = lor(
        *[land(rename(c.valid, s), as_expr(rename(c.cc, s)).eq(target)) for c in contribs]
    )
    q = Query(it.ctx, shape, overrides=ov, fixed={**cex["shapes"], **cex.get("scalars", {})})
    r = q.check(land(*out, covered))
    if r.status != "proved" or (atomic and not cex.get("where")):
        f.status, f.cex = "unknown", None
        f.note = "a witness failed but another contribution may cover the coordinate"


def check_factors(it: Interpreter, op, shape, coords, mask, val: AVal, atomic: bool) -> None:
    """At a store of a product of finished sums: each factor group's contraction, under
    the store's mask."""
    for g in (c for c in val.contrib if isinstance(c, Factor)):
        contraction(it, op, shape, coords, mask, list(g.contribs), atomic)
