"""Abstract interpretation of the IR: transfer functions per op, and the assertions they imply.

Each op updates the abstract value (`AVal`) of its result and poses its implied assertions
as z3 queries (`Checker.require`): loads and stores in bounds or masked and at the offset
their coordinates name; a dot's contracted coordinates agree; elementwise operands carry
equal tags; a store lands where its tags say. Loops are analysed inductively: the carried
values' tags at the top of a symbolic iteration k are the entry value at k == start and
the body's result at k - step otherwise; the body is checked under that assumption, and
the assumption is checked at the bottom (the yielded tags equal the assumed ones at k+step).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    IntLike,
    Let,
    Load,
    Loop,
    Op,
    ProgramPoint,
    Reduce,
    Store,
    Sym,
    Value,
    View,
    Zeros,
    as_expr,
    elem_sym,
    land,
    lnot,
)
from argus_core.ir.expr import BoolOp, Select
from argus_core.ir.nodes import AtomicAdd
from argus_core.ir.tags import COORD, AssertContraction, AssertTag, AssertTagEq, Requires, Tag
from argus_plugins.verifiers.smt.domain import AVal, Contribution, TagVal, sub
from argus_plugins.verifiers.smt.report import counterexample
from argus_plugins.verifiers.smt.solver import Context, Query


@dataclass
class Finding:
    assertion: str
    point: ProgramPoint
    status: str  # proved | violated | unknown
    cex: dict[str, Any] | None = None
    note: str = ""


def any_ne(ls, rs) -> Expr:
    terms = [as_expr(a).ne(b) for a, b in zip(ls, rs)]
    return terms[0] if len(terms) == 1 else BoolOp("or", tuple(terms))


def lor(*ps: IntLike) -> Expr:
    return BoolOp("or", tuple(as_expr(p) for p in ps))


def same(ls, rs) -> bool:
    return all(as_expr(a) == as_expr(b) for a, b in zip(ls, rs))


class Checker:
    """Poses queries and records findings (assertions count, proved or not)."""

    def __init__(self, ctx: Context, threads: tuple[int, int]):
        self.ctx = ctx
        self.threads = threads
        self.findings: list[Finding] = []
        self.collect = True

    def require(
        self,
        assertion: str,
        point: ProgramPoint,
        shape,
        violation: IntLike,
        lhs,
        rhs,
        message: str,
        query: Query | None = None,
        structural: bool = False,
        extra: dict | None = None,
    ) -> Finding | None:
        """Prove `violation` unsatisfiable; a model becomes a counterexample. `structural`:
        the two sides are syntactically equal, so it holds without asking z3."""
        if not self.collect:
            return None
        if structural:
            f = Finding(assertion, point, "proved", note="syntactic")
            self.findings.append(f)
            return f
        q = query or Query(self.ctx, tuple(shape))
        out = q.check(violation)
        f = Finding(assertion, point, out.status, note=out.note)
        if out.status == "violated":
            f.cex = counterexample(
                out, assertion, point, shape, lhs, rhs, message, self.threads, extra
            )
        self.findings.append(f)
        return f


class Interpreter:
    def __init__(self, ctx: Context, checker: Checker):
        self.ctx = ctx
        self.chk = checker
        self.state: dict[int, AVal] = {}
        self.loops: list[Loop] = []
        from argus_plugins.verifiers.smt import data

        data.bind(self)

    # ------------------------------------------------------------------------ helpers
    def shape_of(self, shape, point: ProgramPoint) -> tuple[int, ...]:
        out = tuple(self.ctx.norm(s) for s in shape)
        for s in out:
            if not isinstance(s, int):
                raise ValueError(
                    f"{point}: tile shape {shape} is not concrete under the policy ({s})"
                )
        return out  # type: ignore[return-value]

    def run(self, ops: list[Op]) -> None:
        for op in ops:
            self.op(op)

    def op(self, op: Op) -> None:
        from argus_plugins.verifiers.smt import data  # data-dependent values (MoE)

        handler = getattr(self, "_" + type(op).__name__.lower(), None) or data.handler(self, op)
        if handler is None:
            raise ValueError(
                f"{op.point}: the smt verifier has no transfer function for op {op.kind!r}"
            )
        handler(op)
        data.track(self, op)

    # ------------------------------------------------------------------------ scalars
    def _let(self, op: Let) -> None:
        return None  # the Context holds the Let chain; queries expand it

    # -------------------------------------------------------------------------- tiles
    def _zeros(self, op: Zeros) -> None:
        self.state[op.out.id] = AVal(self.shape_of(op.out.shape, op.point))

    def _full(self, op: Full) -> None:
        self.state[op.out.id] = AVal(self.shape_of(op.out.shape, op.point))

    def _cast(self, op: Cast) -> None:
        self.state[op.out.id] = self.state[op.x.id]

    def _access(self, op: Load | Store, view: View, mask: IntLike, shape: tuple[int, ...]) -> tuple:
        """Implied for every access: in bounds where unmasked, at its coordinates' offset."""
        ctx = self.ctx
        coords = tuple(ctx.norm(c) for c in view.coords)
        dims = tuple(ctx.norm(d) for d in view.tensor.dims)
        inside = land(
            *[as_expr(c) >= 0 for c in coords], *[as_expr(c) < d for c, d in zip(coords, dims)]
        )
        verb = "reads" if isinstance(op, Load) else "writes"
        self.chk.require(
            "bounds",
            op.point,
            shape,
            land(mask, lnot(inside)),
            coords,
            dims,
            f"{verb} coordinate {{lhs}} of {view.tensor.name}, outside its extents {{rhs}}",
        )
        strides = [ctx.norm(s) for s in view.tensor.strides]
        true_off: IntLike = 0
        for c, s in zip(coords, strides):
            true_off = true_off + c * s
        offset = ctx.norm(view.offset)
        self.chk.require(
            "layout",
            op.point,
            shape,
            land(mask, as_expr(offset).ne(true_off)),
            [offset],
            [true_off],
            f"{verb} offset {{lhs}} of {view.tensor.name} but its coordinate "
            "lives at offset {rhs} (wrong stride or layout)",
            structural=same([offset], [true_off]),
        )
        return coords, inside

    def _load(self, op: Load) -> None:
        shape = self.shape_of(op.view.shape, op.point)
        mask = self.ctx.norm(op.mask) if op.mask is not None else 1
        coords, _ = self._access(op, op.view, mask, shape)
        order = tile_order(coords, len(shape))
        lead = len(coords) - len(shape)
        tags = {
            COORD: TagVal(
                tuple(coords[d] for d in order),
                1,
                tuple(self.ctx.norm(op.view.tensor.dims[d]) for d in order),
                (None,) * lead + tuple(range(len(shape))),
            )
        }
        self.state[op.out.id] = AVal(shape, tags, mask)

    def _store(self, op: Store) -> None:
        from argus_plugins.verifiers.smt import coverage

        shape = self.shape_of(op.view.shape, op.point)
        mask = self.ctx.norm(op.mask) if op.mask is not None else 1
        coords, inside = self._access(op, op.view, mask, shape)
        val = self.state[op.value.id]
        t = val.tags.get(COORD)
        order = tile_order(coords, len(shape))
        coords = tuple(coords[d] for d in order)  # tile-axis order, as tags are
        dims = tuple(self.ctx.norm(op.view.tensor.dims[d]) for d in order)
        if t is not None:
            self.chk.require(
                "store_tag",
                op.point,
                shape,
                land(mask, val.valid, t.defined, any_ne(coords, t.exprs)),
                coords,
                t.exprs,
                "lands at {lhs} but its tag says {rhs}",
                structural=same(coords, t.exprs),
            )
        computed = False  # rows computed from sums of data: coverage is data.py's
        if self.chk.collect:
            from argus_plugins.verifiers.smt import data  # loop and cross-store writes

            computed = data.check_writes(self, op, shape, coords, mask)
        if self.chk.collect and not self.loops and not computed:
            coverage.check_store(
                self, op, shape, coords, dims, mask, inside, val, atomic=isinstance(op, AtomicAdd)
            )

    _atomicadd = _store

    def _elementwise(self, op: Elementwise) -> None:
        shape = self.shape_of(op.out.shape, op.point)
        rank = len(shape)
        if op.fn == "where" and isinstance(op.args[0], Expr):
            self._where(op, shape)
            return
        # a broadcast operand's element is its element 0 along each size-1 axis
        tiles = [broadcast(self.state[a.id], shape) for a in op.operands()]
        tags: dict[str, TagVal] = {}
        for a in tiles:
            for name, t in a.tags.items():
                if name not in tags:
                    tags[name] = t
                    continue
                first = tags[name]
                ls, rs = project(first, t, rank)
                self.chk.require(
                    "elementwise_tag",
                    op.point,
                    shape,
                    land(
                        *[x.valid for x in tiles],
                        first.defined,
                        t.defined,
                        any_ne(ls, rs) if ls else 0,
                    ),
                    ls,
                    rs,
                    f"combines elements whose {name!r} tags differ: {{lhs}} vs {{rhs}}",
                    structural=not ls or same(ls, rs),
                )
                if len(t.exprs) > len(first.exprs):  # keep the entries of the full operand
                    tags[name] = t
        # sums and scalings keep the contraction record: acc * alpha + dot(p, v)
        linear = op.fn in LINEAR
        contrib = tuple(c for x in tiles for c in x.contrib) if linear else ()
        window = linear and any(x.window for x in tiles)
        if op.fn in ("mul", "div") and not self.loops:
            from argus_plugins.verifiers.smt import data  # a product of finished sums

            groups = data.factors(tiles)
            if groups is not None:  # each factor is checked on its own at the store
                contrib, window = groups, False
        self.state[op.out.id] = AVal(shape, tags, land(*[x.valid for x in tiles]), contrib, window)

    def _where(self, op: Elementwise, shape: tuple[int, ...]) -> None:
        """`where(pred, x, other)` with a symbolic predicate: where `pred` fails the element
        is the constant `other` (-inf before a softmax, 0 before a sum), so the predicate
        becomes the element's guard: a masked element carries no data."""
        pred = self.ctx.norm(op.args[0])
        a, b = op.args[1], op.args[2]
        if isinstance(a, Value) and isinstance(b, Value):
            va, vb = broadcast(self.state[a.id], shape), broadcast(self.state[b.id], shape)
            self.state[op.out.id] = merge(as_expr(pred), va, vb, ())
            return
        if isinstance(a, Value):
            x, guard = broadcast(self.state[a.id], shape), pred
        elif isinstance(b, Value):
            x, guard = broadcast(self.state[b.id], shape), lnot(as_expr(pred))
        else:
            self.state[op.out.id] = AVal(shape)
            return
        self.state[op.out.id] = replace(x, valid=land(guard, x.valid), contrib=(), window=False)

    def _expanddims(self, op: ExpandDims) -> None:
        x = self.state[op.x.id]
        rank = len(x.shape)
        m = {elem_sym(d): elem_sym(d + 1) for d in range(op.axis, rank)}
        tags = {}
        for name, t in x.tags.items():
            axes = t.axes_for(rank)
            t = t.subs(m)
            if axes is not None:
                axes = tuple(a if a is None or a < op.axis else a + 1 for a in axes)
            tags[name] = replace(t, axes=axes)
        shape = x.shape[: op.axis] + (1,) + x.shape[op.axis :]
        self.state[op.out.id] = replace(x, shape=shape, tags=tags, valid=sub(x.valid, m))

    def _reduce(self, op: Reduce) -> None:
        """The reduced axis' tag entries are dropped (a row max keeps the row's tag); every
        live element reduced must have its reduced coordinate inside the tensor
        (`reduce_bounds`: keys past SKV never reach a softmax's max or sum)."""
        x = self.state[op.x.id]
        rank = len(x.shape)
        # the result's element d is the input's element d (d < axis) or d + 1 (d >= axis)
        m = {elem_sym(d): (0 if d == op.axis else elem_sym(d - (d > op.axis))) for d in range(rank)}
        tags = {}
        for name, t in x.tags.items():
            axes = t.axes_for(rank)
            if axes is None:
                tags[name] = t.subs(m)
                continue
            keep = [n for n, a in enumerate(axes) if a != op.axis]
            for n, a in enumerate(axes):
                if a == op.axis and t.extents is not None:
                    e, ext = t.exprs[n], t.extents[n]
                    self.chk.require(
                        "reduce_bounds",
                        op.point,
                        x.shape,
                        land(x.valid, t.defined, lor(as_expr(e) < 0, as_expr(e) >= ext)),
                        [e],
                        [ext],
                        f"{op.fn} over axis {op.axis} takes an element whose {name!r} "
                        "coordinate {lhs} lies outside [0, {rhs})",
                        structural=False,
                    )
            tags[name] = TagVal(
                tuple(sub(t.exprs[n], m) for n in keep),
                sub(t.defined, m),
                tuple(t.extents[n] for n in keep) if t.extents is not None else None,
                tuple(
                    axes[n] if axes[n] is None or axes[n] < op.axis else axes[n] - 1 for n in keep
                ),
            )
        shape = tuple(s for d, s in enumerate(x.shape) if d != op.axis)
        self.state[op.out.id] = AVal(shape, tags, 1)

    def _dot(self, op: Dot) -> None:
        a, b = self.state[op.a.id], self.state[op.b.id]
        m, kdim, n = a.shape[0], a.shape[1], b.shape[1]
        kk = self.ctx.fresh("kk", 0, kdim)
        at_a, at_b = {elem_sym(1): kk}, {elem_sym(0): kk}  # a[i, kk], b[kk, j]
        va, vb = sub(a.valid, at_a), sub(b.valid, at_b)
        tags: dict[str, TagVal] = {}
        contrib = None
        for name in sorted(set(a.tags) & set(b.tags)):
            ta, tb = a.tags[name].subs(at_a), b.tags[name].subs(at_b)
            xa, xb = ta.axes_for(2), tb.axes_for(2)
            if xa is None or xb is None or 0 not in xa or 1 not in xa:
                continue
            if 0 not in xb or 1 not in xb:
                continue
            # entries by tile axis: a's (row, column) and b's (row, column); a's constant
            # entries (q[b, h]'s b and h) lead the product's tag
            ar, ac, br, bc = xa.index(0), xa.index(1), xb.index(0), xb.index(1)
            lead = [n for n, x in enumerate(xa) if x is None]
            self.chk.require(
                "dot_contract",
                op.point,
                (m, n),
                land(va, vb, ta.defined, tb.defined, as_expr(ta.exprs[ac]).ne(tb.exprs[br])),
                [ta.exprs[ac]],
                [tb.exprs[br]],
                f"contracts a's {name!r} column {{lhs}} with b's row {{rhs}}",
                structural=same([ta.exprs[ac]], [tb.exprs[br]]),
                extra={"k_element": lambda q, mo, kk=kk: q.value(mo, kk)},
            )
            first = {kk: 0}
            row, col = sub(ta.exprs[ar], first), sub(tb.exprs[bc], first)
            # the product's tag is well defined only if a's row and b's column tags do not
            # change along the contraction (a swizzle read back without its inverse does)
            for side, e, e0, v in (
                ("a's row", ta.exprs[ar], row, va),
                ("b's column", tb.exprs[bc], col, vb),
            ):
                self.chk.require(
                    "dot_operand",
                    op.point,
                    (m, n),
                    land(v, as_expr(e).ne(e0)),
                    [e],
                    [e0],
                    f"{side} {name!r} tag is {{lhs}} here but {{rhs}} at k-element 0",
                    structural=not (isinstance(e, Expr) and kk in e.symbols()),
                    extra={"k_element": lambda q, mo, kk=kk: q.value(mo, kk)},
                )
            ea, eb = a.tags[name].extents, b.tags[name].extents
            ext = None
            if ea and eb:
                ext = (*[ea[i] for i in lead], ea[ar], eb[bc])
            tags[name] = TagVal(
                (*[sub(ta.exprs[i], first) for i in lead], row, col),
                land(sub(ta.defined, first), sub(tb.defined, first)),
                ext,
                (None,) * len(lead) + (0, 1),
            )
            if name == COORD and ea:
                loops = tuple((lp.var, *self.ctx.loops[lp.var.name]) for lp in self.loops)
                contrib = Contribution(
                    ta.exprs[ac], land(va, vb), kk, kdim, loops, ea[ac], op.point
                )
        prev: tuple = ()
        if op.acc is not None:
            acc = self.state[op.acc.id]
            prev = acc.contrib
            for name, t in acc.tags.items():
                r = tags.get(name)
                if r is None or len(r.exprs) != len(t.exprs):
                    continue
                self.chk.require(
                    "dot_acc",
                    op.point,
                    (m, n),
                    land(t.defined, r.defined, any_ne(t.exprs, r.exprs)),
                    t.exprs,
                    r.exprs,
                    f"accumulates into an element whose {name!r} tag is {{lhs}}, "
                    "but the product is for {rhs}",
                    structural=same(t.exprs, r.exprs),
                )
        self.state[op.out.id] = AVal((m, n), tags, 1, prev + ((contrib,) if contrib else ()))

    # --------------------------------------------------------------------- tag ops
    def _tag(self, op: Tag) -> None:
        v = self.state[op.value.id]
        tags = dict(v.tags)
        tags[op.name] = TagVal(tuple(self.ctx.norm(e) for e in op.exprs), 1, None)
        self.state[op.value.id] = v.with_tags(tags)

    def _requires(self, op: Requires) -> None:
        return None  # the Context assumes preconditions in every query

    def _assertcontraction(self, op: AssertContraction) -> None:
        from argus_plugins.verifiers.smt import coverage

        v = self.state[op.value.id]
        t = v.tags.get(op.name)
        contribs = [c for c in v.contrib if isinstance(c, Contribution)]
        if t is None or len(t.exprs) != len(op.tag_syms) or not contribs:
            self._malformed(
                op,
                f"assert_contraction: the tile needs tag {op.name!r} with {len(op.tag_syms)} "
                f"entries and a dot summed into it (has {len(contribs)} contributions)",
            )
            return
        window = self.ctx.norm(op.window).subs(dict(zip(op.tag_syms, t.exprs)))

        def inside(c: IntLike, w=window, cs=op.c_sym) -> Expr:
            return as_expr(sub(w, {cs: c}))

        if self.chk.collect:
            coverage.check_window(self, op, v.shape, land(v.valid, t.defined), contribs, inside)
        self.state[op.value.id] = replace(v, window=True)

    def _asserttageq(self, op: AssertTagEq) -> None:
        a, b = self.state[op.a.id], self.state[op.b.id]
        ta, tb = a.tags.get(op.name_a), b.tags.get(op.name_b)
        if ta is None or tb is None or len(ta.exprs) != len(tb.exprs):
            self._malformed(
                op,
                f"assert_tag_eq: tag {op.name_a!r} of a is {ta and ta.exprs} and tag "
                f"{op.name_b!r} of b is {tb and tb.exprs}; both must exist with equal arity",
            )
            return
        self.chk.require(
            "assert_tag_eq",
            op.point,
            a.shape,
            land(a.valid, b.valid, ta.defined, tb.defined, any_ne(ta.exprs, tb.exprs)),
            ta.exprs,
            tb.exprs,
            f"tag {op.name_a!r} is {{lhs}} but {op.name_b!r} is {{rhs}}",
            structural=same(ta.exprs, tb.exprs),
        )

    def _asserttag(self, op: AssertTag) -> None:
        v = self.state[op.value.id]
        t = v.tags.get(op.name)
        if t is None or len(t.exprs) != len(op.tag_syms):
            self._malformed(
                op, f"assert_tag: the tile has no tag {op.name!r} with {len(op.tag_syms)} entries"
            )
            return
        pred = self.ctx.norm(op.pred).subs(dict(zip(op.tag_syms, t.exprs)))
        self.chk.require(
            "assert_tag",
            op.point,
            v.shape,
            land(v.valid, t.defined, lnot(pred)),
            t.exprs,
            [],
            f"tag {op.name!r} = {{lhs}} breaks the asserted predicate",
        )

    def _malformed(self, op: Op, msg: str) -> None:
        if self.chk.collect:
            self.chk.findings.append(Finding(op.kind, op.point, "unknown", note=msg))

    # -------------------------------------------------------------------------- loops
    def _loop(self, op: Loop) -> None:
        start, stop, step = self.ctx.loops[op.var.name]
        k = op.var
        markers = {id(c): object() for c in op.carried}
        inits = {id(c): self.state[c.init.id] for c in op.carried}
        collect = self.chk.collect
        # pass 1: guess that the carried tags do not change, to learn the body's effect
        from argus_plugins.verifiers.smt import data  # running sums of integer tiles

        self.chk.collect = False
        for c in op.carried:
            self.state[c.arg.id] = replace(inits[id(c)], contrib=(markers[id(c)],))
        data.loop_pass(self, op, first=True)
        self._body(op)
        first = {id(c): self.state[c.yielded.id] for c in op.carried}
        data.loop_pass(self, op, first=False)
        self.chk.collect = collect
        # pass 2: the carried values at the top of iteration k, then check the body under it
        tops = {}
        for c in op.carried:
            tops[id(c)] = at_top(inits[id(c)], first[id(c)], k, start, step, markers[id(c)])
            self.state[c.arg.id] = tops[id(c)]
        self._body(op)
        nxt = {k: k + step}
        last = start + ((stop - start - 1) // step) * step
        nonempty = as_expr(stop) > start
        for c in op.carried:
            y, top, init = self.state[c.yielded.id], tops[id(c)], inits[id(c)]
            for name, t in top.tags.items():
                ty = y.tags.get(name)
                if ty is None or len(ty.exprs) != len(t.exprs):
                    continue
                tn = t.subs(nxt)
                self.chk.require(
                    "loop_invariant",
                    op.point,
                    y.shape,
                    land(
                        as_expr(k + step) < stop,
                        y.valid,
                        ty.defined,
                        tn.defined,
                        any_ne(ty.exprs, tn.exprs),
                    ),
                    ty.exprs,
                    tn.exprs,
                    f"carried tile {c.init.name or c.init.id!r} leaves an iteration with "
                    f"{name!r} tag {{lhs}} but the next iteration expects {{rhs}}",
                    structural=same(ty.exprs, tn.exprs)
                    and as_expr(ty.defined) == as_expr(tn.defined),
                )
            self.state[c.result.id] = after_loop(init, y, k, last, nonempty, markers[id(c)])

    def _body(self, op: Loop) -> None:
        self.loops.append(op)
        try:
            self.run(op.body)
        finally:
            self.loops.pop()


LINEAR = ("add", "sub", "mul", "div", "neg")


def tile_order(coords, rank: int) -> list[int]:
    """Tag order of a view's coordinates: the fixed leading coordinates of a sub-tensor
    (`q[b, h]`) first, then the tile's own in tile-axis order."""
    lead = len(coords) - rank
    return list(range(lead)) + [lead + d for d in axis_order(coords[lead:], rank)]


def broadcast(x: AVal, shape: tuple[int, ...]) -> AVal:
    """`x` read at the elements of a `shape` tile (NumPy broadcasting: size-1 axes)."""
    m = {elem_sym(d): 0 for d, (a, b) in enumerate(zip(x.shape, shape)) if a == 1 and b != 1}
    if not m:
        return x
    return replace(
        x, shape=shape, tags={n: t.subs(m) for n, t in x.tags.items()}, valid=sub(x.valid, m)
    )


def project(a: TagVal, b: TagVal, rank: int) -> tuple[list[IntLike], list[IntLike]]:
    """The entries two tags have in common: all of them at equal arity and unknown axes;
    else the constant entries in order and the entries of each axis both have (a row max
    broadcast along a row is compared with the row's entry only)."""
    xa, xb = a.axes_for(rank), b.axes_for(rank)
    if len(a.exprs) == len(b.exprs) and (xa is None or xb is None or xa == xb):
        return list(a.exprs), list(b.exprs)
    if xa is None or xb is None:
        return [], []
    ca = [e for e, x in zip(a.exprs, xa) if x is None]
    cb = [e for e, x in zip(b.exprs, xb) if x is None]
    if len(ca) != len(cb):
        return [], []
    ls, rs = ca, cb
    for d in range(rank):
        if d in xa and d in xb:
            ls.append(a.exprs[xa.index(d)])
            rs.append(b.exprs[xb.index(d)])
    return ls, rs


def axis_order(coords, rank: int) -> list[int]:
    """Which tensor dim each tile axis walks: tags list coordinates in tile-axis order, so
    a permuted view's tag is (k, n) even though the tensor's dims are (n, k)."""
    uses = [
        {d for d in range(rank) if isinstance(c, Expr) and elem_sym(d) in c.symbols()}
        for c in coords
    ]
    order: dict[int, int] = {}
    progress = True
    while progress and len(order) < rank:
        progress = False
        for dim, axes in enumerate(uses):
            free = axes - set(order)
            if dim not in order.values() and len(free) == 1:
                order[free.pop()] = dim
                progress = True
    if len(order) != rank or len(coords) != rank:
        return list(range(len(coords)))
    return [order[a] for a in range(rank)]


def _either(cond: Expr, a: IntLike, b: IntLike) -> IntLike:
    return a if as_expr(a) == as_expr(b) else Select(cond, as_expr(a), as_expr(b))


def _pred_either(cond: Expr, a: IntLike, b: IntLike) -> IntLike:
    if as_expr(a) == as_expr(b):
        return a
    return lor(land(cond, a), land(lnot(cond), b))


def merge(cond: Expr, a: AVal, b: AVal, contrib: tuple) -> AVal:
    """The value that is `a` where `cond` holds and `b` elsewhere; a tag missing on one
    side is undefined there."""
    tags: dict[str, TagVal] = {}
    for name in list(a.tags) + [n for n in b.tags if n not in a.tags]:
        ta, tb = a.tags.get(name), b.tags.get(name)
        if ta is not None and tb is not None and len(ta.exprs) == len(tb.exprs):
            if ta == tb:
                tags[name] = ta
                continue
            exprs = tuple(_either(cond, x, y) for x, y in zip(ta.exprs, tb.exprs))
            tags[name] = TagVal(
                exprs,
                _pred_either(cond, ta.defined, tb.defined),
                tb.extents or ta.extents,
                tb.axes or ta.axes,
            )
        elif ta is not None:
            tags[name] = replace(ta, defined=land(cond, ta.defined))
        elif tb is not None:
            tags[name] = replace(tb, defined=land(lnot(cond), tb.defined))
    return AVal(b.shape, tags, _pred_either(cond, a.valid, b.valid), contrib)


def at_top(
    init: AVal, yielded: AVal, k: Sym, start: IntLike, step: IntLike, marker: object
) -> AVal:
    """The carried value at the top of iteration k: `init` at k == start, else what the
    body yielded at k - step."""
    if init.tags == yielded.tags and as_expr(init.valid) == as_expr(yielded.valid):
        return replace(init, contrib=(marker,))
    prev = {k: k - step}
    shifted = AVal(
        yielded.shape, {n: t.subs(prev) for n, t in yielded.tags.items()}, sub(yielded.valid, prev)
    )
    return merge(k.eq(start), init, shifted, (marker,))


def after_loop(init: AVal, y: AVal, k: Sym, last: IntLike, nonempty: Expr, marker: object) -> AVal:
    """The carried value after the loop: the last iteration's yield (or `init` if the loop
    runs no iteration). Contributions summed across iterations keep k ranging over the
    loop; a value rebuilt each iteration keeps only the last one's."""
    at_last = {k: last}
    final = AVal(y.shape, {n: t.subs(at_last) for n, t in y.tags.items()}, sub(y.valid, at_last))
    if any(c is marker for c in y.contrib):
        contrib = init.contrib + tuple(c for c in y.contrib if c is not marker)
    else:  # the carried value was reset inside the loop: only the last iteration survives
        contrib = tuple(
            Contribution(
                sub(c.cc, at_last),
                land(nonempty, sub(c.valid, at_last)),
                c.kk,
                c.kk_extent,
                tuple(lp for lp in c.loops if lp[0] != k),
                c.ext,
                c.point,
            )
            for c in y.contrib
            if isinstance(c, Contribution)
        )
    out = merge(nonempty, final, init, contrib)
    return out
