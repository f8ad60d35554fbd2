"""Data-dependent values: integer tiles used as indices, scalar loads, and data contracts.

An integer tile's *value* (not only its tags) matters when it indexes memory: `x.rows(tok)`
gathers the rows a loaded tile names, `al.load_scalar(block_expert, pb)` picks an expert.
Each such value is an IR expression per element (over `_i0`, `_i1`, program and loop
symbols) built from **reads**: `read("sorted_ids", pb*BM + _i0)` is an uninterpreted z3
function of the index (`DataRead`). A kernel states what it assumes of its data as
**contracts** (`al.contract`), which every query instantiates at the reads it mentions
(hand-made E-matching: no quantifier reaches z3).

Sums of data (a `sum` reduction, `cumsum`, a loop-carried running total) are prefix sums
with facts (`scan.py`). What is not modelled (max/min of data, other loop-carried integer
tiles, a float division) becomes an **opaque** read, a function of (program, loop
variables, element): sound, and a counterexample that depends on one is reported
`unknown`, naming the op, never `violated`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import z3

from argus_core.ir import (
    Cast,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    IntLike,
    Load,
    Loop,
    Sym,
    TileElem,
    Zeros,
    as_expr,
    elem_sym,
    land,
    lnot,
)
from argus_core.ir.expr import Cmp, Select
from argus_core.ir.nodes import LoadScalar, Reduce, Scan
from argus_core.ir.tags import COORD, READS, Contract, DataRead, RowsFor, Summand, read
from argus_plugins.verifiers.smt import scan
from argus_plugins.verifiers.smt.domain import AVal, Contribution, TagVal, sub

OPAQUE = "%"  # reads named "%<value id>" stand for values the verifier does not model
ROUNDS = 3  # contract instantiation rounds (each may expose reads of other tensors)

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _sel(cond: IntLike, a: IntLike, b: IntLike) -> IntLike:
    if as_expr(cond) == as_expr(1):
        return a
    if as_expr(a) == as_expr(b):
        return a
    return Select(as_expr(cond), as_expr(a), as_expr(b))


def _bool(e: IntLike) -> Expr:
    """An integer (0/1 or any) as a predicate."""
    e = as_expr(e)
    if isinstance(e, Select) and as_expr(e.a) == as_expr(1) and as_expr(e.b) == as_expr(0):
        return e.cond
    return e.ne(0)


def _int(p: Expr) -> IntLike:
    return Select(p, as_expr(1), as_expr(0))


def tdiv(a: IntLike, b: IntLike) -> IntLike:
    """Triton's integer `//` (truncates toward zero), for b > 0."""
    if isinstance(a, int) and a >= 0:
        return as_expr(a) // b if isinstance(b, Expr) else a // b
    return Select(as_expr(a) >= 0, as_expr(a // b), as_expr(0 - ((0 - a) // b)))


def tmod(a: IntLike, b: IntLike) -> IntLike:
    """Triton's integer `%` (sign of the dividend), for b > 0."""
    return Select(as_expr(a) >= 0, as_expr(a % b), as_expr(0 - ((0 - a) % b)))


def reads(exprs) -> list[DataRead]:
    """Every read in `exprs` (index arguments included), each once, in order."""
    out: dict[str, DataRead] = {}
    stack = [e for e in exprs if isinstance(e, Expr)]
    while stack:
        e = stack.pop()
        if isinstance(e, DataRead):
            out.setdefault(e.name, e)
        stack.extend(e.children())
    return list(out.values())


class DataState:
    """Per (kernel, policy): each integer tile's value, opaque reads, and the contracts."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.vals: dict[int, IntLike] = {}
        self.opaque: dict[str, str] = {}  # opaque tensor name -> the op it stands for
        self.contracts = []
        for op in ctx.ir.walk():
            if isinstance(op, Contract):
                self.contracts.append(self._contract(op))
        self.fns: dict[tuple[str, int], Any] = {}
        self.it = None  # the Interpreter, once it runs
        self.ps: dict[str, Any] = {}  # prefix sums by name (scan.py)
        self.ps_names: dict[str, str] = {}  # a sum's summand and range -> its name
        self.z3cache: dict[Expr, tuple] = {}  # fact -> (z3 term, symbols it needs)
        self.running: dict[int, IntLike] = {}  # loop results that are running sums
        self.writes: dict[str, list] = {}  # stores so far, per tensor (scan.check_writes)
        self.uncovered: dict[str, Any] = {}  # tensors with rows computed by sums -> 1st store
        self.cover_writes: dict[str, list] = {}  # their stores, with loops (witness.py)

    def _contract(self, op: Contract):
        pred = self.ctx.norm(op.pred)
        exts = [self.ctx.norm(e) for e in op.extents]
        # each bound variable ranges over the index arguments of the reads it indexes
        triggers: list[set[tuple[str, int]]] = []
        for v in op.vars:
            trig = {(r.tensor, n) for r in reads([pred]) for n, a in enumerate(r.args) if a == v}
            if not trig:
                raise ValueError(
                    f"{op.point}: contract {op.name!r}: bound variable {v.name} must appear "
                    "bare as the index of a read (al.read(t, r)) so the verifier can "
                    "instantiate it"
                )
            triggers.append(trig)
        return op, pred, exts, triggers

    # ------------------------------------------------------------------ tile values
    def opaque_value(self, it, value, op, shape) -> DataRead:
        name = f"{OPAQUE}{value.id}"
        self.opaque[name] = f"{op.kind} at {op.point}"
        prog = [Sym("program_id_0", "pid")]
        loops = [lp.var for lp in it.loops]
        elems = [elem_sym(d) for d in range(len(shape))]
        return self.register(read(name, *prog, *loops, *elems))

    def register(self, r: DataRead) -> DataRead:
        return r  # reads register themselves (argus_core.ir.tags.READS)

    def of(self, it, v, shape) -> IntLike:
        """The value of operand `v` (tile, number, index expression) at an element of a
        tile of `shape` (a broadcast tile reads its element 0 along size-1 axes)."""
        if isinstance(v, bool | int):
            return int(v)
        if isinstance(v, float):
            if math.isfinite(v) and v == int(v):
                return int(v)
            return None  # type: ignore[return-value]
        if isinstance(v, Expr):
            return self.ctx.norm(v)
        val = self.vals.get(v.id)
        if val is None:
            return None  # type: ignore[return-value]
        vshape = it.state[v.id].shape if v.id in it.state else shape
        m = {elem_sym(d): 0 for d, (a, b) in enumerate(zip(vshape, shape)) if a == 1 and b != 1}
        return sub(val, m) if m else val

    def elem(self, it, e: TileElem) -> IntLike:
        """A `TileElem` (element of an index tile) as an expression over the view's elems."""
        val = self.vals.get(e.value.id)
        if val is None:
            shape = it.state[e.value.id].shape if e.value.id in it.state else (1,)
            val = self.opaque_value(it, e.value, _Stub(e.value), shape)
            self.vals[e.value.id] = val
        if e.axis is None or e.axis == 0:
            return val
        return sub(val, {elem_sym(0): elem_sym(e.axis)})

    def resolve(self, it, e: IntLike) -> IntLike:
        if not isinstance(e, Expr):
            return e
        return e.map(lambda s: self.elem(it, s) if isinstance(s, TileElem) else s)

    def track(self, it, op) -> None:
        """Record the value of `op`'s result (after its transfer function ran)."""
        out = getattr(op, "out", None)
        if out is None:
            if isinstance(op, Loop):
                for c in op.carried:  # a running sum (scan.py), else not modelled
                    val = self.running.get(c.result.id)
                    if val is None:
                        val = self.opaque_value(it, c.result, op, c.result.shape)
                    self.vals[c.result.id] = val
            return
        if out.dtype.startswith("f") or out.dtype == "bf16":
            return
        shape = it.state[out.id].shape if out.id in it.state else tuple(out.shape)
        val = self._value(it, op, shape)
        if val is None:
            val = self.opaque_value(it, out, op, shape)
        self.vals[out.id] = val

    def _value(self, it, op, shape) -> IntLike | None:
        ctx = self.ctx
        if isinstance(op, Zeros):
            return 0
        if isinstance(op, Full):
            return self.of(it, op.value, shape)
        if isinstance(op, Cast):
            return self.vals.get(op.x.id)
        if isinstance(op, ExpandDims):
            x = self.vals.get(op.x.id)
            rank = len(shape) - 1
            m = {elem_sym(d): elem_sym(d + 1) for d in range(op.axis, rank)}
            return None if x is None else sub(x, m)
        if isinstance(op, Load):
            other = self.of(it, op.other, shape)
            if other is None:
                return None
            coords = [ctx.norm(c) for c in op.view.coords]
            r = self.register(read(op.view.tensor.name, *coords))
            return _sel(ctx.norm(op.mask) if op.mask is not None else 1, r, other)
        if isinstance(op, Elementwise):
            return self._elementwise(it, op, shape)
        if isinstance(op, Reduce):
            return scan.reduce_value(self, it, op, shape)
        if isinstance(op, Scan):
            return scan.scan_value(self, it, op, shape)
        return None  # max/min reductions, dots: not modelled

    def _elementwise(self, it, op: Elementwise, shape) -> IntLike | None:
        fn = op.fn
        if fn == "where":
            cond = op.args[0]
            c = self.ctx.norm(cond) if isinstance(cond, Expr) else self.of(it, cond, shape)
            a, b = self.of(it, op.args[1], shape), self.of(it, op.args[2], shape)
            if c is None or a is None or b is None:
                return None
            return _sel(_bool(c) if not isinstance(cond, Expr) else c, a, b)
        xs = [self.of(it, a, shape) for a in op.args]
        if any(x is None for x in xs):
            return None
        if fn == "neg":
            return 0 - xs[0]
        a, b = xs[0], xs[1]
        if fn == "add":
            return a + b
        if fn == "sub":
            return a - b
        if fn == "mul":
            return a * b
        if fn == "floordiv" and isinstance(b, int) and b > 0:
            return tdiv(a, b)
        if fn == "floordiv" and isinstance(b, Expr):
            return tdiv(a, b)  # a divisor that is a kernel scalar: `requires` it positive
        if fn == "mod" and (isinstance(b, Expr) or (isinstance(b, int) and b > 0)):
            return tmod(a, b)
        if fn in _CMP:
            return _int(Cmp(_CMP[fn], as_expr(a), as_expr(b)))
        bools = all(isinstance(v, Expr) or v in (0, 1) for v in (a, b)) and op.out.dtype == "i1"
        if fn == "and" and bools:
            return _int(land(_bool(a), _bool(b)))
        if fn == "or" and bools:
            return _int(_bool(a) | _bool(b))
        if fn == "minimum":
            return _sel(as_expr(a) <= b, a, b)
        if fn == "maximum":
            return _sel(as_expr(a) >= b, a, b)
        return None  # bitwise ops on integers, true division: not modelled

    # ------------------------------------------------------------------------- z3
    def term(self, q, name: str):
        """The z3 term of the read named `name` in query `q`."""
        r = READS.get(name)
        if r is None:
            raise KeyError(f"the verifier has no meaning for data read {name!r}")
        key = (r.tensor, len(r.args))
        f = self.fns.get(key)
        if f is None:
            sorts = [z3.IntSort()] * (len(r.args) + 1)
            f = self.fns[key] = z3.Function(f"{r.tensor}/{len(r.args)}", *sorts)
        return f(*[q.z(a) for a in r.args])

    def instances(self, q, roots) -> tuple[list[Any], list[str]]:
        """Contract instances for the reads in `roots` (IR expressions), as z3 terms, and
        the opaque values the query depends on (by the op they stand for)."""
        out: list[Any] = []
        seen: set[tuple] = set()
        frontier = list(roots)
        everything = list(roots)
        if self.ps:  # prefix sums: their facts at the points the query mentions
            out.extend(scan.facts(self, reads(list(roots))))
            everything = list(roots) + out
        for _ in range(ROUNDS):
            rs = reads(everything)
            new: list[Expr] = []
            args: dict[tuple[str, int], dict[str, IntLike]] = {}
            for r in rs:
                for n, a in enumerate(r.args):
                    args.setdefault((r.tensor, n), {})[str(a)] = a
            for c, (op, pred, exts, triggers) in enumerate(self.contracts):
                cands = []
                for trig in triggers:
                    pool: dict[str, IntLike] = {}
                    for key in trig:
                        pool.update(args.get(key, {}))
                    cands.append(list(pool.items()))
                for combo in itertools.product(*cands):
                    key = (c, tuple(k for k, _ in combo))
                    if key in seen:
                        continue
                    seen.add(key)
                    binds = {v: a for v, (_k, a) in zip(op.vars, combo)}
                    inside = land(
                        *[as_expr(a) >= 0 for a in binds.values()],
                        *[as_expr(a) < e for a, e in zip(binds.values(), exts)],
                    )
                    inst = sub(pred, binds)
                    new.append(lnot(inside) | as_expr(inst))
            if not new:
                break
            out.extend(new)
            everything = new
            frontier = new
        del frontier
        terms = scan.convert(self, q, out)
        q.data_reads = [r for r in reads(list(roots)) if not r.tensor.startswith(OPAQUE)]
        every = reads(list(roots) + out)
        used = {r.tensor for r in every}
        q.sums = scan.uses_sums(self, every)
        opaque = sorted({self.opaque[t] for t in used if t in self.opaque})
        return terms, opaque


def model_values(q, model) -> dict[str, int]:
    """The data reads of a violated query with their values in the model (`{"sorted_ids[
    pb*16 + _i0]": 16}`), so a counterexample shows the routing that breaks the kernel."""
    return {r.name[1:]: q.value(model, r) for r in getattr(q, "data_reads", [])}


class _Stub:
    """An op-like origin for a value first seen as an index (no defining op reached)."""

    def __init__(self, value):
        self.kind = "value"
        self.point = f"%{value.id}"


def state(ctx) -> DataState | None:
    """The data state of a Context (made on first use); None for a kernel without data
    ops, so GEMM-like kernels pay nothing."""
    st = getattr(ctx, "data", None)
    if st is None:
        st = DataState(ctx) if uses_data(ctx.ir) else False
        ctx.data = st
    return st or None


def bind(it) -> None:
    """Hook in `Interpreter.__init__`: data values are read through this interpreter."""
    st = state(it.ctx)
    if st is not None:
        st.it = it


def track(it, op) -> None:
    """Hook after each transfer function: record the value of `op`'s result."""
    st = state(it.ctx)
    if st is not None:
        st.track(it, op)


def loop_pass(it, op, first: bool) -> None:
    """Hook around a loop's learning pass: carried integer tiles start as placeholders
    (`first`), and after it a tile that grows by a summand becomes its running sum."""
    st = state(it.ctx)
    if st is not None:
        (scan.loop_entry if first else scan.loop_summands)(st, it, op)


def check_writes(it, op, shape, coords, mask) -> bool:
    """Hook at a store: loop and cross-store write obligations (data kernels only). True
    when the store's coordinates are computed from sums of data (its coverage is here)."""
    if state(it.ctx) is None:
        return False
    return scan.check_writes(it, op, shape, coords, mask)


def resolve(ctx, e: IntLike) -> IntLike:
    """Hook in `Context.norm`: elements of index tiles (`TileElem`) become their values."""
    st = getattr(ctx, "data", None)
    if not st or st.it is None or not isinstance(e, Expr):
        return e
    return st.resolve(st.it, e)


def uses_data(ir) -> bool:
    return any(
        isinstance(op, LoadScalar | Contract | RowsFor | Summand | Scan)
        or isinstance(op, Load | Elementwise)
        and _has_elem(op)
        for op in ir.walk()
    )


def _has_elem(op) -> bool:
    exprs = []
    if isinstance(op, Load):
        exprs = [*op.view.coords, op.mask]
    else:
        exprs = [a for a in op.args if isinstance(a, Expr)]
    return any(isinstance(s, TileElem) for e in exprs if isinstance(e, Expr) for s in e.symbols())


# ------------------------------------------------------------- grid-wide obligations
def is_data(e: IntLike) -> bool:
    return isinstance(e, Expr) and bool(reads([e]))


def scatter_grid(it, op, shape, coords, dims, atomic: bool) -> bool:
    """Output coverage of a scatter (`y.rows(slots)`): True when handled here.

    A coordinate that is a read of a 1-D index tensor at a position (`sorted_ids[pb*BM +
    r]`, or that read where the position is in bounds) is replaced by the position: the
    tile grid is then proved over the index tensor's positions (every row of `sorted_ids`
    is visited once), and coverage of the output follows from the contract (every slot
    appears in `sorted_ids`: assumed, see docs/verifier.md). Other data-dependent
    coordinates are not modelled: `unknown`."""
    from argus_plugins.verifiers.smt import coverage
    from argus_plugins.verifiers.smt.interp import Finding

    if not any(is_data(c) for c in coords):
        return False
    tensors = {t.name: t for t in it.ctx.ir.tensors}
    vcoords, vdims = [], []
    for c, d in zip(coords, dims):
        if not is_data(c):
            vcoords.append(c)
            vdims.append(d)
            continue
        r = c.a if isinstance(c, Select) and isinstance(c.a, DataRead) else c
        t = tensors.get(r.tensor) if isinstance(r, DataRead) else None
        if t is None or len(r.args) != 1 or reads(list(r.args)):
            if it.chk.collect:
                it.chk.findings.append(
                    Finding(
                        "store_tile",
                        op.point,
                        "unknown",
                        note=f"output coverage of a scatter to rows {c} is not modelled",
                    )
                )
            return True
        vcoords.append(r.args[0])
        vdims.append(it.ctx.norm(t.dims[0]))
    coverage._tile_grid(it, op, shape, vcoords, vdims, atomic)
    return True


@dataclass(frozen=True)
class Factor:
    """One factor's contributions in a product of finished sums (`silu(x @ wg) * (x @
    up)`): each factor must cover its contraction exactly once on its own, so the store
    checks each group separately instead of as one sum."""

    contribs: tuple[Contribution, ...]


def factors(tiles) -> tuple[Factor, ...] | None:
    """The factor groups of a product, or None when at most one operand is a sum."""
    groups = []
    for x in tiles:
        cs = tuple(c for c in x.contrib if isinstance(c, Contribution))
        groups.extend(c for c in x.contrib if isinstance(c, Factor))
        if cs and not x.window:
            groups.append(Factor(cs))
    return tuple(groups) if len(groups) > 1 else None


def check_factors(it, op, shape, coords, mask, val, atomic: bool) -> None:
    """At a store: each factor group's contraction, under the store's mask."""
    from argus_plugins.verifiers.smt import coverage

    for g in (c for c in val.contrib if isinstance(c, Factor)):
        coverage._contraction(it, op, shape, coords, mask, list(g.contribs), atomic)


# ------------------------------------------------------------------ transfer functions
def handler(it, op):
    """The transfer function of a data op, or None."""
    fn = _HANDLERS.get(type(op).__name__)
    return None if fn is None else (lambda o: fn(it, o))


def _load_scalar(it, op: LoadScalar) -> None:
    """`load_scalar(t, *index)`: the symbol becomes the read t[index]; the index must be in
    bounds (no mask guards it)."""
    ctx = it.ctx
    coords = tuple(ctx.norm(c) for c in op.coords)
    dims = tuple(ctx.norm(d) for d in op.tensor.dims)
    r = read(op.tensor.name, *coords)
    ctx.subst[op.sym] = r
    inside = land(
        *[as_expr(c) >= 0 for c in coords], *[as_expr(c) < d for c, d in zip(coords, dims)]
    )
    it.chk.require(
        "bounds",
        op.point,
        (),
        lnot(inside),
        list(coords),
        list(dims),
        f"reads coordinate {{lhs}} of {op.tensor.name}, outside its extents {{rhs}}",
    )


def _scan(it, op: Scan) -> None:
    """A prefix sum: no tags (elements mix), valid everywhere; its value is opaque."""
    it.state[op.out.id] = AVal(it.shape_of(op.out.shape, op.point))


def _contract(it, op: Contract) -> None:
    return None  # assumed in every query (DataState.instances)


def _summand(it, op: Summand) -> None:
    """Coordinate entry `entry` of the value's tag becomes a contracted coordinate."""
    v = it.state[op.value.id]
    t = v.tags.get(COORD)
    if t is None or not 0 <= op.entry < len(t.exprs) or t.extents is None:
        it._malformed(op, f"summand: the tile needs a {COORD!r} tag with entry {op.entry}")
        return
    rank = len(v.shape)
    axes = t.axes_for(rank) or (None,) * len(t.exprs)
    keep = [n for n in range(len(t.exprs)) if n != op.entry]
    tag = TagVal(
        tuple(t.exprs[n] for n in keep),
        t.defined,
        tuple(t.extents[n] for n in keep),
        tuple(axes[n] for n in keep),
    )
    kk = it.ctx.fresh("term", 0, 1)  # one term per iteration: no k-element within it
    loops = tuple((lp.var, *it.ctx.loops[lp.var.name]) for lp in it.loops)
    c = Contribution(
        t.exprs[op.entry], land(v.valid, t.defined), kk, 1, loops, t.extents[op.entry], op.point
    )
    it.state[op.value.id] = AVal(v.shape, {**v.tags, COORD: tag}, v.valid, v.contrib + (c,))


def _rows_for(it, op: RowsFor) -> None:
    """Assert the row coordinate is `source`, then relabel it the scatter's index."""
    ctx = it.ctx
    v, ix = it.state[op.value.id], it.state[op.index.id]
    t = v.tags.get(COORD)
    axes = t.axes_for(len(v.shape)) if t is not None else None
    if t is None or axes is None or 0 not in axes:
        it._malformed(op, f"rows_for: the tile needs a {COORD!r} tag with a row entry")
        return
    row = axes.index(0)
    source, target = ctx.norm(op.source), ctx.norm(op.target)
    valid = land(v.valid, t.defined, ix.valid)
    it.chk.require(
        "rows_for",
        op.point,
        v.shape,
        land(valid, as_expr(t.exprs[row]).ne(source)),
        [t.exprs[row]],
        [source],
        "row was computed from source row {lhs} but its index names source row {rhs}",
        structural=as_expr(t.exprs[row]) == as_expr(source),
    )
    exprs = list(t.exprs)
    exprs[row] = target
    ext = list(t.extents) if t.extents is not None else None
    if ext is not None:
        ext[row] = None  # the scatter's extent is the store's tensor's, not the gather's
    tag = TagVal(tuple(exprs), land(t.defined, ix.valid), None, t.axes)
    it.state[op.value.id] = AVal(v.shape, {**v.tags, COORD: tag}, v.valid, v.contrib, v.window)


_HANDLERS = {
    "LoadScalar": _load_scalar,
    "Scan": _scan,
    "Contract": _contract,
    "Summand": _summand,
    "RowsFor": _rows_for,
}

__all__ = ["DataState", "bind", "handler", "resolve", "state", "tdiv", "tmod", "track"]
