"""Transfer functions of tile ops: creation, loads and stores, elementwise ops, reductions
and dots, and the assertions each implies.

Loads and stores are in bounds or masked and at the offset their coordinates name; a dot's
contracted coordinates agree; elementwise operands carry equal tags; a store lands where
its tags say, and covers the output exactly once (`store_coverage.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import z3

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
    Reduce,
    Store,
    Value,
    View,
    Zeros,
    as_expr,
    elem_sym,
    land,
    lnot,
)
from argus_core.ir.nodes import AtomicAdd
from argus_core.ir.tags import COORD
from argus_plugins.verifiers.smt.domain import (
    AVal,
    Contribution,
    TagVal,
    broadcast,
    factor_groups,
    merge,
)
from argus_plugins.verifiers.smt.exprs import any_ne, lor, same, sub
from argus_plugins.verifiers.smt.interpreter import Interpreter
from argus_plugins.verifiers.smt.store_coverage import check_store, check_writes


def let(it: Interpreter, op: Let) -> None:
    return None  # the Context holds the Let chain; queries expand it


# -------------------------------------------------------------------------- tiles
def zeros(it: Interpreter, op: Zeros) -> None:
    it.state[op.out.id] = AVal(it.shape_of(op.out.shape, op.point))


def full(it: Interpreter, op: Full) -> None:
    it.state[op.out.id] = AVal(it.shape_of(op.out.shape, op.point))


def cast(it: Interpreter, op: Cast) -> None:
    it.state[op.out.id] = it.state[op.x.id]


def _access(
    it: Interpreter, op: Load | Store, view: View, mask: IntLike, shape: tuple[int, ...]
) -> tuple:
    """Implied for every access: in bounds where unmasked, at its coordinates' offset."""
    ctx = it.ctx
    coords = tuple(ctx.norm(c) for c in view.coords)
    dims = tuple(ctx.norm(d) for d in view.tensor.dims)
    inside = land(
        *[as_expr(c) >= 0 for c in coords], *[as_expr(c) < d for c, d in zip(coords, dims)]
    )
    verb = "reads" if isinstance(op, Load) else "writes"
    it.chk.require(
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
    it.chk.require(
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


def load(it: Interpreter, op: Load) -> None:
    shape = it.shape_of(op.view.shape, op.point)
    mask = it.ctx.norm(op.mask) if op.mask is not None else 1
    coords, _ = _access(it, op, op.view, mask, shape)
    order = tile_order(coords, len(shape))
    lead = len(coords) - len(shape)
    tags = {
        COORD: TagVal(
            tuple(coords[d] for d in order),
            1,
            tuple(it.ctx.norm(op.view.tensor.dims[d]) for d in order),
            (None,) * lead + tuple(range(len(shape))),
        )
    }
    fills = (
        ()
        if as_expr(mask) == as_expr(1)
        else ((lnot(as_expr(mask)), float(op.other), op.point.line),)
    )
    it.state[op.out.id] = AVal(shape, tags, mask, fills=fills)


def store(it: Interpreter, op: Store) -> None:
    """A store or an atomic add: lands where its tags say; grid-wide coverage once."""
    shape = it.shape_of(op.view.shape, op.point)
    mask = it.ctx.norm(op.mask) if op.mask is not None else 1
    coords, inside = _access(it, op, op.view, mask, shape)
    val = it.state[op.value.id]
    t = val.tags.get(COORD)
    order = tile_order(coords, len(shape))
    coords = tuple(coords[d] for d in order)  # tile-axis order, as tags are
    dims = tuple(it.ctx.norm(op.view.tensor.dims[d]) for d in order)
    if t is not None:
        it.chk.require(
            "store_tag",
            op.point,
            shape,
            land(mask, val.valid, t.defined, any_ne(coords, t.exprs)),
            coords,
            t.exprs,
            "lands at {lhs} but its tag says {rhs}",
            structural=same(coords, t.exprs),
        )
    junk = [c for c, _v, _n in val.fills]  # masked elements whose value is not a real one's
    if junk and not isinstance(op, AtomicAdd):
        it.chk.require(
            "store_valid",
            op.point,
            shape,
            land(mask, lnot(as_expr(val.valid)), lor(*junk)),
            coords,
            [],
            "writes {lhs}, an element computed from masked-off data (a load's `other` or a "
            "`where`'s discarded branch): the store's mask is wider than its data's",
            extra={"origins": _origins(val.fills)},
        )
    computed = False  # rows computed from sums of data: check_writes covers them
    if it.chk.collect and it.data is not None:  # loop and cross-store writes
        computed = check_writes(it, it.data, op, shape, coords, mask)
    if it.chk.collect and not it.loops and not computed:
        check_store(
            it, op, shape, coords, dims, mask, inside, val, atomic=isinstance(op, AtomicAdd)
        )


def elementwise(it: Interpreter, op: Elementwise) -> None:
    shape = it.shape_of(op.out.shape, op.point)
    rank = len(shape)
    if op.fn == "where" and isinstance(op.args[0], Expr):
        _where(it, op, shape)
        return
    # a broadcast operand's element is its element 0 along each size-1 axis
    tiles = [broadcast(it.state[a.id], shape) for a in op.operands()]
    tags: dict[str, TagVal] = {}
    dropped: set[str] = set()
    for a in tiles:
        for name, t in a.tags.items():
            if name in dropped:
                continue
            if name not in tags:
                tags[name] = t
                continue
            first = tags[name]
            ls, rs = project(first, t, rank)
            if name.endswith(RHS):  # provenance of two products (silu(gate) * up): it may
                if not ls or not same(ls, rs):  # differ; the result then has none
                    del tags[name]
                    dropped.add(name)
                continue
            it.chk.require(
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
            elif not ls and (joined := _outer(first, t, rank)) is not None:
                tags[name] = joined  # a row's [None, :] and a column's [:, None]
    fills = _fills(op.fn, tiles, bool(it.loops))
    # sums and scalings keep the contraction record: acc * alpha + dot(p, v)
    linear = op.fn in LINEAR
    contrib = tuple(c for x in tiles for c in x.contrib) if linear else ()
    window = linear and any(x.window for x in tiles)
    carriers = [x for x in tiles if x.contrib]
    if not linear and len(carriers) == 1 and not it.loops:
        # an epilogue of one finished sum (relu(acc + bias), sigmoid(acc)): the stored
        # value is still that sum's, so its contraction is still checked at the store
        contrib, window = carriers[0].contrib, carriers[0].window
    if op.fn in ("mul", "div") and not it.loops:  # a product of finished sums
        groups = factor_groups(tiles)
        if groups is not None:  # each factor is checked on its own at the store
            contrib, window = groups, False
    valid = land(*[x.valid for x in tiles])
    it.state[op.out.id] = AVal(shape, tags, valid, contrib, window, fills)


INF = float("inf")
# a reduction's identity: what a masked element must hold not to change the result
IDENTITY = {"sum": 0.0, "max": -INF, "min": INF}


def _neutral(fn: str, n: int) -> float | None:
    """The identity of `fn` as its operand `n` (maximum: -inf, add: 0, sub: 0 on the
    right, mul: 1, div: 1 on the right), or None."""
    idents = {"maximum": -INF, "minimum": INF, "add": 0.0, "mul": 1.0}
    if n == 1:
        idents.update({"sub": 0.0, "div": 1.0})
    return idents.get(fn)


def _apply(fn: str, vals: list[float | None]) -> float | None:
    """`fn` of known values, where None is a real element's (unknown, finite) value; None
    when the result is not a known constant."""
    a = vals[0]
    b = vals[1] if len(vals) > 1 else None
    try:
        if len(vals) == 1:
            if a is None:
                return None
            if fn in ("exp", "exp2"):
                return 0.0 if a == -INF else (1.0 if a == 0.0 else None)
            if fn == "neg":
                return -a
            return None
        if fn in ("add", "sub") and len(vals) == 2:
            if a is not None and b is not None:
                return a + b if fn == "add" else a - b
            known = a if a is not None else b
            if known is not None and known in (INF, -INF):  # inf + finite
                return known if (fn == "add" or a is not None) else -known
            return None
        if fn == "mul" and len(vals) == 2:
            if a is not None and b is not None:
                return a * b
            return 0.0 if 0.0 in (a, b) else None
        if fn == "div" and len(vals) == 2:
            if a is not None and b is not None:
                return a / b
            return 0.0 if a == 0.0 else None
        if fn in ("maximum", "minimum") and a is not None and b is not None:
            return max(a, b) if fn == "maximum" else min(a, b)
    except (ArithmeticError, ValueError):
        return None
    return None


def _fills(
    fn: str, tiles: list[AVal], in_loop: bool
) -> tuple[tuple[IntLike, float | None, int], ...]:
    """The masked elements of an elementwise result: each operand's masked elements with
    `fn` of their value and the other operands' (unknown) values. Inside a loop, none for
    a masked element that holds `fn`'s identity (acc = maximum(acc, a) with a at -inf,
    acc + a with a at 0: a pool's window over padding adds nothing); outside one, a bias
    of 0 read past a vector's end is still junk (a wrong channel's tile)."""
    if len(tiles) > 2:
        return ()
    out = []
    for n, x in enumerate(tiles):
        neutral = _neutral(fn, n) if in_loop else None
        for c, v, line in x.fills:
            if v is not None and v == neutral:
                continue
            vals: list[float | None] = [None] * len(tiles)
            vals[n] = v
            out.append((c, _apply(fn, vals) if v is not None else None, line))
    return tuple(out)


def _where(it: Interpreter, op: Elementwise, shape: tuple[int, ...]) -> None:
    """`where(pred, x, other)` with a symbolic predicate: where `pred` fails the element
    is the constant `other` (-inf before a softmax, 0 before a sum), so the predicate
    becomes the element's guard: a masked element carries no data."""
    pred = it.ctx.norm(op.args[0])
    a, b = op.args[1], op.args[2]
    if isinstance(a, Value) and isinstance(b, Value):
        va, vb = broadcast(it.state[a.id], shape), broadcast(it.state[b.id], shape)
        it.state[op.out.id] = merge(as_expr(pred), va, vb, ())
        return
    if isinstance(a, Value):
        x, guard, const = broadcast(it.state[a.id], shape), pred, b
    elif isinstance(b, Value):
        x, guard, const = broadcast(it.state[b.id], shape), lnot(as_expr(pred)), a
    else:
        it.state[op.out.id] = AVal(shape)
        return
    # where the guard fails the element is the constant; elsewhere x's masked ones stay
    fill = float(const) if isinstance(const, int | float) else None
    fills = ((lnot(as_expr(guard)), fill, op.point.line),) + tuple(
        (land(guard, c), v, n) for c, v, n in x.fills
    )
    it.state[op.out.id] = replace(
        x, valid=land(guard, x.valid), contrib=(), window=False, fills=fills
    )


def expand_dims(it: Interpreter, op: ExpandDims) -> None:
    x = it.state[op.x.id]
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
    fills = tuple((sub(c, m), v, n) for c, v, n in x.fills)
    it.state[op.out.id] = replace(x, shape=shape, tags=tags, valid=sub(x.valid, m), fills=fills)


def reduce(it: Interpreter, op: Reduce) -> None:
    """The reduced axis' tag entries are dropped (a row max keeps the row's tag); every
    live element reduced must have its reduced coordinate inside the tensor
    (`reduce_bounds`: keys past SKV never reach a softmax's max or sum)."""
    x = it.state[op.x.id]
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
                it.chk.require(
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
            tuple(axes[n] if axes[n] is None or axes[n] < op.axis else axes[n] - 1 for n in keep),
        )
    _reduce_masked(it, op, x)
    shape = tuple(s for d, s in enumerate(x.shape) if d != op.axis)
    it.state[op.out.id] = AVal(shape, tags, 1)


def _reduce_masked(it: Interpreter, op: Reduce, x: AVal) -> None:
    """`reduce_masked`: a masked element that holds a known value other than the
    reduction's identity (a max over a load without `other=-inf`: masked elements read 0)
    is not reduced into a result some real element also reaches: a result whose every
    element is masked (a row past the tensor) is never stored, so it is not flagged."""
    ident = IDENTITY.get(op.fn)
    if ident is None or not x.fills:
        return
    real = it.ctx.fresh("jreal", 0, x.shape[op.axis])  # another element of that result
    other_real = sub(x.valid, {elem_sym(op.axis): real})
    for c, v, line in x.fills:
        if v is None or v == ident:  # unknown values are not flagged (no false alarm)
            continue
        it.chk.require(
            "reduce_masked",
            op.point,
            x.shape,
            land(c, other_real),
            [elem_sym(op.axis)],
            [real],
            f"{op.fn} over axis {op.axis} takes masked element {{lhs}}, which holds {v} "
            f"instead of the identity {ident} (a load's `other` or a `where`'s constant), "
            "into a result that real element {rhs} also reaches",
            extra={"origins": [line]},
        )


def _origins(fills) -> Callable[[Any, Any], list[int]]:
    """The lines of the ops whose masked values the model's element holds (a counterexample
    names them first among its causes)."""

    def lines(q, model) -> list[int]:
        out = []
        for c, _v, line in fills:
            try:
                hit = z3.is_true(model.eval(q.z(c), model_completion=True))
            except (z3.Z3Exception, KeyError, TypeError):
                hit = False
            if hit and line not in out:
                out.append(line)
        return out or sorted({line for _c, _v, line in fills})

    return lines


def dot(it: Interpreter, op: Dot) -> None:
    a, b = it.state[op.a.id], it.state[op.b.id]
    m, kdim, n = a.shape[0], a.shape[1], b.shape[1]
    kk = it.ctx.fresh("kk", 0, kdim)
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
        it.chk.require(
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
            it.chk.require(
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
        # b's constant entries (w1[ex, 0]'s expert and half) are not in the product's
        # coordinates: kept as tag `name + RHS`, so the right operand's provenance can
        # still be asserted after the dot (only when they do not change along k)
        blead = [i for i, x in enumerate(xb) if x is None]
        if blead and not name.endswith(RHS):
            entries = [tb.exprs[i] for i in blead]
            if not any(isinstance(e, Expr) and kk in e.symbols() for e in entries):
                tags[name + RHS] = TagVal(
                    tuple(entries),
                    land(vb, tb.defined),
                    tuple(eb[i] for i in blead) if eb else None,
                    (None,) * len(blead),
                )
        if name == COORD and ea:
            loops = tuple((lp.var, *it.ctx.loops[lp.var.name]) for lp in it.loops)
            contrib = Contribution(ta.exprs[ac], land(va, vb), kk, kdim, loops, ea[ac], op.point)
    prev: tuple = ()
    if op.acc is not None:
        acc = it.state[op.acc.id]
        prev = acc.contrib
        for name in [n for n in tags if n.endswith(RHS)]:
            # a provenance tag holds for the sum only if the earlier products that had
            # one had the same right-operand entries (a sum over w[0] and w[1] has none)
            t, r = acc.tags.get(name), tags[name]
            if t is not None and len(t.exprs) == len(r.exprs) and same(t.exprs, r.exprs):
                tags[name] = replace(r, defined=lor(t.defined, r.defined))
            elif t is not None:
                del tags[name]
        for name, t in acc.tags.items():
            if name.endswith(RHS):
                continue
            r = tags.get(name)
            if r is None or len(r.exprs) != len(t.exprs):
                continue
            it.chk.require(
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
    it.state[op.out.id] = AVal((m, n), tags, 1, prev + ((contrib,) if contrib else ()))


# ------------------------------------------------------------------------ helpers
RHS = ".rhs"  # suffix of the tag a dot keeps for its right operand's constant entries
LINEAR = ("add", "sub", "mul", "div", "neg")  # ops that keep a sum's contraction record


def tile_order(coords, rank: int) -> list[int]:
    """Tag order of a view's coordinates: the fixed leading coordinates of a sub-tensor
    (`q[b, h]`) first, then the tile's own in tile-axis order."""
    lead = len(coords) - rank
    return list(range(lead)) + [lead + d for d in axis_order(coords[lead:], rank)]


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
    # fixed entries are compared when both have as many (q[b, h] with k[b, g]); a tile of
    # a sub-tensor with more of them (x[n, g]'s block beside a per-channel vec0[g]'s) is
    # still compared along each tile axis both walk: a bias or scale of the wrong channel
    ls, rs = (ca, cb) if len(ca) == len(cb) else ([], [])
    for d in range(rank):
        if d in xa and d in xb:
            ls.append(a.exprs[xa.index(d)])
            rs.append(b.exprs[xb.index(d)])
    return ls, rs


def _outer(a: TagVal, b: TagVal, rank: int) -> TagVal | None:
    """The tag of an outer combination (`row[None, :] + col[:, None]`): two tags that walk
    disjoint tile axes and have no fixed entries give one entry per axis, each from the
    operand that walks it (element (r, c) came from col's r and row's c, so it lands at
    (r, c)); None otherwise."""
    xa, xb = a.axes_for(rank), b.axes_for(rank)
    if xa is None or xb is None or None in xa or None in xb or set(xa) & set(xb):
        return None
    by_axis = {
        x: (e, t.extents[i] if t.extents else None)
        for t, xs in ((a, xa), (b, xb))
        for i, (e, x) in enumerate(zip(t.exprs, xs))
    }
    axes = tuple(sorted(by_axis))
    extents = tuple(by_axis[x][1] for x in axes)
    return TagVal(
        tuple(by_axis[x][0] for x in axes),
        land(a.defined, b.defined),
        extents if a.extents and b.extents else None,
        axes,
    )


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
