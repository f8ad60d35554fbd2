"""The bases of exponentials: an abstract domain that checks an online softmax's rescaling.

An online softmax (flash attention) keeps a running row max `m`, and sums of exponentials
taken against it: `p = exp2(s - m)`, `l = Σ p`, `acc = Σ p·v`. A sum is only meaningful
if all its terms share one max (its **base**), and when the max grows the sums must be
rebased by `alpha = exp2(m_old - m_new)`. Numbers cannot show a stale max (the output is
merely wrong by a factor), but the bases can: every max carries the set of keys it covers
(a `Cover`: the iterations [lo, hi) of the loop whose score tile it reduced; the max over a
given key set of a row is one value, so equal covers mean equal maxes), and every sum of
exponentials carries the keys it sums and the cover of its base.

Transfer functions: `max(s, 1)` of the loop's score tile covers block n; `maximum` unites
adjacent covers; `s - m` then `exp2` gives terms of block n based on m (`softmax_cover`: m
covers block n, so no term exceeds 1); `exp2(m_a - m_b)` is a factor rebasing a to b;
`sum`, `dot(p, v)` keep keys and base; `x * factor` rebases x (`softmax_base`: x's base is
the factor's source); `x + y`, `dot(p, v, acc)` unite keys (`softmax_base`: equal bases);
`acc / l` needs equal bases and keys; `m + log2(l)` needs l based on m. Loops: at the top
of iteration n the running max covers [start, n) and each running sum sums [start, n)
against it; the yields must cover [start, n + step) (`softmax_carried`), by induction.
At a store of `o` or `lse`, the sum covers every iteration of the loop (`softmax_cover`).

This module is its own pass over the IR (`check`), after the tag interpreter, with its own
table of transfer functions per IR op type (`_RULES`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from argus_core.ir import (
    Cast,
    Dot,
    Elementwise,
    ExpandDims,
    Expr,
    Full,
    IntLike,
    KernelIR,
    Loop,
    Op,
    ProgramPoint,
    Reduce,
    Store,
    Value,
    Zeros,
    as_expr,
    elem_sym,
    land,
    lnot,
)
from argus_core.ir.expr import BoolOp, Select
from argus_core.ir.nodes import AtomicAdd
from argus_plugins.verifiers.smt.checker import Checker
from argus_plugins.verifiers.smt.solver import Context

EXP = ("exp", "exp2")
LOG = ("log", "log2")


@dataclass(frozen=True)
class Cover:
    """The keys of iterations [lo, hi) of the loop whose score tile `src` (a value id) a max
    reduced; `src` None only for the empty cover of `full(-inf)` / `zeros`."""

    src: int | None
    lo: IntLike
    hi: IntLike


EMPTY = Cover(None, 0, 0)


@dataclass(frozen=True)
class Score:
    block: Cover  # the loop's score tile at iteration n: block [n, n + step)


@dataclass(frozen=True)
class Max:
    cover: Cover


@dataclass(frozen=True)
class Shifted:  # s - m
    block: Cover
    base: Cover


@dataclass(frozen=True)
class Diff:  # m_a - m_b
    a: Cover
    b: Cover


@dataclass(frozen=True)
class Factor:  # exp2(m_from - m_to): rebases a sum from one max to another
    frm: Cover
    to: Cover


@dataclass(frozen=True)
class Terms:  # exponentials (or sums of them) of the keys `keys`, taken against `base`
    keys: Cover
    base: Cover


@dataclass(frozen=True)
class LogSum:
    keys: Cover
    base: Cover


@dataclass(frozen=True)
class Result:  # o = acc / l or lse = m + log2(l): final, over `keys`
    keys: Cover


def _e(x: IntLike) -> Expr:
    return as_expr(x)


def _same(a: IntLike, b: IntLike) -> bool:
    return _e(a) == _e(b)


def empty(c: Cover) -> Expr:
    return _e(c.lo) >= c.hi


def cover_ne(a: Cover, b: Cover) -> IntLike:
    """Where two covers name different key sets (two empty covers are equal)."""
    if a.src is not None and b.src is not None and a.src != b.src:
        return lnot(land(empty(a), empty(b)))
    if _same(a.lo, b.lo) and _same(a.hi, b.hi):
        return 0
    diff = BoolOp("or", (_e(a.lo).ne(b.lo), _e(a.hi).ne(b.hi)))
    return land(lnot(land(empty(a), empty(b))), diff)


def _sel(cond: Expr, a: IntLike, b: IntLike) -> IntLike:
    return a if _same(a, b) else Select(cond, _e(a), _e(b))


def pick(cond: Expr, a: Cover, b: Cover) -> Cover:
    """`a` where cond holds, else `b`."""
    if a == b:
        return a
    return Cover(
        a.src if a.src is not None else b.src, _sel(cond, a.lo, b.lo), _sel(cond, a.hi, b.hi)
    )


def unite(a: Cover, b: Cover) -> Cover | None:
    """The union of two covers when it is an interval for sure (adjacent, or one empty
    literally); else None."""
    if a == EMPTY:
        return b
    if b == EMPTY:
        return a
    if a.src != b.src:
        return None
    if _same(a.hi, b.lo):
        return Cover(a.src, a.lo, b.hi)
    if _same(b.hi, a.lo):
        return Cover(a.src, b.lo, a.hi)
    return None


class SoftmaxPass:
    """Interprets the IR over the base domain and poses its assertions through `chk`."""

    def __init__(self, ctx: Context, chk: Checker, ir: KernelIR):
        self.ctx, self.chk, self.ir = ctx, chk, ir
        self.vals: dict[int, Any] = {}
        self.loop_of: dict[int, Loop] = {}  # score tile id -> the loop that reduces it
        self.blocks: dict[int, Cover] = {}
        self.rows: tuple[int, ...] = ()
        self.live: IntLike = 1
        for op in ir.walk():  # a real row: the mask of the row-vector store (lse)
            if isinstance(op, Store) and len(op.view.shape) == 1 and op.mask is not None:
                self.live = ctx.norm(op.mask)
                break

    # ------------------------------------------------------------------ assertions
    def require(self, name: str, point: ProgramPoint, violation: IntLike, lhs, rhs, msg: str):
        if as_expr(violation) == as_expr(0):
            self.chk.require(name, point, self.rows, 0, lhs, rhs, msg, structural=True)
            return
        at_row = land(self.live, _e(elem_sym(0)) >= 0, violation) if self.rows else violation
        self.chk.require(name, point, self.rows, at_row, lhs, rhs, msg)

    def _ends(self, c: Cover) -> list[IntLike]:
        return [c.lo, c.hi]

    def same_base(self, point, a: Cover, b: Cover, live: IntLike, what: str) -> None:
        self.require(
            "softmax_base",
            point,
            land(live, cover_ne(a, b)),
            self._ends(a),
            self._ends(b),
            what + " (iteration blocks [lo, hi))",
        )

    # -------------------------------------------------------------------- the pass
    def run(self, ops) -> None:
        for op in ops:
            self.op(op)

    def op(self, op) -> None:
        rule = _RULES.get(type(op))
        if rule is not None:
            rule(self, op)
        elif op.result is not None:  # any other op's result is nothing this domain knows
            self.vals[op.result.id] = None

    def full(self, op: Full) -> None:
        is_neg_inf = isinstance(op.value, float) and op.value == float("-inf")
        self.vals[op.out.id] = Max(EMPTY) if is_neg_inf else None

    def zeros(self, op: Zeros) -> None:
        self.vals[op.out.id] = Terms(EMPTY, EMPTY)

    def same_value(self, op: Cast | ExpandDims) -> None:
        self.vals[op.out.id] = self.get(op.x)

    def get(self, v: Any) -> Any:
        if not isinstance(v, Value):
            return None
        if v.id in self.blocks:
            return Score(self.blocks[v.id])
        return self.vals.get(v.id)

    def reduce(self, op: Reduce) -> None:
        self.vals[op.out.id] = self._reduce(op)

    def _reduce(self, op: Reduce) -> Any:
        x = self.get(op.x)
        if op.fn == "max" and isinstance(x, Score):
            return Max(x.block)
        if op.fn == "sum" and isinstance(x, Terms):
            return x
        return None

    def dot(self, op: Dot) -> None:
        self.vals[op.out.id] = self._dot(op)

    def _dot(self, op: Dot) -> Any:
        a = self.get(op.a)
        if not isinstance(a, Terms):
            return None
        if op.acc is None:
            return a
        return self.add(op.point, self.get(op.acc), a)

    def add(self, point, x: Any, y: Any) -> Any:
        if not (isinstance(x, Terms) and isinstance(y, Terms)):
            return None
        live = land(lnot(empty(x.keys)), lnot(empty(y.keys)))
        self.same_base(point, x.base, y.base, live, "adds sums against maxes over {lhs} and {rhs}")
        keys = unite(x.keys, y.keys)
        if keys is None:
            return None
        return Terms(keys, pick(empty(x.keys), y.base, x.base))

    def elementwise(self, op: Elementwise) -> None:
        self.vals[op.out.id] = self._elementwise(op)

    def _elementwise(self, op: Elementwise) -> Any:
        args = [self.get(a) if isinstance(a, Value) else a for a in op.args]
        tiles = [a for a in args if not isinstance(a, int | float | Expr)]
        fn = op.fn
        if fn in EXP and isinstance(args[0], Shifted):
            return Terms(args[0].block, args[0].base)
        if fn in EXP and isinstance(args[0], Diff):
            return Factor(args[0].a, args[0].b)
        if fn in LOG and isinstance(args[0], Terms):
            return LogSum(args[0].keys, args[0].base)
        if fn == "maximum" and all(isinstance(a, Max) for a in args):
            c = unite(args[0].cover, args[1].cover)
            return None if c is None else Max(c)
        if fn == "sub" and isinstance(args[1], Max):
            return self.shift(op, args[0], args[1])
        if fn == "add":
            if isinstance(args[0], Terms):
                return self.add(op.point, args[0], args[1])
            ms = [a for a in args if isinstance(a, Max)]
            ls = [a for a in args if isinstance(a, LogSum)]
            if ms and ls:  # lse = m + log2(l): l's base must be m
                m, lg = ms[0], ls[0]
                msg = "adds log2 of a sum against the max over {rhs} to the max over {lhs}"
                self.same_base(op.point, m.cover, lg.base, lnot(empty(lg.keys)), msg)
                return Result(lg.keys)
            return None
        if fn in ("mul", "div") and len(tiles) == 1 and not isinstance(tiles[0], Max | Score):
            return tiles[0]  # scaling by a number keeps keys and base
        if fn == "mul" and len(tiles) == 2:
            t = next((a for a in tiles if isinstance(a, Terms)), None)
            f = next((a for a in tiles if isinstance(a, Factor)), None)
            if t is not None and f is not None:
                msg = (
                    "rescales a sum against the max over {lhs} by a factor from the max over {rhs}"
                )
                self.same_base(op.point, t.base, f.frm, lnot(empty(t.keys)), msg)
                return Terms(t.keys, f.to)
        if fn == "div" and all(isinstance(a, Terms) for a in args):
            x, y = args
            msg = "divides a sum against the max over {lhs} by one against the max over {rhs}"
            self.same_base(op.point, x.base, y.base, 1, msg)
            self.require(
                "softmax_base",
                op.point,
                cover_ne(x.keys, y.keys),
                self._ends(x.keys),
                self._ends(y.keys),
                "divides a sum over iteration blocks {lhs} by a sum over {rhs}",
            )
            return Result(x.keys)
        return None

    def shift(self, op: Elementwise, x: Any, m: Max) -> Any:
        """`s - m`: the exponentials of s will be based on m, which must cover s's block
        (else a term can exceed 1 and overflow)."""
        if not isinstance(x, Score):
            return Diff(x.cover, m.cover) if isinstance(x, Max) else None
        b, c = x.block, m.cover
        inside = land(_e(c.lo) <= b.lo, _e(b.hi) <= c.hi)
        self.require(
            "softmax_cover",
            op.point,
            lnot(inside) if c.src in (None, b.src) else 1,
            self._ends(c),
            self._ends(b),
            "takes exponentials against a max over iteration blocks {lhs}, "
            "which misses the scores' block {rhs}",
        )
        return Shifted(b, c)

    def store(self, op: Store) -> None:
        v = self.get(op.value)
        if not isinstance(v, Result) or v.keys.src not in self.loop_of:
            return
        loop = self.loop_of[v.keys.src]
        start, stop, _ = self.ctx.loops[loop.var.name]
        full = Cover(v.keys.src, start, stop)
        self.require(
            "softmax_cover",
            op.point,
            cover_ne(v.keys, full),
            self._ends(v.keys),
            self._ends(full),
            "stores a softmax over iteration blocks {lhs}, but the loop visits {rhs}",
        )

    # ----------------------------------------------------------------------- loops
    def loop(self, op: Loop) -> None:
        start, stop, step = self.ctx.loops[op.var.name]
        n = op.var
        reds = [o for o in op.body if isinstance(o, Reduce) and o.fn == "max" and o.axis == 1]
        srcs = [o.x.id for o in reds]
        inits = [self.get(c.init) for c in op.carried]
        maxes = [c for c, v in zip(op.carried, inits) if isinstance(v, Max) and v.cover == EMPTY]
        # a running max need not be carried: one never updated is the `full(-inf)` outside
        if len(set(srcs)) != 1 or len(maxes) > 1:
            for c in op.carried:  # not an online softmax: nothing carried is known
                self.vals[c.arg.id] = None
            self.run(op.body)
            for c in op.carried:
                self.vals[c.result.id] = None
            return
        src = srcs[0]
        self.loop_of[src] = op
        self.blocks[src] = Cover(src, n, n + step)
        self.rows = self.rows or (self.ctx.norm(reds[0].out.shape[0]),)
        seen = Cover(src, start, n)  # the invariant at the top of iteration n
        kinds = {}
        for c, v in zip(op.carried, inits):
            if any(c is x for x in maxes):
                kinds[c.arg.id], self.vals[c.arg.id] = "max", Max(seen)
            elif isinstance(v, Terms) and v.keys == EMPTY:
                kinds[c.arg.id], self.vals[c.arg.id] = "sum", Terms(seen, seen)
            else:
                self.vals[c.arg.id] = None
        self.run(op.body)
        nxt = Cover(src, start, n + step)
        last = start + ((stop - start - 1) // step) * step
        nonempty = _e(stop) > start
        for c in op.carried:
            y, kind = self.get(c.yielded), kinds.get(c.arg.id)
            name = c.init.name or str(c.init.id)
            if kind == "max":
                got = y.cover if isinstance(y, Max) else Cover(-1, 0, 1)
                self.require(
                    "softmax_carried",
                    op.point,
                    cover_ne(got, nxt),
                    self._ends(got),
                    self._ends(nxt),
                    f"running max {name!r} leaves the iteration covering blocks {{lhs}}, "
                    "but the next iteration needs {rhs}",
                )
                if isinstance(y, Max):
                    self.vals[c.result.id] = Max(pick(nonempty, at(y.cover, n, last), EMPTY))
                    continue
            elif kind == "sum":
                if isinstance(y, Terms):
                    for part, got in (("sums", y.keys), ("is based on the max over", y.base)):
                        self.require(
                            "softmax_carried",
                            op.point,
                            cover_ne(got, nxt),
                            self._ends(got),
                            self._ends(nxt),
                            f"running sum {name!r} leaves the iteration and {part} blocks "
                            "{lhs}, but the next iteration needs {rhs}",
                        )
                    keys = pick(nonempty, at(y.keys, n, last), EMPTY)
                    self.vals[c.result.id] = Terms(keys, pick(nonempty, at(y.base, n, last), EMPTY))
                    continue
            self.vals[c.result.id] = None


# The base domain's transfer function per IR op type (exact type); other ops' results are
# unknown to it (None).
_RULES: dict[type[Op], Callable[[SoftmaxPass, Any], None]] = {
    Loop: SoftmaxPass.loop,
    Full: SoftmaxPass.full,
    Zeros: SoftmaxPass.zeros,
    Cast: SoftmaxPass.same_value,
    ExpandDims: SoftmaxPass.same_value,
    Reduce: SoftmaxPass.reduce,
    Dot: SoftmaxPass.dot,
    Elementwise: SoftmaxPass.elementwise,
    Store: SoftmaxPass.store,
    AtomicAdd: SoftmaxPass.store,
}


def at(c: Cover, n, value: IntLike) -> Cover:
    """`c` at iteration n == value."""
    m = {n: value}
    sub = lambda e: e.subs(m) if isinstance(e, Expr) else e  # noqa: E731
    return Cover(c.src, sub(c.lo), sub(c.hi))


def uses_softmax(ir: KernelIR) -> bool:
    """A running max and an exponential: the only kernels this pass has anything to say of."""
    ops = list(ir.walk())
    return any(isinstance(o, Reduce) and o.fn == "max" for o in ops) and any(
        isinstance(o, Elementwise) and o.fn in EXP for o in ops
    )


def check(ctx: Context, chk: Checker, ir: KernelIR) -> None:
    """After the tag interpreter: pose the softmax base assertions of `ir`."""
    if uses_softmax(ir):
        SoftmaxPass(ctx, chk, ir).run(ir.ops)
