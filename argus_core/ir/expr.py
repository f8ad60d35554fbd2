"""Symbolic integer expressions: program ids, loop variables, shapes, strides, element indices.

One expression serves three consumers: the lowering prints it as Triton source, the
verifier turns it into a z3 term, and tests evaluate it on concrete values. Arithmetic on
Python ints folds eagerly, so layouts of concrete shapes stay concrete.

Integer division and modulo are floor semantics on non-negative operands (all index
arithmetic in a kernel is non-negative), which Triton, Python and z3 agree on there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

IntLike = Union[int, "Expr"]

# kinds of symbols; the verifier bounds each kind differently
SYM_KINDS = ("pid", "num_pids", "loop", "shape", "stride", "const", "elem", "scalar", "thread")


class Expr:
    """Base of the immutable expression tree. Use the operators, not the constructors."""

    __slots__ = ()

    # arithmetic ---------------------------------------------------------------
    # An operand that is not a number (a layout's coordinate tuple, a DSL tile) gets its own
    # reflected operator: `i * stride` works whichever side defines the product.
    def __add__(self, o: IntLike) -> IntLike:
        return binop("+", self, o) if _number(o) else NotImplemented

    def __radd__(self, o: IntLike) -> IntLike:
        return binop("+", o, self) if _number(o) else NotImplemented

    def __sub__(self, o: IntLike) -> IntLike:
        return binop("-", self, o) if _number(o) else NotImplemented

    def __rsub__(self, o: IntLike) -> IntLike:
        return binop("-", o, self) if _number(o) else NotImplemented

    def __mul__(self, o: IntLike) -> IntLike:
        return binop("*", self, o) if _number(o) else NotImplemented

    def __rmul__(self, o: IntLike) -> IntLike:
        return binop("*", o, self) if _number(o) else NotImplemented

    def __floordiv__(self, o: IntLike) -> IntLike:
        return binop("//", self, o) if _number(o) else NotImplemented

    def __rfloordiv__(self, o: IntLike) -> IntLike:
        return binop("//", o, self) if _number(o) else NotImplemented

    def __mod__(self, o: IntLike) -> IntLike:
        return binop("%", self, o) if _number(o) else NotImplemented

    def __rmod__(self, o: IntLike) -> IntLike:
        return binop("%", o, self) if _number(o) else NotImplemented

    def __neg__(self) -> IntLike:
        return binop("-", 0, self)

    # comparisons build predicates; == stays structural so expressions can be dict keys
    def __lt__(self, o: IntLike) -> Expr:
        return Cmp("<", self, as_expr(o))

    def __le__(self, o: IntLike) -> Expr:
        return Cmp("<=", self, as_expr(o))

    def __gt__(self, o: IntLike) -> Expr:
        return Cmp(">", self, as_expr(o))

    def __ge__(self, o: IntLike) -> Expr:
        return Cmp(">=", self, as_expr(o))

    def eq(self, o: IntLike) -> Expr:
        return Cmp("==", self, as_expr(o))

    def ne(self, o: IntLike) -> Expr:
        return Cmp("!=", self, as_expr(o))

    def __and__(self, o: Expr) -> Expr:
        return land(self, o)

    def __or__(self, o: Expr) -> Expr:
        return BoolOp("or", (self, as_expr(o)))

    def __bool__(self) -> bool:
        raise TypeError(
            "a symbolic value has no truth value at trace time; use al.where/masks, "
            "not Python `if`/`and`/`or`, on program ids, loop variables or shapes"
        )

    def __index__(self) -> int:
        raise TypeError("a symbolic value cannot be used where Python needs a concrete int")

    # traversal ------------------------------------------------------------------
    def children(self) -> tuple[Expr, ...]:
        return ()

    def symbols(self) -> set[Sym]:
        out: set[Sym] = set()
        stack: list[Expr] = [self]
        while stack:
            e = stack.pop()
            if isinstance(e, Sym):
                out.add(e)
            stack.extend(e.children())
        return out

    def subs(self, mapping: Mapping[Sym, IntLike]) -> IntLike:
        """Replace symbols; folds constants."""
        return self.map(lambda s: mapping.get(s, s))

    def map(self, f: Callable[[Sym], IntLike]) -> IntLike:  # overridden
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, int]) -> int | bool:
        """Concrete value given every symbol's value by name."""
        return _eval(self, env)

    def __repr__(self) -> str:
        return to_source(self)


@dataclass(frozen=True, eq=True, repr=False)
class Const(Expr):
    value: int

    def map(self, f):
        return self.value


@dataclass(frozen=True, eq=True, repr=False)
class Sym(Expr):
    """A named symbol. `lo`/`hi` bound it (inclusive lo, exclusive hi) where known."""

    name: str
    kind: str = "scalar"
    lo: int | None = None
    hi: IntLike | None = None

    def map(self, f):
        return f(self)

    def __hash__(self) -> int:
        return hash(("Sym", self.name))

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        return isinstance(other, Sym) and other.name == self.name


@dataclass(frozen=True, eq=True, repr=False)
class BinOp(Expr):
    op: str  # + - * // %
    a: Expr
    b: Expr

    def children(self):
        return (self.a, self.b)

    def map(self, f):
        return binop(self.op, _map(self.a, f), _map(self.b, f))


@dataclass(frozen=True, eq=True, repr=False)
class Call(Expr):
    fn: str  # min, max, cdiv
    args: tuple[Expr, ...]

    def children(self):
        return self.args

    def map(self, f):
        return call(self.fn, *[_map(a, f) for a in self.args])


@dataclass(frozen=True, eq=True, repr=False)
class Cmp(Expr):
    op: str  # < <= > >= == !=
    a: Expr
    b: Expr

    def children(self):
        return (self.a, self.b)

    def map(self, f):
        a, b = _map(self.a, f), _map(self.b, f)
        if isinstance(a, int) and isinstance(b, int):
            return Const(int(_CMP[self.op](a, b)))
        return Cmp(self.op, as_expr(a), as_expr(b))


@dataclass(frozen=True, eq=True, repr=False)
class BoolOp(Expr):
    op: str  # and, or, not
    args: tuple[Expr, ...]

    def children(self):
        return self.args

    def map(self, f):
        return BoolOp(self.op, tuple(as_expr(_map(a, f)) for a in self.args))


@dataclass(frozen=True, eq=True, repr=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    def children(self):
        return (self.cond, self.a, self.b)

    def map(self, f):
        return Select(
            as_expr(_map(self.cond, f)), as_expr(_map(self.a, f)), as_expr(_map(self.b, f))
        )


_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}
_CMP: dict[str, Callable[[int, int], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_CALLS: dict[str, Callable[..., int]] = {
    "min": min,
    "max": max,
    "cdiv": lambda a, b: -(-a // b),
}


def _number(x: object) -> bool:
    # floats are numbers too, so that `sym * 0.5` fails with as_expr's message naming them
    return isinstance(x, int | float | Expr)


def as_expr(x: IntLike | bool) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool | int):
        return Const(int(x))
    raise TypeError(f"expected an int or a symbolic expression, got {type(x).__name__}: {x!r}")


def _map(e: Expr, f) -> IntLike:
    return e.map(f)


def binop(op: str, a: IntLike, b: IntLike) -> IntLike:
    """Build `a op b`, folding constants and the identities that keep printed indices short."""
    if isinstance(a, Const):
        a = a.value
    if isinstance(b, Const):
        b = b.value
    if isinstance(a, int) and isinstance(b, int):
        return _ARITH[op](a, b)
    if op == "+":
        if a == 0:
            return b
        if b == 0:
            return a
    elif op == "-":
        if b == 0:
            return a
    elif op == "*":
        if a == 0 or b == 0:
            return 0
        if a == 1:
            return b
        if b == 1:
            return a
    elif op == "//":
        if b == 1:
            return a
        if isinstance(a, int) and a == 0:
            return 0
    elif op == "%":
        if b == 1:
            return 0
    return BinOp(op, as_expr(a), as_expr(b))


def call(fn: str, *args: IntLike) -> IntLike:
    vals = [a.value if isinstance(a, Const) else a for a in args]
    if all(isinstance(v, int) for v in vals):
        return _CALLS[fn](*vals)
    if fn == "cdiv" and vals[1] == 1:
        return vals[0]
    return Call(fn, tuple(as_expr(v) for v in vals))


def cdiv(a: IntLike, b: IntLike) -> IntLike:
    return call("cdiv", a, b)


def emin(a: IntLike, b: IntLike) -> IntLike:
    return call("min", a, b)


def emax(a: IntLike, b: IntLike) -> IntLike:
    return call("max", a, b)


def land(*preds: Expr | bool | None) -> Expr:
    """Conjunction, dropping `None` and constant-true terms."""
    keep: list[Expr] = []
    for p in preds:
        if p is None or p is True:
            continue
        p = as_expr(p)
        if isinstance(p, Const):
            if p.value:
                continue
            return Const(0)
        if isinstance(p, BoolOp) and p.op == "and":
            keep.extend(p.args)
        else:
            keep.append(p)
    if not keep:
        return Const(1)
    return keep[0] if len(keep) == 1 else BoolOp("and", tuple(keep))


def lnot(p: Expr) -> Expr:
    return BoolOp("not", (as_expr(p),))


def _eval(e: Expr | int, env: Mapping[str, int]) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Sym):
        if e.name not in env:
            raise KeyError(f"no value for symbol {e.name!r}")
        return env[e.name]
    if isinstance(e, BinOp):
        return _ARITH[e.op](_eval(e.a, env), _eval(e.b, env))
    if isinstance(e, Call):
        return _CALLS[e.fn](*[_eval(a, env) for a in e.args])
    if isinstance(e, Cmp):
        return int(_CMP[e.op](_eval(e.a, env), _eval(e.b, env)))
    if isinstance(e, BoolOp):
        vals = [_eval(a, env) for a in e.args]
        if e.op == "and":
            return int(all(vals))
        if e.op == "or":
            return int(any(vals))
        return int(not vals[0])
    if isinstance(e, Select):
        return _eval(e.a, env) if _eval(e.cond, env) else _eval(e.b, env)
    raise TypeError(f"cannot evaluate {e!r}")


# ------------------------------------------------------------------------- printing

_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6}


def to_source(
    e: IntLike, name_of: Callable[[Sym], str] | None = None, funcs: Mapping[str, str] | None = None
) -> str:
    """Python/Triton source for `e`. `name_of` renames symbols (element indices become
    broadcast aranges in the lowering); `funcs` maps min/max/cdiv to callable names."""
    funcs = {"min": "min", "max": "max", "cdiv": "cdiv", **(funcs or {})}
    name_of = name_of or (lambda s: s.name)

    def go(x: Expr | int, parent: int) -> str:
        if isinstance(x, int):
            return str(x) if x >= 0 or parent == 0 else f"({x})"
        if isinstance(x, Const):
            return go(x.value, parent)
        if isinstance(x, Sym):
            return name_of(x)
        if isinstance(x, BinOp):
            p = _PREC[x.op]
            # right operand of - // % needs parens at equal precedence
            s = f"{go(x.a, p)} {x.op} {go(x.b, p + (x.op in ('-', '//', '%', '*')))}"
            return f"({s})" if p < parent else s
        if isinstance(x, Call):
            return f"{funcs[x.fn]}({', '.join(go(a, 0) for a in x.args)})"
        if isinstance(x, Cmp):
            p = _PREC["cmp"]
            s = f"{go(x.a, p + 1)} {x.op} {go(x.b, p + 1)}"
            return f"({s})" if p < parent else s
        if isinstance(x, BoolOp):
            if x.op == "not":
                return f"~({go(x.args[0], 0)})"
            # Triton tensors combine with & and |; parenthesize each side
            sep = " & " if x.op == "and" else " | "
            return "(" + sep.join(f"({go(a, 0)})" for a in x.args) + ")"
        if isinstance(x, Select):
            return f"tl.where({go(x.cond, 0)}, {go(x.a, 0)}, {go(x.b, 0)})"
        raise TypeError(f"cannot print {x!r}")

    return go(e, 0)


def to_z3(e: IntLike, env: Mapping[str, Any]):
    """z3 term for `e`; `env` maps symbol names to z3 terms (or ints)."""
    import z3

    def go(x):
        if isinstance(x, int | bool):
            return z3.IntVal(int(x))
        if isinstance(x, Const):
            return z3.IntVal(x.value)
        if isinstance(x, Sym):
            if x.name not in env:
                raise KeyError(f"no z3 variable for symbol {x.name!r}")
            v = env[x.name]
            return z3.IntVal(v) if isinstance(v, int) else v
        if isinstance(x, BinOp):
            a, b = go(x.a), go(x.b)
            if x.op == "+":
                return a + b
            if x.op == "-":
                return a - b
            if x.op == "*":
                return a * b
            if x.op == "//":
                return a / b  # z3 integer division is floor for positive divisors
            return a % b
        if isinstance(x, Call):
            args = [go(a) for a in x.args]
            if x.fn == "min":
                return z3.If(args[0] <= args[1], args[0], args[1])
            if x.fn == "max":
                return z3.If(args[0] >= args[1], args[0], args[1])
            return (args[0] + args[1] - 1) / args[1]
        if isinstance(x, Cmp):
            a, b = go(x.a), go(x.b)
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[
                x.op
            ]
        if isinstance(x, BoolOp):
            args = [as_bool(go(a)) for a in x.args]
            if x.op == "and":
                return z3.And(*args)
            if x.op == "or":
                return z3.Or(*args)
            return z3.Not(args[0])
        if isinstance(x, Select):
            return z3.If(as_bool(go(x.cond)), go(x.a), go(x.b))
        raise TypeError(f"cannot convert {x!r} to z3")

    def as_bool(t):
        return t if z3.is_bool(t) else t != 0

    return go(e)
