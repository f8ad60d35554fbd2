"""IR expressions as z3 terms, fast: one query converts each shared subexpression once
(a memo by node identity) and builds terms through z3's C API, skipping the Python
wrapper's sort coercion (every IR integer expression is an Int term, every predicate a
Bool term, so there is nothing to coerce). The terms are exactly those
`argus_core.ir.to_z3` builds (z3 hash-conses terms), so verdicts and models are the same;
only the conversion is cheaper. Profiled on moe_align, the wrapper's coercion was the
largest part of a verification's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import z3
from z3 import z3core

from argus_core.ir.expr import BinOp, BoolOp, Call, Cmp, Const, IntLike, Select, Sym

_INT = z3.IntSort()
_CMP = {
    "<": z3core.Z3_mk_lt,
    "<=": z3core.Z3_mk_le,
    ">": z3core.Z3_mk_gt,
    ">=": z3core.Z3_mk_ge,
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _arr(*ts: Any):
    a = (z3.Ast * len(ts))()
    for i, t in enumerate(ts):
        a[i] = t.as_ast()
    return a


class Converter:
    """Converts expressions for one query: `env` maps a symbol's name to its z3 term (or
    an int). The memo keeps every converted node alive, so its id stays unique."""

    def __init__(self, env: Mapping[str, Any]):
        self.env = env
        self.ctx = z3.main_ctx()
        self.ref = self.ctx.ref()
        self.memo: dict[int, tuple[Any, Any, bool]] = {}
        self.ints: dict[int, Any] = {}

    def __call__(self, e: IntLike | bool) -> Any:
        return self.go(e)[0]

    def int(self, v: int) -> Any:
        t = self.ints.get(v)
        if t is None:
            t = self.ints[v] = z3.IntNumRef(
                z3core.Z3_mk_numeral(self.ref, str(v), _INT.ast), self.ctx
            )
        return t

    def go(self, x: Any) -> tuple[Any, bool]:
        """(term, is it Bool)."""
        if isinstance(x, int | bool):
            return self.int(int(x)), False
        hit = self.memo.get(id(x))
        if hit is not None:
            return hit[1], hit[2]
        t, b = self.conv(x)
        self.memo[id(x)] = (x, t, b)
        return t, b

    def arith(self, ast: Any) -> Any:
        return z3.ArithRef(ast, self.ctx)

    def boolean(self, ast: Any) -> Any:
        return z3.BoolRef(ast, self.ctx)

    def as_bool(self, x: Any) -> Any:
        t, b = self.go(x)
        if b:
            return t
        return self.boolean(z3core.Z3_mk_distinct(self.ref, 2, _arr(t, self.int(0))))

    def as_int(self, x: Any) -> Any:
        t, b = self.go(x)
        if b:  # a predicate as a number, 1 or 0: what z3's wrapper coerces it to
            one, zero = self.int(1).as_ast(), self.int(0).as_ast()
            return self.arith(z3core.Z3_mk_ite(self.ref, t.as_ast(), one, zero))
        return t

    def compare(self, op: str, a: Any, b: Any) -> Any:
        """`a op b` as z3's wrapper builds it: Python gives a numeral on the right (its
        class derives from the left's) the reflected comparison, `0 <= j` for `j >= 0`."""
        if isinstance(b, z3.IntNumRef) and not isinstance(a, z3.IntNumRef):
            op, a, b = _FLIP[op], b, a
        r = self.ref
        if op == "==":
            return self.boolean(z3core.Z3_mk_eq(r, a.as_ast(), b.as_ast()))
        if op == "!=":
            return self.boolean(z3core.Z3_mk_distinct(r, 2, _arr(a, b)))
        return self.boolean(_CMP[op](r, a.as_ast(), b.as_ast()))

    def conv(self, x: Any) -> tuple[Any, bool]:
        r = self.ref
        if isinstance(x, Const):
            return self.int(x.value), False
        if isinstance(x, Sym):
            v = self.env[x.name]
            if isinstance(v, int):
                return self.int(v), False
            return v, z3.is_bool(v)
        if isinstance(x, BinOp):
            a, b = self.as_int(x.a), self.as_int(x.b)
            if x.op == "+":
                return self.arith(z3core.Z3_mk_add(r, 2, _arr(a, b))), False
            if x.op == "-":
                return self.arith(z3core.Z3_mk_sub(r, 2, _arr(a, b))), False
            if x.op == "*":
                return self.arith(z3core.Z3_mk_mul(r, 2, _arr(a, b))), False
            if x.op == "//":  # z3 integer division is floor for positive divisors
                return self.arith(z3core.Z3_mk_div(r, a.as_ast(), b.as_ast())), False
            return self.arith(z3core.Z3_mk_mod(r, a.as_ast(), b.as_ast())), False
        if isinstance(x, Call):
            a, b = (self.as_int(y) for y in x.args)
            if x.fn in ("min", "max"):
                c = self.compare("<=" if x.fn == "min" else ">=", a, b).as_ast()
                return self.arith(z3core.Z3_mk_ite(r, c, a.as_ast(), b.as_ast())), False
            s = self.arith(z3core.Z3_mk_add(r, 2, _arr(a, b)))
            s = self.arith(z3core.Z3_mk_sub(r, 2, _arr(s, self.int(1))))
            return self.arith(z3core.Z3_mk_div(r, s.as_ast(), b.as_ast())), False
        if isinstance(x, Cmp):
            if x.op in ("==", "!=") and self.go(x.a)[1] and self.go(x.b)[1]:
                a, b = self.go(x.a)[0], self.go(x.b)[0]  # two predicates: no coercion
            else:
                a, b = self.as_int(x.a), self.as_int(x.b)
            return self.compare(x.op, a, b), True
        if isinstance(x, BoolOp):
            args = [self.as_bool(a) for a in x.args]
            if x.op == "and":
                return self.boolean(z3core.Z3_mk_and(r, len(args), _arr(*args))), True
            if x.op == "or":
                return self.boolean(z3core.Z3_mk_or(r, len(args), _arr(*args))), True
            return self.boolean(z3core.Z3_mk_not(r, args[0].as_ast())), True
        if isinstance(x, Select):
            c = self.as_bool(x.cond)
            (a, ab), (b, bb) = self.go(x.a), self.go(x.b)
            if ab or bb:  # a predicate-valued select: let z3's wrapper match the sorts
                t = z3.If(c, a, b)
                return t, z3.is_bool(t)
            return self.arith(z3core.Z3_mk_ite(r, c.as_ast(), a.as_ast(), b.as_ast())), False
        raise TypeError(f"cannot convert {x!r} to z3")


__all__ = ["Converter"]
