"""Coverage of a tensor whose rows are computed from sums of data: every row is written.

Coverage is ∀ row ∃ writer. The existential is replaced by explicit **witnesses** built
by inverting each store's row expression, so the query stays quantifier-free: for a row
`r`, a store at `base(pid) + run(pid, c) + rank(c, pid, i + 1) - 1` is inverted sum by
sum, outermost first, with the **select** function of each prefix sum (`S_F(params, t)`,
the b with F(b) <= t < F(b) + w(b), see `prefix_sums.py`): pid = S_base(r), then the chunk c =
S_run(pid, r - base(pid)), then the element i from the innermost sum's residual. A part
of the row that is a plain linear combination of loop and element variables is split by
mixed radix (`q * BS + i`), and a program fixed by the mask (`pid == E - 1`) is taken from
it. The query asks for a row in [0, N) that no store's witness writes (within its
program, iteration and element ranges, under its mask): unsat is a proof.

A model is first confirmed with the true sums (`prefix_sums.confirm`), then every (program,
iteration, element) of every store is enumerated at the model's (small) shapes: only a
row that no writer at all hits is `violated`; else the finding is `unknown`.
"""

from __future__ import annotations

import itertools

from argus_core.ir import Expr, IntLike, ProgramPoint, Sym, as_expr, land, lnot
from argus_core.ir.expr import BinOp, BoolOp, Call, Cmp, Const, Select
from argus_core.ir.tags import DataRead, read
from argus_plugins.verifiers.smt.checker import Checker, Finding
from argus_plugins.verifiers.smt.counterexample import counterexample
from argus_plugins.verifiers.smt.exprs import PROGRAM_ID
from argus_plugins.verifiers.smt.prefix_sums import Evaluator, _TooBig
from argus_plugins.verifiers.smt.solver import Context, Outcome, Query

UNKNOWN_KINDS = ("pid", "loop", "elem")
MAX_ENUM = 1 << 17  # (program, iteration, element) triples a confirmation may enumerate


def _vars(e: IntLike) -> set[Sym]:
    """Plain symbols of `e`, reads' index arguments included (not the reads themselves)."""
    out: set[Sym] = set()
    stack = [e] if isinstance(e, Expr) else []
    while stack:
        x = stack.pop()
        if isinstance(x, Sym) and not isinstance(x, DataRead):
            out.add(x)
        stack.extend(x.children())
    return out


def _terms(e: IntLike, sign: int = 1) -> list[tuple[int, Expr]]:
    """`e` as signed additive terms."""
    e = as_expr(e)
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        return _terms(e.a, sign) + _terms(e.b, sign if e.op == "+" else -sign)
    return [(sign, e)]


def _sum_of(terms) -> IntLike:
    out: IntLike = 0
    for s, x in terms:
        out = out + x if s > 0 else out - x
    return out


def _sum_read(st, x: Expr) -> tuple[DataRead, int] | None:
    """(F's read, M) when term `x` is a prefix sum F or F // M (Triton's `//`: a Select
    on the sign, whose true branch is taken for the nonnegative sums)."""
    if isinstance(x, Select):
        x = as_expr(x.a)
    m = 1
    if isinstance(x, BinOp) and x.op == "//" and isinstance(x.b, Const):
        x, m = as_expr(x.a), x.b.value
    if isinstance(x, DataRead) and x.tensor in st.ps:
        return x, m
    return None


def _invert(g: IntLike, v: Sym, x0: IntLike) -> IntLike | None:
    """A value of `v` with g(v) == x0, for g = v, v + k, v - k, or a clamp min/max(g, k)
    (the clamp is the identity inside the sum's range, which the query checks)."""
    g = as_expr(g)
    if g == v:
        return x0
    if _after(g, v):  # fold constants: (S + 1) - 1 is S, which the facts name
        k, x0 = g.b.value, as_expr(x0)
        if isinstance(x0, BinOp) and x0.op == "+" and isinstance(x0.b, Const):
            return x0.a if x0.b.value == k else x0.a + (x0.b.value - k)
        return x0 - k
    if isinstance(g, BinOp) and g.op in ("+", "-"):
        for a, b, sgn in ((g.a, g.b, 1), (g.b, g.a, 1 if g.op == "+" else None)):
            if v in _vars(a) and v not in _vars(b) and sgn is not None:
                return _invert(a, v, x0 - b if g.op == "+" else x0 + b)
    if isinstance(g, Call) and g.fn in ("min", "max"):
        inner = [a for a in g.args if v in _vars(a)]
        if len(inner) == 1:
            return _invert(inner[0], v, x0)
    return None


def _after(g: Expr, v: Sym) -> bool:
    """g is v + k for a constant k >= 1 (an inclusive scan's index)."""
    return (
        isinstance(g, BinOp)
        and g.op == "+"
        and g.a == v
        and isinstance(g.b, Const)
        and g.b.value >= 1
    )


def _linear(terms, free: set[Sym]) -> list[tuple[int, Sym]] | None:
    """The terms as coef * var (positive integer coefficients), or None."""
    out = []
    for s, x in terms:
        if s < 0:
            return None
        if isinstance(x, Sym) and x in free:
            out.append((1, x))
        elif isinstance(x, BinOp) and x.op == "*" and isinstance(x.b, Const) and x.a in free:
            out.append((x.b.value, x.a))
        elif isinstance(x, BinOp) and x.op == "*" and isinstance(x.a, Const) and x.b in free:
            out.append((x.a.value, x.b))
        else:
            return None
    return sorted(out, key=lambda p: -p[0])


def witnesses(st, coord: IntLike, t: IntLike, unknowns: set[Sym]) -> list[dict[Sym, IntLike]]:
    """Candidate assignments of `unknowns` under which `coord` may equal `t`."""
    out: list[dict[Sym, IntLike]] = []

    def go(bound: dict[Sym, IntLike], depth: int) -> None:
        c = as_expr(coord).subs(bound) if bound else as_expr(coord)
        free = unknowns - set(bound)
        terms = _terms(c)
        live = [(s, x) for s, x in terms if _vars(x) & free]
        if not live or depth > 6:
            out.append(bound)
            return
        known = [(s, x) for s, x in terms if not _vars(x) & free]
        inner = len(live) == 1
        rest = t - _sum_of([p for p in known if inner or not isinstance(p[1], Const)])
        for s, x in live:
            sr = _sum_read(st, x)
            if s < 0 or sr is None:
                continue
            r, m = sr
            params, last = r.args[:-1], r.args[-1]
            vs = _vars(last) & free
            if _vars(params) & free or len(vs) != 1:
                continue
            (v,) = vs
            sel = _select(r.tensor, params)
            target = as_expr(rest) * m if m > 1 else rest
            # the largest b with F(b) <= t (a residual follows), except for an inclusive
            # scan F(v + 1) that must equal t exactly: its smallest solution, v's own mark
            x0 = sel(target) if not (inner and _after(last, v)) else sel(as_expr(target) - 1) + 1
            w = _invert(last, v, x0)
            if w is not None:
                go({**bound, v: w}, depth + 1)
            return
        lin = _linear(live, free)
        if lin is None:
            return
        rem, sol = as_expr(rest), {}
        for coef, v in lin:
            sol[v] = rem // coef if coef > 1 else rem
            rem = rem % coef if coef > 1 else as_expr(0)
        out.append({**bound, **sol})

    go({}, 0)
    return out


def _select(name: str, params):
    return lambda t: read(f"{name}.sel", *params, t)


def _fixed_by_mask(mask: IntLike, free: set[Sym]) -> dict[Sym, IntLike]:
    """Unknowns that a conjunct `v == e` of the mask pins (the last program's tail fill)."""
    out: dict[Sym, IntLike] = {}
    stack = [as_expr(mask)]
    while stack:
        e = stack.pop()
        if isinstance(e, BoolOp) and e.op == "and":
            stack.extend(e.args)
        elif isinstance(e, Select):
            stack.append(e.cond)
        elif isinstance(e, Cmp) and e.op == "!=" and as_expr(e.b) == as_expr(0):
            stack.append(as_expr(e.a))
        elif isinstance(e, Cmp) and e.op == "==":
            for a, b in ((e.a, e.b), (e.b, e.a)):
                if isinstance(a, Sym) and a in free and not _vars(b) & free:
                    out[a] = b
    return out


def _domain(ctx, v: Sym, w: IntLike, shape) -> Expr | None:
    """`w` is a value `v` may take: a program of the grid, an iteration, an element."""
    if v.kind == "elem":
        d = int(v.name[2:])
        return land(as_expr(w) >= 0, as_expr(w) < shape[d])
    if v.kind == "loop":
        start, stop, step = ctx.loops[v.name]
        ok = [as_expr(w) >= start, as_expr(w) < stop]
        if step != 1:
            ok.append(((as_expr(w) - start) % step).eq(0))
        return land(*ok)
    name = v.name
    while isinstance(ctx.lets.get(name), Sym):  # pid_0 = pid = program_id_0
        name = ctx.lets[name].name
    if name == PROGRAM_ID:
        return land(as_expr(w) >= 0, as_expr(w) < ctx.grid_total)
    return None


def covered(ctx: Context, write, row: Sym) -> Expr:
    """Some witness of store `write` writes `row` (0 when none can be built)."""
    point, shape, coords, mask, loops = write
    st = ctx.data
    (coord,) = coords
    unknowns = {s for s in _vars(coord) | _vars(mask) if s.kind in UNKNOWN_KINDS}
    pid = Sym(PROGRAM_ID, "pid")
    alias = [s for s in unknowns if s.kind == "pid"]
    pinned = _fixed_by_mask(mask, unknowns)
    options = []
    for cand in witnesses(st, coord, row, unknowns - set(pinned)):
        cand = {**pinned, **cand}
        if pid in unknowns and pid not in cand:  # opaque reads name the flat id itself
            pcand = [cand[a] for a in alias if a in cand and a != pid]
            if pcand:
                cand[pid] = pcand[0]
        if set(cand) != unknowns:
            continue
        dom = [_domain(ctx, v, w, shape) for v, w in cand.items()]
        if any(d is None for d in dom):
            continue
        c = as_expr(coord).subs(cand)
        options.append(land(*dom, as_expr(mask).subs(cand), as_expr(c).eq(row)))
    return BoolOp("or", tuple(options)) if len(options) > 1 else (options[0] if options else 0)


def check_cover(
    ctx: Context, chk: Checker, name: str, extent: IntLike, writes: list, point: ProgramPoint
) -> None:
    """Pose `store_cover` for tensor `name`: every row in [0, extent) is written by a
    witness of one of `writes` (each (point, shape, coords, mask, loops))."""
    if not chk.collect:
        return
    row = ctx.fresh(f"row_{name}", 0, extent)
    hits = [covered(ctx, w, row) for w in writes]
    q = Query(ctx, ())
    out = q.check(land(*[lnot(as_expr(h)) for h in hits]))
    f = Finding("store_cover", point, out.status, note=out.note)
    if out.status == "violated" and not _unwritten(ctx, out, writes, row):
        f.status = "unknown"
        f.note = f"a row of {name} that the witnesses miss may be written by another store"
    elif out.status == "violated":
        msg = f"row {{lhs}} of {name} (extent {{rhs}}) is written by no store"
        f.cex = counterexample(out, "store_cover", point, (), [row], [extent], msg, chk.threads)
    if f.status == "unknown" and not f.note:
        f.note = f"that every row of {name} is written is not proved"
    chk.findings.append(f)


def _unwritten(ctx: Context, out: Outcome, writes: list, row: Sym) -> bool:
    """Does no (program, iteration, element) of any store write the counterexample's row?
    (Enumerated at the model's shapes with its data; False, so the finding stays
    `unknown`, when too large to enumerate or to evaluate.)"""
    try:
        return _enumerate_unwritten(ctx, out, writes, row)
    except _TooBig:  # a prefix sum of the model too large to evaluate (a loaded machine's
        return False  # probe timed out into a larger model): not shown, not claimed


def _enumerate_unwritten(ctx: Context, out: Outcome, writes: list, row: Sym) -> bool:
    ev = Evaluator(out.query, out.model)
    target = ev.value(row)
    budget = MAX_ENUM
    for _point, shape, coords, mask, loops in writes:
        env: dict[str, int] = {}
        ranges = [(PROGRAM_ID, 0, ev.value(ctx.grid_total), 1)]
        ranges += [(v.name, ev.value(a), ev.value(b), ev.value(c)) for v, a, b, c in loops]
        ranges += [(f"_i{d}", 0, n, 1) for d, n in enumerate(shape)]
        total = 1
        for _n, a, b, c in ranges:
            total *= max(0, -(-(b - a) // c))
        budget -= total
        if budget < 0:
            return False
        lets = dict(ctx.lets)
        for vals in itertools.product(*[range(a, b, c) for _n, a, b, c in ranges]):
            env = dict(zip([n for n, *_ in ranges], vals))
            for k, v in lets.items():
                env[k] = ev.value(v, env)
            if ev.value(mask, env) and ev.value(coords[0], env) == target:
                return False
    return True


__all__ = ["check_cover", "covered", "witnesses"]
