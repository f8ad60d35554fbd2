"""Data-dependent values: integer tiles used as indices, scalar loads, and data contracts.

An integer tile's *value* (not only its tags) matters when it indexes memory: `x.rows(tok)`
gathers the rows a loaded tile names, `al.load_scalar(block_expert, pb)` picks an expert.
Each such value is an IR expression per element (over `_i0`, `_i1`, program and loop
symbols) built from **reads**: `read("sorted_ids", pb*BM + _i0)` is an uninterpreted z3
function of the index (`DataRead`). A kernel states what it assumes of its data as
**contracts** (`al.contract`), which every query instantiates at the reads it mentions
(hand-made E-matching: no quantifier reaches z3).

Sums of data (a `sum` reduction, `cumsum`, a loop-carried running total) are prefix sums
with facts (`prefix_sums.py`). What is not modelled (max/min of data, other loop-carried integer
tiles, a float division) becomes an **opaque** read, a function of (program, loop
variables, element): sound, and a counterexample that depends on one is reported
`unknown`, naming the op, never `violated`.

`DataState` is the solver's `DataTheory` for such a kernel (made only for kernels with
data ops, so GEMM-like kernels pay nothing); its value of each op's result is computed by
one rule per IR op type (`VALUE_RULES`). The transfer functions of the data ops themselves
are in `data_ops.py`.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from typing import Any

import z3
from z3 import z3core

from argus_core.ir import (
    Cast,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    IntLike,
    KernelIR,
    Load,
    Loop,
    Op,
    Sym,
    TileElem,
    Value,
    Zeros,
    as_expr,
    elem_sym,
    land,
    lnot,
)
from argus_core.ir.expr import Cmp, Select
from argus_core.ir.nodes import LoadScalar, Reduce, Scan
from argus_core.ir.tags import READS, Contract, DataRead, RowsFor, Summand, read
from argus_plugins.verifiers.smt import prefix_sums
from argus_plugins.verifiers.smt.domain import Frame
from argus_plugins.verifiers.smt.exprs import reads, sub
from argus_plugins.verifiers.smt.solver import Context, Query

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


class DataState:
    """Per (kernel, policy): each integer tile's value, opaque reads, and the contracts.
    The solver's `DataTheory` for the kernel; `frame` is the interpretation's state (the
    shapes of tiles and the loops around the current op)."""

    def __init__(self, ctx: Context, frame: Frame):
        # the Context owns this state (`ctx.data`): a weak reference back, so the two and
        # the z3 terms cached here are freed together when the Context is dropped, not at
        # a cyclic collection whose timing would change the term ids later queries get
        self.ctx = weakref.proxy(ctx)
        self.frame = frame
        self.vals: dict[int, IntLike] = {}
        self.opaque: dict[str, str] = {}  # opaque tensor name -> the op it stands for
        self.contracts = []
        for op in ctx.ir.walk():
            if isinstance(op, Contract):
                self.contracts.append(self._contract(op))
        self.fns: dict[tuple[str, int], Any] = {}
        self.ps: dict[str, Any] = {}  # prefix sums by name (prefix_sums.py)
        # facts by (the reads they are for, the sums and their proved properties so far)
        self._facts: dict[tuple, list[Expr]] = {}
        self.ps_names: dict[str, str] = {}  # a sum's summand and range -> its name
        self.z3cache: dict[Expr, tuple] = {}  # fact -> (z3 term, symbols it needs)
        # (root reads, sums) -> (facts and instances, tensors read, sums?, their terms)
        self._derived: dict[tuple, tuple] = {}
        self.running: dict[int, IntLike] = {}  # loop results that are running sums
        self.writes: dict[str, list] = {}  # stores so far, per tensor (store_coverage.py)
        self.uncovered: dict[str, Any] = {}  # tensors with rows computed by sums -> 1st store
        self.cover_writes: dict[str, list] = {}  # their stores, with loops (select_witnesses)

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
    def shape(self, v: Value, default: tuple[int, ...]) -> tuple[int, ...]:
        """The (concrete) shape of tile `v` once interpreted, else `default`."""
        val = self.frame.values.get(v.id)
        return default if val is None else val.shape

    def opaque_value(self, value: Value, origin: str, shape) -> DataRead:
        """A read standing for `value`, which is not modelled (`origin`: the op, for the
        finding's note): a function of (program, loop variables, element)."""
        name = f"{OPAQUE}{value.id}"
        self.opaque[name] = origin
        prog = [Sym("program_id_0", "pid")]
        loops = [lp.var for lp in self.frame.loops]
        elems = [elem_sym(d) for d in range(len(shape))]
        return read(name, *prog, *loops, *elems)  # reads register themselves (READS)

    def of(self, v: Any, shape) -> IntLike | None:
        """The value of operand `v` (tile, number, index expression) at an element of a
        tile of `shape` (a broadcast tile reads its element 0 along size-1 axes); None
        when it is not modelled."""
        if isinstance(v, bool | int):
            return int(v)
        if isinstance(v, float):
            if math.isfinite(v) and v == int(v):
                return int(v)
            return None
        if isinstance(v, Expr):
            return self.ctx.norm(v)
        val = self.vals.get(v.id)
        if val is None:
            return None
        vshape = self.shape(v, shape)
        m = {elem_sym(d): 0 for d, (a, b) in enumerate(zip(vshape, shape)) if a == 1 and b != 1}
        return sub(val, m) if m else val

    def elem(self, e: TileElem) -> IntLike:
        """A `TileElem` (element of an index tile) as an expression over the view's elems."""
        val = self.vals.get(e.value.id)
        if val is None:  # first seen as an index: no defining op reached
            shape = self.shape(e.value, (1,))
            val = self.opaque_value(e.value, f"value at %{e.value.id}", shape)
            self.vals[e.value.id] = val
        if e.axis is None or e.axis == 0:
            return val
        return sub(val, {elem_sym(0): elem_sym(e.axis)})

    def resolve(self, e: Expr) -> IntLike:
        """`e` with every element of an index tile replaced by its value (`Context.norm`)."""
        return e.map(lambda s: self.elem(s) if isinstance(s, TileElem) else s)

    def track(self, op: Op) -> None:
        """Record the value of `op`'s result (after its transfer function ran)."""
        out = op.result
        if out is None:
            if isinstance(op, Loop):
                for c in op.carried:  # a running sum (prefix_sums.py), else not modelled
                    val = self.running.get(c.result.id)
                    if val is None:
                        val = self.opaque_value(
                            c.result, f"{op.kind} at {op.point}", c.result.shape
                        )
                    self.vals[c.result.id] = val
            return
        if out.dtype.startswith("f") or out.dtype == "bf16":
            return
        shape = self.shape(out, tuple(out.shape))
        rule = VALUE_RULES.get(type(op))
        val = None if rule is None else rule(self, op, shape)
        if val is None:
            val = self.opaque_value(out, f"{op.kind} at {op.point}", shape)
        self.vals[out.id] = val

    def loop_entry(self, op: Loop) -> None:
        """Before a loop's first (learning) pass: carried integer tiles are placeholders."""
        prefix_sums.loop_entry(self, op)

    def loop_summands(self, op: Loop) -> None:
        """After it: a carried tile that grows by a summand becomes its running sum."""
        prefix_sums.loop_summands(self, op)

    # ------------------------------------------------------------------------- z3
    def term(self, q: Query, name: str):
        """The z3 term of the read named `name` in query `q`."""
        r = READS.get(name)
        if r is None:
            raise KeyError(f"the verifier has no meaning for data read {name!r}")
        key = (r.tensor, len(r.args))
        f = self.fns.get(key)
        if f is None:
            sorts = [z3.IntSort()] * (len(r.args) + 1)
            f = self.fns[key] = z3.Function(f"{r.tensor}/{len(r.args)}", *sorts)
        # f(*args) through z3's C API (the wrapper's coercion of each Int argument to the
        # Int domain made this a tenth of moe_align's time): the same term
        args = [q.zi(a) for a in r.args]
        arr = (z3.Ast * len(args))()
        for i, a in enumerate(args):
            arr[i] = a.as_ast()
        ctx = f.ctx
        return z3.ArithRef(z3core.Z3_mk_app(ctx.ref(), f.ast, len(args), arr), ctx)

    def instances(self, q: Query, roots) -> tuple[list[Any], list[str]]:
        """Contract instances for the reads in `roots` (IR expressions), as z3 terms, and
        the opaque values the query depends on (by the op they stand for).

        The instances are a function of the roots' reads (and of the sums known so far):
        they are derived once per such key (`_derive`) and their z3 terms converted once
        (`prefix_sums.convert_cached`), so the queries of one kernel that read the same
        data (moe_align: a third of them) pay only for making their variables."""
        root_reads = reads(roots)
        key = (
            tuple(r.name for r in root_reads),
            tuple((n, p.multiple, p.nonneg, p.unit) for n, p in self.ps.items()),
        )
        hit = self._derived.get(key)
        if hit is None:
            hit = self._derived[key] = self._derive(root_reads, key[1])
        out, used, sums, converted = hit
        terms = prefix_sums.convert_cached(self, q, out, converted)
        q.data_reads = [r for r in root_reads if not r.tensor.startswith(OPAQUE)]
        q.sums = sums
        opaque = sorted({self.opaque[t] for t in used if t in self.opaque})
        return terms, opaque

    def _derive(self, root_reads: list[DataRead], sums_key: tuple) -> tuple:
        """(the prefix-sum facts and contract instances for `root_reads` as IR predicates,
        the tensors they and the roots read, whether they mention sums, a slot for their
        converted terms)."""
        out: list[Expr] = []
        seen: set[tuple] = set()
        rs = root_reads
        every = {r.name: r for r in root_reads}
        if self.ps:  # prefix sums: their facts at the points the query mentions
            key = (tuple(r.name for r in root_reads), sums_key)
            if key not in self._facts:
                self._facts[key] = prefix_sums.facts(self, root_reads)
            out.extend(self._facts[key])
            # = reads(roots + facts): `reads` lists the later expressions' reads first
            fact_reads = reads(out)
            rs = list({r.name: r for r in fact_reads + root_reads}.values())
            every.update((r.name, r) for r in fact_reads)
        new: list[Expr] = []
        for rnd in range(ROUNDS):
            if rnd:
                rs = reads(new)
                every.update((r.name, r) for r in rs)
            new = []
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
        else:  # the last round's instances were not walked for reads
            every.update((r.name, r) for r in reads(new))
        used = {r.tensor for r in every.values()}
        return out, used, prefix_sums.uses_sums(self, every.values()), []

    def confirm(self, q: Query, model, violation: IntLike, solver) -> Any | None:
        """A model with every prefix sum at its true value (`prefix_sums.confirm`)."""
        return prefix_sums.confirm(q, model, violation, solver)

    def model_values(self, q: Query, model) -> dict[str, int]:
        """The data reads of a violated query with their values in the model (`{"sorted_ids[
        pb*16 + _i0]": 16}`), so a counterexample shows the routing that breaks the kernel."""
        return {r.name[1:]: q.value(model, r) for r in q.data_reads}


# ----------------------------------------------------------- values, one rule per op
def _zeros(st: DataState, op: Zeros, shape) -> IntLike | None:
    return 0


def _full(st: DataState, op: Full, shape) -> IntLike | None:
    return st.of(op.value, shape)


def _cast(st: DataState, op: Cast, shape) -> IntLike | None:
    return st.vals.get(op.x.id)


def _expand_dims(st: DataState, op: ExpandDims, shape) -> IntLike | None:
    x = st.vals.get(op.x.id)
    rank = len(shape) - 1
    m = {elem_sym(d): elem_sym(d + 1) for d in range(op.axis, rank)}
    return None if x is None else sub(x, m)


def _load(st: DataState, op: Load, shape) -> IntLike | None:
    other = st.of(op.other, shape)
    if other is None:
        return None
    ctx = st.ctx
    coords = [ctx.norm(c) for c in op.view.coords]
    r = read(op.view.tensor.name, *coords)
    return _sel(ctx.norm(op.mask) if op.mask is not None else 1, r, other)


def _elementwise(st: DataState, op: Elementwise, shape) -> IntLike | None:
    fn = op.fn
    if fn == "where":
        cond = op.args[0]
        c = st.ctx.norm(cond) if isinstance(cond, Expr) else st.of(cond, shape)
        a, b = st.of(op.args[1], shape), st.of(op.args[2], shape)
        if c is None or a is None or b is None:
            return None
        return _sel(_bool(c) if not isinstance(cond, Expr) else c, a, b)
    xs = [st.of(a, shape) for a in op.args]
    if any(x is None for x in xs):
        return None
    if fn == "neg":
        return 0 - xs[0]
    if len(xs) != 2:  # other unary ops (sqrt, exp, abs of a tile typed like a tensor)
        return None
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


def _reduce(st: DataState, op: Reduce, shape) -> IntLike | None:
    return prefix_sums.reduce_value(st, op, shape)


def _scan(st: DataState, op: Scan, shape) -> IntLike | None:
    return prefix_sums.scan_value(st, op, shape)


# The value of an integer result, per op type; an op without a rule (max/min reductions,
# dots) or a rule that returns None gives an opaque value.
VALUE_RULES: dict[type[Op], Callable[[DataState, Any, tuple[int, ...]], IntLike | None]] = {
    Zeros: _zeros,
    Full: _full,
    Cast: _cast,
    ExpandDims: _expand_dims,
    Load: _load,
    Elementwise: _elementwise,
    Reduce: _reduce,
    Scan: _scan,
}


def uses_data(ir: KernelIR) -> bool:
    """The kernel has data ops (or indexes by a tile's elements): it needs a DataState."""
    return any(
        isinstance(op, LoadScalar | Contract | RowsFor | Summand | Scan)
        or isinstance(op, Load | Elementwise)
        and _has_elem(op)
        for op in ir.walk()
    )


def _has_elem(op: Load | Elementwise) -> bool:
    exprs = []
    if isinstance(op, Load):
        exprs = [*op.view.coords, op.mask]
    else:
        exprs = [a for a in op.args if isinstance(a, Expr)]
    return any(isinstance(s, TileElem) for e in exprs if isinstance(e, Expr) for s in e.symbols())


__all__ = ["VALUE_RULES", "DataState", "tdiv", "tmod", "uses_data"]
